"""The simulator's arrival semantics: batch (the daemon's way) and sequential (iSPD's loop)."""

from __future__ import annotations

import json

import pytest
import sqlite_utils

from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import Node, Pool, PoolListener, Task
from gridfair.errors import InputError
from gridfair.policies.hosep import HosepOrder, HosepPreempt
from gridfair.sim.engine import Simulation
from gridfair.sim.engine_options import EngineOptions


def run(machines, tasks, arrivals: str) -> dict[str, Task]:
    pool = Pool(task_key=HosepOrder.task_key)
    negotiator = Negotiator(pool, HosepOrder(), HosepPreempt())
    for index, (owner, power) in enumerate(machines):
        pool.add_node(Node(f"{owner}-{index}", owner, power))
    Simulation(negotiator, tasks, engine=EngineOptions(arrivals=arrivals)).run()
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
        Simulation(negotiator, tasks, engine=EngineOptions(arrivals="sequential", interval=10.0))
    with pytest.raises(InputError, match="batch, sequential"):
        Simulation(negotiator, tasks, engine=EngineOptions(arrivals="one-by-one"))


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


def run_refreshed(machines, tasks, refresh: float | None, same_instant: str) -> dict[str, Task]:
    pool = Pool(task_key=HosepOrder.task_key)
    negotiator = Negotiator(pool, HosepOrder(), HosepPreempt(test="ispd2014"))
    for owner, power in machines:
        pool.add_node(Node(f"{owner}-node", owner, power))
    Simulation(negotiator, tasks,
               engine=EngineOptions(arrivals="sequential", status_refresh=refresh,
                                    same_instant=same_instant)).run()
    return {task.id: task for task in tasks}


# iSPD's event list (`--same-instant ispd2014`) holds machines the same way: its update
# messages and each machine's answer are events of their own, and the second answer after a
# start releases the machine.
SAME_INSTANT = pytest.mark.parametrize("same_instant", ["ordered", "ispd2014"])


@SAME_INSTANT
@pytest.mark.parametrize("refresh, a1_starts", [(None, 2.0), (15.0, 100.0)])
def test_a_machine_given_a_task_is_not_free_until_the_second_status_refresh(refresh,
                                                                            a1_starts,
                                                                            same_instant):
    # A and B own one 100 MFlop/s node each. At 0 A.0 (2 s) and B.0 (100 s) start, one on
    # each; A.1 arrives at 1 and waits. A.0 ends at 2. Without refreshes A-node is free at once
    # and A.1 starts at 2. With refreshes every 15 s, A-node got its task at 0: uncertain at
    # 15, known free at 30, and a refresh wakes no negotiation, so A.1 waits for the next
    # event, B.0's end at 100.
    tasks = [Task("A.0", "A", 0.0, work=200.0), Task("B.0", "B", 0.0, work=10_000.0),
             Task("A.1", "A", 1.0, work=200.0)]
    done = run_refreshed([("A", 100.0), ("B", 100.0)], tasks, refresh, same_instant)
    assert done["A.1"].first_start == a1_starts


@SAME_INSTANT
@pytest.mark.parametrize("refresh, a0_starts, b0_preempted", [(None, 1.0, True),
                                                               (15.0, 50.0, False)])
def test_a_machine_given_a_task_is_no_victim_until_the_second_status_refresh(
        refresh, a0_starts, b0_preempted, same_instant):
    # A owns the only node; B.0 (50 s) takes it at 0 and A.0 arrives at 1. Without refreshes
    # HOSEP vacates B.0 for its owner at 1. With refreshes the node, given B.0 at 0, is no
    # victim before 30; nothing happens between 1 and B.0's end at 50, when A.0 starts.
    tasks = [Task("B.0", "B", 0.0, work=5000.0), Task("A.0", "A", 1.0, work=100.0)]
    done = run_refreshed([("A", 100.0)], tasks, refresh, same_instant)
    assert done["A.0"].first_start == a0_starts
    assert (done["B.0"].preemptions > 0) is b0_preempted


def test_a_status_refresh_needs_sequential_arrivals_and_a_positive_period():
    pool = Pool()
    pool.add_node(Node("n", "A", 1.0))
    negotiator = Negotiator(pool, HosepOrder())
    tasks = [Task("A.0", "A", 0.0, work=1.0)]
    with pytest.raises(InputError, match="status refresh is an option of sequential"):
        Simulation(negotiator, tasks, engine=EngineOptions(status_refresh=15.0))
    with pytest.raises(InputError, match="status refresh must be positive"):
        Simulation(negotiator, tasks,
                   engine=EngineOptions(arrivals="sequential", status_refresh=0.0))


class FirstStarts(PoolListener):
    """Each task's first start: when and on which node."""

    def __init__(self) -> None:
        self.first: dict[str, tuple[float, str]] = {}

    def task_started(self, task: Task, now: float) -> None:
        self.first.setdefault(task.id, (now, task.node.name))


def run_same_instant(order: str) -> dict[str, tuple[float, str]]:
    pool = Pool(task_key=HosepOrder.task_key)
    negotiator = Negotiator(pool, HosepOrder())  # no preemption: placement only
    pool.add_node(Node("A-node", "A", 100.0))
    pool.add_node(Node("B-node", "B", 10.0))
    starts = FirstStarts()
    pool.listen(starts)
    tasks = [Task(name, name[0], 0.0, work=1000.0) for name in ("B.0", "A.0", "A.1")]
    Simulation(negotiator, tasks,
               engine=EngineOptions(arrivals="sequential", same_instant=order)).run()
    assert all(task.finish_time is not None for task in tasks)
    return starts.first


@pytest.mark.parametrize("order, placed", [
    # Submit order: B.0 alone takes the fast A-node, A.0 the slow B-node; A.1 waits for B.0's
    # end at 10 (1000 MFlop at 100 MFlop/s).
    ("ordered", {"B.0": (0.0, "A-node"), "A.0": (0.0, "B-node"), "A.1": (10.0, "A-node")}),
    # iSPD's heap holds the three arrivals at 0 as [B.0, A.0, A.1]. Polling B.0 moves the last,
    # A.1, to the root, where it stays (equal keys do not move); B.0 queued wakes the scheduler
    # (a scheduling event, last in the heap). So A.1 arrives second and is queued, the
    # scheduling event comes third: HOSEP's tie at PowerDiff -1 goes to A (first in the pool),
    # whose only task so far is A.1: the fast node. A.0 arrives after; B.0 gets the B-node at
    # the next scheduling, and A.0 the A-node when A.1 ends at 10.
    ("ispd2014", {"A.1": (0.0, "A-node"), "B.0": (0.0, "B-node"), "A.0": (10.0, "A-node")}),
])
def test_same_time_arrivals_come_out_of_ispds_heap_out_of_submit_order(order, placed):
    assert run_same_instant(order) == placed


def test_ispds_event_list_is_an_option_of_sequential_arrivals_on_one_cpu_machines():
    pool = Pool()
    pool.add_node(Node("n", "A", 1.0, cpus=2))
    negotiator = Negotiator(pool, HosepOrder())
    tasks = [Task("A.0", "A", 0.0, work=1.0)]
    with pytest.raises(InputError, match="ordered, ispd2014"):
        Simulation(negotiator, tasks,
                   engine=EngineOptions(arrivals="sequential", same_instant="java"))
    with pytest.raises(InputError, match="option of sequential arrivals"):
        Simulation(negotiator, tasks, engine=EngineOptions(same_instant="ispd2014"))
    with pytest.raises(InputError, match="one cpu each"):
        Simulation(negotiator, tasks,
                   engine=EngineOptions(arrivals="sequential", same_instant="ispd2014")).run()


def test_the_cli_records_ispds_event_list_and_refuses_it_without_sequential_arrivals(
        gridfair_cli):
    invoke = gridfair_cli
    options = ("simulate", "hosep-table1", "-w", "low", "--policy", "hosep", "-q",
               "--format", "json")
    result = invoke(*options, "--arrivals", "sequential", "--same-instant", "ispd2014")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["same_instant"] == "ispd2014"
    default = invoke(*options, "--arrivals", "sequential")
    assert "same_instant" not in json.loads(default.stdout)  # default runs' JSON unchanged
    refused = invoke(*options, "--same-instant", "ispd2014")
    assert refused.exit_code == 2
    assert "option of sequential arrivals" in refused.output
