"""DMFA-SRQ: dynamic weighted DRF with shared resource quantities (papers/001).

Users arrive one after another and never leave. User i brings w_i of the pool and has a
normalised demand d_i (d_ij = D_ij / max_j D_ij: 1 on its dominant resource). With k users
present the pool holds W_k = sum_{i<=k} w_i. x_i^k is user i's allocation in dominant-share
units. LP (4):

    maximise M^k  s.t.  x_i^k >= M^k w_i,  x_i^k >= x_i^{k-1},  sum_i x_i^k d_ij <= W_k (all j)

Lemma 1: x_i^k = max(M^k w_i, x_i^{k-1}). So sum_i max(M w_i, x_i^{k-1}) d_ij is piecewise
linear and non-decreasing in M, with breakpoints where M w_i = x_i^{k-1}. Eq. 8-10: sort
the previous allocations (here by their breakpoint x_i^{k-1} / w_i, which is what Eq. 9
compares), binary-search the last breakpoint at which every resource still fits, and on that
piece solve Eq. 10:

    M^k = min_j (W_k - sum_{i kept} x_i^{k-1} d_ij) / (sum_{i raised} w_i d_ij)

O(k log k + k m) per arrival. A user with w_i = 0 is never raised (its x stays 0).

`DmfaSrqOrder` uses the allocations as targets: a user arrives when it first has a waiting
task (its demand is that task's, normalised by the pool's capacity; its w_i the share of the
pool's MFlops it provides, or configured), and the next free slot goes to the waiting user
furthest below its target, measured as the fraction x held / x target of its dominant share
(users with no target come after every user with one). Arrivals re-key every user, O(k log k);
decisions are O(log k). Ties: the user seen first in the pool (`UserState.index`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gridfair.core.pool import CPUS, GPUS, MEMORY, POWER, Pool, Task, UserState
from gridfair.core.stages import option
from gridfair.errors import ConfigError
from gridfair.policies.drf import RankedShareOrder, resource_shares

# Relative slack when testing that a breakpoint's allocation fits the pool.
FIT_TOLERANCE = 1e-12


def normalised_demand(demand: Sequence[float]) -> list[float]:
    """d_j = D_j / max_j D_j; every D_j must be >= 0 and one > 0."""
    values = [float(value) for value in demand]
    if not values or any(not math.isfinite(v) or v < 0 for v in values) or max(values) <= 0:
        raise ConfigError(f"a demand must be finite numbers >= 0, one of them > 0: {demand!r}")
    top = max(values)
    return [value / top for value in values]


class DmfaSrq:
    """The incremental DMFA-SRQ allocation (Algorithm 1 with Lemma 1's closed form)."""

    def __init__(self) -> None:
        self.weights: list[float] = []
        self.demands: list[list[float]] = []
        self.allocations: list[float] = []  # x_i^k
        self.level = 0.0  # M^k
        self.pool_share = 0.0  # W_k

    def arrive(self, weight: float, demand: Sequence[float]) -> float:
        """User k arrives with share `weight` and demand `demand`; returns M^k."""
        if not math.isfinite(weight) or weight < 0:
            raise ConfigError(f"a user's share must be a finite number >= 0, not {weight!r}")
        d = normalised_demand(demand)
        if self.demands and len(d) != len(self.demands[0]):
            raise ConfigError(f"demand has {len(d)} resources, earlier users "
                              f"{len(self.demands[0])}")
        self.weights.append(weight)
        self.demands.append(d)
        self.allocations.append(0.0)
        self.pool_share += weight
        self.level = self._solve()
        level = self.level
        self.allocations = [max(level * w, x) for w, x in zip(self.weights, self.allocations,
                                                               strict=True)]
        return level

    def _solve(self) -> float:
        """max M such that sum_i max(M w_i, x_i) d_ij <= W for every j (Eq. 8-10)."""
        weights, demands, allocations = self.weights, self.demands, self.allocations
        # Users by breakpoint M = x_i / w_i (Eq. 8): below it user i keeps x_i, above it it
        # is raised to M w_i. Users of weight 0 are never raised.
        raisable = sorted((x / w, i) for i, (w, x) in enumerate(zip(weights, allocations,
                                                                     strict=True)) if w > 0)
        if not raisable:
            return 0.0
        resources = range(len(demands[0]))
        order = [i for _, i in raisable]
        breakpoints = [b for b, _ in raisable]
        # raised[p][j]: sum of w_i d_ij over the first p users; kept[p][j]: sum of x_i d_ij
        # over everyone else (the users of weight 0 included).
        raised = [[0.0] * len(demands[0])]
        for i in order:
            raised.append([s + weights[i] * demands[i][j] for j, s in enumerate(raised[-1])])
        total_kept = [math.fsum(allocations[i] * demands[i][j] for i in range(len(weights)))
                      for j in resources]
        kept = [total_kept]
        for i in order:
            kept.append([s - allocations[i] * demands[i][j] for j, s in enumerate(kept[-1])])
        limit = self.pool_share * (1.0 + FIT_TOLERANCE)

        def fits(p: int) -> bool:
            """Whether raising the first p users to M = their last breakpoint fits."""
            level = breakpoints[p - 1]
            return all(kept[p][j] + level * raised[p][j] <= limit for j in resources)

        # The first breakpoint always fits (it changes nothing); binary search the last (Eq. 9).
        low, high = 1, len(order)
        while low < high:
            middle = (low + high + 1) // 2
            if fits(middle):
                low = middle
            else:
                high = middle - 1
        p = low
        return min((self.pool_share - kept[p][j]) / raised[p][j]
                   for j in resources if raised[p][j] > 0)


def task_demand(task: Task, pool: Pool, resources: Sequence[int]) -> list[float]:
    """A task's share of each resource of the pool (its MFlops at the pool's mean speed)."""
    capacity = pool.capacity
    per_cpu = capacity[POWER] / capacity[CPUS] if capacity[CPUS] > 0 else 0.0
    usage = [0.0] * len(capacity)
    usage[CPUS] = task.cpus
    usage[MEMORY] = task.memory
    usage[POWER] = task.cpus * per_cpu
    usage[GPUS] = task.gpus
    return resource_shares(usage, capacity, resources)


@dataclass(frozen=True)
class DmfaSrqOptions:
    """DMFA-SRQ's options."""

    resources: Sequence[int | str] = option((CPUS, MEMORY),
                                            "the resources demands are taken over")
    weights: Mapping[str, float] | None = option(None, "each user's share")


class DmfaSrqOrder(RankedShareOrder):
    """Free slots to the waiting user furthest below its DMFA-SRQ allocation."""

    name = "dmfa-srq"
    measure = "fraction of its DMFA-SRQ target"
    Options = DmfaSrqOptions

    @classmethod
    def from_options(cls, options: DmfaSrqOptions) -> DmfaSrqOrder:
        return cls(resources=options.resources, weights=options.weights)
    later_class = "every other waiting user has no target"

    def __init__(
        self,
        *,
        resources: Iterable[int | str] = (CPUS, MEMORY),
        weights: Mapping[str, float] | None = None,
    ) -> None:
        super().__init__(resources, weights)

    def attach(self, pool: Pool) -> None:
        super().attach(pool)
        self.allocation = DmfaSrq()
        self.arrival: dict[int, int] = {}  # user index -> position in `allocation`

    def target(self, user: UserState) -> float:
        position = self.arrival.get(user.index)
        return self.allocation.allocations[position] if position is not None else 0.0

    def figures(self, user: UserState) -> dict[str, Any]:
        share, resource = self.dominant_share(user)
        target = self.target(user)
        return {
            "user": user.name,
            "dominant_share": share,
            "dominant_resource": resource,
            "target": target,
            # None: no target (no entitlement); ranked after every user with one.
            "fraction_of_target": share / target if target > 0 else None,
        }

    def rank_of(self, user: UserState, usage: Sequence[float]) -> tuple[int, float]:
        share = max(resource_shares(usage, self.pool.capacity, self.resources))
        target = self.target(user)
        return (0, share / target) if target > 0 else (1, share)

    def arrive(self, user: UserState) -> bool:
        """A user's first waiting task makes it arrive: every target may move."""
        if user.index in self.arrival or user.idle_count == 0:
            return False
        head = self.pool.head(user)
        assert head is not None
        demand = task_demand(head, self.pool, self.resources)
        if max(demand) <= 0:
            return False
        self.arrival[user.index] = len(self.allocation.allocations)
        self.allocation.arrive(self.entitlements.of(user), demand)
        return True

    def why(self, user: UserState, now: float) -> tuple[str, dict[str, Any]]:
        figures = self.figures(user)
        tail, tail_figures = self.lead(user)
        if figures["target"] > 0:
            head = ("free slot to {user}: furthest below its DMFA-SRQ target, holding "
                    "{fraction_of_target:.4g} of it (dominant share {dominant_share:.4g} of "
                    "{dominant_resource}, target {target:.4g}), ")
        else:
            head = ("free slot to {user}: no DMFA-SRQ target, least dominant share "
                    "{dominant_share:.4g} of {dominant_resource}; ")
        return head + tail, {**figures, **tail_figures}
