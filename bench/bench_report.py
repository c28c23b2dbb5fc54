"""What kvrt's Python benchmark scripts share (bench/python/python_bench.py,
bench/metrics/scrape_bench.py): a pinned `kvrt node` process, the machine
line, and the report every `kvrt bench` topic prints (docs/benchmarks.md):
one JSON object with --json, a table otherwise."""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class BenchNode:
    """A `kvrt node` serving `config`, pinned to `cpu` when given."""

    def __init__(self, kvrt_binary: str, config: Path, directory: Path, cpu: int | None) -> None:
        self.descriptor = str(directory / f"{config.stem}.json")
        self.log = open(directory / f"{config.stem}.log", "w")
        pin = (lambda: os.sched_setaffinity(0, {cpu})) if cpu is not None else None
        self.process = subprocess.Popen([kvrt_binary, "node", "--config", str(config), "--descriptor", self.descriptor],
                                        stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=pin)
        deadline = time.monotonic() + 30
        while not os.path.exists(self.descriptor):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kvrt node did not start: {open(self.log.name).read()[-2000:]}")
            time.sleep(0.02)

    def facts(self) -> dict:
        """The node's descriptor (addresses of its scrape and event sockets)."""
        return json.load(open(self.descriptor))

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def machine() -> dict:
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
                 platform.processor())
    build = "?"
    cache = ROOT / "build" / "CMakeCache.txt"
    if cache.exists():
        build = next((line.split("=", 1)[1].strip() for line in open(cache)
                      if line.startswith("CMAKE_BUILD_TYPE:")), "?") or "?"
    return {"cpus": os.cpu_count(), "cpu_model": model, "compiler": f"python {platform.python_version()}",
            "build": build}


def print_report(bench: str, rows: list[dict], as_json: bool, legend: str, width: int = 48) -> None:
    """The report of one run: {"bench", "machine", "rows"} as JSON, or a table
    under the machine line and `legend`."""
    report = {"bench": bench, "machine": machine(), "rows": rows}
    if as_json:
        print(json.dumps(report, indent=2))
        return
    m = report["machine"]
    print(f"machine: {m['cpus']} cpus, {m['cpu_model']}, {m['compiler']}, {m['build']}")
    print(legend + "\n")
    print(f"{'row':{width}} {'value':>10} {'unit':8} {'baseline':>10} {'ratio':>7}  target")
    for r in rows:
        meets = "" if "meets" not in r else ("  (meets)" if r["meets"] else "  (MISSES)")
        print(f"{r['name']:{width}} {r['value']:>10} {r['unit']:8} {r.get('baseline', ''):>10} "
              f"{r.get('ratio', ''):>7}  {r.get('target', r.get('note', ''))}{meets}")
