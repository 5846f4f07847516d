"""The daemon's outputs per accounting group under the `hdrf` order with a tree: the
`gridfair_group_*` gauges of a cycle, `history --group` and `explain GROUP` from its store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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


def two_cycles(tmp_path: Path) -> str:
    """The store of two cycles of `daemon_of`'s daemon."""
    daemon = daemon_of(tmp_path)
    try:
        daemon.tick()
        daemon.skip_until = 0.0
        daemon.tick()
    finally:
        daemon.close()
    return str(tmp_path / "state.db")


def test_history_and_explain_show_a_group_from_the_store(tmp_path: Path, gridfair_cli) -> None:
    store = two_cycles(tmp_path)
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


@pytest.mark.parametrize(("order", "levels"), [("condor", "priorities"),
                                               ("sdrf", "commitments")])
def test_the_daemon_carries_a_group_s_priorities_across_cycles(tmp_path: Path, order: str,
                                                               levels: str) -> None:
    """A group ordered by HTCondor's priority, or by SDRF's: its users' priorities (or
    commitments) are saved after each cycle (`policy_state`, as `--policy condor`'s) and
    restored before the next."""
    raw = config(tmp_path)
    tree = {**TREE, "physics": {**TREE["physics"], "order": order}}
    raw["policy"] = {"name": "hdrf", "options": {"groups": tree}}
    daemon = Daemon(validate(raw, base=tmp_path))
    try:
        daemon.tick()
        first = daemon.store.policy_state()["order:hdrf"]
        daemon.skip_until = 0.0
        daemon.tick()
        second = daemon.store.policy_state()["order:hdrf"]
    finally:
        daemon.close()
    assert list(first["groups"]) == ["physics"]
    assert list(first["groups"]["physics"][levels]) == ["bbockelm@users.opensciencegrid.org"]
    assert second["time"] > first["time"]


def test_shares_from_the_store_by_group(tmp_path: Path, gridfair_cli) -> None:
    """`shares --db --groups`: the latest cycle's group rows, as `--tree` shows a tree; a
    store of no groups, and `--groups` with ad files, are one error each (exit 2)."""
    store = two_cycles(tmp_path)
    table = gridfair_cli("shares", "--db", store, "--groups")
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert lines[0].startswith("As of cycle 2 (") and lines[0].endswith("policy order:hdrf")
    assert any(line.startswith("  physics ") and " 0.500 " in line for line in lines)
    assert lines[-1] == "Number of groups: 1"
    report = json.loads(gridfair_cli("shares", "--db", store, "--groups", "--format",
                                     "json").output)
    assert report["cycle"] == 2
    assert [row["group"] for row in report["groups"]] == ["<none>", "physics"]
    plain = tmp_path / "plain"
    plain.mkdir()
    raw = config(plain)
    Daemon(validate(raw, base=plain)).close()
    none = gridfair_cli("shares", "--db", str(plain / "state.db"), "--groups")
    assert none.exit_code == 2 and "no cycle in the store recorded accounting groups" \
        in none.output
    ads = gridfair_cli("shares", "--machines", str(tmp_path / "pool"), "--groups")
    assert ads.exit_code == 2 and "--groups reads the daemon's store" in ads.output
