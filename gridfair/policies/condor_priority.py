"""HTCondor's user priority, the baseline a grid would use today (notes/htcondor.md, 1).

Real user priority (Accountant.cpp, UpdatePriorities):
    beta = 0.5 ^ (dt / PRIORITY_HALFLIFE)
    RUP(t) = beta RUP(t - dt) + (1 - beta) RecentUsage,   floored at MinPriority = 0.5
RecentUsage is the user's weighted resources in use (SLOT_WEIGHT = Cpus: cpus held now).
Usage changes only on the user's own events, so the update is taken in closed form between
them (exactly the formula above with dt the time since the last event), and the floor is
applied whenever RUP is committed or read. A new user starts at MinPriority.
Effective priority EUP = RUP x priority factor. This implementation's default factor is
HTCondor's DEFAULT_PRIO_FACTOR, 1000 (so figures read as condor_userprio prints them; a common
factor does not change the order); per-user factors may be configured (> 0).

Order (default): the waiting user of least EUP first (HTCondor's submitter order, EUP
ascending). The pie: each submitter's slice is (1/EUP_i) / sum_j (1/EUP_j) of the pool
(`pie_shares`). With the order alone, the submitter of least EUP takes every slot it can use
in a negotiation (EUPs do not move within one instant); HTCondor stops it at its slice and
spins again with what is left. The `pie` option reaches that allocation slot by slot without
the per-cycle normalisation: the next slot goes to the submitter whose slice would be least
filled after taking it, i.e. least (cpus in use + its next job's cpus) x EUP, since slices
are proportional to 1/EUP (users using nothing go in EUP order).
PRIORITY_HALFLIFE defaults to 86400 s and must be > 0.

EUPs drift between events (they decay towards usage), so users are kept in a `LiveTree`:
EUP = factor x max(0.5, U + (RUP(t0) - U) x) is a max of two lines in x (scaled by
cpus in use + next job's cpus under `pie`).
Ties: equal keys go to the user seen first in the pool (`UserState.index`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from gridfair.core.pool import CPUS, UserState
from gridfair.errors import ConfigError
from gridfair.policies.live_tree import DecayingOrder, Line

DEFAULT_HALFLIFE = 86400.0
DEFAULT_PRIORITY_FACTOR = 1000.0
MIN_PRIORITY = 0.5


def _positive(name: str, value: Any) -> float:
    if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name} must be a number > 0, not {value!r}")
    return float(value)


class CondorPriorityOrder(DecayingOrder):
    """Free slots to the waiting user of least effective priority."""

    name = "condor"
    state_name = "priorities"
    level_size = 1

    def __init__(
        self,
        *,
        halflife: float = DEFAULT_HALFLIFE,
        factor: float = DEFAULT_PRIORITY_FACTOR,
        factors: Mapping[str, float] | None = None,
        pie: bool = False,
    ) -> None:
        self.halflife = _positive("PRIORITY_HALFLIFE", halflife)
        super().__init__(self.halflife / math.log(2.0))
        self.factor = _positive("the priority factor", factor)
        self.factors = {name: _positive(f"the priority factor of {name!r}", value)
                        for name, value in (factors or {}).items()}
        self.pie = pie
        if pie:
            self.why_template = (
                "free slot to {user}: least-filled pie slice, (cpus in use {cpus_in_use:g} + "
                "next job's {next_cpus:g}) x effective priority {effective_priority:.4g} = "
                "{priority:.4g}, ")

    def factor_of(self, user: UserState) -> float:
        return self.factors.get(user.name, self.factor)

    # ------------------------------------------------------------ the rule
    def inputs(self, user: UserState) -> tuple[float, float]:
        head = self.pool.head(user) if self.pie else None
        return (user.usage[CPUS], head.cpus if head is not None else 0.0)

    def basis(self, user: UserState) -> tuple:
        return (*self.inputs(user), self.factor_of(user))

    def target(self, user: UserState, basis: tuple) -> list[float]:
        return [basis[0]]

    def initial_level(self) -> list[float]:
        return [MIN_PRIORITY]

    def settle(self, level: list[float]) -> list[float]:
        return [max(level[0], MIN_PRIORITY)]

    def curve(self, user: UserState, basis: tuple, level: list[float], target: list[float],
              scale: float = 1.0) -> list[Line]:
        usage, next_cpus, factor = basis
        weight = factor * (usage + next_cpus if self.pie else 1.0)
        return [(weight * usage, weight * (level[0] - usage) * scale),
                (weight * MIN_PRIORITY, 0.0)]

    # ------------------------------------------------------- explanations
    why_template = ("free slot to {user}: least effective priority {priority:.4g} (real "
                    "priority {real_priority:.4g} x factor {priority_factor:g}), ")

    def real_priority(self, user: UserState, now: float) -> float:
        return self.settle(self.levels(user, now))[0]

    def effective_priority(self, user: UserState, now: float) -> float:
        return self.real_priority(user, now) * self.factor_of(user)

    def pie_shares(self, now: float) -> dict[str, float]:
        """Each waiting submitter's slice, (1/EUP_i) / sum_j (1/EUP_j) (a report: O(n))."""
        inverse = {user.name: 1.0 / self.effective_priority(user, now)
                   for user in self.tree.ordered(now)}
        total = sum(inverse.values())
        return {name: value / total for name, value in inverse.items()}

    def describe(self, basis: tuple, level: list[float]) -> dict[str, Any]:
        usage, next_cpus, factor = basis
        real = self.settle(level)[0]
        figures = {
            "real_priority": real,
            "priority_factor": factor,
            "effective_priority": real * factor,
            "cpus_in_use": usage,
        }
        if self.pie:
            figures["next_cpus"] = next_cpus
        return figures
