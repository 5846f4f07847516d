"""The Prometheus endpoint: off by default, on 127.0.0.1 when enabled, with cycle duration,
decisions and actions by kind, per-user PowerDiff and dominant share, errors."""

from __future__ import annotations

import json
import re
import shutil
import socket
import time
import urllib.request
from pathlib import Path

import yaml

from gridfair.daemon.config import validate
from gridfair.daemon.metrics import NullMetrics, PrometheusMetrics
from gridfair.daemon.service import Daemon

ROOT = Path(__file__).resolve().parent.parent
POOL = ROOT / "tests" / "data" / "daemon" / "pool"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def config(tmp_path: Path, **metrics) -> dict:
    shutil.copytree(POOL, tmp_path / "pool", dirs_exist_ok=True, copy_function=shutil.copy)
    return {"daemon": {"store": "state.db"},
            "backend": {"kind": "files",
                        "files": {"directory": "pool", "actions": "actions.jsonl"}},
            "safety": {"max_snapshot_age": 3600.0},
            "metrics": metrics}


def test_metrics_are_off_by_default(tmp_path):
    daemon = Daemon(validate(config(tmp_path), base=tmp_path))
    assert type(daemon.metrics) is NullMetrics
    daemon.close()


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        return reply.read().decode()


def test_metrics_name_no_user_unless_asked(tmp_path):
    """The endpoint has no authentication: user names only with metrics.user_labels."""
    port = free_port()
    daemon = Daemon(validate(config(tmp_path, enabled=True, port=port), base=tmp_path))
    try:
        daemon.tick()
        text = scrape(port)
    finally:
        daemon.close()
    assert 'gridfair_decisions_total{kind="allocate"} 8.0' in text
    assert "bt@cs.wisc.edu" not in text and "bbockelm" not in text
    assert "gridfair_user_power_diff{" not in text


def test_metrics_endpoint_serves_cycle_figures(tmp_path):
    port = free_port()
    daemon = Daemon(validate(config(tmp_path, enabled=True, port=port, user_labels=True),
                             base=tmp_path))
    try:
        daemon.tick()
        shutil.rmtree(tmp_path / "pool")
        daemon.skip_until = 0.0
        daemon.tick()  # fails: the pool is gone
        text = scrape(port)
    finally:
        daemon.close()
    assert 'gridfair_cycle_duration_seconds_count{outcome="ok"} 1.0' in text
    assert 'gridfair_cycle_duration_seconds_count{outcome="failed"} 1.0' in text
    assert 'gridfair_decisions_total{kind="allocate"} 8.0' in text
    assert 'gridfair_decisions_total{kind="vacate"} 2.0' in text
    assert 'gridfair_actions_total{kind="vacate",state="confirmed"} 2.0' in text
    assert 'gridfair_user_power_diff{user="bt@cs.wisc.edu"} +Inf' in text
    assert 'gridfair_user_power_diff{user="bbockelm@users.opensciencegrid.org"} -1.0' in text
    assert 'gridfair_user_dominant_share{user="bt@cs.wisc.edu"}' in text
    assert 'gridfair_errors_total{where="snapshot"} 1.0' in text


def test_metrics_bind_to_localhost_only(tmp_path):
    port = free_port()
    daemon = Daemon(validate(config(tmp_path, enabled=True, port=port), base=tmp_path))
    try:
        assert daemon.metrics.server.server_address[0] == "127.0.0.1"
    finally:
        daemon.close()


def test_every_metric_of_the_dashboard_is_served(tmp_path):
    """configs/grafana/gridfair.json and the alerting rules beside it: every metric their
    queries read is in the endpoint's output after a few simulated cycles (allocations made,
    then landed)."""
    dashboard = json.loads((ROOT / "configs" / "grafana" / "gridfair.json").read_text())
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    queries += [variable["query"] for variable in dashboard["templating"]["list"]
                if variable["type"] == "query"]
    rules = yaml.safe_load((ROOT / "configs" / "grafana" / "gridfair-alerts.yml").read_text())
    queries += [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    read = {name for query in queries for name in re.findall(r"\bgridfair_\w+", query)}
    port = free_port()
    raw = {"daemon": {"store": "state.db"}, "backend": {"kind": "sim"},
           "metrics": {"enabled": True, "port": port}}
    daemon = Daemon(validate(raw, base=tmp_path))
    try:
        for _ in range(3):
            daemon.tick()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            text = reply.read().decode()
    finally:
        daemon.close()
    # Samples, and the families declared (a labelled counter with no sample yet, such as
    # errors in a cycle without any, is declared by its TYPE line).
    served = {line.split("{")[0].split()[0] for line in text.splitlines()
              if line.startswith("gridfair_")}
    served |= set(re.findall(r"^# TYPE (gridfair_\w+) ", text, re.MULTILINE))
    assert len(read) >= 10 and read <= served, sorted(read - served)
    assert 'gridfair_allocations_settled_total{outcome="landed"}' in text


def _value(metrics: PrometheusMetrics, name: str) -> float:
    return metrics.registry.get_sample_value(name) or 0.0


def test_liveness_is_times_an_alert_compares_with_now() -> None:
    """The daemon's start, its last successful cycle (a failed or stale one does not count)
    and the lease's end, as epoch seconds: what the alerting rules compare with time()."""
    before = time.time()
    metrics = PrometheusMetrics("127.0.0.1", 0)
    try:
        assert _value(metrics, "gridfair_daemon_start_time_seconds") >= int(before)
        metrics.cycle("failed", 1.0)
        metrics.cycle("stale", 1.0)
        assert _value(metrics, "gridfair_last_successful_cycle_time_seconds") == 0
        metrics.cycle("ok", 1.0)
        assert _value(metrics, "gridfair_last_successful_cycle_time_seconds") >= int(before)
        metrics.lease(before + 120)
        assert _value(metrics, "gridfair_lease_end_time_seconds") == before + 120
    finally:
        metrics.close()


def test_the_daemon_exports_its_lease_each_cycle(tmp_path) -> None:
    port = free_port()
    raw = {"daemon": {"store": "state.db"}, "backend": {"kind": "sim"},
           "metrics": {"enabled": True, "port": port}}
    daemon = Daemon(validate(raw, base=tmp_path))
    try:
        report = daemon.tick()
        daemon.metrics.lease(-1.0)  # a value the next cycle replaces
        report = daemon.tick()
        assert _value(daemon.metrics, "gridfair_lease_end_time_seconds") == (
            report.lease_until or 0.0)
    finally:
        daemon.close()
