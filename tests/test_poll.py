"""When a look between cycles runs the next one (`gridfair.daemon.poll`)."""

from __future__ import annotations

from gridfair.daemon.backends import PoolChange
from gridfair.daemon.poll import SETTLE_LONGEST, SETTLE_LOOK, ArrivalSettle

SLOT, SUBMITTED, NONE = PoolChange.SLOT, PoolChange.SUBMITTED, PoolChange.NONE


def test_a_slot_change_runs_the_cycle_at_once_even_while_submissions_settle():
    settle = ArrivalSettle()
    assert settle.after(SLOT, 0.0)
    assert not settle.after(SUBMITTED, 10.0)
    assert settle.after(SLOT | SUBMITTED, 10.5)
    assert settle.next_look(2.0) == 2.0  # nothing settles any more


def test_submissions_run_the_cycle_at_the_first_look_that_finds_no_more():
    settle = ArrivalSettle()
    assert not settle.after(NONE, 0.0)
    assert not settle.after(SUBMITTED, 2.0)  # the first user's cluster
    assert settle.next_look(2.0) == SETTLE_LOOK
    assert not settle.after(SUBMITTED, 3.0)  # the second user's
    assert settle.after(NONE, 4.0)
    assert settle.next_look(2.0) == 2.0
    assert not settle.after(NONE, 6.0)


def test_a_queue_that_keeps_growing_holds_its_cycle_back_no_longer_than_the_bound():
    settle = ArrivalSettle()
    times = [step * SETTLE_LOOK for step in range(int(SETTLE_LONGEST / SETTLE_LOOK) + 2)]
    runs = [moment for moment in times if settle.after(SUBMITTED, moment)]
    assert runs == [SETTLE_LONGEST]
    assert not settle.after(SUBMITTED, SETTLE_LONGEST + 1)  # a new settling begins
