"""How a group's own users are ordered among themselves under H-DRF (a group's `order`).

Above the users every level is H-DRF's (`hdrf.py`); inside a group its own users go:
- `drf`: by dominant share (the default; the group's `UserRanking`, kept by `hdrf.py` itself);
- `condor`: by HTCondor's effective priority (`CondorPriorityOrder`: usage decayed with
  `PRIORITY_HALFLIFE`'s default);
- `sdrf`: by SDRF's priority (`SdrfOrder`, the paper's form, Eq. 5, its default delta), with
  the group's share as the group's own entitlement: each of the group's own users is
  entitled to an equal part (among the users the tree names in it and any other charged to
  it) of the share of the pool the group's own users are guaranteed (the product of the
  quotas' fractions on the group's path, times the own users' part of the group when it has
  subgroups), and its commitments accrue on its use above that part. Share terms are of the
  whole pool, as the guarantee is. The part moves with the pool's capacity (quotas, hence
  weights) and with the group's users, not with siblings coming and going: a guarantee is
  what the group is owed whoever else asks, so a user's commitments are not rewritten by
  another group's demand.
Each such order is fed its group's users' events alone, and its levels (priorities,
commitments) are the state the daemon saves after a cycle (`PrioritisedHdrfOrder`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from gridfair.core.groups import Group
from gridfair.core.pool import Pool, UserState
from gridfair.policies.condor_priority import CondorPriorityOrder
from gridfair.policies.decaying_order import DecayingOrder
from gridfair.policies.drf import Entitlements
from gridfair.policies.sdrf import SdrfOrder


class GroupNode(Protocol):
    """What these orders read of a group's state in H-DRF's tree (`hdrf.GroupNode`)."""

    weight: float
    members_weight: float
    subgroups: Sequence[GroupNode]
    users: Mapping[int, UserState]

    def path(self) -> Iterator[GroupNode]: ...

#: What a group's order ranks its users by, in a decision's reason (`HdrfOrder.why`).
MEASURE_OF = {"condor": "HTCondor effective priority", "sdrf": "SDRF priority"}


def group_guarantee(node: GroupNode) -> float:
    """The share of the pool `node`'s own users are guaranteed when every group wants more:
    the product of the weights on its path, times their part of it beside its subgroups."""
    share = math.prod(group.weight for group in node.path())
    return share * node.members_weight if node.subgroups else share


class GroupEntitlements(Entitlements):
    """SDRF's w_i inside a group: the group's own users' guarantee, in equal parts among its
    users: those the tree names (`users`) and any other H-DRF has seen charged to it."""

    def __init__(self, node: GroupNode, named: Iterable[str]) -> None:
        super().__init__(equal=True)
        self.node = node
        self.named = frozenset(named)
        self._seen = 0  # how many of the group's users were seen at the last count
        self._users = len(self.named)
        self._key: tuple[float, int] | None = None

    def users(self) -> int:
        seen = self.node.users
        if len(seen) != self._seen:  # users are only ever added
            self._seen = len(seen)
            self._users = len(self.named) + sum(user.name not in self.named
                                                for user in seen.values())
        return self._users

    def of(self, user: UserState) -> float:
        users = self.users()
        return group_guarantee(self.node) / users if users else 0.0

    def changed(self) -> bool:
        """Whether the part moved since the last call (checked on each of the group's users'
        events: the group's weights and users move without the order seeing the pool's)."""
        key = (group_guarantee(self.node), self.users())
        if key == self._key:
            return False
        self._key = key
        return True


class GroupSdrfOrder(SdrfOrder):
    """SDRF over one group's own users, entitled to the group's guarantee (`GroupEntitlements`)."""

    def __init__(self, node: GroupNode, named: Iterable[str],
                 resources: Sequence[int | str]) -> None:
        super().__init__(resources=resources, equal_shares=True)
        self.node = node
        self.entitlements = GroupEntitlements(node, named)

    def user_changed(self, user: UserState, now: float) -> None:
        time = self.tree.time
        if now < time:  # set-up events come at time 0
            now = time
        if self.targets_moved():  # every event: the group's part moves with no pool event
            # The group's users only (`DecayingOrder` re-places every user of the pool).
            for other in self.node.users.values():
                self._place(other, now, self._account(other, now, recheck=True))
        self._place(user, now, self._account(user, now))


def within_order(group: Group, node: GroupNode, pool: Pool,
                 resources: Sequence[int | str]) -> DecayingOrder | None:
    """The order of `node`'s own users for its group's `order` (`GROUP_ORDERS`), attached to
    `pool`; None for `drf` (H-DRF's own ranking)."""
    if group.order == "drf":
        return None
    within: DecayingOrder = (CondorPriorityOrder() if group.order == "condor"
                             else GroupSdrfOrder(node, group.users, resources))
    within.attach(pool)
    return within
