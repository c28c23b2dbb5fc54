"""Two engine processes with vLLM's calling order share one kvrt node
through kvrt.integrations.vllm.KvrtConnector (tests/python/tiny_engine.py):

- engine B reuses the prefixes engine A saved, and every row it loads is
  bitwise the row it would compute itself; both engines' tokens equal a run
  with no connector; B computes fewer prefill tokens;
- an engine killed mid-run leaves nothing behind in the node;
- a node killed mid-run leaves the engine running on, recomputing, with
  the same tokens."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tiny_engine import BLOCK_SIZE, random_tokens as tokens, TinyEngine, kvrt_connector_factory  # noqa: E402

ENGINE = str(Path(__file__).resolve().parent / "tiny_engine.py")



def shared_prefix_workloads(seed: int) -> tuple[list[dict], list[dict]]:
    """Engine A's and engine B's requests: a system prompt and a document
    both use, questions of their own, a prompt B repeats exactly, and one
    whose length is a whole number of blocks that A saved in full."""
    rng = random.Random(seed)
    system, document = tokens(rng, 2 * BLOCK_SIZE + 5), tokens(rng, 3 * BLOCK_SIZE + 2)
    a = [{"id": f"a-{i}", "prompt": system + tokens(rng, rng.randrange(3, 20)), "max_tokens": 6} for i in range(3)]
    a.append({"id": "a-doc", "prompt": document + tokens(rng, 9), "max_tokens": 5})
    b = [{"id": f"b-{i}", "prompt": system + tokens(rng, rng.randrange(3, 20)), "max_tokens": 6} for i in range(3)]
    b.append({"id": "b-doc", "prompt": document + tokens(rng, 17), "max_tokens": 5})
    b.append({"id": "b-repeat", "prompt": list(a[1]["prompt"]), "max_tokens": 7})
    b.append({"id": "b-aligned", "prompt": document[:3 * BLOCK_SIZE], "max_tokens": 4})
    return a, b


def reference(requests: list[dict]) -> tuple[dict, int]:
    """Outputs and prefill tokens of the same engine with no connector."""
    engine = TinyEngine()
    for r in requests:
        engine.add_request(r["id"], r["prompt"], r["max_tokens"])
    return engine.run(), engine.prefill_tokens_computed


def run_engine(tmp_path: Path, name: str, requests: list[dict], descriptor: str, principal: str,
               verify: bool = True) -> dict:
    workload, out = tmp_path / f"{name}-workload.json", tmp_path / f"{name}-result.json"
    workload.write_text(json.dumps({"requests": requests}))
    args = [sys.executable, ENGINE, "--workload", str(workload), "--out", str(out), "--descriptor", descriptor,
            "--principal", principal] + (["--verify-loads"] if verify else [])
    done = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{name} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return json.loads(out.read_text())


def test_engine_b_reuses_what_engine_a_saved_bitwise_and_tokens_do_not_change(engines_node, tmp_path):
    seed = int(os.environ.get("KVRT_TEST_SEED", "20261205"))
    a_requests, b_requests = shared_prefix_workloads(seed)
    a = run_engine(tmp_path, "a", a_requests, engines_node.descriptor, "engine-a")
    b = run_engine(tmp_path, "b", b_requests, engines_node.descriptor, "engine-b")
    a_ref, a_prefill = reference(a_requests)
    b_ref, b_prefill = reference(b_requests)
    assert a["outputs"] == a_ref, f"seed {seed}"
    assert b["outputs"] == b_ref, f"seed {seed}"
    assert a["counters"]["saved_blocks"] > 0 and a["counters"]["published_blocks"] > 0
    assert b["counters"]["loaded_blocks"] > 0 and b["counters"]["load_error_blocks"] == 0
    assert b["verified_rows"] == b["counters"]["loaded_blocks"] * BLOCK_SIZE
    # Every prompt token is either loaded or computed, never both.
    assert b_prefill == sum(len(r["prompt"]) for r in b_requests)
    assert b["prefill_tokens_computed"] == b_prefill - b["counters"]["loaded_blocks"] * BLOCK_SIZE
    # At least: b-0..b-2 the system prompt's 2 full blocks each, b-doc the
    # document's 3, b-repeat 2 of a-1's, b-aligned 2 of its 3 (the last
    # prompt token is always computed, so a whole-block hit stops a block short).
    assert b["counters"]["loaded_blocks"] >= 3 * 2 + 3 + 2 + 2, f"seed {seed}"
    # A's four requests were admitted in one step, before any was published.
    assert a["prefill_tokens_computed"] == a_prefill
    stats = engines_node.quiescent()
    assert stats["validate_ok"] and stats["leaked_blocks"] == 0
    assert stats["owners"]["allocator"]["live_requests"] == 0


def test_an_engine_killed_mid_run_leaks_nothing_in_the_node(engines_node, tmp_path):
    rng = random.Random(5)
    system = tokens(rng, 3 * BLOCK_SIZE)
    requests = [{"id": f"k-{i}", "prompt": system + tokens(rng, 30), "max_tokens": 40} for i in range(200)]
    workload = tmp_path / "k-workload.json"
    workload.write_text(json.dumps({"requests": requests}))
    engine = subprocess.Popen([sys.executable, ENGINE, "--workload", str(workload), "--out", str(tmp_path / "k.json"),
                               "--descriptor", engines_node.descriptor, "--principal", "engine-a"],
                              stdout=subprocess.PIPE, text=True)
    # Kill it once it holds requests in the node and has published some.
    deadline = time.monotonic() + 120
    while True:
        line = engine.stdout.readline()
        assert line, "the engine exited before it was killed"
        if int(line.split()[3]) >= 2:
            break
        assert time.monotonic() < deadline
    held = engines_node.stats(validate=False)["owners"]["allocator"]["live_requests"]
    engine.send_signal(signal.SIGKILL)
    engine.wait()
    engine.stdout.close()
    assert held > 0
    stats = engines_node.quiescent(timeout=20)
    assert stats["validate_ok"] and stats["leaked_blocks"] == 0
    assert stats["owners"]["allocator"]["live_requests"] == 0 and stats["live_leases"] == 0


def test_a_node_killed_mid_run_leaves_the_engine_recomputing_with_the_same_tokens(engines_node):
    rng = random.Random(9)
    system = tokens(rng, 2 * BLOCK_SIZE + 3)
    requests = [{"id": f"n-{i}", "prompt": system + tokens(rng, rng.randrange(4, 24)), "max_tokens": 5}
                for i in range(10)]
    engine = TinyEngine(kvrt_connector_factory(engines_node.descriptor, "engine-a"), verify_loads=True)
    for r in requests:
        engine.add_request(r["id"], r["prompt"], r["max_tokens"])
    killed_at = []

    def kill_node(step: int) -> None:
        if not killed_at and len(engine.finished) >= 4 and engine.running:
            engines_node.kill()
            killed_at.append(step)

    outputs = engine.run(kill_node)
    counters = engine.scheduler_connector.counters
    engine.shutdown()
    assert killed_at, "the node was never killed"
    assert outputs == reference(requests)[0]
    assert engine.verified_rows > 0  # requests before the kill reused the system prompt
    assert counters["node_errors"] >= 1
