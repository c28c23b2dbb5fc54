"""Fixtures of the Python tests: a kvrt node process per test, and the kvrt
binary to ask it for statistics.

CTest runs these with KVRT_BINARY (the kvrt executable), KVRT_SOURCE_DIR
and PYTHONPATH (the built package, <build>/python) set; by hand:

    PYTHONPATH=build/python KVRT_BINARY=build/apps/kvrt/kvrt \\
        /usr/bin/python3 -m pytest tests/python
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

SOURCE_DIR = Path(os.environ.get("KVRT_SOURCE_DIR", Path(__file__).resolve().parents[2]))
KVRT = os.environ.get("KVRT_BINARY", str(SOURCE_DIR / "build" / "apps" / "kvrt" / "kvrt"))


class Node:
    """A `kvrt node` process serving a test configuration."""

    def __init__(self, directory: Path, config: str) -> None:
        self.descriptor = str(directory / "node.json")
        self.log = open(directory / "node.log", "w")
        self.process = subprocess.Popen(
            [KVRT, "node", "--config", str(SOURCE_DIR / config), "--descriptor", self.descriptor],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while not os.path.exists(self.descriptor):
            if self.process.poll() is not None:
                raise RuntimeError(f"kvrt node exited {self.process.returncode}: {open(directory / 'node.log').read()}")
            if time.monotonic() > deadline:
                raise RuntimeError("kvrt node wrote no descriptor in 20 s")
            time.sleep(0.02)

    def stats(self, validate: bool = True) -> dict:
        args = [KVRT, "stats", "--node", self.descriptor, "--json"] + (["--validate"] if validate else [])
        out = subprocess.run(args, check=True, capture_output=True, text=True, timeout=30).stdout
        return json.loads(out)

    def quiescent(self, timeout: float = 10.0) -> dict:
        """Waits until the node holds no request, lease or leaked block and
        every owner validates; returns those statistics."""
        deadline = time.monotonic() + timeout
        while True:
            s = self.stats()
            alloc = s["owners"]["allocator"]
            done = (s["validate_ok"] and s["leaked_blocks"] == 0 and alloc["live_requests"] == 0
                    and alloc["live_leases"] == 0 and s["live_leases"] == 0)
            if done or time.monotonic() > deadline:
                return s
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILLs the node, then unlinks the pool segments it left (those
        `kvrt segments` names with its pid; not every stale segment, which
        other tests running beside this one may be inspecting)."""
        pid = str(self.process.pid)
        self.process.kill()
        self.process.wait()
        listed = subprocess.run([KVRT, "segments", "--json"], check=True, capture_output=True, text=True,
                                timeout=30).stdout
        for segment in json.loads(listed)["segments"]:
            if segment["owner_pid"] == pid:
                try:
                    os.unlink("/dev/shm/" + segment["name"].lstrip("/"))
                except FileNotFoundError:
                    pass

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


@pytest.fixture
def node(tmp_path):
    n = Node(tmp_path, "tests/data/node/node-test.toml")
    yield n
    n.stop()


@pytest.fixture
def radix_node(tmp_path):
    n = Node(tmp_path, "tests/data/node/node-radix-test.toml")
    yield n
    n.stop()


@pytest.fixture
def metrics_node(tmp_path):
    """A node serving /metrics and KV events on free loopback ports, with a
    small pool and alert windows short enough for a test."""
    n = Node(tmp_path, "tests/data/python/node-metrics.toml")
    yield n
    n.stop()


@pytest.fixture
def engines_node(tmp_path):
    """A node for the test engines: the tiny engine's layout, engine-a and
    engine-b on test/engines, engine-c on test/elsewhere."""
    n = Node(tmp_path, "tests/data/python/node-engines.toml")
    yield n
    n.stop()


def publish(s, prompt: list[int], ns: str = "test/engines", adapter: str = "") -> bool:
    """Admits `prompt` in namespace `ns`, commits its rows, publishes its
    full blocks (or ends its reuse attempt, which publishes the successor)
    and releases it; False when the node had no room."""
    import kvrt
    a = s.admit([kvrt.Request(ns, prompt, adapter)])[0]
    if not a.admitted:
        return False
    P = s.geometry.block_tokens
    full = len(prompt) // P
    kvrt.check_statuses(s.commit_rows([a.request], [len(prompt)]))
    if a.reuse_attempt:
        s.end_reuse(a.reuse_attempt, True, a.request, prompt[:full * P], full)
        s.flush_reuse_ends()
    else:
        s.publish(a.request, ns, prompt, 0, full)
    kvrt.check_statuses(s.release([a.request]))
    return True
