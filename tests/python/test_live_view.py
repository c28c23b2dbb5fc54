"""The live views of a node: `kvrt stats --watch` (one line, or one JSON
object, per interval, with the interval's hit rate) and `kvrt top` driven in
a pseudo-terminal: it draws, refreshes, quits on `q` and on Ctrl-C, gives
the terminal back (alternate screen left, cursor shown), refuses to run
without a terminal, and ends with an error when its node dies."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import random
import select
import subprocess
import termios
import threading
import time

import pytest

import kvrt
from conftest import KVRT, Node, publish

NS = "test/engines"


def test_stats_watch_prints_one_json_object_per_interval_with_that_intervals_hit_rate(metrics_node):
    s = kvrt.Session(metrics_node.descriptor, "engine-a")
    s.authorize(NS)
    P = s.geometry.block_tokens
    system = list(range(1, 2 * P + 1))
    assert publish(s, system + [9000], NS)
    watch = subprocess.Popen([KVRT, "stats", "--node", metrics_node.descriptor, "--watch", "--json",
                              "--interval", "0.5", "--count", "3"], stdout=subprocess.PIPE, text=True)
    first = json.loads(watch.stdout.readline())
    # Between the first and second line: admissions whose lookups hit the
    # 2 cached blocks (a side-effect-free lookup counts as a peek, not here).
    for _ in range(4):
        assert publish(s, system + [7, 7, 7], NS)
    rest = [json.loads(watch.stdout.readline()) for _ in range(2)]
    assert watch.wait(timeout=10) == 0
    assert first["interval_s"] == 0
    assert all(r["interval_s"] > 0.3 for r in rest)
    assert first["pools"][0]["capacity_blocks"] == 24
    assert first["alerts"] == []
    # The admissions land in the intervals after the first line (one, or
    # two when a busy machine makes them straddle a line): each line counts
    # only its own interval's, and together they are all four.
    assert sum(r["lookups"] for r in rest) == 4, rest
    assert sum(r["hit_tokens"] for r in rest) == 4 * 2 * P
    assert sum(r["query_tokens"] for r in rest) == 4 * (2 * P + 3)
    for r in rest:
        if r["query_tokens"]:
            assert r["hit_rate"] == pytest.approx((2 * P) / (2 * P + 3))
    assert "allocator" in rest[-1]["receipt_latency"]
    s.close()


def test_stats_watch_plain_lines_end_at_count(metrics_node):
    out = subprocess.run([KVRT, "stats", "--node", metrics_node.descriptor, "--watch", "--interval", "0.1",
                          "--count", "2"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2 and all(" usage 0:" in ln and "alerts none" in ln for ln in lines)


class Terminal:
    """`kvrt top` on the slave side of a pseudo-terminal it controls."""

    def __init__(self, descriptor: str, interval: str = "0.2") -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, b"\x28\x00\x78\x00\x00\x00\x00\x00")  # 40 rows, 120 columns

        def controlling_terminal():
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.process = subprocess.Popen([KVRT, "top", "--node", descriptor, "--interval", interval],
                                        stdin=slave, stdout=slave, stderr=slave, preexec_fn=controlling_terminal)
        os.close(slave)
        self.output = b""

    def read_until(self, predicate, timeout: float = 15.0) -> bool:
        deadline = time.monotonic() + timeout
        while not predicate(self.output) and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if ready:
                try:
                    self.output += os.read(self.master, 65536)
                except OSError:  # the slave side closed
                    break
        return predicate(self.output)

    def finish(self, timeout: float = 10.0) -> int:
        code = self.process.wait(timeout=timeout)
        self.read_until(lambda o: False, timeout=0.3)
        os.close(self.master)
        return code


@pytest.mark.parametrize("quit_key", [b"q", b"\x03"], ids=["q", "ctrl-c"])
def test_top_draws_refreshes_and_quits_giving_the_terminal_back(metrics_node, quit_key):
    term = Terminal(metrics_node.descriptor)
    assert term.read_until(lambda o: o.count(b"\x1b[2J") >= 1 and b"POOLS" in o), term.output
    assert b"\x1b[?1049h" in term.output  # the alternate screen
    # Activity between frames shows in the next ones.
    s = kvrt.Session(metrics_node.descriptor, "engine-a")
    s.authorize(NS)
    rng = random.Random(7)
    for _ in range(3):
        assert publish(s, [rng.randrange(1, 5000) for _ in range(40)], NS)
    # A frame arrives in pieces: wait for one drawn whole (its last section
    # and final line) after the session connected.
    def whole_frame_after_connect(o: bytes) -> bool:
        frames = o.split(b"\x1b[2J")
        last = frames[-1]
        return (len(frames) >= 4 and b"connected 1" in o and b"LATENCY" in last and last.endswith(b"\n")
                and b"allocator" in last)

    assert term.read_until(whole_frame_after_connect), term.output[-3000:]
    frame = term.output.rsplit(b"\x1b[2J", 1)[-1].decode(errors="replace")
    assert "pool 0" in frame and "ALERTS" in frame and "none of the seven" in frame
    assert "LATENCY" in frame and "allocator" in frame
    os.write(term.master, quit_key)
    assert term.finish() == 0
    assert term.output.endswith(b"\x1b[?25h\x1b[?1049l") or b"\x1b[?1049l" in term.output[-64:]
    s.close()


def test_top_ends_with_an_error_when_its_node_dies(tmp_path):
    node = Node(tmp_path, "tests/data/python/node-metrics.toml")
    try:
        term = Terminal(node.descriptor)
        assert term.read_until(lambda o: b"POOLS" in o)
        node.kill()
        assert term.finish(timeout=20) == 2
        assert b"\x1b[?1049l" in term.output
        assert b"kvrt top:" in term.output
    finally:
        node.stop()


def test_top_needs_a_terminal(metrics_node):
    out = subprocess.run([KVRT, "top", "--node", metrics_node.descriptor], capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 2
    assert "kvrt stats --watch" in out.stderr


def test_watch_keeps_printing_while_a_worker_runs(metrics_node):
    # A worker process beside the watcher: lines keep coming, the worker is exact.
    lines = []
    watch = subprocess.Popen([KVRT, "stats", "--node", metrics_node.descriptor, "--watch", "--json",
                              "--interval", "0.2"], stdout=subprocess.PIPE, text=True)
    reader = threading.Thread(target=lambda: lines.extend(watch.stdout), daemon=True)
    reader.start()
    deadline = time.monotonic() + 30

    def await_lines(n: int) -> None:
        while len(lines) < n and time.monotonic() < deadline:
            time.sleep(0.05)

    await_lines(1)  # the watcher is connected
    s = kvrt.Session(metrics_node.descriptor, "engine-a")
    s.authorize(NS)
    for i in range(20):
        assert publish(s, [1 + (i % 3)] * 33, NS)
    await_lines(len(lines) + 2)  # two more while the session is open
    watch.send_signal(2)
    assert watch.wait(timeout=10) == 0
    reader.join(timeout=5)
    assert len(lines) >= 3
    seen = [json.loads(x) for x in lines]
    assert max(r["workers_connected"] for r in seen) == 1
    s.close()
