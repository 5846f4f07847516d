"""SDRF: Stateful Dominant Resource Fairness (papers/003 and 000, sections 4.2-6.3).

User i holds o_ir of resource r (normalised by the pool's total of r; by default cpus, memory,
power and, while the pool has any, GPUs: `drf.counted_resources`) and is entitled to w_i of
the pool: configured weights, equal shares 1/n (n = users the pool knows), or by default the
share of the pool's MFlops it provides. Its commitment to each resource is an exponential
moving average of its use above its entitlement, in continuous time (Eq. 6):

    obar_ir = max(o_ir - w_i, 0)
    c_ir(t) = (1 - d) obar_ir + d c_ir(t0),  d = exp(-(t - t0)/tau),  tau = -1 / ln(delta)

valid while obar_ir is constant on [t0, t] (it changes only on the user's own events, where
c is committed). `delta` is per second (Delta_t = 1 s), default 1 - 1e-6, and must be in (0, 1).
That is the equation-as-printed form (`form="paper"`, the default). The SDRF authors'
simulator (`form="authors"`) works per resource, with entitlement e_ir = w_ir (user i's mean
use of r over the mean total use of r; `resource_weights`, which a task list supplies; 0 with
equal shares or without them) and n users:

    share term o_ir - e_ir (signed: a user below its entitlement has a negative share)
    obar_ir = max(o_ir - e_ir - 1/n, 0)

With e = 0 this is the paper's form with equal shares. Priority (lower goes first):
- Eq. 5 (default, and what the authors' simulator computes): max_r o_ir + max_r c_ir (with the
  share term in place of o_ir);
- Algorithm 1's option (`priority="alg1"`): max_r (o_ir + c_ir).
Algorithm 1: the waiting user of least priority gets its next task if it fits; if it does not,
allocation stops until the next arrival or completion: `stop` is this order's paper rule, and
a run may choose `backfill` instead (the negotiator's allocation rule).

Priorities drift between events, so users are kept in a `LiveTree`: with x = exp(-(t-T)/tau)
each c_ir is a line in x and each priority a max of lines (see live_tree.py). Commitments are
state: `export_state` / `import_state` carry them across daemon restarts.
Ties: equal priorities go to the user seen first in the pool (`UserState.index`); in the
authors' form first to the user whose commitment on its dominant share's resource falls
fastest (least dc/dt, as their simulator has it), then to the lower index, the users its
entitlements name being indexed first in the authors' order (`authors_ties`). The authors'
form also keeps the pool's arithmetic as their simulator does (`Pool`'s `exact_accounting`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gridfair.core.pool import RESOURCE_NAMES, Pool, UserState
from gridfair.core.stages import STOP, option
from gridfair.errors import ConfigError
from gridfair.policies.authors_ties import authors_user_order, index_users
from gridfair.policies.decaying_order import DecayingOrder
from gridfair.policies.drf import (
    AUTHORS,
    DEFAULT_RESOURCES,
    PAPER,
    Entitlements,
    WeightedDrfOptions,
    check_form,
    check_resources,
    counted_resources,
    dominant,
)
from gridfair.policies.live_tree import Line, value_at

DEFAULT_DELTA = 1.0 - 1e-6
PRIORITIES = ("eq5", "alg1")


@dataclass(frozen=True)
class SdrfOptions(WeightedDrfOptions):
    """SDRF's options: weighted DRF's, and the commitments' decay and priority."""

    delta: float = option(DEFAULT_DELTA, "SDRF: commitment decay per second", flag=True,
                          swept=True)
    sdrf_priority: str = option("eq5", "SDRF: eq5 (default) or alg1", choices=PRIORITIES,
                                swept=True)


def time_constant(delta: float) -> float:
    """tau = -Delta_t / ln(delta), Delta_t = 1 s; delta must be in (0, 1)."""
    if not isinstance(delta, int | float) or not 0.0 < delta < 1.0:
        raise ConfigError(f"delta must be in (0, 1) (a discount per second), not {delta!r}")
    return -1.0 / math.log(delta)


class SdrfOrder(DecayingOrder):
    """Free slots to the waiting user of least dominant share plus dominant commitment."""

    name = "sdrf"
    state_name = "commitments"
    paper_allocation = STOP
    measure = "SDRF priority"
    Options = SdrfOptions

    @classmethod
    def from_options(cls, options: SdrfOptions) -> SdrfOrder:
        return cls(delta=options.delta, resources=options.resources, weights=options.weights,
                   equal_shares=options.equal_shares, priority=options.sdrf_priority,
                   resource_weights=options.resource_weights, form=options.form)

    def __init__(
        self,
        *,
        delta: float = DEFAULT_DELTA,
        resources: Iterable[int | str] = DEFAULT_RESOURCES,
        weights: Mapping[str, float] | None = None,
        equal_shares: bool = False,
        priority: str = "eq5",
        resource_weights: Mapping[str, Mapping[str, float]] | None = None,
        form: str = PAPER,
    ) -> None:
        super().__init__(time_constant(delta))
        if priority not in PRIORITIES:
            raise ConfigError(f"unknown SDRF priority {priority!r} (known: "
                              f"{', '.join(PRIORITIES)})")
        self.delta = delta
        self.resources = check_resources(resources)
        #: The resources of the set counted in the pool as it is (`counted_resources`): one
        #: share term and one commitment each.
        self.counted = self.resources
        self.level_size = len(self.counted)
        self.form = check_form(form)
        self.exact_accounting = form == AUTHORS
        self.entitlements = Entitlements(
            weights, equal=equal_shares,
            per_resource=resource_weights if form == AUTHORS and not equal_shares else None)
        self.priority_rule = priority
        rule = "dominant share + dominant commitment" if priority == "eq5" else \
            "max over resources of share + commitment"
        self.why_template = (
            "free slot to {user}: least SDRF priority {priority:.4g} (" + rule + "; dominant "
            "share {dominant_share:.4g} of {dominant_resource}, dominant commitment "
            "{dominant_commitment:.4g} on {commitment_resource}), ")

    def attach(self, pool: Pool) -> None:
        # The authors' SDRF indexes the users of its entitlements in their own order (ties go
        # to the lower index, after the rate of change of the commitment).
        if self.form == AUTHORS and self.entitlements.configured is not None:
            index_users(pool, authors_user_order(list(self.entitlements.configured)))
        self.entitlements.attach(pool)
        self.counted = counted_resources(self.resources, pool.capacity)
        self.level_size = len(self.counted)
        self._none_entitled = (0.0,) * len(self.counted)
        self._set_users(self.entitlements.users())
        # Until the entitlements move: user name -> e_ir (the authors' form), user index ->
        # w_i (the paper's).
        self._entitled: dict[str, tuple[float, ...]] = {}
        self._allowances: dict[int, float] = {}
        super().attach(pool)

    # ------------------------------------------------------------ the rule
    def basis(self, user: UserState) -> tuple[tuple[float, ...], float]:
        return self.basis_of(user, user.usage)

    def basis_of(self, user: UserState, usage: Sequence[float]
                 ) -> tuple[tuple[float, ...], float]:
        """The share terms of `user` holding `usage`, and what each must exceed to add to the
        commitment: the same for every resource (w_i in the paper's form, 1/n in the
        authors')."""
        capacity, counted = self.pool.capacity, self.counted
        if self.form == PAPER:
            allowance = self._allowances.get(user.index)
            if allowance is None:  # until the entitlements move (`targets_moved`)
                allowance = self._allowances[user.index] = self.entitlements.of(user)
            entitled = self._none_entitled
        else:
            allowance = self._fair
            known = self._entitled.get(user.name)
            if known is None:
                known = self._entitled[user.name] = (
                    tuple(self.entitlements.of_resources(user, counted))
                    if self.entitlements.per_resource is not None else self._none_entitled)
            entitled = known
        # share_r - e_r (the paper's form: e_r = 0, the share itself, bit for bit), each share
        # as `resource_shares` takes it, in one loop: this runs on every start and stop.
        terms = []
        for position, resource in enumerate(counted):
            total = capacity[resource]
            terms.append((usage[resource] / total if total > 0 else 0.0) - entitled[position])
        return tuple(terms), allowance

    # `target` and `curve` run on every event: plain loops, cheaper than comprehensions here.
    def target(self, user: UserState, basis: tuple) -> list[float]:
        # The parts typed, not unpacked: compiled, that is a native loop over floats.
        shares: tuple[float, ...] = basis[0]
        allowance: float = basis[1]
        excess = []
        for share in shares:
            above = share - allowance
            excess.append(0.0 if above < 0.0 else above)  # max(above, 0.0), without the call
        return excess

    def initial_level(self) -> list[float]:
        return [0.0] * self.level_size

    def curve(self, user: UserState, basis: tuple, level: list[float], target: list[float],
              scale: float = 1.0) -> list[Line]:
        # c_r(x) = obar_r + (c_r(now) - obar_r) x: one line per resource.
        shares: tuple[float, ...] = basis[0]
        lines = []
        if self.priority_rule == "eq5":
            top = shares[0]  # max(shares), the first of equals, with no call
            for share in shares:
                if share > top:
                    top = share
            for position, excess in enumerate(target):
                lines.append((top + excess, (level[position] - excess) * scale))
        else:
            for position, excess in enumerate(target):
                lines.append((shares[position] + excess, (level[position] - excess) * scale))
        return lines

    def rank(self, basis: tuple, level: list[float], target: list[float]) -> float:
        # The authors' simulator breaks equal priorities by the rate of change of the
        # commitment on the resource of the largest share term (the last such on ties), lower
        # first: dc_r/dt = (target_r - c_r) / tau. The paper's form leaves ties to the index.
        if self.form == PAPER:
            return 0.0
        shares = basis[0]
        resource, top = 0, shares[0]  # the last of the largest share terms, in one loop
        for position in range(1, len(shares)):
            if shares[position] >= top:
                resource, top = position, shares[position]
        return target[resource] - level[resource]

    def share_key(self, user: UserState, usage: Sequence[float], now: float
                  ) -> tuple[int, float]:
        """(0, the priority `user` would have now holding `usage`): its commitments as they
        are at `now` (they move only in time), the share terms of `usage` (what a preemption
        stage compares: `fair_preempt`)."""
        basis = self.basis_of(user, usage)
        lines = self.curve(user, basis, self.levels(user, now), self.target(user, basis))
        return (0, value_at(lines, 1.0))  # the curve is in the drift since now: x = 1

    def targets_moved(self) -> bool:
        moved = self.entitlements.changed()
        if self._count_resources():
            moved = True
        # The authors' target's C_r / n moves with n, unless n is the configured users'.
        if self.form == AUTHORS and self.entitlements.configured is None:
            users = self.entitlements.users()
            if users != self._users:
                self._set_users(users)
                moved = True
        if moved:
            self._entitled.clear()
            self._allowances.clear()
        return moved

    def _count_resources(self) -> bool:
        """Count the resources the pool has now; when that changes (its first GPU), every
        user's commitments are laid out again by resource, a resource new to the count at 0
        (nobody held any of it). True if it changed."""
        counted = counted_resources(self.resources, self.pool.capacity)
        if counted == self.counted:
            return False
        relay = _relayer(self.counted, counted)
        for account in self.accounts.values():
            account.level, account.target = relay(account.level), relay(account.target)
        self._pending = {name: (relay(level), since)
                         for name, (level, since) in self._pending.items()}
        self.counted = counted
        self.level_size = len(counted)
        self._none_entitled = (0.0,) * len(counted)
        return True

    def _set_users(self, users: int) -> None:
        """n, and the fair share 1/n of each resource the authors' target subtracts."""
        self._users = users
        self._fair = 1.0 / users if users else 0.0

    def extra_state(self) -> dict[str, Any]:
        return {"resources": [RESOURCE_NAMES[r] for r in self.counted]}

    def import_state(self, state: Mapping[str, Any], source: str = "state") -> None:
        """As `DecayingOrder.import_state`, but commitments saved over other resources of
        this order's set (before the pool had GPUs, or after it lost them) are laid out by
        resource as the pool counts them now."""
        self._count_resources()
        saved = state.get("resources")
        configured = {RESOURCE_NAMES[r] for r in self.resources}
        levels = state.get(self.state_name)
        if (isinstance(saved, list) and saved != self.extra_state()["resources"]
                and all(isinstance(name, str) and name in configured for name in saved)
                and len(set(saved)) == len(saved) and isinstance(levels, Mapping)
                and all(isinstance(v, list) and len(v) == len(saved) for v in levels.values())):
            relay = _relayer(tuple(RESOURCE_NAMES.index(name) for name in saved), self.counted)
            state = {**state, **self.extra_state(),
                     self.state_name: {name: relay(v) for name, v in levels.items()}}
        super().import_state(state, source)

    # ------------------------------------------------------- explanations
    def commitments(self, user: UserState, now: float) -> list[float]:
        """c_ir(now) for each resource of the set."""
        return self.levels(user, now)

    def describe(self, basis: tuple, level: list[float]) -> dict[str, Any]:
        shares, allowance = basis
        share, share_resource = dominant(shares, self.counted)
        top_commitment, commitment_resource = dominant(level, self.counted)
        return {
            "dominant_share": share,
            "dominant_resource": share_resource,
            "dominant_commitment": top_commitment,
            "commitment_resource": commitment_resource,
            "entitlement": allowance,
        }


def _relayer(before: tuple[int, ...], after: tuple[int, ...]
             ) -> Callable[[list[float]], list[float]]:
    """Values by resource `before` -> values by resource `after` (0 for a resource new)."""
    position = {resource: index for index, resource in enumerate(before)}

    def relay(values: list[float]) -> list[float]:
        return [values[position[r]] if r in position else 0.0 for r in after]
    return relay
