"""The simulator's arrival semantics: batch (the daemon's way) and sequential (iSPD's loop)."""

from __future__ import annotations

import json

import pytest
import sqlite_utils

from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import Node, Pool, Task
from gridfair.errors import InputError
from gridfair.policies.hosep import HosepOrder, HosepPreempt
from gridfair.sim.engine import Simulation


def run(machines, tasks, arrivals: str) -> dict[str, Task]:
    pool = Pool(task_key=HosepOrder.task_key)
    negotiator = Negotiator(pool, HosepOrder(), HosepPreempt())
    for index, (owner, power) in enumerate(machines):
        pool.add_node(Node(f"{owner}-{index}", owner, power))
    Simulation(negotiator, tasks, arrivals=arrivals).run()
    return {task.id: task for task in tasks}


def test_same_time_arrivals_are_served_one_at_a_time_in_submit_order():
    # A owns the fast node, B the slow one; B's task is submitted first at the same instant.
    # Batch: one cycle sees both and HOSEP's order (tie at PowerDiff -1: A, seen first in the
    # pool) gives A the fast node. Sequential: B's arrival is negotiated alone and takes it.
    def tasks():
        return [Task("B.0", "B", 0.0, work=1000.0), Task("A.0", "A", 0.0, work=1000.0)]

    # 1000 MFlop: 10 s on the fast node, 100 s on the slow one; no task waits, so no
    # preemption follows.
    machines = [("A", 100.0), ("B", 10.0)]
    batch = run(machines, tasks(), "batch")
    assert (batch["A.0"].finish_time, batch["B.0"].finish_time) == (10.0, 100.0)
    sequential = run(machines, tasks(), "sequential")
    assert (sequential["B.0"].finish_time, sequential["A.0"].finish_time) == (10.0, 100.0)


def test_an_arrival_into_a_waiting_queue_wakes_nobody():
    # One node, owned by A. B (a guest) runs one task and has a second waiting when A's task
    # arrives at t=1. Batch negotiates at once and A preempts the guest; sequential waits for
    # the next completion (t=10), where A, the owner, goes before the guest's waiting task.
    def tasks():
        return [Task("B.0", "B", 0.0, work=1000.0), Task("B.1", "B", 0.0, work=1000.0),
                Task("A.0", "A", 1.0, work=1000.0)]

    machines = [("A", 100.0)]
    assert run(machines, tasks(), "batch")["A.0"].start_time == 1.0
    sequential = run(machines, tasks(), "sequential")
    assert sequential["A.0"].start_time == 10.0
    assert sequential["B.1"].start_time == 20.0


def test_sequential_arrivals_take_no_interval_and_unknown_semantics_are_refused():
    pool = Pool()
    pool.add_node(Node("n", "A", 1.0))
    negotiator = Negotiator(pool, HosepOrder())
    tasks = [Task("A.0", "A", 0.0, work=1.0)]
    with pytest.raises(InputError, match="no interval"):
        Simulation(negotiator, tasks, arrivals="sequential", interval=10.0)
    with pytest.raises(InputError, match="batch, sequential"):
        Simulation(negotiator, tasks, arrivals="one-by-one")


def test_the_cli_records_the_semantics_in_json_and_the_db(gridfair_cli, tmp_path):
    invoke = gridfair_cli
    db = tmp_path / "runs.db"
    result = invoke("simulate", "hosep-table1", "-w", "low", "--policy", "hosep", "-q",
                    "--arrivals", "sequential", "--hosep-test", "ispd2014", "--format", "json",
                    "--db", str(db))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["arrivals"] == "sequential"
    satisfaction = {row["user"]: row["satisfaction"] for row in report["users"]}
    assert set(sorted(satisfaction, key=satisfaction.get)[-2:]) == {"User1", "User2"}
    row = next(sqlite_utils.Database(db)["runs"].rows)
    assert row["arrivals"] == "sequential"
    assert json.loads(row["options"])["hosep_test"] == "ispd2014"
    assert invoke("simulate", "hosep-table1", "-w", "low", "--policy", "hosep",
                  "--arrivals", "one-by-one").exit_code == 2
