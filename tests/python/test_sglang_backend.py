"""kvrt.integrations.sglang.KvrtHiCacheStorage driven the way SGLang's
HiCacheController calls a storage backend (tests/python/hicache_engine.py):

- engine B (page_first host pool, the generic flat-page calls) reuses the
  pages engine A (layer_first, the zero-copy v1 calls) backed up, every
  page it loads bitwise the rows it would compute, with the tokens of a
  run without storage;
- exists / batch_exists / get / set / batch_get_v1 / batch_set_v1 answer
  as HiCache expects; another namespace sees nothing;
- bad input raises kvrt's typed errors and leaves the node intact;
- a node that is gone means misses and failed copies, not exceptions."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import kvrt  # noqa: E402
from hicache_engine import HiCacheEngine, HostPool, get_hash_str, make_backend  # noqa: E402
from tiny_engine import BLOCK_SIZE, random_tokens as tokens, TinyModel  # noqa: E402

ENGINE = str(Path(__file__).resolve().parent / "hicache_engine.py")



def keys_of(prompt: list[int]) -> list[str]:
    out, last = [], None
    for j in range(len(prompt) // BLOCK_SIZE):
        last = get_hash_str(prompt[j * BLOCK_SIZE:(j + 1) * BLOCK_SIZE], last)
        out.append(last)
    return out


def run_engine(tmp_path: Path, name: str, requests: list[dict], descriptor: str, principal: str,
               *flags: str) -> dict:
    workload, out = tmp_path / f"{name}-workload.json", tmp_path / f"{name}-result.json"
    workload.write_text(json.dumps({"requests": requests}))
    args = [sys.executable, ENGINE, "--workload", str(workload), "--out", str(out), "--descriptor", descriptor,
            "--principal", principal, *flags]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return json.loads(out.read_text())


def reference(requests: list[dict]) -> tuple[dict, int]:
    engine = HiCacheEngine(None)
    outputs = {r["id"]: engine.generate(r["prompt"], r["max_tokens"]) for r in requests}
    return outputs, engine.prefill_tokens_computed


def test_engine_b_loads_the_pages_engine_a_backed_up_bitwise(engines_node, tmp_path):
    rng = random.Random(1205)
    system = tokens(rng, 5 * BLOCK_SIZE + 3)  # crosses a storage batch of 4 pages
    a_requests = [{"id": f"a-{i}", "prompt": system + tokens(rng, rng.randrange(2, 30)), "max_tokens": 5}
                  for i in range(3)]
    b_requests = [{"id": f"b-{i}", "prompt": system + tokens(rng, rng.randrange(2, 30)), "max_tokens": 5}
                  for i in range(3)]
    b_requests.append({"id": "b-repeat", "prompt": list(a_requests[2]["prompt"]), "max_tokens": 6})
    a = run_engine(tmp_path, "a", a_requests, engines_node.descriptor, "engine-a", "--layout", "layer_first")
    b = run_engine(tmp_path, "b", b_requests, engines_node.descriptor, "engine-b", "--layout", "page_first",
                   "--generic", "--verify-loads")
    assert a["outputs"] == reference(a_requests)[0]
    b_ref, b_prefill = reference(b_requests)
    assert b["outputs"] == b_ref
    # A's first request backs up the system prompt's 5 pages, its later ones
    # load them and back up their own question pages.
    assert a["loaded_pages"] == 2 * 5 and a["backed_up_pages"] > 5
    full = sum((len(r["prompt"]) - 1) // BLOCK_SIZE for r in b_requests[:3])
    assert b["loaded_pages"] >= 3 * 5 + len(keys_of(a_requests[2]["prompt"][:-1]))
    assert b["loaded_pages"] <= full + (len(a_requests[2]["prompt"]) - 1) // BLOCK_SIZE
    assert b["verified_rows"] == b["loaded_pages"] * BLOCK_SIZE
    assert b["prefill_tokens_computed"] == b_prefill - b["loaded_pages"] * BLOCK_SIZE
    stats = engines_node.quiescent()
    assert stats["validate_ok"] and stats["leaked_blocks"] == 0
    assert stats["owners"]["allocator"]["live_requests"] == 0


def page_rows(seed: int) -> torch.Tensor:
    """A page's bits: (2, layers, P, heads, head_dim) fp16 from random int16."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-30000, 30000, (2, 4, BLOCK_SIZE, 2, 16), generator=g, dtype=torch.int16).view(torch.float16)


def test_the_storage_calls_answer_as_hicache_expects(engines_node):
    a = make_backend(engines_node.descriptor, "engine-a")
    b = make_backend(engines_node.descriptor, "engine-b")
    host_a, host_b = HostPool(16, "layer_first"), HostPool(16, "page_first")
    a.register_mem_pool_host(host_a)
    b.register_mem_pool_host(host_b)
    keys = keys_of(list(range(100, 100 + 6 * BLOCK_SIZE)))
    idx = host_a.alloc(4 * BLOCK_SIZE)
    for i in range(4):
        host_a.set_from_flat_data_page(int(idx[i * BLOCK_SIZE]), page_rows(i).flatten())
    # Pages 0, 1 and 3 are stored; page 2 is not, so batch_exists stops at 2.
    assert a.batch_set_v1([keys[0], keys[1], keys[3]],
                          torch.cat([idx[0:32], idx[48:64]])) == [True, True, True]
    assert b.batch_exists(keys[:5]) == 2
    assert [b.exists(k) for k in keys[:5]] == [True, True, False, True, False]
    # Storing a stored key again is a success that changes nothing.
    assert a.batch_set_v1([keys[1]], idx[16:32]) == [True] and a.get_stats()["set_present"] == 1
    got_idx = host_b.alloc(3 * BLOCK_SIZE)
    assert b.batch_get_v1([keys[0], keys[2], keys[3]], got_idx) == [True, False, True]
    for j, src in ((0, 0), (2, 3)):
        page = host_b.get_data_page(int(got_idx[j * BLOCK_SIZE]), flat=False)  # (2, P, layers, H, D)
        assert torch.equal(page.transpose(1, 2).contiguous().view(torch.int16), page_rows(src).view(torch.int16))
    # get / set of flat pages in the registered pool's layout.
    assert b.set(keys[4], host_b.get_data_page(int(got_idx[0])))
    flat = a.get(keys[4], host_a.get_dummy_flat_data_page())
    assert flat is not None and torch.equal(flat.view(torch.int16), page_rows(0).flatten().view(torch.int16))
    assert a.get(keys[5]) is None and a.batch_get(keys[4:6])[1] is None
    # Another namespace's engine sees none of it.
    c = make_backend(engines_node.descriptor, "engine-c", namespace="test/elsewhere")
    host_c = HostPool(4, "page_first")
    c.register_mem_pool_host(host_c)
    assert c.batch_exists(keys[:2]) == 0 and c.batch_get_v1(keys[:1], host_c.alloc(BLOCK_SIZE)) == [False]
    for backend in (a, b, c):
        backend.close()
    stats = engines_node.quiescent()
    assert stats["validate_ok"] and stats["leaked_blocks"] == 0


def test_bad_input_raises_typed_errors_and_a_lost_node_means_misses(engines_node):
    a = make_backend(engines_node.descriptor, "engine-a")
    with pytest.raises(kvrt.InvalidArgument):
        a.batch_set_v1(["k"], torch.arange(BLOCK_SIZE))  # no host pool registered yet
    wrong = HostPool(4, "layer_first")
    wrong.head_dim = 8
    with pytest.raises(kvrt.Incompatible):
        a.register_mem_pool_host(wrong)
    host = HostPool(8, "layer_first")
    a.register_mem_pool_host(host)
    idx = host.alloc(2 * BLOCK_SIZE)
    with pytest.raises(kvrt.InvalidArgument):
        a.batch_set_v1(["k0", "k1"], idx[:BLOCK_SIZE + 3])  # too few indices
    with pytest.raises(kvrt.InvalidArgument):
        a.batch_get_v1(["k0"], idx[3:BLOCK_SIZE + 3])  # not page-aligned
    with pytest.raises(kvrt.InvalidArgument):
        a.batch_set_v1(["k0"], torch.arange(8 * BLOCK_SIZE, 9 * BLOCK_SIZE))  # past the pool
    with pytest.raises(kvrt.InvalidArgument):
        a.set("k0", torch.zeros(10, dtype=torch.float16))  # not a page
    with pytest.raises(kvrt.InvalidArgument):
        a.set("k0", host.get_data_page(0).float())  # wrong dtype
    with pytest.raises(kvrt.InvalidArgument):
        a.batch_exists([""])
    assert a.batch_exists(["k0"]) == 0 and a.get_stats()["set_stored"] == 0
    stats = engines_node.quiescent()
    assert stats["validate_ok"] and stats["leaked_blocks"] == 0
    assert a.batch_set_v1(["k0"], idx[:BLOCK_SIZE]) == [True]
    engines_node.kill()
    assert a.batch_exists(["k0"]) == 0
    assert a.batch_get_v1(["k0"], idx[BLOCK_SIZE:]) == [False]
    assert a.batch_set_v1(["k1"], idx[:BLOCK_SIZE]) == [False]
    assert a.get("k0") is None and a.set("k1", host.get_data_page(0)) is False
    assert a.get_stats()["node_errors"] >= 1
    a.close()


def test_the_reference_model_is_the_same_in_both_engines():
    # The two test engines share TinyModel: a prompt's tokens agree between them.
    from tiny_engine import TinyEngine

    rng = random.Random(3)
    prompt = tokens(rng, 2 * BLOCK_SIZE + 7)
    v = TinyEngine()
    v.add_request("x", prompt, 6)
    assert v.run()["x"] == HiCacheEngine(None).generate(prompt, 6)
    assert TinyModel().reference_kv(prompt)[0].shape == (2, len(prompt), 2, 16)
