"""The daemon's outputs per accounting group: the `gridfair_group_*` gauges of a cycle under
the `hdrf` order with a tree."""

from __future__ import annotations

import shutil
from pathlib import Path

from gridfair.daemon.config import validate
from gridfair.daemon.metrics import PrometheusMetrics
from gridfair.daemon.service import Daemon
from tests.test_daemon_metrics import POOL, free_port, scrape

#: The daemon test pool's submitter, in a group of half the pool; its slots' other user
#: (bt@cs.wisc.edu) in no group.
TREE = {"accept_surplus": True,
        "physics": {"quota_dynamic": 0.5, "users": ["bbockelm@users.opensciencegrid.org"]}}


def test_the_daemon_exports_gauges_per_group(tmp_path: Path) -> None:
    shutil.copytree(POOL, tmp_path / "pool", dirs_exist_ok=True, copy_function=shutil.copy)
    port = free_port()
    raw = {"daemon": {"store": "state.db"},
           "backend": {"kind": "files",
                       "files": {"directory": "pool", "actions": "actions.jsonl"}},
           "safety": {"max_snapshot_age": 3600.0},
           "policy": {"name": "hdrf", "options": {"groups": TREE}},
           "metrics": {"enabled": True, "port": port}}
    daemon = Daemon(validate(raw, base=tmp_path))
    try:
        daemon.tick()
        text = scrape(port)
    finally:
        daemon.close()
    assert 'gridfair_group_guaranteed_share{group="physics"} 0.5' in text
    assert 'gridfair_group_guaranteed_share{group="<none>"} 1.0' in text
    assert 'gridfair_group_users{group="physics"} 1.0' in text
    # As of the snapshot: bbockelm's jobs are idle; bt runs on two of the slots.
    assert 'gridfair_group_dominant_share{group="physics"} 0.0' in text
    assert 'gridfair_group_hdrf_share{group="physics"}' in text


def test_a_group_gone_from_the_rows_loses_its_series() -> None:
    metrics = PrometheusMetrics("127.0.0.1", free_port())
    try:
        row = {"dominant_share": 0.25, "guaranteed_share": 0.5, "hdrf_share": 0.5, "users": 2}
        metrics.groups([{"group": "a", **row}, {"group": "b", **row}])
        metrics.groups([{"group": "a", **row}])
        sample = metrics.registry.get_sample_value
        assert sample("gridfair_group_dominant_share", {"group": "a"}) == 0.25
        assert sample("gridfair_group_dominant_share", {"group": "b"}) is None
    finally:
        metrics.close()
