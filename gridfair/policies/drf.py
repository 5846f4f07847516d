"""DRF and weighted DRF (Ghodsi et al.; restated in papers/003, section 4.4).

User i holds o_ir of resource r, normalised by the pool's total of r (`Pool.capacity`), over a
configurable set of resources (indexes of `UserState.usage`: cpus, memory, power, gpus; a
resource the pool has none of is left out). Its dominant share is s_i = max_r o_ir. The default
set is cpus, memory, power and GPUs, GPUs counted only while the pool has some
(`counted_resources`): a pool without GPUs computes exactly what it did before they existed,
at no cost.
- DRF: progressive filling: the next free slot goes to the waiting user of least s_i.
- Weighted DRF: least max_r o_ir / w_ir. In the equation-as-printed form (`form="paper"`)
  w_ir = w_i, the user's entitlement, so the key is s_i / w_i: by default the share of the
  pool's MFlops the user provides (`provided_power / capacity[power]`), or configured per user
  (normalised to sum 1). In the SDRF authors' form (`form="authors"`, their simulator's
  weighted DRF) w_ir is per resource: user i's mean use of r over the mean total use of r
  (`resource_weights`, which a task list supplies); without them it is w_i again. A user whose
  weights are all 0 is served after every entitled user, in order of s_i; a resource the user
  holds but has no weight on makes its key infinite.

Keys change only on the user's own events (and when the pool's capacity or the entitlements
change, which re-keys everyone), so a decision is O(log n) in a sorted ranking.
Ties: equal keys go to the user seen first in the pool (`UserState.index`); in the authors'
form weighted DRF first indexes the users its weights name in the authors' order
(`authors_ties`).
In the authors' form (DRF too) the pool keeps their simulator's arithmetic: an exact fit test
and usage as running sums never cleared when a user goes idle (`Pool`'s `exact_accounting`).

The resource-share and entitlement helpers here are shared by SDRF and DMFA-SRQ.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from gridfair.core.native import mypyc_attr
from gridfair.core.pool import CPUS, GPUS, MEMORY, POWER, RESOURCE_NAMES, Pool, UserState
from gridfair.core.stages import OrderPolicy, option
from gridfair.errors import ConfigError
from gridfair.policies.authors_ties import authors_user_order, index_users
from gridfair.policies.ranking import PairRanking, UserRanking

DEFAULT_RESOURCES = (CPUS, MEMORY, POWER, GPUS)
#: Forms of weighted DRF and SDRF: the equations as the papers print them, or as the SDRF
#: authors' simulator computes them (per-resource weights and entitlements).
PAPER, AUTHORS = "paper", "authors"
FORMS = (PAPER, AUTHORS)


@mypyc_attr(allow_interpreted_subclasses=True)
@dataclass(frozen=True)
class DrfOptions:
    """DRF's options."""

    resources: Sequence[int | str] = option(
        DEFAULT_RESOURCES, "the resources shares are taken over (cpus, memory, power, gpus)")
    form: str = option(
        PAPER, "DRF, weighted DRF and SDRF: the equations as printed (paper, default) or as "
        "the SDRF authors' simulator computes them (authors: per-resource weights/"
        "entitlements, exact fit test, running-sum usage, SDRF's rate-of-change tie-break)",
        choices=FORMS, flag=True, swept=True)


@mypyc_attr(allow_interpreted_subclasses=True)  # SDRF's options
@dataclass(frozen=True)
class WeightedDrfOptions(DrfOptions):
    """Weighted DRF's options (and those SDRF shares with it)."""

    weights: Mapping[str, float] | None = option(
        None, "each user's entitlement (normalised to sum 1); default: the MFlops it provides")
    equal_shares: bool = option(False, "every user entitled to an equal share")
    resource_weights: Mapping[str, Mapping[str, float]] | None = option(
        None, "the authors' form: each user's weight per resource")


def check_form(form: str) -> str:
    if form not in FORMS:
        raise ConfigError(f"unknown form {form!r} (known: {', '.join(FORMS)})")
    return form


def check_resources(resources: Iterable[int | str]) -> tuple[int, ...]:
    """Resource indexes from indexes or names ("cpus", "memory", "power"), validated."""
    checked: list[int] = []
    for resource in resources:
        if isinstance(resource, str):
            if resource not in RESOURCE_NAMES:
                known = ", ".join(RESOURCE_NAMES)
                raise ConfigError(f"unknown resource {resource!r} (known: {known})")
            resource = RESOURCE_NAMES.index(resource)
        if not 0 <= resource < len(RESOURCE_NAMES):
            last = len(RESOURCE_NAMES) - 1
            raise ConfigError(f"resource index {resource} out of range 0..{last}")
        if resource in checked:
            raise ConfigError(f"resource {RESOURCE_NAMES[resource]!r} given twice")
        checked.append(resource)
    if not checked:
        raise ConfigError("the resource set is empty: give at least one of "
                          f"{', '.join(RESOURCE_NAMES)}")
    return tuple(checked)


def counted_resources(resources: Sequence[int], capacity: Sequence[float]) -> tuple[int, ...]:
    """The resources of the set a share is taken over in a pool of `capacity`: all of them
    but GPUs when the pool has none (a GPU share would be 0 for everyone, and only cost)."""
    if GPUS in resources and capacity[GPUS] <= 0 and len(resources) > 1:
        return tuple(resource for resource in resources if resource != GPUS)
    return tuple(resources)


def resource_shares(usage: Sequence[float], capacity: Sequence[float],
                    resources: Sequence[int]) -> list[float]:
    """o_r = usage_r / capacity_r for each resource of the set (0 where the pool has none)."""
    shares = []  # a plain loop: this runs on every event of the DRF family
    for resource in resources:
        total = capacity[resource]
        shares.append(usage[resource] / total if total > 0 else 0.0)
    return shares


def dominant_share_of(usage: Sequence[float], capacity: Sequence[float],
                      resources: Sequence[int]) -> float:
    """max_r usage_r / capacity_r over the set (0 where the pool has none), the first of
    equal ones: `max(resource_shares(...))` in one loop, with no list (every event of DRF)."""
    most = -math.inf
    for resource in resources:
        total = capacity[resource]
        share = usage[resource] / total if total > 0 else 0.0
        if share > most:
            most = share
    return most


def dominant(shares: Sequence[float], resources: Sequence[int]) -> tuple[float, str]:
    """max_r o_r and the name of the resource that attains it (the first on ties)."""
    best = 0
    for position, share in enumerate(shares):
        if share > shares[best]:
            best = position
    return shares[best], RESOURCE_NAMES[resources[best]]


class Entitlements:
    """Each user's entitled share w_i of the pool.

    `weights` configures them per user (normalised to sum 1; a user left out gets 0);
    `equal=True` gives each of the n users the pool knows 1/n; otherwise (the grid's default)
    w_i is the share of the pool's MFlops that user i provides. `per_resource` (user -> resource
    name -> share of the pool's use of that resource) gives the SDRF authors' w_ir.
    """

    def __init__(self, weights: Mapping[str, Any] | None = None, *, equal: bool = False,
                 per_resource: Mapping[str, Mapping[str, Any]] | None = None):
        if weights is not None and equal:
            raise ConfigError("give per-user weights or equal shares, not both")
        self.equal = equal
        self.configured: dict[str, float] | None = None
        if weights is not None:
            self.configured = normalised_weights(weights)
        self.per_resource = (None if per_resource is None else
                             {user: {name: _checked_weight(f"{user}/{name}", value)
                                     for name, value in shares.items()}
                              for user, shares in per_resource.items()})
        self.pool: Pool | None = None

    def of_resources(self, user: UserState, resources: Sequence[int]) -> list[float]:
        """w_ir for each resource of the set: the per-resource weights when given (0 for a
        resource they leave out), else w_i for every resource."""
        if self.per_resource is None:
            return [self.of(user)] * len(resources)
        shares = self.per_resource.get(user.name, {})
        return [shares.get(RESOURCE_NAMES[r], 0.0) for r in resources]

    def users(self) -> int:
        """n: the users the configured weights name, else the users the pool knows."""
        if self.configured is not None:
            return len(self.configured)
        assert self.pool is not None
        return len(self.pool.users)

    def attach(self, pool: Pool) -> None:
        self.pool = pool
        self._generation = pool.generation
        self._capacity = list(pool.capacity)
        self._users = len(pool.users)

    def of(self, user: UserState) -> float:
        if self.configured is not None:
            return self.configured.get(user.name, 0.0)
        pool = self.pool
        assert pool is not None
        if self.equal:
            return 1.0 / len(pool.users)
        total = pool.capacity[POWER]
        return user.provided_power / total if total > 0 else 0.0

    def changed(self) -> bool:
        """Whether some user's entitlement or normalisation may have changed since the last
        call: the pool's capacity (nodes joined) or, for equal shares, the number of users.
        Called on every event: one comparison while the pool's generation (bumped when its
        capacity or users change) stands."""
        pool = self.pool
        assert pool is not None
        if pool.generation == self._generation:
            return False
        self._generation = pool.generation
        if pool.capacity == self._capacity and (not self.equal or
                                                len(pool.users) == self._users):
            return False
        self._capacity = list(pool.capacity)
        self._users = len(pool.users)
        return True

    def unknown(self, user_names: Iterable[str]) -> list[str]:
        """The users configured weights name that are not among `user_names`, sorted."""
        if self.configured is None:
            return []
        known = set(user_names)
        return sorted(name for name in self.configured if name not in known)

    def check_known(self, user_names: Iterable[str], where: str = "the pool") -> None:
        """Configured weights must name only users that exist (in `where`)."""
        unknown = self.unknown(user_names)
        if unknown:
            listed = ", ".join(repr(name) for name in unknown[:5])
            more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            raise ConfigError(f"weights name users {where} does not have: {listed}{more}")


def normalised_weights(weights: Mapping[str, Any]) -> dict[str, float]:
    """Validated per-user weights (as written: anything) scaled to sum 1."""
    checked = {name: _checked_weight(name, weight) for name, weight in weights.items()}
    total = math.fsum(checked.values())
    if total <= 0:
        raise ConfigError("every weight is zero: at least one user needs a positive weight")
    return {name: value / total for name, value in checked.items()}


def _checked_weight(name: str, weight: Any) -> float:
    try:
        value = float(weight)
    except (TypeError, ValueError):
        raise ConfigError(f"weight of user {name!r} is {weight!r}, not a number") from None
    if math.isnan(value) or math.isinf(value):
        raise ConfigError(f"weight of user {name!r} is {weight!r}: it must be finite")
    if value < 0:
        raise ConfigError(f"weight of user {name!r} is {value:g}: weights must be >= 0")
    return value


def runner_up(ranking: UserRanking | PairRanking) -> UserState | None:
    """The second user of a ranking, or None."""
    return next(islice(ranking, 1, None), None)


def lead_figures(value: float, runner: UserState | None, runner_value: float | None,
                 ) -> tuple[str, dict[str, Any]]:
    """The tail of a `why()` sentence: by how much the chosen user is below the next one."""
    if runner is None or runner_value is None:
        return "the only user waiting", {}
    return (
        "{margin:.4g} below the next, {runner_up} ({runner_up_value:.4g})",
        {"runner_up": runner.name, "runner_up_value": runner_value,
         "margin": runner_value - value},
    )


@mypyc_attr(allow_interpreted_subclasses=True)  # DMFA-SRQ's order
class RankedShareOrder(OrderPolicy):
    """An order stage over users ranked by a key (class, value) that changes only on their
    own events, and on capacity or entitlement changes (which re-key everyone)."""

    #: How `why()` ends when the runner-up is in a later class (its value is not comparable).
    later_class = "every other waiting user is in a later class"

    def __init__(self, resources: Iterable[int | str], weights: Mapping[str, float] | None,
                 equal_shares: bool = False,
                 resource_weights: Mapping[str, Mapping[str, float]] | None = None) -> None:
        self.resources = check_resources(resources)
        #: What shares are taken over in the pool as it is (`counted_resources`).
        self.counted = self.resources
        self.entitlements = Entitlements(weights, equal=equal_shares,
                                         per_resource=resource_weights)

    def attach(self, pool: Pool) -> None:
        self.pool = pool
        self.entitlements.attach(pool)
        self.counted = counted_resources(self.resources, pool.capacity)
        self.ranking = PairRanking()  # keys are (class, value)
        self.forget_weights()

    def forget_weights(self) -> None:
        """Hook: weights cached per user are stale (capacity or entitlements moved)."""

    @abstractmethod
    def figures(self, user: UserState) -> dict[str, Any]:
        """The figures the key is made of, with the user's name."""

    @abstractmethod
    def rank_of(self, user: UserState, usage: Sequence[float]) -> tuple[int, float]:
        """(class, value) of `user` holding `usage` (its own, or what it would hold after a
        preemption): lower classes first, then lower values."""

    def share_key(self, user: UserState, usage: Sequence[float], now: float
                  ) -> tuple[int, float]:
        """The user's key were it to hold `usage` now (what a preemption stage compares:
        `fair_preempt`); keys here do not drift in time."""
        return self.rank_of(user, usage)

    def dominant_share(self, user: UserState) -> tuple[float, str]:
        return dominant(resource_shares(user.usage, self.pool.capacity, self.counted),
                        self.counted)

    def arrive(self, user: UserState) -> bool:
        """Hook for state a user's events add to; True if every key must be recomputed."""
        return False

    def key(self, user: UserState) -> tuple[int, float] | None:
        """The user's key in the ranking, None when it does not want a slot now."""
        # Computed afresh: a key is a few divisions, less than a cache of it by usage costs
        # (most of a user's re-keys, on a start or a stop, change its usage).
        return self.rank_of(user, user.usage) if user.active else None

    def rekey_all(self) -> None:
        self.counted = counted_resources(self.resources, self.pool.capacity)
        self.forget_weights()
        for other in self.pool.users.values():
            self.ranking.update(other, self.key(other))

    def user_changed(self, user: UserState, now: float) -> None:
        stale = self.entitlements.changed()
        if self.arrive(user) or stale:
            self.rekey_all()
        self.ranking.update(user, self.key(user))

    def first(self, now: float) -> UserState | None:
        # A machine that joined (or a user, for equal shares) moved every share: re-keyed
        # here too, not only at the next user event, or the first answer after it is stale.
        if self.entitlements.changed():
            self.rekey_all()
        return self.ranking.first()

    def lead(self, user: UserState) -> tuple[str, dict[str, Any]]:
        """The tail of `why()`: the margin to the runner-up, when it is in the same class."""
        runner = runner_up(self.ranking)
        own = self.ranking.key_of(user)
        theirs = self.ranking.key_of(runner) if runner is not None else None
        if runner is not None and (own is None or theirs is None or own[0] != theirs[0]):
            return self.later_class, {}
        return lead_figures(own[1] if own is not None else 0.0, runner,
                            theirs[1] if theirs is not None else None)

    def key_figures(self, user: UserState, now: float) -> dict[str, Any]:
        figures = self.figures(user)
        del figures["user"]
        return figures


class DrfOrder(RankedShareOrder):
    """Free slots to the waiting user of least (weighted) dominant share."""

    Options = DrfOptions
    # Shares are of the running tasks and the capacity as they are now.
    state_from_totals = True

    @classmethod
    def from_options(cls, options: DrfOptions) -> DrfOrder:
        return cls(resources=options.resources, form=options.form)

    @property
    def measure(self) -> str:  # type: ignore[override]  # the class attribute, per instance
        return "weighted dominant share" if self.weighted else "dominant share"

    def __init__(
        self,
        *,
        weighted: bool = False,
        resources: Iterable[int | str] = DEFAULT_RESOURCES,
        weights: Mapping[str, float] | None = None,
        equal_shares: bool = False,
        resource_weights: Mapping[str, Mapping[str, float]] | None = None,
        form: str = PAPER,
    ) -> None:
        # Per-resource weights are the authors' form; the paper's has one weight a user.
        super().__init__(resources, weights, equal_shares,
                         resource_weights if check_form(form) == AUTHORS else None)
        self.weighted = weighted
        self.form = form
        self.exact_accounting = form == AUTHORS
        self.name = "wdrf" if weighted else "drf"
        # The authors' weighted DRF indexes the users of its weights in their own order (ties
        # go to the lower index); their plain DRF, in order of appearance, as the pool does.
        self.user_order = (authors_user_order(list(weights)) if weighted and form == AUTHORS
                           and weights is not None else [])

    def attach(self, pool: Pool) -> None:
        index_users(pool, self.user_order)
        super().attach(pool)

    def figures(self, user: UserState) -> dict[str, Any]:
        share, resource = self.dominant_share(user)
        weights = self.weights(user)
        ranked_apart, weighted_share = self.rank_of(user, user.usage)
        return {
            "user": user.name,
            "dominant_share": share,
            "dominant_resource": resource,
            "weight": max(weights),
            # None for a user with no entitlement: it is ranked apart, after every other.
            "weighted_share": None if ranked_apart else weighted_share,
        }

    def weights(self, user: UserState) -> list[float]:
        """w_ir for the resources counted (1 for plain DRF)."""
        if not self.weighted:
            return [1.0] * len(self.counted)
        return self.entitlements.of_resources(user, self.counted)

    def forget_weights(self) -> None:
        # User index -> (whether any weight is positive, the weights).
        self._weights: dict[int, tuple[bool, list[float]]] = {}

    def rank_of(self, user: UserState, usage: Sequence[float]) -> tuple[int, float]:
        capacity, counted = self.pool.capacity, self.counted
        if not self.weighted:  # every weight is 1: the key is the dominant share itself
            return (0, dominant_share_of(usage, capacity, counted))
        # A user's weights change only with the capacity or the entitlements, which re-key
        # every user (`rekey_all`) and forget them.
        cached = self._weights.get(user.index)
        if cached is None:
            weights = self.weights(user)
            cached = self._weights[user.index] = (any(weight > 0 for weight in weights),
                                                  weights)
        entitled, weights = cached
        if not entitled:
            return (1, dominant_share_of(usage, capacity, counted))
        # max_r share_r / w_r, the first of equal ones, in one loop (every event of wDRF).
        most = -math.inf
        for position, resource in enumerate(counted):
            total = capacity[resource]
            share = usage[resource] / total if total > 0 else 0.0
            weight = weights[position]
            value = share / weight if weight > 0 else math.inf if share > 0 else 0.0
            if value > most:
                most = value
        return (0, most)

    def why(self, user: UserState, now: float) -> tuple[str, dict[str, Any]]:
        figures = self.figures(user)
        tail, tail_figures = self.lead(user)
        if not self.weighted:
            head = ("free slot to {user}: least dominant share {dominant_share:.4g} "
                    "(of {dominant_resource}), ")
        elif figures["weight"] > 0:
            head = ("free slot to {user}: least weighted dominant share {weighted_share:.4g} "
                    "(dominant share {dominant_share:.4g} of {dominant_resource} over weight "
                    "{weight:.4g}), ")
        else:
            head = ("free slot to {user}: no entitlement, served after entitled users, "
                    "least dominant share {dominant_share:.4g} of {dominant_resource}; ")
        return head + tail, {**figures, **tail_figures}


class WeightedDrfOrder(DrfOrder):
    """Weighted DRF (`wdrf`): DRF over shares divided by each user's entitlement."""

    Options = WeightedDrfOptions

    @classmethod
    def from_options(  # type: ignore[override]  # each order takes its own options
            cls, options: WeightedDrfOptions) -> WeightedDrfOrder:
        return cls(weighted=True, resources=options.resources, weights=options.weights,
                   equal_shares=options.equal_shares,
                   resource_weights=options.resource_weights, form=options.form)
