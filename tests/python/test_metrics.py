"""A kvrt node's /metrics endpoint read as Prometheus reads it: every
documented family present and parsed by prometheus_client's own parser,
the exposition clean under `promtool check metrics`, its numbers equal to
what `kvrt stats` reports, a joint alert of 0x0CF raised live by a pool
filled to refusal and cleared when it drains, and requests that are not a
scrape answered without harm."""

from __future__ import annotations

import json
import random
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

parser = pytest.importorskip("prometheus_client.parser")

import kvrt  # noqa: E402
from conftest import SOURCE_DIR, Node, publish  # noqa: E402

NS = "test/engines"

# Every family docs/operations.md lists, with its type.
FAMILIES = {
    "kvrt_node_uptime_seconds": "gauge",
    "kvrt_pool_capacity_blocks": "gauge",
    "kvrt_pool_blocks": "gauge",
    "kvrt_pool_peak_live_blocks": "gauge",
    "kvrt_kv_cache_usage_ratio": "gauge",
    "kvrt_pool_partition_residual_blocks": "gauge",
    "kvrt_kv_live_valid_rows": "gauge",
    "kvrt_kv_live_allocated_rows": "gauge",
    "kvrt_kv_memory_efficiency_ratio": "gauge",
    "kvrt_refcount_delta_references": "gauge",
    "kvrt_leaked_blocks": "gauge",
    "kvrt_mapping_lag_tokens": "gauge",
    "kvrt_prefix_cache_queries_tokens": "counter",
    "kvrt_prefix_cache_hits_tokens": "counter",
    "kvrt_prefix_cache_lookups": "counter",
    "kvrt_prefix_cache_publications": "counter",
    "kvrt_prefix_cache_blocks": "gauge",
    "kvrt_prefix_cache_leased_blocks": "gauge",
    "kvrt_cache_evicted_blocks": "counter",
    "kvrt_cow_copies": "counter",
    "kvrt_cow_copied_rows": "counter",
    "kvrt_cow_copied_bytes": "counter",
    "kvrt_reuse_funnel": "counter",
    "kvrt_reuse_rejections": "counter",
    "kvrt_reuse_unsettled_candidates": "gauge",
    "kvrt_reuse_candidate_outcomes": "counter",
    "kvrt_reuse_transactions": "counter",
    "kvrt_purges": "counter",
    "kvrt_purge_duration_seconds": "gauge",
    "kvrt_invalidations": "counter",
    "kvrt_invalidated_pages": "counter",
    "kvrt_workers_connected": "gauge",
    "kvrt_sessions_opened": "counter",
    "kvrt_sessions_ended": "counter",
    "kvrt_sessions_lost": "counter",
    "kvrt_sessions_silenced": "counter",
    "kvrt_hellos_refused": "counter",
    "kvrt_requests_reclaimed": "counter",
    "kvrt_allocation_refusals": "counter",
    "kvrt_locked_eviction_rejects": "counter",
    "kvrt_fault_points_fired": "counter",
    "kvrt_owner_errors": "counter",
    "kvrt_kv_events_published": "counter",
    "kvrt_kv_events_dropped": "counter",
    "kvrt_kv_event_batches_published": "counter",
    "kvrt_kv_event_replays_served": "counter",
    "kvrt_receipt_latency_seconds": "histogram",
    "kvrt_alert_window_seconds": "gauge",
    "kvrt_alert_active": "gauge",
    "kvrt_alert_input": "gauge",
    "kvrt_owner_stat": "gauge",
}

ALERTS = ["allocator_exhaustion", "locked_cache_pressure", "reference_leak", "mapping_stall",
          "compatibility_churn", "stale_receipt_race", "security_boundary_pressure"]


def scrape_text(node: Node) -> str:
    url = json.load(open(node.descriptor))["metrics_url"]
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return r.read().decode()


def scrape(node: Node) -> dict:
    """family name -> {(sample name, sorted labels): value}, and the types."""
    families = {}
    for f in parser.text_string_to_metric_families(scrape_text(node)):
        families[f.name] = (f.type, f.documentation,
                            {(s.name, tuple(sorted(s.labels.items()))): s.value for s in f.samples})
    return families


def value(families: dict, family: str, sample: str | None = None, **labels) -> float:
    samples = families[family][2]
    return samples[(sample or family, tuple(sorted(labels.items())))]


def await_alert(node: Node, alert: str, active: int, timeout: float = 10.0) -> dict:
    """Scrapes until kvrt_alert_active{alert} is `active`; the last scrape."""
    deadline = time.monotonic() + timeout
    while True:
        families = scrape(node)
        if value(families, "kvrt_alert_active", alert=alert) == active or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert value(families, "kvrt_alert_active", alert=alert) == active
    return families


def test_every_family_is_served_parsed_and_agrees_with_kvrt_stats(metrics_node):
    seed = 20261206
    rng = random.Random(seed)
    s = kvrt.Session(metrics_node.descriptor, "engine-a")
    s.authorize(NS)
    P = s.geometry.block_tokens
    system = [rng.randrange(1, 5000) for _ in range(2 * P)]
    for _ in range(12):
        assert publish(s, system + [rng.randrange(1, 5000) for _ in range(rng.randrange(1, 2 * P))], NS)
    hits, _ = s.lookup([kvrt.Request(NS, system + [1, 2, 3])])
    assert int(hits[0]) == 2 * P, f"seed {seed}"
    s.close()
    stats = metrics_node.quiescent()
    metrics_node.stats(validate=False)  # the node is idle: nothing below moves but the clock

    families = scrape(metrics_node)
    for name, kind in FAMILIES.items():
        assert name in families, f"{name} is not served"
        assert families[name][0] == kind, f"{name}: {families[name][0]}"
        assert families[name][1], f"{name} has no help text"
    assert set(n for n in families if n.startswith("kvrt_")) == set(FAMILIES)

    # Every value `kvrt stats` reports, under kvrt_owner_stat, unchanged.
    now = metrics_node.stats(validate=False)
    for owner, values in now["owners"].items():
        for name, v in values.items():
            if isinstance(v, bool) or not isinstance(v, int):
                continue
            assert value(families, "kvrt_owner_stat", owner=owner, name=name) == v, f"{owner}.{name}"
    alloc, prefix, node = now["owners"]["allocator"], now["owners"]["prefix_index"], now["owners"]["node"]
    # The documented views of the same counters.
    for state in ("free", "evictable", "live", "in_transaction"):
        assert value(families, "kvrt_pool_blocks", pool="0", state=state) == alloc[f"pool0_{state}_blocks"]
    capacity = alloc["pool0_capacity_blocks"]
    assert value(families, "kvrt_pool_capacity_blocks", pool="0") == capacity == 24
    idle = alloc["pool0_free_blocks"] + alloc["pool0_evictable_blocks"]
    assert value(families, "kvrt_kv_cache_usage_ratio", pool="0") == pytest.approx((capacity - idle) / capacity)
    assert value(families, "kvrt_pool_partition_residual_blocks", pool="0") == 0
    assert value(families, "kvrt_prefix_cache_queries_tokens", "kvrt_prefix_cache_queries_tokens_total") == \
        prefix["lookup_prompt_tokens"]
    hits_tokens = value(families, "kvrt_prefix_cache_hits_tokens", "kvrt_prefix_cache_hits_tokens_total")
    assert hits_tokens == prefix["lookup_hit_tokens"] >= 2 * P
    funnel = now["reuse_funnel"]
    assert value(families, "kvrt_reuse_funnel", "kvrt_reuse_funnel_total", stage="requests") == funnel["requests"] > 0
    assert value(families, "kvrt_reuse_funnel", "kvrt_reuse_funnel_total", stage="leased") == funnel["leased"]
    assert value(families, "kvrt_sessions_opened", "kvrt_sessions_opened_total") == node["sessions_opened"] == 1
    assert value(families, "kvrt_workers_connected") == 0
    published = value(families, "kvrt_kv_events_published", "kvrt_kv_events_published_total")
    assert published == node["kv_events_published"] > 0
    assert value(families, "kvrt_refcount_delta_references") == stats["refcount_delta"] == 0
    # The allocator answered receipts; every histogram's buckets add up.
    latency = families["kvrt_receipt_latency_seconds"][2]
    count = value(families, "kvrt_receipt_latency_seconds", "kvrt_receipt_latency_seconds_count",
                  owner="allocator", route="allocator")
    assert count > 0
    inf = latency[("kvrt_receipt_latency_seconds_bucket",
                   tuple(sorted({"owner": "allocator", "route": "allocator", "le": "+Inf"}.items())))]
    assert inf == count
    for alert in ALERTS:
        assert value(families, "kvrt_alert_active", alert=alert) == 0, alert


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian prometheus) is not installed")
def test_promtool_finds_nothing_to_lint_in_a_scrape(metrics_node):
    s = kvrt.Session(metrics_node.descriptor, "engine-a")
    s.authorize(NS)
    assert publish(s, list(range(1, 40)), NS)
    s.close()
    text = scrape_text(metrics_node)
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_full_pool_raises_allocator_exhaustion_live_and_draining_clears_it(metrics_node):
    s = kvrt.Session(metrics_node.descriptor, "engine-a")
    s.authorize(NS)
    P = s.geometry.block_tokens
    held = []
    refused = 0
    for i in range(40):  # 24 blocks of one group: 12 two-block prompts fill it
        a = s.admit([kvrt.Request(NS, [1000 + i] * (2 * P))], reuse=False)[0]
        if a.admitted:
            held.append(a.request)
        else:
            refused += 1
    assert len(held) == 12 and refused == 28
    families = await_alert(metrics_node, "allocator_exhaustion", 1)
    # The node samples every 100 ms: the sample that raised the alert may
    # have come in the middle of the refusals; a later one counts them all
    # (the 5 s window still starts before the first).
    deadline = time.monotonic() + 10
    while (value(families, "kvrt_alert_input", alert="allocator_exhaustion",
                 input="allocation_failures_increase") < refused and time.monotonic() < deadline):
        time.sleep(0.1)
        families = scrape(metrics_node)
    assert value(families, "kvrt_alert_active", alert="allocator_exhaustion") == 1
    assert value(families, "kvrt_alert_input", alert="allocator_exhaustion", input="free_blocks") == 0
    assert value(families, "kvrt_alert_input", alert="allocator_exhaustion", input="evictable_blocks") == 0
    assert value(families, "kvrt_alert_input", alert="allocator_exhaustion",
                 input="allocation_failures_increase") == refused
    assert value(families, "kvrt_allocation_refusals", "kvrt_allocation_refusals_total") == refused
    assert value(families, "kvrt_kv_cache_usage_ratio", pool="0") == 1.0
    for alert in ALERTS:
        if alert != "allocator_exhaustion":
            assert value(families, "kvrt_alert_active", alert=alert) == 0, alert

    kvrt.check_statuses(s.release(held))
    families = await_alert(metrics_node, "allocator_exhaustion", 0)
    assert value(families, "kvrt_alert_input", alert="allocator_exhaustion", input="free_blocks") == 24
    s.close()


def test_requests_that_are_not_a_scrape_are_refused_and_the_node_serves_on(metrics_node):
    url = json.load(open(metrics_node.descriptor))["metrics_url"]
    base = url[: -len("/metrics")]
    for path in ("/", "/metrics/../admin", "/nope"):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(base + path, timeout=10)
        assert e.value.code == 404
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(urllib.request.Request(url, data=b"x" * 100000, method="POST"), timeout=10)
    assert e.value.code in (404, 405, 413)
    # Garbage on the socket.
    host, port = base[len("http://"):].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as c:
        c.sendall(b"\x00\xff garbage \r\n\r\n")
        c.recv(4096)
    assert "kvrt_node_uptime_seconds" in scrape_text(metrics_node)
    assert metrics_node.stats()["validate_ok"]


def test_the_alert_rules_and_the_dashboard_read_only_families_a_node_serves(metrics_node):
    yaml = pytest.importorskip("yaml")
    root = SOURCE_DIR
    served = set()
    for line in scrape_text(metrics_node).splitlines():
        if line and not line.startswith("#"):
            served.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
    exprs = []
    for group in yaml.safe_load(open(root / "deploy/prometheus/kvrt-alerts.yml"))["groups"]:
        exprs += [r["expr"] for r in group["rules"]]
    dashboard = json.load(open(root / "deploy/grafana/kvrt-node.json"))
    for panel in dashboard["panels"]:
        exprs += [t["expr"] for t in panel["targets"]]
    exprs += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    used = set()
    for e in exprs:
        used |= set(re.findall(r"\bkvrt_[a-z0-9_]+", e))
    assert used, "no kvrt series named"
    assert used <= served, f"not served: {sorted(used - served)}"
