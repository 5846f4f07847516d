"""The rules written once (`policies/hosep_rule.py`, `policies/fair_rule.py`), on hand-worked
figures: the same functions decide a preemption and tell `explain` why one was refused."""

from __future__ import annotations

import pytest

from gridfair.core.pool import Node, Task
from gridfair.policies.fair_rule import BELOW, TIED, refusal, stays_at_or_above
from gridfair.policies.hosep_rule import ISPD2014, OMEGA, PHI, Fig2Test, Ispd2014Test


def never() -> bool:
    raise AssertionError("Phi is asked only once every omega passes")


@pytest.mark.parametrize(("receiver_diff", "omegas", "phi", "absolute", "clause"), [
    (-0.5, (0.2,), True, False, None),     # omega 0.2 > -0.5, Phi falls: the move is made
    (-0.5, (-0.6,), never, False, OMEGA),  # the victim would end below the receiver
    (-0.5, (0.2, -0.5), never, False, OMEGA),  # every victim user must pass
    (-0.5, (0.2,), False, False, PHI),     # the convergence guard
    (-0.5, (0.2,), never, True, OMEGA),    # Eq. 6: omega against |PowerDiff| = 0.5
    (-0.5, (0.6,), True, True, None),
])
def test_fig2s_test(receiver_diff, omegas, phi, absolute, clause) -> None:
    phi_falls = phi if callable(phi) else (lambda: phi)
    assert Fig2Test(absolute).refusal(receiver_diff, 0.1, omegas, phi_falls) == clause


@pytest.mark.parametrize(("receiver_after", "omegas", "clause"), [
    (0.1, (0.1,), None),      # victim after at the receiver after
    (0.3, (0.2,), None),      # below it, but still above its share
    (0.3, (-0.1,), ISPD2014),  # below the receiver after, and below its share
    (-0.2, (-0.1,), None),
])
def test_ispd2014s_test_has_no_phi_guard(receiver_after, omegas, clause) -> None:
    assert Ispd2014Test().refusal(-0.5, receiver_after, omegas, never) == clause


def test_each_test_orders_victims_its_way() -> None:
    slow, fast = Node("slow", "a", 100.0), Node("fast", "a", 200.0)
    slow.index, fast.index = 1, 0
    early, late = Task("early", "b", 0.0, work=1.0), Task("late", "b", 0.0, work=1.0)
    early.start_time, late.start_time = 0.0, 5.0
    assert Fig2Test.victim_key(late, slow) < Fig2Test.victim_key(early, slow)  # least work lost
    equal = Node("equal", "a", 100.0)
    equal.index = 0
    assert Ispd2014Test.victim_key(early, equal) < Ispd2014Test.victim_key(late, slow)
    assert Fig2Test.victim_key(early, slow) < Fig2Test.victim_key(early, fast)


@pytest.mark.parametrize(("receiver_after", "victim_before", "victim_after", "clause"), [
    ((0, 0.3, 0.3), (0, 0.6, 0.6), (0, 0.4, 0.4), None),   # victim stays above
    ((0, 0.3, 0.3), (0, 0.6, 0.6), (0, 0.2, 0.2), BELOW),  # victim ends below the receiver
    ((0, 0.4, 0.5), (0, 0.4, 0.4), (0, 0.4, 0.3), TIED),   # tied on the order's key, above next
    ((0, 0.4, 0.3), (0, 0.4, 0.5), (0, 0.4, 0.4), None),   # tied, below on the refined key
    ((0, 0.4, 0.4), (0, 0.4, 0.4), (0, 0.4, 0.3), TIED),   # equal to the victim before: no
])
def test_fair_shares_rule(receiver_after, victim_before, victim_after, clause) -> None:
    assert refusal(receiver_after, victim_before, victim_after) == clause
    assert stays_at_or_above(victim_after, receiver_after) == (clause != BELOW)
