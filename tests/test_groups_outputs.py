"""The daemon's outputs per accounting group under the `hdrf` order with a tree: the
`gridfair_group_*` gauges of a cycle, `history --group` and `explain GROUP` from its store."""

from __future__ import annotations

import json
from pathlib import Path

from gridfair.daemon.config import validate
from gridfair.daemon.metrics import PrometheusMetrics
from gridfair.daemon.service import Daemon
from tests.test_daemon_metrics import config, free_port, scrape

#: The daemon test pool's submitter, in a group of half the pool; its slots' other user
#: (bt@cs.wisc.edu) in no group.
TREE = {"accept_surplus": True,
        "physics": {"quota_dynamic": 0.5, "users": ["bbockelm@users.opensciencegrid.org"]}}


def daemon_of(tmp_path: Path, **metrics: object) -> Daemon:
    """The daemon on the test pool (`test_daemon_metrics`'s) under hdrf with `TREE`."""
    raw = config(tmp_path, **metrics)
    raw["policy"] = {"name": "hdrf", "options": {"groups": TREE}}
    return Daemon(validate(raw, base=tmp_path))


def test_the_daemon_exports_gauges_per_group(tmp_path: Path) -> None:
    port = free_port()
    daemon = daemon_of(tmp_path, enabled=True, port=port)
    try:
        daemon.tick()
        text = scrape(port)
    finally:
        daemon.close()
    assert 'gridfair_group_guaranteed_share{group="physics"} 0.5' in text
    assert 'gridfair_group_guaranteed_share{group="<none>"} 1.0' in text
    assert 'gridfair_group_users{group="physics"} 1.0' in text
    # At the first cycle, before its decisions: bbockelm's jobs are idle.
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


def test_history_and_explain_show_a_group_from_the_store(tmp_path: Path, gridfair_cli) -> None:
    daemon = daemon_of(tmp_path)
    try:
        daemon.tick()
        daemon.skip_until = 0.0
        daemon.tick()
    finally:
        daemon.close()
    store = str(tmp_path / "state.db")
    result = gridfair_cli("history", "--db", store, "--group", "physics", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [row["cycle"] for row in rows] == [1, 2]
    assert rows[0]["guaranteed_share"] == 0.5 and rows[0]["users"] == 1
    # The first cycle's allocations, in flight at the second (the files backend's pool does
    # not start them), count as the policy's view counts them.
    assert rows[1]["dominant_share"] > rows[0]["dominant_share"] == 0.0
    result = gridfair_cli("explain", "--db", store, "physics")
    assert result.exit_code == 0, result.output
    text = result.output
    assert text.startswith("accounting group physics (level 1) as of cycle 2")
    assert "guaranteed 0.500 of the pool (quota cpus=6 memory=15940, weight 0.500), holds " \
        "0.500 (of cpus)" in text
    assert "  bbockelm@users.opensciencegrid.org: " in text
    assert "allocate " in text.split("Recent decisions naming it:")[1]
    root = gridfair_cli("explain", "--db", store, "<none>")
    assert root.exit_code == 0 and "Its subgroups:\n  physics: guaranteed" in root.output
    both = gridfair_cli("history", "--db", store, "--group", "physics", "--user", "bt")
    assert both.exit_code == 2 and "--group shows a group's shares" in both.output
    unknown = gridfair_cli("history", "--db", store, "--group", "chemistry")
    assert unknown.exit_code == 2
    assert "no accounting group named 'chemistry'" in unknown.output
