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

Order: the waiting user of least EUP first (HTCondor's submitter order, EUP ascending).
The pie: each submitter's share is (1/EUP_i) / sum_j (1/EUP_j) over the waiting submitters
(`pie_shares`, for reports). PRIORITY_HALFLIFE defaults to 86400 s and must be > 0.

EUPs drift between events (they decay towards usage), so users are kept in a `LiveTree`:
EUP = factor x max(0.5, U + (RUP(t0) - U) x) is a max of two lines in x.
Ties: equal EUPs go to the user seen first in the pool (`UserState.index`).
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
    ) -> None:
        self.halflife = _positive("PRIORITY_HALFLIFE", halflife)
        super().__init__(self.halflife / math.log(2.0))
        self.factor = _positive("the priority factor", factor)
        self.factors = {name: _positive(f"the priority factor of {name!r}", value)
                        for name, value in (factors or {}).items()}

    def factor_of(self, user: UserState) -> float:
        return self.factors.get(user.name, self.factor)

    # ------------------------------------------------------------ the rule
    def basis(self, user: UserState) -> tuple:
        return (user.usage[CPUS], self.factor_of(user))

    def target(self, user: UserState, basis: tuple) -> list[float]:
        return [basis[0]]

    def initial_level(self) -> list[float]:
        return [MIN_PRIORITY]

    def settle(self, level: list[float]) -> list[float]:
        return [max(level[0], MIN_PRIORITY)]

    def curve(self, user: UserState, basis: tuple, level: list[float],
              target: list[float]) -> list[Line]:
        factor = basis[1]
        usage = target[0]
        return [(factor * usage, factor * (level[0] - usage)), (factor * MIN_PRIORITY, 0.0)]

    # ------------------------------------------------------- explanations
    why_template = ("free slot to {user}: least effective priority {priority:.4g} (real "
                    "priority {real_priority:.4g} x factor {priority_factor:g}), ")

    def real_priority(self, user: UserState, now: float) -> float:
        return self.settle(self.levels(user, now))[0]

    def pie_shares(self, now: float) -> dict[str, float]:
        """Each waiting submitter's slice, (1/EUP_i) / sum_j (1/EUP_j) (a report: O(n))."""
        inverse = {user.name: 1.0 / self.priority(user, now)
                   for user in self.tree.ordered(now)}
        total = sum(inverse.values())
        return {name: value / total for name, value in inverse.items()}

    def describe(self, basis: tuple, level: list[float]) -> dict[str, Any]:
        usage, factor = basis
        return {
            "real_priority": self.settle(level)[0],
            "priority_factor": factor,
            "cpus_in_use": usage,
        }
