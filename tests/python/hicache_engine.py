"""A tiny engine with SGLang HiCache's shapes and calling order, for
testing kvrt's HiCache storage backend end to end on the CPU.

- A host pool with SGLang's MHATokenToKVPoolHost layouts (layer_first:
  (2, layers, tokens, heads, head_dim); page_first: (2, tokens, layers,
  heads, head_dim)), page-aligned token slots, get_data_page /
  get_dummy_flat_data_page / set_from_flat_data_page.
- Page keys as HiCache computes them: SHA-256 over the previous page's key
  and the page's token ids (4 bytes little-endian each).
- HiCacheController's storage order: a storage hit query in batches
  (batch_exists with the earlier pages as prefix_keys, stopping at the first
  short batch), a prefetch of the hit pages into host slots (batch_get_v1,
  or batch_get + set_from_flat_data_page in the generic path, counting the
  pages copied from the first), host -> device, and after the prefill a
  write-through backup device -> host -> storage (batch_set_v1, or
  batch_set of get_data_page in the generic path) of the prompt's full pages
  the storage does not hold.
- tests/python/tiny_engine.py's deterministic model computes the rest.

Run as a process (tests/python/test_sglang_backend.py)::

    hicache_engine.py --workload W.json --out R.json --descriptor D --principal P
                      [--layout layer_first|page_first] [--generic] [--verify-loads]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import sys
from typing import Optional

import torch

from tiny_engine import BLOCK_SIZE, HEAD_DIM, HEADS, LAYERS, TinyModel

STORAGE_BATCH_SIZE = 4  # pages per storage call (SGLang's is 128; small here to cross batches)


def get_hash_str(token_ids: list[int], prior_hash: Optional[str] = None) -> str:
    hasher = hashlib.sha256()
    if prior_hash:
        hasher.update(bytes.fromhex(prior_hash))
    for t in token_ids:
        hasher.update(t.to_bytes(4, byteorder="little", signed=False))
    return hasher.hexdigest()


class HostPool:
    """SGLang's MHA host pool: page-aligned token slots in one buffer."""

    def __init__(self, pages: int, layout: str) -> None:
        self.page_size, self.layer_num, self.head_num, self.head_dim = BLOCK_SIZE, LAYERS, HEADS, HEAD_DIM
        self.size, self.layout, self.dtype = pages * BLOCK_SIZE, layout, torch.float16
        dims = {"layer_first": (2, LAYERS, self.size, HEADS, HEAD_DIM),
                "page_first": (2, self.size, LAYERS, HEADS, HEAD_DIM)}[layout]
        self.kv_buffer = torch.zeros(dims, dtype=self.dtype)
        self.free_pages = list(range(pages))

    def alloc(self, tokens: int) -> torch.Tensor:
        pages = [self.free_pages.pop(0) for _ in range(tokens // self.page_size)]
        return torch.tensor([p * self.page_size + t for p in pages for t in range(self.page_size)], dtype=torch.int64)

    def free(self, indices: torch.Tensor) -> None:
        self.free_pages += sorted({int(i) // self.page_size for i in indices})

    def _page(self, index: int) -> torch.Tensor:
        if self.layout == "layer_first":
            return self.kv_buffer[:, :, index:index + self.page_size]
        return self.kv_buffer[:, index:index + self.page_size]

    def get_data_page(self, index: int, flat: bool = True) -> torch.Tensor:
        page = self._page(index)
        return page.flatten() if flat else page

    def get_dummy_flat_data_page(self) -> torch.Tensor:
        return torch.zeros((2, self.layer_num, self.page_size, self.head_num, self.head_dim), dtype=self.dtype).flatten()

    def set_from_flat_data_page(self, index: int, data_page: torch.Tensor) -> None:
        self._page(index)[...] = data_page.reshape(self._page(index).shape)

    def layer_rows(self, index: int, layer: int) -> torch.Tensor:
        """(2, page, heads, head_dim) rows of one layer of the page at `index`."""
        if self.layout == "layer_first":
            return self.kv_buffer[:, layer, index:index + self.page_size]
        return self.kv_buffer[:, index:index + self.page_size, layer]


def make_backend(descriptor: str, principal: str, namespace: str = "test/engines", model_name: str = "tiny"):
    """The backend as SGLang's StorageBackendFactory builds a dynamic one:
    the class named by the extra config, called with (storage_config, kwargs)."""
    from kvrt.integrations.sglang import HiCacheStorageConfig

    extra = {"backend_name": "kvrt", "module_path": "kvrt.integrations.sglang", "class_name": "KvrtHiCacheStorage",
             "descriptor": descriptor, "principal": principal, "namespace": namespace, "worker_name": principal,
             "reconnect_interval_s": 0.2}
    config = HiCacheStorageConfig(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, is_mla_model=False,
                                  is_page_first_layout=False, model_name=model_name, extra_config=extra)
    cls = getattr(importlib.import_module(extra["module_path"]), extra["class_name"])
    return cls(config, {})


class HiCacheEngine:
    """Requests one after another: storage -> host -> device, compute the
    rest, back the prompt's pages up."""

    def __init__(self, backend, layout: str = "layer_first", generic: bool = False, verify_loads: bool = False,
                 device_blocks: int = 64) -> None:
        from kvrt.integrations.sglang import HiCacheStorageExtraInfo

        self.extra_info = HiCacheStorageExtraInfo
        self.model = TinyModel()
        self.backend = backend
        self.host = HostPool(256, layout)
        if backend is not None:
            backend.register_mem_pool_host(self.host)
        self.generic = generic
        self.verify_loads = verify_loads
        self.device = [torch.zeros((2, device_blocks, BLOCK_SIZE, HEADS, HEAD_DIM), dtype=torch.float16)
                       for _ in range(LAYERS)]
        self.device_blocks = device_blocks
        self.prefill_tokens_computed = self.loaded_pages = self.backed_up_pages = self.verified_rows = 0

    # ---- HiCacheController ------------------------------------------------

    def storage_hit_query(self, tokens: list[int]) -> list[str]:
        hashes: list[str] = []
        last_hash: Optional[str] = None
        prefix_keys: list[str] = []
        step = BLOCK_SIZE * STORAGE_BATCH_SIZE
        for start in range(0, len(tokens), step):
            batch_tokens = tokens[start:start + step]
            batch_hashes = []
            for i in range(0, len(batch_tokens) - BLOCK_SIZE + 1, BLOCK_SIZE):
                last_hash = get_hash_str(batch_tokens[i:i + BLOCK_SIZE], last_hash)
                batch_hashes.append(last_hash)
            if not batch_hashes:
                break
            hit = self.backend.batch_exists(batch_hashes, self.extra_info(prefix_keys=list(prefix_keys)))
            hashes.extend(batch_hashes[:hit])
            if hit < len(batch_hashes):
                break
            prefix_keys.extend(batch_hashes)
        return hashes

    def prefetch(self, hashes: list[str], host_indices: torch.Tensor) -> int:
        """Pages copied into host_indices from the first, as HiCache counts them."""
        done = 0
        for i in range(0, len(hashes), STORAGE_BATCH_SIZE):
            batch = hashes[i:i + STORAGE_BATCH_SIZE]
            idx = host_indices[i * BLOCK_SIZE:(i + len(batch)) * BLOCK_SIZE]
            if self.generic:
                pages = self.backend.batch_get(batch, [self.host.get_dummy_flat_data_page() for _ in batch])
                ok = []
                for j, page in enumerate(pages):
                    if page is None:
                        break
                    self.host.set_from_flat_data_page(int(idx[j * BLOCK_SIZE]), page)
                    ok.append(True)
            else:
                ok = self.backend.batch_get_v1(batch, idx, self.extra_info(prefix_keys=hashes[:i]))
            run = ok.index(False) if False in ok else len(ok)
            done += run
            if run < len(batch):
                break
        return done

    def backup(self, hashes: list[str], host_indices: torch.Tensor) -> int:
        done = 0
        for i in range(0, len(hashes), STORAGE_BATCH_SIZE):
            batch = hashes[i:i + STORAGE_BATCH_SIZE]
            idx = host_indices[i * BLOCK_SIZE:(i + len(batch)) * BLOCK_SIZE]
            if self.generic:
                ok = self.backend.batch_set(batch, [self.host.get_data_page(int(idx[j * BLOCK_SIZE]))
                                                    for j in range(len(batch))])
            else:
                ok = all(self.backend.batch_set_v1(batch, idx, self.extra_info(prefix_keys=hashes[:i])))
            if not ok:
                break
            done += len(batch)
        return done

    # ---- a request ---------------------------------------------------------

    def generate(self, prompt: list[int], max_tokens: int) -> list[int]:
        blocks = list(range((len(prompt) + max_tokens + BLOCK_SIZE - 1) // BLOCK_SIZE))
        assert len(blocks) <= self.device_blocks
        loaded = 0
        if self.backend is not None:
            hashes = self.storage_hit_query(prompt)[:(len(prompt) - 1) // BLOCK_SIZE]  # the last token is computed
            if hashes:
                host_indices = self.host.alloc(len(hashes) * BLOCK_SIZE)
                loaded = self.prefetch(hashes, host_indices)
                for j in range(loaded):  # host -> device
                    for layer in range(LAYERS):
                        self.device[layer][:, blocks[j]] = self.host.layer_rows(int(host_indices[j * BLOCK_SIZE]),
                                                                               layer)
                self.host.free(host_indices)
                if self.verify_loads and loaded:
                    self._verify(prompt, blocks, loaded)
        self.loaded_pages += loaded
        out: list[int] = []
        tokens = list(prompt)
        h = None
        for pos in range(loaded * BLOCK_SIZE, len(prompt) + max_tokens - 1):
            h = self.model.hidden_in(tokens[pos], pos)
            for layer in range(LAYERS):
                h = self.model.layer_token(layer, h, self.device[layer], blocks, pos)
            if pos < len(prompt):
                self.prefill_tokens_computed += 1
            if pos >= len(prompt) - 1:
                out.append(self.model.sample(h))
                tokens.append(out[-1])
        if self.backend is not None:
            self._write_through(prompt, blocks, loaded)
        return out

    def _write_through(self, prompt: list[int], blocks: list[int], loaded: int) -> None:
        full = len(prompt) // BLOCK_SIZE
        hashes, last = [], None
        for j in range(full):
            last = get_hash_str(prompt[j * BLOCK_SIZE:(j + 1) * BLOCK_SIZE], last)
            hashes.append(last)
        unsaved = hashes[loaded:]
        if not unsaved:
            return
        host_indices = self.host.alloc(len(unsaved) * BLOCK_SIZE)
        for i in range(len(unsaved)):  # device -> host
            for layer in range(LAYERS):
                self.host.layer_rows(int(host_indices[i * BLOCK_SIZE]), layer)[...] = self.device[layer][:, blocks[loaded + i]]
        self.backed_up_pages += self.backup(unsaved, host_indices)
        self.host.free(host_indices)

    def _verify(self, prompt: list[int], blocks: list[int], loaded: int) -> None:
        ref = self.model.reference_kv(prompt)
        for j in range(loaded):
            rows = slice(j * BLOCK_SIZE, (j + 1) * BLOCK_SIZE)
            for layer in range(LAYERS):
                got = self.device[layer][:, blocks[j]].contiguous().view(torch.int16)
                if not torch.equal(got, ref[layer][:, rows].contiguous().view(torch.int16)):
                    raise AssertionError(f"page {j} of layer {layer} from kvrt differs from the recomputation")
            self.verified_rows += BLOCK_SIZE


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--descriptor", required=True)
    p.add_argument("--principal", default="engine-a")
    p.add_argument("--layout", default="layer_first", choices=["layer_first", "page_first"])
    p.add_argument("--generic", action="store_true", help="batch_get / batch_set of flat pages, not the v1 calls")
    p.add_argument("--verify-loads", action="store_true")
    args = p.parse_args(argv)
    backend = make_backend(args.descriptor, args.principal)
    engine = HiCacheEngine(backend, args.layout, args.generic, args.verify_loads)
    outputs = {}
    for r in json.load(open(args.workload))["requests"]:
        outputs[r["id"]] = engine.generate(r["prompt"], r["max_tokens"])
        print(f"finished {len(outputs)}", flush=True)
    stats = backend.get_stats()
    backend.close()
    json.dump({"outputs": outputs, "prefill_tokens_computed": engine.prefill_tokens_computed,
               "loaded_pages": engine.loaded_pages, "backed_up_pages": engine.backed_up_pages,
               "verified_rows": engine.verified_rows, "counters": stats}, open(args.out, "w"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
