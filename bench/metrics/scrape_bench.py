"""Does a Prometheus scrape disturb serving? A `kvrt worker` (the engine
loop, real model K/V) runs against a node for a fixed time, alternately
without and with a 1 Hz scraper reading GET /metrics (ABBA order, node and
worker pinned apart); the rows compare the worker's receipt latency p99
and p50 (every round trip it timed) with and without scraping, beside the
spread of the unscraped runs themselves, the floor below which no change
can be measured on this machine (docs/benchmarks.md "metrics").

    /usr/bin/python3 bench/metrics/scrape_bench.py [--json] [--quick] \\
        [--node-cpu 0 --client-cpu 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from bench_report import BenchNode, print_report  # noqa: E402


class Scraper:
    """GET /metrics once a second, as Prometheus would, timing each."""

    def __init__(self, url: str) -> None:
        self.url, self.seconds, self.bytes = url, [], 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.is_set():
            t0 = time.perf_counter()
            with urllib.request.urlopen(self.url, timeout=10) as r:
                body = r.read()
            self.seconds.append(time.perf_counter() - t0)
            self.bytes = len(body)
            self.stop.wait(1.0)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


def worker(args, node: BenchNode, seed: int) -> dict:
    out = subprocess.run([args.kvrt, "worker", "--node", node.descriptor, "--principal", "bench", "--duration",
                          str(args.duration), "--seed", str(seed), "--json"], check=True, capture_output=True,
                         text=True, timeout=args.duration + 120).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", action="store_true")
    p.add_argument("--quick", action="store_true", help="one short pair, as the test suite runs it")
    p.add_argument("--kvrt", default=str(ROOT / "build" / "apps" / "kvrt" / "kvrt"))
    p.add_argument("--node-cpu", type=int)
    p.add_argument("--client-cpu", type=int, help="pin the worker and the scraper to this CPU")
    args = p.parse_args()
    args.duration = 2 if args.quick else 10
    pairs = 1 if args.quick else 4
    if args.client_cpu is not None:
        os.sched_setaffinity(0, {args.client_cpu})
    plain, scraped, scrape_s, scrape_bytes = [], [], [], 0
    with tempfile.TemporaryDirectory(prefix="kvrt-scrape-bench-") as d:
        node = BenchNode(args.kvrt, ROOT / "bench" / "metrics" / "node-scrape.toml", Path(d), args.node_cpu)
        metrics_url = node.facts()["metrics_url"]
        try:
            worker(args, node, 1)  # warm the node's pools and index
            for i in range(pairs):
                # ABBA: drift over the run weighs on both sides alike.
                for with_scrape in ((False, True) if i % 2 == 0 else (True, False)):
                    if with_scrape:
                        with Scraper(metrics_url) as s:
                            scraped.append(worker(args, node, 100 + i))
                        scrape_s += s.seconds
                        scrape_bytes = s.bytes
                    else:
                        plain.append(worker(args, node, 100 + i))
        finally:
            node.stop()
    for r in plain + scraped:
        if r["reuse_mismatches"] != 0 or r["operation_errors"] != 0:
            print(f"scrape_bench: a worker was not exact: {r}", file=sys.stderr)
            return 1
    rows = []
    for q in ("p99", "p50"):
        a = [r[f"call_{q}_us"] for r in plain]
        b = [r[f"call_{q}_us"] for r in scraped]
        base, value = statistics.median(a), statistics.median(b)
        # No measurable change: the scraped median lies within the spread
        # of the unscraped runs (or within 5% where that spread is smaller).
        low, high = min(a), max(a)
        meets = min(low, base * 0.95) <= value <= max(high, base * 1.05)
        rows.append({"name": f"receipt_{q}_scraped_1hz", "value": round(value, 1), "unit": "us",
                     "baseline_name": "no_scrape", "baseline": round(base, 1), "ratio": round(base / value, 3),
                     "target": "no measurable change (within the unscraped runs' spread)", "meets": meets})
        rows.append({"name": f"receipt_{q}_unscraped_spread", "value": round(high / low, 3), "unit": "max/min",
                     "note": f"{len(a)} unscraped runs of {args.duration} s"})
    rows.append({"name": "scrape_seconds", "value": round(statistics.median(scrape_s) * 1e3, 2), "unit": "ms",
                 "note": f"median of {len(scrape_s)} scrapes of {scrape_bytes} bytes"})
    rows.append({"name": "worker_round_trips", "value": int(statistics.median(r["round_trips"] for r in plain + scraped)),
                 "unit": "per run"})
    print_report("metrics", rows, args.json,
                 f"medians over {pairs} ABBA pairs of {args.duration} s worker runs; ratio > 1 is better", width=36)
    return 0


if __name__ == "__main__":
    sys.exit(main())
