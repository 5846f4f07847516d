"""The allocation rule belongs to the run: stop (Algorithm 1) or backfill, for every order,
named in every report, and never mixed silently in a comparison."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlite_utils

from gridfair.core.pool import Node, Task
from gridfair.errors import ConfigError
from gridfair.sim.grid_loader import embedded_grids
from gridfair.sim.scenario import Scenario, run_scenario

TABLE1 = str(embedded_grids()["hosep-table1"])
CPU_MEMORY = {"resources": ("cpus", "memory")}


def starts(scenario: Scenario, order: str, allocation: str | None) -> dict[str, float]:
    result, _ = run_scenario(scenario, order=order, allocation=allocation)
    return {task.id: task.first_start for task in result.tasks}


def blocked_head_scenario() -> Scenario:
    """One node of (4 cpus, 4 mem); every task runs 10 s and all arrive at t = 0.
    A's queue: A.0 (1, 1), A.1 (2, 1); B's: B.0 (2, 0.5), B.1 (1, 0.5)."""
    node = Node("node", None, power=4, cpus=4, memory=4)
    shapes = [("A.0", "A", 1, 1), ("A.1", "A", 2, 1), ("B.0", "B", 2, 0.5), ("B.1", "B", 1, 0.5)]
    tasks = [Task(name, user, 0.0, cpus=cpus, memory=memory, duration=10.0, source_index=index)
             for index, (name, user, cpus, memory) in enumerate(shapes)]
    return Scenario([node], tasks, policy_options=dict(CPU_MEMORY))


# DRF by hand, t = 0 (dominant shares; ties go to A, seen first):
#   A 0 = B 0 -> A.0 (1, 1): A holds 1/4 of each, free (3, 3)
#   B 0       -> B.0 (2, .5): B's dominant share 2/4, free (1, 2.5)
#   A 1/4     -> A.1 needs 2 cpus, 1 is free: it does not fit.
#     stop:     the cycle ends; B.1 waits although it fits.
#     backfill: A is set aside, B 2/4 -> B.1 (1, .5) fits, free (0, 2).
# t = 10: everything running ends; stop starts A.1 and B.1 (A first, both fit), backfill A.1.
@pytest.mark.parametrize("allocation, expected", [
    ("stop", {"A.0": 0.0, "A.1": 10.0, "B.0": 0.0, "B.1": 10.0}),
    ("backfill", {"A.0": 0.0, "A.1": 10.0, "B.0": 0.0, "B.1": 0.0}),
])
def test_the_stop_rule_changes_drfs_schedule_by_hand(allocation, expected) -> None:
    assert starts(blocked_head_scenario(), "drf", allocation) == expected


def test_without_a_rule_each_order_keeps_its_papers_and_an_unknown_rule_is_refused() -> None:
    _, drf = run_scenario(blocked_head_scenario(), order="drf")
    _, sdrf = run_scenario(blocked_head_scenario(), order="sdrf")
    assert (drf.allocation, sdrf.allocation) == ("backfill", "stop")
    with pytest.raises(ConfigError, match="unknown allocation rule 'skip'"):
        run_scenario(blocked_head_scenario(), order="drf", allocation="skip")


def write_task_list(path: Path) -> Path:
    # The 7-column list of the SDRF authors' simulator (times in microseconds): the same four
    # tasks, which run 10 s each; capacity = the mean usage, (3 cpus, 1.5 mem) over [0, 10 s].
    path.write_text("".join(
        f"0,0,10000000,{user},{name},{cpus},{memory}\n"
        for name, user, cpus, memory in [("1", "A", 1, 0.5), ("2", "B", 2, 1)]))
    return path


def test_task_lists_stop_for_every_order_and_reports_name_the_rule(gridfair_cli, tmp_path):
    tasks = str(write_task_list(tmp_path / "tasks.csv"))
    for args, rule in [((), "stop"), (("--allocation", "backfill"), "backfill")]:
        result = gridfair_cli("simulate", "--workload", tasks, "--order", "drf", *args,
                              "--format", "json", "--quiet", "--db", str(tmp_path / "runs.db"))
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["allocation"] == rule
    runs = sqlite_utils.Database(tmp_path / "runs.db")["runs"]
    assert [row["allocation"] for row in runs.rows] == ["stop", "backfill"]


def test_compare_refuses_orders_under_different_rules_unless_one_is_given(gridfair_cli):
    # On a grid, SDRF keeps Algorithm 1's stop and DRF backfills: not like for like.
    mixed = gridfair_cli("compare", TABLE1, "-p", "drf,sdrf", "-w", "low", "--format", "json")
    assert mixed.exit_code == 2 and mixed.stdout == ""
    # The runs' progress lines, then the error in one line.
    assert [line.startswith("gridfair compare: run ") for line in mixed.stderr.splitlines()
            ] == [True, True, False]
    assert "different allocation rules (order=drf: backfill, order=sdrf: stop)" in \
        mixed.stderr.splitlines()[-1]
    chosen = gridfair_cli("compare", TABLE1, "-p", "drf,sdrf", "-w", "low", "--format", "json",
                          "--param", "allocation=stop")
    assert chosen.exit_code == 0, chosen.output
    assert json.loads(chosen.stdout)["allocation"] == "stop"


def test_backfill_looks_past_a_run_of_one_size_to_a_smaller_job_that_fits():
    """Found live (Showcase 4): a user's fifteen 4-cpu jobs, each fitting no free node, kept
    its 2-cpu job behind them off an idle 2-cpu machine, because the negotiator set aside at
    most `PARK_LIMIT` (8) jobs a user. It now counts sizes, as HTCondor's negotiator rejects
    an autocluster rather than a job: the fifteen are one size, and the 2-cpu job starts at
    t = 0. A 4-cpu machine runs one 4-cpu job for 10 s first."""
    nodes = [Node("big", None, power=4, cpus=4, memory=4),
             Node("small", None, power=2, cpus=2, memory=4)]
    tasks = [Task(f"C.{number}", "C", 0.0, cpus=4, memory=1, duration=10.0,
                  source_index=number) for number in range(16)]
    tasks.append(Task("C.16", "C", 0.0, cpus=2, memory=1, duration=10.0, source_index=16))
    scenario = Scenario(nodes, tasks, policy_options=dict(CPU_MEMORY))
    started = starts(scenario, "drf", "backfill")
    assert started["C.0"] == 0.0 and started["C.1"] == 10.0
    assert started["C.16"] == 0.0
