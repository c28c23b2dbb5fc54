"""kvrt's Python way in, measured against baselines of the same run
(docs/benchmarks.md; rows and JSON as every `kvrt bench` topic):

- the Python package's batched calls against the same calls made from C
  through libkvrt (build/bench/kvrt_call_baseline), alternated C, Python,
  C, Python, ...: median ns per call, target <= 1.3x C;
- the vLLM connector's save (engine -> kvrt) and load (kvrt -> engine) of
  16-token blocks of a 32-layer, 8-head, 128-wide fp16 model against a
  plain memcpy of the same bytes in the same process: GB/s, target >= 0.7
  of memcpy;
- prefill tokens engine B computes with the connector, on a shared-prefix
  workload after engine A ran it, against the same engine without it (the
  tokens must be equal, or the bench fails).

    PYTHONPATH=build/python /usr/bin/python3 bench/python/python_bench.py \\
        [--json] [--quick] [--node-cpu 0 --client-cpu 1]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))
sys.path.insert(0, str(ROOT / "bench"))

import kvrt  # noqa: E402
from bench_report import BenchNode, print_report  # noqa: E402


# ---- per-call overhead -----------------------------------------------------


def python_calls(descriptor: str, batch: int, tokens: int, trials: int, iterations: int) -> dict:
    """What kvrt_call_baseline does, through the Python package."""
    with kvrt.Session(descriptor, "bench", worker_name="python-bench") as s:
        s.authorize("bench/calls")
        reqs = [kvrt.Request("bench/calls", [1 + (r * 7919 + t) % 30000 for t in range(tokens)]) for r in range(batch)]
        lookup, admit_release, decode = [], [], []
        for _ in range(trials):
            t0 = time.perf_counter_ns()
            for _ in range(iterations):
                s.lookup(reqs)
            lookup.append((time.perf_counter_ns() - t0) / iterations)

            t0 = time.perf_counter_ns()
            for _ in range(iterations):
                held = [a.request for a in s.admit(reqs, reuse=False)]
                s.release(held, kvrt.ReleaseReason.FINISHED)
            admit_release.append((time.perf_counter_ns() - t0) / iterations)

            held = [a.request for a in s.admit(reqs, reuse=False)]
            t0 = time.perf_counter_ns()
            for _ in range(iterations):
                positions, _ = s.append(held)
                s.commit_rows(held, positions + 1)
            decode.append((time.perf_counter_ns() - t0) / iterations)
            s.release(held, kvrt.ReleaseReason.FINISHED)
    return {"lookup": statistics.median(lookup), "admit_release": statistics.median(admit_release),
            "decode_step": statistics.median(decode)}


def call_rows(args, tmp: Path) -> list[dict]:
    node = BenchNode(args.kvrt, ROOT / "bench" / "python" / "node-calls.toml", tmp, args.node_cpu)
    batch, tokens = 16, 256
    trials, iterations = (3, 20) if args.quick else (7, 200)
    try:
        # The prompts published once, so that lookups walk full chains.
        with kvrt.Session(node.descriptor, "bench") as s:
            s.authorize("bench/calls")
            for r in range(batch):
                ids = [1 + (r * 7919 + t) % 30000 for t in range(tokens)]
                a = s.admit([kvrt.Request("bench/calls", ids)], reuse=False)[0]
                kvrt.check_statuses(s.commit_rows([a.request], [tokens]))
                s.publish(a.request, "bench/calls", ids, 0, tokens // s.geometry.block_tokens)
                s.release([a.request])
        c_runs, py_runs = [], []
        for _ in range(1 if args.quick else 3):
            out = subprocess.run([args.baseline, node.descriptor, "bench", "bench/calls", str(batch), str(tokens),
                                  str(trials), str(iterations)], check=True, capture_output=True, text=True).stdout
            c_runs.append(json.loads(out))
            py_runs.append(python_calls(node.descriptor, batch, tokens, trials, iterations))
    finally:
        node.stop()
    rows = []
    for op in ("lookup", "admit_release", "decode_step"):
        c = statistics.median(r[op] for r in c_runs)
        py = statistics.median(r[op] for r in py_runs)
        rows.append({"name": f"python_{op}_batch{batch}", "value": round(py / 1000, 2), "unit": "us/call",
                     "baseline_name": "c_libkvrt", "baseline": round(c / 1000, 2), "ratio": round(c / py, 3),
                     "target": "<= 1.3x C", "meets": py <= 1.3 * c})
    return rows


# ---- connector copies ---------------------------------------------------------


def copy_rows(args, tmp: Path) -> list[dict]:
    import torch

    from kvrt.integrations.vllm import BlockCopy, KvrtConnector, KvrtConnectorMetadata, KVConnectorRole

    node = BenchNode(args.kvrt, ROOT / "bench" / "python" / "node-model-wide.toml", tmp, args.node_cpu)
    blocks = 8 if args.quick else 64
    trials = 3 if args.quick else 9
    layers, P = 32, 16
    try:
        extra = {"descriptor": node.descriptor, "principal": "bench", "namespace": "bench/copies"}
        config = SimpleNamespace(kv_transfer_config=SimpleNamespace(kv_connector_extra_config=extra),
                                 cache_config=SimpleNamespace(block_size=P))
        names = [f"model.layers.{i}.self_attn.attn" for i in range(layers)]
        engine_blocks = blocks + 8
        g = torch.Generator().manual_seed(1)
        caches = {n: torch.randint(-30000, 30000, (2, engine_blocks, P, 8, 128), generator=g,
                                   dtype=torch.int16).view(torch.float16) for n in names}
        with kvrt.Session(node.descriptor, "bench") as s:
            s.authorize("bench/copies")
            a = s.admit([kvrt.Request("bench/copies", list(range(1, blocks * P + 1)))], reuse=False)[0]
            kvrt_blocks = list(s.block_table(a.request, 0))[:blocks]
            worker = KvrtConnector(config, KVConnectorRole.WORKER)
            worker.register_kv_caches(caches)
            src = list(range(blocks))
            dst = list(range(8, 8 + blocks))  # loads land elsewhere, so they can be checked
            save = KvrtConnectorMetadata(saves=[BlockCopy("bench", src, [kvrt_blocks])])
            load = KvrtConnectorMetadata(loads=[BlockCopy("bench", dst, [kvrt_blocks])])

            def run_save() -> None:
                worker.bind_connector_metadata(save)
                worker.start_load_kv(None)
                for n in names:
                    worker.save_kv_layer(n, caches[n], None)
                worker.wait_for_save()
                worker.clear_connector_metadata()

            def run_load() -> None:
                worker.bind_connector_metadata(load)
                worker.start_load_kv(None)
                worker.clear_connector_metadata()

            nbytes = blocks * layers * 2 * P * 8 * 128 * 2
            mem_src = np.frombuffer(np.random.default_rng(2).bytes(nbytes), dtype=np.uint8).copy()
            mem_dst = np.zeros(nbytes, dtype=np.uint8)

            def run_memcpy() -> None:
                ctypes.memmove(mem_dst.ctypes.data, mem_src.ctypes.data, nbytes)

            timings = {"save": [], "load": [], "memcpy": []}
            for fn in (run_save, run_load, run_memcpy):
                fn()  # touch every page once
            for _ in range(trials):  # alternated, so drift hits all three
                for name, fn in (("save", run_save), ("memcpy", run_memcpy), ("load", run_load)):
                    t0 = time.perf_counter()
                    fn()
                    timings[name].append(time.perf_counter() - t0)
            for n in names:  # what was loaded is what was saved
                if not torch.equal(caches[n][:, dst].view(torch.int16), caches[n][:, src].view(torch.int16)):
                    raise AssertionError(f"{n}: the loaded blocks differ from the saved ones")
            worker.shutdown()
            s.release([a.request], kvrt.ReleaseReason.CANCELLED)
    finally:
        node.stop()
    gbps = {k: nbytes / statistics.median(v) / 1e9 for k, v in timings.items()}
    return [{"name": f"connector_{op}_16tok_blocks_32x8x128_fp16", "value": round(gbps[op], 2), "unit": "GB/s",
             "baseline_name": "memcpy", "baseline": round(gbps["memcpy"], 2),
             "ratio": round(gbps[op] / gbps["memcpy"], 3), "target": ">= 0.7x memcpy",
             "meets": gbps[op] >= 0.7 * gbps["memcpy"]} for op in ("save", "load")]


# ---- prefill saved --------------------------------------------------------------


def prefill_rows(args, tmp: Path) -> list[dict]:
    from tiny_engine import BLOCK_SIZE, VOCAB, TinyEngine, kvrt_connector_factory

    rng = random.Random(7)
    system = [rng.randrange(VOCAB) for _ in range(6 * BLOCK_SIZE + 5)]
    count = 4 if args.quick else 12

    def workload(prefix: str) -> list[tuple[str, list[int], int]]:
        return [(f"{prefix}-{i}", system + [rng.randrange(VOCAB) for _ in range(rng.randrange(8, 40))], 4)
                for i in range(count)]

    a_requests, b_requests = workload("a"), workload("b")

    def run(requests, factory):
        engine = TinyEngine(factory)
        for rid, prompt, n in requests:
            engine.add_request(rid, prompt, n)
        out = engine.run()
        engine.shutdown()
        return out, engine.prefill_tokens_computed

    node = BenchNode(args.kvrt, ROOT / "tests" / "data" / "python" / "node-engines.toml", tmp, args.node_cpu)
    try:
        run(a_requests, kvrt_connector_factory(node.descriptor, "engine-a"))
        b_out, b_prefill = run(b_requests, kvrt_connector_factory(node.descriptor, "engine-b"))
    finally:
        node.stop()
    ref_out, ref_prefill = run(b_requests, None)
    if b_out != ref_out:
        raise AssertionError("engine B's tokens with the connector differ from its tokens without it")
    return [{"name": "prefill_tokens_engine_b_shared_prefix", "value": b_prefill, "unit": "tokens",
             "baseline_name": "no_connector", "baseline": ref_prefill, "ratio": round(ref_prefill / b_prefill, 3)}]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true", help="print one JSON object (docs/benchmarks.md)")
    p.add_argument("--quick", action="store_true", help="reduced sizes, as the test suite runs it")
    p.add_argument("--kvrt", default=str(ROOT / "build" / "apps" / "kvrt" / "kvrt"))
    p.add_argument("--baseline", default=str(ROOT / "build" / "bench" / "kvrt_call_baseline"))
    p.add_argument("--node-cpu", type=int, help="pin the node to this CPU")
    p.add_argument("--client-cpu", type=int, help="pin this process (and the C baseline) to this CPU")
    args = p.parse_args()
    if args.client_cpu is not None:
        os.sched_setaffinity(0, {args.client_cpu})
    with tempfile.TemporaryDirectory(prefix="kvrt-python-bench-") as d:
        rows = call_rows(args, Path(d)) + copy_rows(args, Path(d)) + prefill_rows(args, Path(d))
    print_report("python", rows, args.json, "medians over alternated trials; ratio > 1 is better for kvrt's Python path")
    return 0


if __name__ == "__main__":
    sys.exit(main())
