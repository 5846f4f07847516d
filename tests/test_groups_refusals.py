"""Why `group-fair` found no move for a group below its entitlement
(`policies/group_refusals.py`): a DECLINE in figures, journaled once per receiver group
per change, the memory kept in the daemon's saved state."""

from __future__ import annotations

import json

from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import Node, Pool, Task
from gridfair.core.stages import DECLINE
from gridfair.policies.group_preempt import GroupFairPreempt
from gridfair.policies.hdrf import HdrfOrder

HALVES = {"accept_surplus": True, "a": {"quota_dynamic": 0.5, "users": ["a"]},
          "b": {"quota_dynamic": 0.5, "users": ["b"]}}


def crowded() -> Negotiator:
    """One machine of 8 cpus: a runs a job of 2 cpus, b three; at 1 a asks for all 8 cpus.
    a holds 0.25 of the pool against an entitlement of 0.5 (b holds no more than it runs, so
    both grow to half), b 0.75: a is a receiver, b's jobs its victims, but the three of them
    free 6 cpus of the 8."""
    pool = Pool()
    pool.add_node(Node("n0", None, power=8, cpus=8, memory=80))
    order = HdrfOrder(resources=("cpus", "memory"), groups=HALVES)
    negotiator = Negotiator(pool, order, GroupFairPreempt(order))
    negotiator.submit(Task("a.0", "a", 0.0, cpus=2, memory=1, duration=1e9), 0.0)
    for number in range(3):
        negotiator.submit(Task(f"b.{number}", "b", 0.0, cpus=2, memory=1, duration=1e9), 0.0)
    negotiator.cycle(0.0)
    negotiator.submit(Task("a.1", "a", 1.0, cpus=8, memory=1, duration=1e9), 1.0)
    return negotiator


def declines(negotiator: Negotiator, ticks: range) -> list:
    found = []
    for tick in ticks:
        negotiator.cycle(float(tick))
        found += [decision for decision in negotiator.declined if decision.kind == DECLINE]
    return found


def test_a_receiver_that_finds_no_room_is_told_what_the_best_machine_lacked() -> None:
    negotiator = crowded()
    (declined,) = declines(negotiator, range(1, 2))
    figures = declined.figures
    assert declined.task.id == "a.1" and declined.node.name == "n0"
    assert figures["rule"] == "room" and figures["receiver_group"] == "a"
    assert figures["receiver_share"] == 0.25 and figures["receiver_entitlement"] == 0.5
    assert figures["lacked"] == "2 cpus"
    assert figures["victims"] == "b.0, b.1, b.2"
    assert "would still lack 2 cpus once every job it may vacate there" in declined.reason


def test_a_steady_pool_journals_a_refusal_once_and_again_when_it_changes() -> None:
    """Cycles on the unchanged pool say nothing more; when a's own job ends, a's share and
    what n0 lacks change, and the new refusal is journaled, once."""
    negotiator = crowded()
    assert len(declines(negotiator, range(1, 6))) == 1
    pool = negotiator.pool
    pool.finish(pool.tasks["a.0"], 6.0)
    again = declines(negotiator, range(6, 10))
    assert len(again) == 1
    assert again[0].figures["receiver_share"] == 0.0


def test_the_daemons_saved_state_keeps_what_was_journaled() -> None:
    """The daemon builds the stage anew each cycle: what it journaled comes back from the
    saved state, so the next cycle's unchanged refusal is not journaled again."""
    negotiator = crowded()
    assert len(declines(negotiator, range(1, 2))) == 1
    saved = json.loads(json.dumps(negotiator.preempt.export_state(1.0)))
    fresh = crowded()
    fresh.preempt.import_state(saved, source="test")
    assert declines(fresh, range(1, 3)) == []
    assert len(declines(crowded(), range(1, 3))) == 1
