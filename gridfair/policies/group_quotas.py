"""HTCondor's hierarchical group quotas (HGQ), as its negotiator computes them, for the `condor`
order over a group tree (`[policy] order = "condor"` with the `groups` option).

From HTCondor's source (`src/condor_negotiator.V6/GroupEntry.cpp`, with its defaults):

- **Quotas** (`hgq_assign_quotas`, `NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION = true`): the root
  `<none>` receives the pool's weight (`SLOT_WEIGHT`, Cpus by default). A group passes to its
  static children their configured quota, and to its dynamic children their fraction of what
  the static ones leave (fractions scaled down when they sum over 1). A group keeps the whole
  quota it received for its own submitters (oversubscription); `<none>` keeps what its
  children's quotas leave of the pool. A group of quota 0 passes 0 down.
- **Allocation** (`hgq_fairshare`, `hgq_allocate_surplus`): each group is allocated the least
  of its quota and its demand (weighted running + idle jobs, `NEGOTIATOR_USE_WEIGHTED_DEMAND`);
  what is left (surplus) goes up the tree. At each group, the surplus of its subtree is shared
  among its children that accept surplus and its own submitters (always, as HTCondor does),
  each up to its subtree's unmet demand: all of it when the surplus covers the demand, else in
  proportion to their subtree quotas, then in equal parts among those of quota 0; what a group
  takes is shared below it the same way. So surplus goes to siblings first; what no subtree
  wants goes up. `hgq_round_robin` (remainder recovery) runs only with unweighted slots
  (`NEGOTIATOR_USE_SLOT_WEIGHTS = false`), not with HTCondor's default.
- **Order** (`GROUP_SORT_EXPR`'s default): groups negotiate by starvation, usage / quota
  ascending; a group of quota 0 after those, `<none>` last; ties in the negotiator's list
  order (breadth first, children by name). A group with no allocation or no submitters is
  passed over.
- **Limit**: a group negotiates up to max(allocated, quota) (`GROUP_QUOTA_ROUND_ROBIN_RATE`
  unset: one pass to the full limit), lowered by `NEGOTIATOR_STRICT_ENFORCE_QUOTA` (true): for
  the group and each ancestor that does not accept surplus, what that subtree's quota (its
  configured one when static) leaves of the subtree's usage. A job is matched while the
  group's usage plus the job's weight stays within the limit.
- **Users in a group** by effective priority (`CondorPriorityOrder`'s).
- **Autoregroup** (`GROUP_AUTOREGROUP`): once every group has negotiated, the submitters of
  `<none>` and of the groups with autoregroup negotiate again together, with no group limit.

As HTCondor's negotiator, the order fixes the allocations and the groups' order once a cycle
(at the first decision of an instant, `now`) and serves each group to its limit before the
next: with every group tied at no usage, the group listed first may take its parent's whole
cap before its sibling negotiates. Each decision reads the groups' usage as it is (the limits
move as jobs start). When no group can take more and some did not place their allocation,
the cycle allocates again with those groups' demand cut to what they hold, up to 3 rounds
(`GROUP_QUOTA_MAX_ALLOCATION_ROUNDS`), so what they leave goes to others as surplus. Not
reproduced: a submitter's rounding up past its pie slice once a spin, floors and ceilings
(`condor_userprio`), a `GROUP_SORT_EXPR` other than the default.

Cost: no decision reads every user. Each group's weighted usage and demand are sums kept by
the pool's events (`ExactSum`: exact, so equal bit for bit to a recount whatever the events'
order), each group's waiting users are in their own live tree, and each group keeps the
weight of its lightest waiting next job: a decision costs O(G log G) in the G groups (the
allocation and the groups' order, once a cycle and a round), plus the users it passes over
in the group it serves, which are only those whose next job is bigger than the group's
room (none when a group's jobs are alike). An event costs O(log n).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gridfair.core.groups import NONE_GROUP, QUOTA_RESOURCES, GroupTree
from gridfair.core.pool import CPUS, GPUS, MEMORY, Pool, UserState
from gridfair.core.stages import option
from gridfair.errors import ConfigError
from gridfair.policies.condor_priority import (
    DEFAULT_HALFLIFE,
    DEFAULT_PRIORITY_FACTOR,
    CondorPriorityOptions,
    CondorPriorityOrder,
)
from gridfair.policies.live_tree import LiveTree

#: Slack on a limit: a quota met exactly is not exceeded by float noise.
EPSILON = 1e-9
#: GROUP_SORT_EXPR's default keys for a group of quota 0 and for `<none>`.
ZERO_QUOTA_KEY = 3.3e38
#: GROUP_QUOTA_MAX_ALLOCATION_ROUNDS' default: allocations a cycle.
MAX_ALLOCATION_ROUNDS = 3
NONE_KEY = 3.4e38


@dataclass(frozen=True)
class GroupQuota:
    """One group as HGQ sees it: its configured quota in slot weight (static: an amount;
    else a fraction of its parent's), whether it accepts surplus and autoregroups."""

    name: str
    parent: str | None  # None for `<none>`
    children: tuple[str, ...]
    configured: float
    static: bool
    accept_surplus: bool
    autoregroup: bool


@dataclass(frozen=True)
class Allocation:
    """A group's figures after `allocate`: its assigned quota, the quota its subtree received,
    and what it is allocated (quota met by demand, plus surplus)."""

    quota: float
    subtree_quota: float
    allocated: float


def hgq_groups(tree: GroupTree) -> tuple[GroupQuota, ...]:
    """The tree as HGQ's groups, breadth first from `<none>`, children by name (case
    ignored), the negotiator's list order. A static quota must be one number (cpus): an HGQ
    quota is one amount of slot weight."""
    names = [NONE_GROUP]
    kids: dict[str, list[str]] = {}
    for name in names:
        children = sorted((group.name for group in tree.children(name)),
                          key=lambda child: child.lower())
        kids[name] = children
        names.extend(children)
    groups = [GroupQuota(NONE_GROUP, None, tuple(kids[NONE_GROUP]), 0.0, False, True,
                         any(tree.group(name).autoregroup for name in names[1:]))]
    for name in names[1:]:
        group = tree.group(name)
        other = sorted(set(group.static) - {CPUS})
        if other:
            resource = next(key for key, index in QUOTA_RESOURCES.items() if index == other[0])
            raise ConfigError(f"group {name!r}: the condor order's group quotas are one amount "
                              f"of slot weight (cpus), as HTCondor's; a {resource} quota is "
                              "H-DRF's (order hdrf)")
        static = group.dynamic is None
        groups.append(GroupQuota(
            name, group.parent, tuple(kids[name]),
            group.static.get(CPUS, 0.0) if static else float(group.dynamic or 0.0), static,
            group.accept_surplus, group.autoregroup))
    return tuple(groups)


def allocate(groups: Sequence[GroupQuota], total: float, requested: Mapping[str, float],
             *, oversubscription: bool = True) -> dict[str, Allocation]:
    """Each group's quota and allocation in a pool of `total` slot weight, given each group's
    demand (weighted running + idle jobs of its own submitters; absent: 0), as
    `hgq_assign_quotas` then `hgq_fairshare` compute them (module docstring).
    `oversubscription`: NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION (HTCondor's default, true);
    false scales static children down to their parent's quota and leaves a parent what its
    children's quotas leave."""
    return _Allocator(groups, requested, oversubscription).run(total)


class _Allocator:
    """HGQ's working figures of one allocation (GroupEntry's fields of those names)."""

    def __init__(self, groups: Sequence[GroupQuota], requested: Mapping[str, float],
                 oversubscription: bool) -> None:
        self.oversubscription = oversubscription
        self.groups = {group.name: group for group in groups}
        self.quota = dict.fromkeys(self.groups, 0.0)
        self.subtree_quota = dict.fromkeys(self.groups, 0.0)
        self.allocated = dict.fromkeys(self.groups, 0.0)
        self.requested = {name: float(requested.get(name, 0.0)) for name in self.groups}
        self.subtree_requested = dict.fromkeys(self.groups, 0.0)
        self.accepts = {name: group.accept_surplus for name, group in self.groups.items()}

    def run(self, total: float) -> dict[str, Allocation]:
        self.assign_quotas(NONE_GROUP, total)
        self.fairshare(NONE_GROUP)
        return {name: Allocation(self.quota[name], self.subtree_quota[name],
                                 self.allocated[name]) for name in self.groups}

    def assign_quotas(self, name: str, quota: float) -> None:
        if quota <= 0:
            return
        self.subtree_quota[name] = quota
        children = [self.groups[child] for child in self.groups[name].children]
        static_sum = math.fsum(child.configured for child in children if child.static)
        dynamic_sum = math.fsum(child.configured for child in children if not child.static)
        for_static = static_sum if self.oversubscription else min(static_sum, quota)
        left_for_dynamic = max(0.0, quota - for_static)
        static_scale = for_static / static_sum if static_sum > 0 else 0.0
        scale = max(dynamic_sum, 1.0)
        given = 0.0
        for child in children:
            share = max(0.0, child.configured * static_scale if child.static
                        else child.configured * left_for_dynamic / scale)
            self.assign_quotas(child.name, share)
            given += share
        # With oversubscription a group keeps all it received; `<none>` always keeps what
        # its children leave (the pool's surplus is not counted twice).
        keeps_all = self.oversubscription and name != NONE_GROUP
        self.quota[name] = max(0.0, quota if keeps_all else quota - given)

    def fairshare(self, name: str) -> float:
        """Allocate the group its quota up to its demand; its subtree's surplus, shared."""
        self.allocated[name] = min(self.requested[name], self.quota[name])
        self.requested[name] -= self.allocated[name]
        self.subtree_requested[name] = self.requested[name]
        surplus = self.quota[name] - self.allocated[name]
        for child in self.groups[name].children:
            surplus += self.fairshare(child)
            if self.accepts[child]:
                self.subtree_requested[name] += self.subtree_requested[child]
        if self.groups[name].children:
            surplus = self.allocate_surplus(name, surplus)
        return surplus

    def allocate_surplus(self, name: str, surplus: float) -> float:
        """Share `surplus` among the group's children that accept it and its own submitters
        (last), each up to its subtree's unmet demand; what is left goes back up."""
        if surplus <= 0:
            return 0.0
        if self.subtree_requested[name] <= 0:
            return surplus
        members = [*self.groups[name].children, name]
        # The group's own submitters stand beside its children, accepting surplus, with the
        # group's own quota and demand (HTCondor sets and restores these on the group).
        saved = (self.accepts[name], self.subtree_quota[name], self.subtree_requested[name])
        self.accepts[name] = True
        self.subtree_quota[name] = self.quota[name]
        requested = self.subtree_requested[name]
        self.subtree_requested[name] = self.requested[name]
        wanted = [self.subtree_requested[member] if self.accepts[member]
                  and self.subtree_requested[member] > 0 else 0.0 for member in members]
        given = [0.0] * len(members)
        if surplus >= requested:
            given = wanted
            surplus -= requested
            requested = 0.0
        else:
            for by_quota in (True, False):
                surplus, requested = self._share(members, given, wanted, surplus, requested,
                                                 by_quota)
        for member, amount in zip(members[:-1], given[:-1], strict=True):
            if amount > 0:
                self.allocate_surplus(member, amount)
        self.allocated[name] += given[-1]
        self.requested[name] -= given[-1]
        self.accepts[name], self.subtree_quota[name], _ = saved
        self.subtree_requested[name] = requested
        return surplus

    def _share(self, members: Sequence[str], given: list[float], wanted: list[float],
               surplus: float, requested: float, by_quota: bool) -> tuple[float, float]:
        """`hgq_allocate_surplus_loop`: in proportion to subtree quotas (`by_quota`), or in
        equal parts, until the surplus is gone or every wanting member has its demand."""
        while surplus > 0:
            weights = [(self.subtree_quota[member] if by_quota else 1.0)
                       if wanted[index] > 0 else 0.0 for index, member in enumerate(members)]
            normaliser = math.fsum(weights)
            if normaliser <= 0:
                break
            all_given = True
            handed = 0.0
            for index, weight in enumerate(weights):
                if wanted[index] > 0:
                    amount = surplus * weight / normaliser
                    if amount > wanted[index]:
                        amount = wanted[index]
                        all_given = False
                    given[index] += amount
                    wanted[index] -= amount
                    handed += amount
            surplus -= handed
            requested -= handed
            if all_given or surplus < 0:
                surplus = 0.0
        return surplus, requested


def negotiation_order(groups: Sequence[GroupQuota], allocations: Mapping[str, Allocation],
                      usage: Mapping[str, float]) -> list[str]:
    """The groups in the order they negotiate: GROUP_SORT_EXPR's default, usage / quota
    ascending, quota 0 after, `<none>` last (stable: ties in `groups`' order)."""
    def key(group: GroupQuota) -> float:
        quota = allocations[group.name].quota
        if group.name == NONE_GROUP:
            return NONE_KEY
        return usage.get(group.name, 0.0) / quota if quota > 0 else ZERO_QUOTA_KEY

    return [group.name for group in sorted(groups, key=key)]


def group_limit(groups: Mapping[str, GroupQuota], allocations: Mapping[str, Allocation],
                usage: Mapping[str, float], name: str,
                subtree_usage: Mapping[str, float] | None = None) -> float:
    """What group `name` may hold once it has negotiated: max(allocated, quota), lowered by
    NEGOTIATOR_STRICT_ENFORCE_QUOTA at itself and each ancestor that accepts no surplus to
    what that subtree's quota leaves of its usage (`subtree_usage`: each subtree's, when the
    caller has it)."""
    own = usage.get(name, 0.0)
    allocation = allocations[name]
    more = max(allocation.allocated, allocation.quota) - own
    if subtree_usage is None:
        subtree_usage = subtree_usages(groups, usage)
    ancestor: str | None = name
    while ancestor is not None:
        group = groups[ancestor]
        if not group.accept_surplus:
            quota = group.configured if group.static else allocations[ancestor].subtree_quota
            more = min(more, max(0.0, quota - subtree_usage[ancestor]))
        ancestor = group.parent
    return more + own


def subtree_usages(groups: Mapping[str, GroupQuota], usage: Mapping[str, float]
                   ) -> dict[str, float]:
    """Each group's usage with its subtree's."""
    totals = {name: usage.get(name, 0.0) for name in groups}
    for name in reversed(list(groups)):  # breadth first: children after their parents
        parent = groups[name].parent
        if parent is not None:
            totals[parent] += totals[name]
    return totals


@dataclass(frozen=True)
class GroupQuotaOptions(CondorPriorityOptions):
    """The `condor` order's options: HTCondor's priority's, and the group tree."""

    groups: Mapping[str, Any] | GroupTree | str | None = option(
        None, "the accounting group tree (as hdrf's): under condor, HTCondor's hierarchical "
        "group quotas over it")


class GroupQuotaOrder(CondorPriorityOrder):
    """HTCondor's priority under hierarchical group quotas: the next slot to the user of least
    effective priority in the most starved group that has room under its limit. The `condor`
    order: with no tree (or a flat one) it is `CondorPriorityOrder` itself."""

    Options = GroupQuotaOptions

    @classmethod
    def from_options(cls, options: GroupQuotaOptions) -> CondorPriorityOrder:  # type: ignore[override]
        if options.groups is not None:
            # Imported here: a flat run reads no group option (nor the pool's knobs).
            from gridfair.policies.group_option import group_tree

            tree = group_tree(options.groups)
            if not tree.flat:
                return cls(groups=tree, halflife=options.halflife,
                           factor=options.priority_factor, factors=options.priority_factors,
                           pie=options.condor_pie, slot_weight=options.slot_weight)
        return CondorPriorityOrder.from_options(options)

    def __init__(self, *, groups: GroupTree, halflife: float = DEFAULT_HALFLIFE,
                 factor: float = DEFAULT_PRIORITY_FACTOR,
                 factors: Mapping[str, float] | None = None, pie: bool = False,
                 slot_weight: str = "Cpus") -> None:
        # Named, not **kwargs: a compiled build passes keywords through by name only.
        super().__init__(halflife=halflife, factor=factor, factors=factors, pie=pie,
                         slot_weight=slot_weight)
        if self.slot_weight.slot:
            raise ConfigError(f"slot_weight {self.slot_weight.text!r}: group quotas need a "
                              "pool weight, and a per-job constant has none")
        self.group_tree = groups
        self.hgq = {group.name: group for group in hgq_groups(groups)}
        self.group_figures: dict[str, dict[str, float]] = {}

    def attach(self, pool: Pool) -> None:
        super().attach(pool)
        # `DecayingOrder.attach` binds the live tree's `first`: the groups choose here.
        self.first = self.first_within_quotas  # type: ignore[method-assign]
        self.group_of: dict[str, str] = {}
        #: The waiting users of each group, by effective priority (`tree_of`).
        self.trees = {name: LiveTree(self.tau) for name in self.hgq}
        #: Each group's weighted usage and demand, and what each user adds to them.
        self.usage_sums = {name: ExactSum() for name in self.hgq}
        self.demand_sums = {name: ExactSum() for name in self.hgq}
        self.counted: dict[int, tuple[float, float]] = {}
        #: The weight of each waiting user's next job, by group, and a heap of them (stale
        #: entries dropped when they reach the top): a group with no room for its least
        #: is passed over without reading its users.
        self.head_weights: dict[str, dict[int, float]] = {name: {} for name in self.hgq}
        self.least_heads: dict[str, list[tuple[float, int]]] = {name: [] for name in self.hgq}
        #: The cycle's allocations and groups' order, fixed at its first decision.
        self.cycle_time: float | None = None
        self.rounds = 0
        self.allocations: dict[str, Allocation] = {}
        self.order_of_groups: list[str] = []

    def _group(self, user: UserState) -> str:
        group = self.group_of.get(user.name)
        if group is None:
            group = self.group_of[user.name] = self.group_tree.group_of(user.name)
        return group

    def _weight(self, usage: Sequence[float]) -> float:
        weight = self.slot_weight
        return weight.cpus * usage[CPUS] + weight.memory * usage[MEMORY] + \
            weight.gpus * usage[GPUS]

    # ------------------------------------------------- incremental state, by event
    def tree_of(self, user: UserState) -> LiveTree:
        return self.trees[self._group(user)]

    def user_changed(self, user: UserState, now: float) -> None:
        super().user_changed(user, now)
        self._count(user, self._group(user))

    def import_state(self, state: Mapping[str, Any], source: str = "state") -> None:
        # The levels are placed as of the tree's clock: every group's at the latest, as one
        # tree of all the users would be.
        latest = max(tree.time for tree in self.trees.values())
        for tree in self.trees.values():
            tree.advance(latest)
        super().import_state(state, source)

    def _count(self, user: UserState, group: str) -> None:
        """Bring the group's sums and its waiting heads up to the user's state."""
        held = self._weight(user.usage)
        head = self.pool.head(user)
        next_weight = self.slot_weight.of_task(head) if head is not None else 0.0
        counted = (held, held + user.idle_count * next_weight)
        before = self.counted.get(user.index)
        if before != counted:
            if before is not None:
                self.usage_sums[group].add(-before[0])
                self.demand_sums[group].add(-before[1])
            self.usage_sums[group].add(counted[0])
            self.demand_sums[group].add(counted[1])
            self.counted[user.index] = counted
        weights = self.head_weights[group]
        if user.index not in self.trees[group]:
            weights.pop(user.index, None)
        elif weights.get(user.index) != next_weight:
            weights[user.index] = next_weight
            heads = self.least_heads[group]
            heapq.heappush(heads, (next_weight, user.index))
            if len(heads) > 2 * len(weights) + 16:  # mostly stale: rebuilt, O(1) amortised
                heads[:] = [(weight, index) for index, weight in weights.items()]
                heapq.heapify(heads)

    def _least_head(self, group: str) -> float:
        """The weight of the lightest next job of the group's waiting users (inf: none)."""
        heads = self.least_heads[group]
        weights = self.head_weights[group]
        while heads and weights.get(heads[0][1]) != heads[0][0]:
            heapq.heappop(heads)
        return heads[0][0] if heads else math.inf

    def snapshot(self) -> tuple[dict[str, float], dict[str, float]]:
        """Each group's weighted usage and demand (usage + idle jobs, each idle job weighed as
        its user's next one: exact when a user's idle jobs are alike), as kept by events."""
        return ({name: total.value() for name, total in self.usage_sums.items()},
                {name: total.value() for name, total in self.demand_sums.items()})

    # ------------------------------------------------------------- decisions
    def first_within_quotas(self, now: float) -> UserState | None:
        if not any(len(tree) for tree in self.trees.values()):
            return None
        usage, requested = self.snapshot()
        if now != self.cycle_time:
            self.cycle_time = now
            self.rounds = 1
            self._allocate(requested, usage)
        while True:
            user = self._first_in_order(usage, now)
            if user is not None or not self._another_round(requested, usage):
                break
        if user is not None or not self.hgq[NONE_GROUP].autoregroup:
            return user
        return self._regrouped(usage, now)

    def _allocate(self, requested: Mapping[str, float], usage: Mapping[str, float]) -> None:
        groups = list(self.hgq.values())
        self.allocations = allocate(groups, self._weight(self.pool.capacity), requested)
        self.order_of_groups = negotiation_order(groups, self.allocations, usage)

    def _another_round(self, requested: Mapping[str, float], usage: Mapping[str, float]
                       ) -> bool:
        """GROUP_QUOTA_MAX_ALLOCATION_ROUNDS: when no group can take more and some did not
        fill their allocation, allocate again with those groups' demand cut to what they
        hold, so the rest of their allocation goes to others as surplus (up to 3 rounds a
        cycle, HTCondor's default)."""
        allocations = self.allocations
        placed = math.fsum(min(usage[name], figures.allocated)
                           for name, figures in allocations.items())
        if self.rounds >= MAX_ALLOCATION_ROUNDS or placed >= math.fsum(
                figures.allocated for figures in allocations.values()):
            return False
        self.rounds += 1
        self._allocate({name: usage[name] if usage[name] < allocations[name].allocated
                        else requested[name] for name in allocations}, usage)
        return True

    def _first_in_order(self, usage: Mapping[str, float], now: float) -> UserState | None:
        """The first user, in the cycle's order of groups, whose next job fits its group's
        room under its limit."""
        allocations = self.allocations
        subtree_usage = subtree_usages(self.hgq, usage)
        for name in self.order_of_groups:
            if allocations[name].allocated <= 0 or not len(self.trees[name]):
                continue
            limit = group_limit(self.hgq, allocations, usage, name, subtree_usage)
            room = limit - usage[name]
            if self._least_head(name) > room + EPSILON:
                continue
            user = self._fitting(self.trees[name].ordered(now), room)
            if user is not None:
                self.group_figures[user.name] = {
                    "quota": allocations[name].quota, "allocated": allocations[name].allocated,
                    "limit": limit, "usage": usage[name]}
                return user
        return None

    def _regrouped(self, usage: Mapping[str, float], now: float) -> UserState | None:
        """The autoregroup round: `<none>`'s users and the autoregroup groups', together, by
        effective priority, with no group limit."""
        user = self._fitting(self._merged(
            [name for name, group in self.hgq.items()
             if name == NONE_GROUP or group.autoregroup], now), math.inf)
        if user is not None:
            self.group_figures[user.name] = {"quota": math.inf, "allocated": math.inf,
                                             "limit": math.inf, "usage": usage[self._group(user)]}
        return user

    def _fitting(self, users: Iterable[UserState], room: float) -> UserState | None:
        for user in users:
            head = self.pool.head(user)
            if head is not None and self.slot_weight.of_task(head) <= room + EPSILON:
                return user
        return None

    def _merged(self, groups: Iterable[str], now: float) -> Iterator[UserState]:
        """The waiting users of `groups` in one order, by effective priority then as the
        pool first saw them, as one live tree of them all orders them (a condor order's
        ranks are all 0); lazily: the first few cost O(G log G)."""
        def keyed(tree: LiveTree) -> Iterator[tuple[float, int, UserState]]:
            for user in tree.ordered(now):
                yield tree.value(user.index, now), user.index, user

        for _, _, user in heapq.merge(*(keyed(self.trees[name]) for name in groups)):
            yield user

    # ---------------------------------------------------------- explanations
    def waiting(self, now: float) -> Iterator[UserState]:
        return self._merged(self.trees, now)

    def runner_up(self, now: float) -> tuple[UserState | None, float | None]:
        """The second waiting user of the pool by effective priority, whatever its group."""
        waiting = self.waiting(now)
        next(waiting, None)
        user = next(waiting, None)
        return (user, self.trees[self._group(user)].value(user.index, now)) if user else (
            None, None)

    def why(self, user: UserState, now: float) -> tuple[str, Mapping[str, Any]]:
        template, figures = super().why(user, now)
        group = {"group": self._group(user), **self.group_figures.get(user.name, {})}
        return ("group {group}: usage {usage:g} under its limit {limit:g} (quota {quota:g}, "
                "allocated {allocated:g}), the first with room in the cycle's starvation order; "
                + template,
                {**figures, **group})


class ExactSum:
    """A sum of floats kept exact as terms come and go (Shewchuk's partials, as `math.fsum`
    keeps them): its value is the correctly rounded sum of the terms it holds, whatever the
    order they were added and taken out in, so a group's total read from events equals a
    full recount's `math.fsum` bit for bit."""

    __slots__ = ("partials",)

    def __init__(self) -> None:
        self.partials: list[float] = []

    def add(self, value: float) -> None:
        """Add `value` (a negative one takes a term out)."""
        partials = self.partials
        kept = 0
        for partial in partials:
            if abs(value) < abs(partial):
                value, partial = partial, value
            high = value + partial
            low = partial - (high - value)
            if low:
                partials[kept] = low
                kept += 1
            value = high
        partials[kept:] = [value] if value else []

    def value(self) -> float:
        return math.fsum(self.partials)
