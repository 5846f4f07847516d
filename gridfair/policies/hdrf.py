"""H-DRF: DRF across a tree of accounting groups (Bhattacharya et al., "Hierarchical Scheduling
for Diverse Datacenter Workloads", SoCC 2013, dynamic H-DRF).

The tree is the pool's groups (`core/groups.py`): each group's children are its subgroups and
its own users (one node, "members", whose users are ordered by plain DRF among themselves, or
as the group's `order` says: HTCondor's effective priority, SDRF's, `group_orders.py`). A
child's weight is its quota as a fraction of its parent's (the members' weight: what the
subgroups leave), taken on its dominant quota'd resource; a child of weight 0 is served after
its weighted siblings. A free slot goes down from the root, at each level to the child of least
normalised dominant share (dominant share / weight), to a user.

A node's consumption is not the plain sum of its children's (naive H-DRF, which starves a child
whose dominant resource its sibling saturated): each child's consumption is rescaled to the
least normalised share m among the children that want a slot now ("rescaling to the minimum
node"), c_n = sum_i c_i * min(1, m / d_i), so a blocked or idle child, whose share does not
move, does not raise its parent's share above its active siblings'. With no group (the tree of
one level), the root's members are every user and the order is exactly DRF's.

Quotas are served first, then surplus, as HTCondor's negotiator does: a decision first looks
for a user whose next task keeps every group on its path within its quota; then one past the
quotas of the deepest groups that accept surplus (room a project leaves goes to its sibling
first), then one level up, and so on to the top groups; a quota of a group that does not
accept surplus is a ceiling. Each round goes down the tree in H-DRF's order. A group with
autoregroup is served past its ceiling when no one else can be (HTCondor's second round in
`<none>`). Quotas and weights are per resource: a rule on cpus alone limits cpus alone, and a
project whose sibling holds memory past its quota still has its cpus.

State: each user's usage is added to its groups' totals on its events (O(depth)); a user's
DRF key is kept in its group's sorted ranking (O(log n)), its next task's demand beside it; a
group whose subtree changed is marked, and at the next decision its rescaled consumption, its
children's order, the least demand waiting below it and whether its quota leaves room for it
("full") are recomputed, over its children and own users, on the changed path only; a user's
event that changes none of these (its head set aside for a task of the same size) marks
nothing. A decision goes down the tree in up to depth + 2 rounds, passing over every group full
in the round, so it looks at the users of the groups with room only; when no waiting task fits
the pool's room at all (the groups' least demands say so), it recomputes nothing and finds
no one, leaving the changed paths to the next decision (`docs/results/groups.md`).
Ties: equal keys go to the subgroup listed first, then to the group's own users; among users,
to the user seen first in the pool (`UserState.index`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gridfair.core.groups import NONE_GROUP, QUOTA_RESOURCES, GroupTree
from gridfair.core.pool import CPUS, GPUS, MEMORY, RESOURCE_NAMES, Pool, UserState
from gridfair.core.stages import OrderPolicy, option
from gridfair.errors import InputError
from gridfair.policies.decaying_order import DecayingOrder
from gridfair.policies.drf import (
    DEFAULT_RESOURCES,
    check_resources,
    counted_resources,
    dominant,
    resource_shares,
)
from gridfair.policies.group_option import group_tree
from gridfair.policies.group_orders import MEASURE_OF, within_order
from gridfair.policies.ranking import UserRanking

#: Slack on a ceiling: a quota met exactly is not exceeded by float noise.
EPSILON = 1e-9
#: The last round of a decision: past the ceiling of a group with autoregroup.
AUTOREGROUP = 0
#: The least demand of no task, and the room of no ceiling: (cpus, memory, gpus).
NO_DEMAND = UNLIMITED = (math.inf, math.inf, math.inf)


@dataclass(frozen=True)
class HdrfOptions:
    """H-DRF's options."""

    resources: Sequence[int | str] = option(
        DEFAULT_RESOURCES, "the resources shares are taken over (cpus, memory, power, gpus)")
    groups: Mapping[str, Any] | GroupTree | str | None = option(
        None, "the accounting group tree: a [groups] table (docs/groups.md), or 'condor': "
        "the GROUP_* knobs of HTCondor's configuration here, or 'condor@HOST[:PORT]': of "
        "the running negotiator of that collector's pool; none: every user in <none>, "
        "which is DRF")


#: What a next job asks for, (cpus, memory, gpus); a resource it does not ask for as -inf.
Demand = tuple[float, float, float]


def least_of(least: Demand, demands: Iterable[Demand]) -> Demand:
    """Per resource (cpus, memory, gpus), the least of `least` and of each of `demands`."""
    least_cpus, least_memory, least_gpus = least
    for cpus, memory, gpus in demands:
        if cpus < least_cpus:
            least_cpus = cpus
        if memory < least_memory:
            least_memory = memory
        if gpus < least_gpus:
            least_gpus = gpus
    return least_cpus, least_memory, least_gpus


class GroupNode:
    """A group's state in the tree: its subtree's usage, its users' DRF ranking and its
    rescaled consumption (recomputed when `dirty`)."""

    __slots__ = ("name", "parent", "subgroups", "users", "ranking", "used", "quota",
                 "accept_surplus", "autoregroup", "weight", "members_weight", "members_share",
                 "consumption", "share", "active", "dirty", "depth", "own_used", "own_quota",
                 "lifted_in", "ceilings", "demands", "members_least", "least", "full",
                 "order", "seen", "tallies", "within", "version")

    def __init__(self, name: str, parent: GroupNode | None, width: int) -> None:
        self.name = name
        self.parent = parent
        self.subgroups: list[GroupNode] = []
        self.users: dict[int, UserState] = {}  # its own users, by index
        #: Its own users' usage as last seen and their dominant share of it, by index.
        self.seen: dict[int, tuple[list[float], float]] = {}
        self.ranking = UserRanking()  # its own users who want a slot, by dominant share
        self.used = [0.0] * width  # the subtree's actual usage
        self.own_used = [0.0] * width  # its own users' usage
        self.quota = [math.inf] * width
        #: Its own users' ceiling: `<none>`'s remainder, unless it accepts surplus.
        self.own_quota = [math.inf] * width
        self.accept_surplus = True
        self.autoregroup = False
        self.weight = 1.0
        self.members_weight = 1.0
        self.members_share = 0.0  # its own users' rescaled share, over their weight
        self.consumption = [0.0] * width  # rescaled (H-DRF)
        self.share = 0.0  # dominant share of `consumption` over the weight
        self.active = False  # some user below wants a slot
        self.dirty = True
        self.depth = 0 if parent is None else parent.depth + 1
        #: Its quota is a ceiling in the rounds past this one (its depth if it accepts
        #: surplus, else -1: every round; set at `attach`).
        self.lifted_in = -1
        #: (lifted_in, usage, quota) of its own users' ceiling and of each group's on its
        #: path (set at `attach`).
        self.ceilings: list[tuple[int, list[float], list[float]]] = []
        #: Its waiting users' next tasks: user index -> (cpus, memory, gpus), a resource the
        #: task does not ask for as -inf (it fits any room).
        self.demands: dict[int, Demand] = {}
        #: The least of `demands` per resource (None: to recompute).
        self.members_least: Demand | None = None
        #: The least demand per resource of the waiting users in its subtree, and whether
        #: its own quota leaves room for none of them (`_update`).
        self.least = NO_DEMAND
        self.full = False
        #: Its children that want a slot, best first; None: its own users (`_update`).
        self.order: list[GroupNode | None] = []
        #: The usage totals its own users' usage counts in: theirs, and each group's on its
        #: path (set at `attach`).
        self.tallies: list[list[float]] = []
        #: The order of its own users when not DRF's (a group's `order`, `group_orders.py`):
        #: fed its users' events alone.
        self.within: DecayingOrder | None = None
        #: Bumped whenever its own users' usage, waiting or next jobs change (what
        #: `group_entitlement` keeps a group's figures by).
        self.version = 0

    def path(self) -> Iterator[GroupNode]:
        node: GroupNode | None = self
        while node is not None:
            yield node
            node = node.parent



class HdrfOrder(OrderPolicy):
    """Free slots down the group tree to the child of least normalised dominant share."""

    Options = HdrfOptions
    name = "hdrf"
    measure = "dominant share"
    # Shares are of the running tasks and the capacity as they are now.
    state_from_totals = True

    @classmethod
    def from_options(cls, options: HdrfOptions) -> HdrfOrder:
        tree = group_tree(options.groups)
        # Priorities that outlive a cycle make the order one whose state the daemon keeps.
        kind = (PrioritisedHdrfOrder if any(tree.group(name).order != "drf"
                                            for name in tree.names() if name != NONE_GROUP)
                else cls)
        return kind(resources=options.resources, groups=tree)

    def __init__(self, *, resources: Sequence[int | str] = DEFAULT_RESOURCES,
                 groups: Mapping[str, Any] | GroupTree | str | None = None) -> None:
        self.resources = check_resources(resources)
        self.counted = self.resources
        self.tree = group_tree(groups)

    # ------------------------------------------------------------------ state
    def attach(self, pool: Pool) -> None:
        self.pool = pool
        width = len(pool.capacity)
        self.nodes: dict[str, GroupNode] = {}
        for name in self.tree.names():
            parent = None if name == NONE_GROUP else self.nodes[self.tree.group(name).parent]
            node = self.nodes[name] = GroupNode(name, parent, width)
            if parent is not None:
                parent.subgroups.append(node)
                group = self.tree.group(name)
                node.accept_surplus = group.accept_surplus
                node.autoregroup = group.autoregroup
                node.within = within_order(group, node, pool, self.resources)
        self.root = self.nodes[NONE_GROUP]
        for node in self.nodes.values():
            if node.parent is not None and node.accept_surplus:
                node.lifted_in = node.depth
        for node in self.nodes.values():
            node.ceilings = [(-1, node.own_used, node.own_quota)]
            node.ceilings += [(group.lifted_in, group.used, group.quota)
                              for group in node.path()]
            node.tallies = [node.own_used, *(group.used for group in node.path())]
        self.depth = max(node.depth for node in self.nodes.values())
        self.autoregroup = any(node.autoregroup for node in self.nodes.values())
        self.group_of: dict[int, GroupNode] = {}
        #: The groups with users of their own, in the order they got their first.
        self.peopled: list[GroupNode] = []
        self._generation = -1
        self._capacity: list[float] = []

    def _refresh_quotas(self) -> None:
        """Quotas and weights for the pool's capacity as it is (once per capacity change)."""
        pool = self.pool
        if pool.generation == self._generation:
            return
        self._generation = pool.generation
        if pool.capacity == self._capacity:
            return
        self._capacity = list(pool.capacity)
        self.counted = counted_resources(self.resources, pool.capacity)
        # Every dominant share is over the capacity: re-key every user seen.
        for node in self.nodes.values():
            for index, (usage, _) in list(node.seen.items()):
                node.seen[index] = (usage, self.user_share(usage))
                user = node.users[index]
                node.ranking.update(user, (0, node.seen[index][1]) if user.active else None)
        quotas = self.tree.quotas(pool.capacity)
        for name, node in self.nodes.items():
            node.quota[:] = quotas[name]  # in place: `ceilings` holds it
            node.dirty = True
        root = self.root
        if not self.tree.flat and not self.tree.none_accepts_surplus:
            root.own_quota[:] = self.tree.remainder(NONE_GROUP, quotas)
        for node in self.nodes.values():
            parent_quota = quotas[node.name]
            for child in node.subgroups:
                child.weight = self._fraction(quotas[child.name], parent_quota)
            # The own users' part, over the resources the subgroups' quotas limit (with
            # quotas of cpus alone, the cpus they leave).
            limited = [r for r in self.counted
                       if any(math.isfinite(quotas[child.name][r]) for child in node.subgroups)]
            node.members_weight = (self._fraction(self.tree.remainder(node.name, quotas),
                                                  parent_quota, limited)
                                   if node.subgroups else 1.0)

    def _fraction(self, part: Sequence[float], whole: Sequence[float],
                  resources: Sequence[int] | None = None) -> float:
        """A child's weight: its quota over its parent's, on its dominant quota'd resource
        (of `resources`, default every counted one)."""
        fractions = [part[r] / whole[r] for r in (self.counted if resources is None
                                                  else resources)
                     if math.isfinite(part[r]) and math.isfinite(whole[r]) and whole[r] > 0]
        return max(fractions) if fractions else 1.0

    def user_changed(self, user: UserState, now: float) -> None:
        if self.pool.generation != self._generation:
            self._refresh_quotas()
        node = self.group_of.get(user.index)
        if node is None:
            node = self.group_of[user.index] = self.nodes[self.tree.group_of(user.name)]
            if not node.users:
                self.peopled.append(node)
            node.users[user.index] = user
        seen = node.seen.get(user.index)
        usage = user.usage
        # Whether the group's figures may change: not when only the user's head moved to a
        # task of the same size (a task set aside, `Pool.park`, and back).
        changed = seen is None or seen[0] != usage
        if changed:
            old = seen[0] if seen is not None else (0.0, 0.0, 0.0, 0.0)
            cpus, memory, power, gpus = (usage[0] - old[0], usage[1] - old[1],
                                         usage[2] - old[2], usage[3] - old[3])
            for used in node.tallies:
                used[0] += cpus
                used[1] += memory
                used[2] += power
                used[3] += gpus
            seen = node.seen[user.index] = (usage[:], self.user_share(usage))
        key = (0, seen[1]) if user.active else None
        if node.ranking.key_of(user) != key:
            node.ranking.update(user, key)
            changed = True
        task = self.pool.head(user) if user.active else None
        demand = None if task is None else (task.cpus or -math.inf, task.memory or -math.inf,
                                            task.gpus or -math.inf)
        before = node.demands.get(user.index)
        if demand != before:
            changed = True
            if demand is None:
                del node.demands[user.index]
                node.members_least = None
            else:
                node.demands[user.index] = demand
                # A demand added can only lower the least (exact: a minimum); one changed
                # may have been it.
                least = node.members_least
                node.members_least = (least_of(least, (demand,))
                                      if before is None and least is not None else None)
        if node.within is not None:
            node.within.user_changed(user, now)
        if not changed:
            return
        node.version += 1
        for group in node.path():
            if group.dirty:
                break
            group.dirty = True

    def user_share(self, usage: Sequence[float]) -> float:
        """The dominant share of `usage`: max_r usage_r / capacity_r (0 where the pool has
        none), the first of equal ones, as `max(resource_shares(...))` but in one loop."""
        capacity = self.pool.capacity
        most = -math.inf
        for resource in self.counted:
            total = capacity[resource]
            share = usage[resource] / total if total > 0 else 0.0
            if share > most:
                most = share
        return most

    # ------------------------------------------------------------- rescaling
    def _update(self, node: GroupNode, *, shown: bool = False) -> None:
        """Recompute `node`'s rescaled consumption, normalised share, children's order, least
        waiting demand and whether it is full, children first. The root's own consumption
        and share are only shown (`shown`): no decision weighs the root against anything; a
        root without subgroups orders its users as DRF does."""
        if not node.dirty:
            return
        subgroups = node.subgroups
        if node is self.root and not shown and not subgroups:
            node.active = len(node.ranking) > 0
            node.dirty = False
            return
        for child in subgroups:
            if child.dirty:
                self._update(child)
        # The members' own consumption, rescaled to the least share of those waiting.
        first = node.ranking.first()
        seen = node.seen
        if seen:
            members = self._rescaled_sum(seen.values(), seen[first.index][1]
                                         if first is not None else math.inf)
            members_dominant = self.user_share(members)
        else:  # a group of subgroups alone
            members, members_dominant = [0.0, 0.0, 0.0, 0.0], 0.0
        weight = node.members_weight
        members_share = node.members_share = (members_dominant / weight if weight > 0
                                              else members_dominant)
        least = self._members_least(node)
        if not subgroups:  # a leaf: its consumption is its users' (the sum below's)
            node.consumption = members
            weight = node.weight
            node.share = members_dominant / weight if weight > 0 else members_dominant
            node.active = first is not None
            node.order = [None] if first is not None else []
        else:
            # Children that want a slot, best first: weight 0 after the weighted; ties to
            # the subgroup listed first, then to the group's own users.
            keyed: list[tuple[tuple, GroupNode | None]] = []
            least_share = math.inf
            if first is not None:
                keyed.append(((int(weight <= 0), members_share, len(subgroups)), None))
                least_share = members_share
            for order, child in enumerate(subgroups):
                if child.active:
                    share = child.share
                    keyed.append(((int(child.weight <= 0), share, order), child))
                    if share < least_share:
                        least_share = share
            least = least_of(least, (child.least for child in subgroups if child.active))
            if node is not self.root or shown:
                node.consumption = self._rescaled_sum(
                    [(members, members_share), *((child.consumption, child.share)
                                                 for child in subgroups)], least_share)
                weight = node.weight
                dominant_share = self.user_share(node.consumption)
                node.share = dominant_share / weight if weight > 0 else dominant_share
            node.active = bool(keyed)
            keyed.sort()  # keys are unique (the listed order in them): nodes never compared
            node.order = [child for _, child in keyed]
        node.least = least
        quota, used = node.quota, node.used
        node.full = (quota[CPUS] - used[CPUS] + EPSILON < least[0]
                     or quota[MEMORY] - used[MEMORY] + EPSILON < least[1]
                     or quota[GPUS] - used[GPUS] + EPSILON < least[2])
        node.dirty = False

    @staticmethod
    def _members_least(node: GroupNode) -> Demand:
        """The least next task of `node`'s own waiting users, per resource."""
        least = node.members_least
        if least is None:
            least = node.members_least = least_of(NO_DEMAND, node.demands.values())
        return least

    @staticmethod
    def _rescaled_sum(entries: Any, least: float) -> list[float]:
        """sum_i c_i * min(1, least / d_i) over (c_i, d_i), c_i a pool's usage vector
        (cpus, memory, power, gpus): written out, as it runs on every decision."""
        cpus = memory = power = gpus = 0.0
        for vector, share in entries:
            if share <= least:
                cpus += vector[0]
                memory += vector[1]
                power += vector[2]
                gpus += vector[3]
                continue
            factor = least / share
            if factor > 0:
                cpus += vector[0] * factor
                memory += vector[1] * factor
                power += vector[2] * factor
                gpus += vector[3] * factor
        return [cpus, memory, power, gpus]

    # -------------------------------------------------------------- decision
    def first(self, now: float) -> UserState | None:
        self._refresh_quotas()
        if self.tree.flat:  # one level, no ceiling: the least dominant share, as DRF
            return self.root.ranking.first()
        if self.root.dirty and not self.autoregroup and self._pool_full():
            # Nothing waiting fits the pool's room (most calls on a busy pool): the groups'
            # figures are left to recompute at the next decision, with the events since.
            return None
        self._update(self.root)
        # Within every quota first; then past the quotas of groups at depth >= level that
        # accept surplus, the deepest first (surplus from siblings before cousins); then
        # past an autoregroup group's ceiling. `<none>`'s quota, the pool, holds in each.
        if not self.root.full:
            for level in range(self.depth + 1, 0, -1):
                found = self._descend(self.root, level, now)
                if found is not None:
                    return found
        return self._descend(self.root, AUTOREGROUP, now)

    def _pool_full(self) -> bool:
        """`<none>`'s quota, the pool, leaves room for no waiting task: the root's `full`,
        from its users' least demands alone (no group's figures recomputed)."""
        least = least_of(NO_DEMAND, map(self._members_least, self.peopled))
        quota, used = self.root.quota, self.root.used
        return (quota[CPUS] - used[CPUS] + EPSILON < least[0]
                or quota[MEMORY] - used[MEMORY] + EPSILON < least[1]
                or quota[GPUS] - used[GPUS] + EPSILON < least[2])

    def _descend(self, node: GroupNode, level: int, now: float) -> UserState | None:
        """The first user under `node`, in H-DRF's order, whose next task fits the room of
        round `level`. A subgroup whose quota holds in this round and leaves room for no
        waiting task below it is passed over whole."""
        for child in node.order:
            if child is None:
                if level != AUTOREGROUP:
                    found = self._fitting(node, self._room(node, level), now)
                elif node.autoregroup:
                    found = self._fitting(node, UNLIMITED, now)
                else:
                    continue
            elif level != AUTOREGROUP and level > child.lifted_in and child.full:
                continue
            else:
                found = self._descend(child, level, now)
            if found is not None:
                return found
        return None

    def _fitting(self, node: GroupNode, room: tuple[float, float, float],
                 now: float) -> UserState | None:
        """The first of `node`'s own waiting users, in the group's order of them (DRF's, or
        HTCondor's priority at `now`), whose next task fits `room`. Only what the task asks
        for counts (a job of no GPUs fits a group at its GPU quota)."""
        cpus, memory, gpus = room
        least = self._members_least(node)
        if least[0] > cpus or least[1] > memory or least[2] > gpus:
            return None  # no task of theirs fits: most groups, in the rounds past their quota
        head = self.pool.head
        users = node.ranking if node.within is None else node.within.tree.ordered(now)
        for user in users:
            task = head(user)
            if task is not None and (task.cpus <= cpus or not task.cpus) \
                    and (task.memory <= memory or not task.memory) \
                    and (task.gpus <= gpus or not task.gpus):
                return user
        return None

    @staticmethod
    def _room(node: GroupNode, level: int) -> tuple[float, float, float]:
        """What the users of `node` may take more in this round (cpus, memory, gpus): the
        least room left under the ceilings on its path, but those of groups at depth >=
        `level` that accept surplus."""
        cpus = memory = gpus = math.inf
        for lifted_in, used, quota in node.ceilings:
            if level > lifted_in:
                left = quota[CPUS] - used[CPUS]
                if left < cpus:
                    cpus = left
                left = quota[MEMORY] - used[MEMORY]
                if left < memory:
                    memory = left
                left = quota[GPUS] - used[GPUS]
                if left < gpus:
                    gpus = left
        return cpus + EPSILON, memory + EPSILON, gpus + EPSILON

    # --------------------------------------------------------------- figures
    def why(self, user: UserState, now: float) -> tuple[str, Mapping[str, Any]]:
        figures = self.figures(user)
        template = ("free slot to {user} of group {group} (path {path}): least normalised "
                    "dominant share at every level; its own {dominant_share:.4g} (of "
                    "{dominant_resource}), its group's {group_share:.4g} (H-DRF's, over the "
                    "group's weight)")
        node = self.group_of.get(user.index)
        if node is not None and node.within is not None:
            figures["priority"] = node.within.priority(user, now)
            template += ("; in its group, least " + MEASURE_OF[self.tree.group(node.name).order]
                         + ", {priority:.4g}")
        return template, figures

    def figures(self, user: UserState) -> dict[str, Any]:
        node = self.group_of.get(user.index, self.root)
        if node is self.root:  # the root's share is computed only to be shown
            self.root.dirty = True
        self._update(self.root, shown=node is self.root)
        share, resource = dominant(resource_shares(user.usage, self.pool.capacity,
                                                   self.counted), self.counted)
        return {"user": user.name, "group": node.name,
                "path": " > ".join(group.name for group in reversed(list(node.path()))),
                "dominant_share": share, "dominant_resource": resource,
                "group_share": node.share}

    def key_figures(self, user: UserState, now: float) -> dict[str, Any]:
        figures = self.figures(user)
        del figures["user"], figures["path"]
        return figures

    @staticmethod
    def first_in(node: GroupNode, now: float) -> UserState | None:
        """`node`'s own waiting user that goes first in the group's order of them."""
        return node.ranking.first() if node.within is None else node.within.first(now)

    def tree_root(self) -> GroupNode:
        """The root of the tree, every group's quotas, weights, usage and waiting users
        current (not their rescaled figures: the stages reading it, `group_preempt`, need
        none)."""
        self._refresh_quotas()
        return self.root

    def group_rows(self) -> list[dict[str, Any]]:
        """One row a group, parents first: quota, weight, actual and rescaled dominant
        shares, surplus in use (`gridfair shares --tree`)."""
        self._refresh_quotas()
        self.root.dirty = True
        self._update(self.root, shown=True)
        capacity = self.pool.capacity
        rows = []
        for name, node in self.nodes.items():
            used_share, used_resource = dominant(
                resource_shares(node.used, capacity, self.counted), self.counted)
            quotas = [r for r in QUOTA_RESOURCES.values()
                      if math.isfinite(node.quota[r]) and r in self.counted]
            surplus = {RESOURCE_NAMES[r]: node.used[r] - node.quota[r] for r in quotas
                       if node.used[r] > node.quota[r]}
            rows.append({
                "group": name, "level": node.depth,
                "quota": {RESOURCE_NAMES[r]: node.quota[r] for r in quotas},
                "weight": node.weight,
                "guaranteed_share": self._guaranteed(node),
                "dominant_share": used_share, "dominant_resource": used_resource,
                "hdrf_share": node.share,
                "accept_surplus": node.accept_surplus,
                "surplus_in_use": surplus,
                "users": len(node.users),
            })
        return rows

    @staticmethod
    def _guaranteed(node: GroupNode) -> float:
        """The product of the weights on the path: the share of the pool the group is
        guaranteed when every group wants more."""
        return math.prod(group.weight for group in node.path())


class PrioritisedHdrfOrder(HdrfOrder):
    """H-DRF over a tree where some group orders its own users by HTCondor's priority or by
    SDRF's: those priorities and commitments (each group's order, `group_orders.py`) are state
    the daemon saves after a cycle and restores before the next (`Stateful`), as it does
    `--policy condor`'s and `sdrf`'s."""

    state_name = "groups"

    def export_state(self, now: float) -> dict[str, Any]:
        """Each such group's levels at `now` (`DecayingOrder.export_state`)."""
        return {"policy": self.name, "time": now,
                self.state_name: {node.name: node.within.export_state(now)
                                  for node in self.nodes.values() if node.within is not None}}

    def import_state(self, state: Mapping[str, Any], source: str = "state") -> None:
        """Restore levels exported by `export_state`. A group now ordered otherwise than when
        saved (or by DRF) is skipped, and so is a user no longer in the group it was saved
        in: its levels were earned under another rule, or against other users."""
        if state.get("policy") != self.name:
            raise InputError(f"state is for policy {state.get('policy')!r}, not {self.name!r}",
                             source=source)
        groups = state.get(self.state_name)
        if not isinstance(groups, Mapping):
            raise InputError(f"state has no {self.state_name} mapping", source=source,
                             attribute=self.state_name)
        for name, saved in groups.items():
            node = self.nodes.get(name)
            within = None if node is None else node.within
            if within is None or (isinstance(saved, Mapping)
                                  and saved.get("policy", within.name) != within.name):
                continue
            where = f"{source} group {name}"
            if not isinstance(saved, Mapping) or not isinstance(
                    levels := saved.get(within.state_name), Mapping):
                raise InputError(f"group {name!r}: no {within.state_name} mapping",
                                 source=where, attribute=self.state_name)
            within.import_state(
                {**saved, within.state_name: {
                    user: level for user, level in levels.items()
                    if self.tree.group_of(user) == name}}, source=where)


def group_rows_of(order: OrderPolicy) -> list[dict[str, Any]]:
    """`order`'s rows per accounting group (`HdrfOrder.group_rows`); none for an order
    without a tree (the daemon's per-group outputs)."""
    if isinstance(order, HdrfOrder) and not order.tree.flat:
        return order.group_rows()
    return []
