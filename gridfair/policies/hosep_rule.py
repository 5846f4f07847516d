"""HOSEP's preemption test, written once: Fig. 2's (with gridfair's Phi guard) and iSPD
2014's, each with the victim order it goes with. The stage's choice (`HosepPreempt.choose`,
one victim or several on a partitionable machine) and its account of why it stopped
(`HosepPreempt.declined`, which `explain` shows) both ask `refusal`, a pure function of the
move's figures (`hosep.py`'s docstring gives the equations).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from gridfair.core.pool import Node, Task

FIG2, ISPD2014 = "fig2", "ispd2014"
#: The clauses of Fig. 2's test that refuse a move: omega not above the receiver's PowerDiff;
#: Phi not falling.
OMEGA, PHI = "omega", "phi"


class Fig2Test:
    """Fig. 2's step 3: each victim user's omega after the move above the receiver's PowerDiff
    (|PowerDiff| with `absolute`, Eq. 6), and the move lowering Phi. Victims: the least
    powerful machine (Def. 3); among equals, the run started last (least work lost)."""

    name = FIG2

    def __init__(self, absolute: bool = False) -> None:
        self.absolute = absolute

    @staticmethod
    def victim_key(task: Task, node: Node | None = None) -> Any:
        node = node or task.node
        assert node is not None  # a victim runs on its node, or has just left `node`
        return (node.power_per_cpu * task.cpus, -task.start_time)

    def refusal(self, receiver_diff: float, receiver_after: float, omegas: Iterable[float],
                phi_falls: Callable[[], bool]) -> str | None:
        """The clause that refuses the move (`OMEGA`, `PHI`), or None when it passes;
        `phi_falls` is asked only once every omega passes."""
        threshold = abs(receiver_diff) if self.absolute else receiver_diff
        for omega in omegas:
            if not omega > threshold:
                return OMEGA
        if not phi_falls():
            return PHI
        return None


class Ispd2014Test:
    """iSPD 2014's test (`HOSEP.java`): each victim user after the move at or above the
    receiver after it, or still above its share; no Phi guard. Victims: the least powerful
    machine, and among equals the first in the pool's machine order (`buscarRecurso`)."""

    name = ISPD2014

    def __init__(self, absolute: bool = False) -> None:
        self.absolute = absolute  # iSPD's test has no |PowerDiff| form: kept for the record

    @staticmethod
    def victim_key(task: Task, node: Node | None = None) -> Any:
        node = node or task.node
        assert node is not None  # a victim runs on its node, or has just left `node`
        return (node.power_per_cpu * task.cpus, node.index)

    def refusal(self, receiver_diff: float, receiver_after: float, omegas: Iterable[float],
                phi_falls: Callable[[], bool]) -> str | None:
        for omega in omegas:
            if not (omega >= receiver_after or omega > 0):
                return ISPD2014
        return None


#: The preemption tests HOSEP offers, by name.
TESTS: dict[str, type[Fig2Test] | type[Ispd2014Test]] = {FIG2: Fig2Test, ISPD2014: Ispd2014Test}
PREEMPTION_TESTS = tuple(TESTS)
