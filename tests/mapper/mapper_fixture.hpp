#pragma once
// Shared helpers of the [mapper] tests (spec 0x06-0x06I).
#include <catch2/catch.hpp>
#include <memory>

#include "services/mapper/memfd_backing.hpp"
#include "services/mapper/vmm_mapper.hpp"

namespace kvrt::test {

// The 0x06F teaching fixture: L=2, B=3, T_max=12, H_kv=2, d_h=4, b=2 B,
// G=64 B, N_handle=12. G is below any OS page, so it runs through the
// arithmetic only (LedgerOnlyBacking).
inline MapperConfig fixture_0x06f_config() {
  MapperConfig c;
  c.local_layers = 2;
  c.request_slots = 3;
  c.max_tokens = 12;
  c.kv_heads = 2;
  c.head_dim = 4;
  c.element_bytes = 2;
  c.page_group_bytes = 64;
  c.handle_count = 12;
  return c;
}

inline std::unique_ptr<VmmMapper> make_fixture_mapper() {
  auto m = VmmMapper::init(fixture_0x06f_config(), std::make_unique<LedgerOnlyBacking>());
  REQUIRE(m.ok());
  REQUIRE(m.value()->validate().ok());
  return std::move(m).value();
}

// L=1, B=2, T_max=32, H_kv=2, d_h=64, b=2: 256 B rows, G = one OS page.
inline MapperConfig os_page_config() {
  MapperConfig c;
  c.local_layers = 1;
  c.request_slots = 2;
  c.max_tokens = 32;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.element_bytes = 2;
  c.page_group_bytes = MemfdBacking::os_page_bytes();
  c.handle_count = 8;
  return c;
}

inline RequestId req(uint64_t id) { return RequestId{id}; }
inline RequestGeneration gen1() { return RequestGeneration{1}; }

inline ErrorCode code_of(const Status& s) { return s.ok() ? ErrorCode::ok : s.error().code; }
template <class T>
ErrorCode code_of(const Result<T>& r) {
  return r.ok() ? ErrorCode::ok : r.error().code;
}

}  // namespace kvrt::test
