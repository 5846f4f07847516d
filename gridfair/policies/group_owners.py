"""A group that owns machines is an owner to OSEP, HOSEP and `reclaim` (issue 47).

With a group tree (the owner-share stages' `groups` option, as H-DRF's), a machine whose owner
names a listed group, as the group (`group_sci`) or as its identity (`group group_sci`, a job
charged to the group where the pool validates groups), is that group's. Every user charged to
the group or to a group below it (the tree's `users`, or a `group G` identity; the nearest
such group on its path when several own machines) counts as that owner: the owner-share rules
read, for each of them, the owner's figures (`OwnerAccount`): the nodes and MFlops the
group's machines provide (and the machines its users own, if any: theirs count for the group
they count as), and the jobs and MFlops all of its users hold. So a group below its
share as a whole lends its users the owner's claim (a waiting user of it preempts users above
their share, HOSEP's PowerDiff in MFlops, OSEP's node balance), and a group above its share
makes each of its users that runs a job a victim, whichever of them holds the most. Its own
machines are its users' own to `reclaim`. A user of no owning group is its own owner, as
without a tree; a tree whose groups own no machine changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from gridfair.core.groups import GROUP_IDENTITY, NONE_GROUP, GroupTree
from gridfair.core.pool import Pool, UserState, power_diff
from gridfair.policies.group_option import group_tree


class OwnerAccount:
    """What the owner-share rules read of a user (`UserState`'s names), for the users of a
    group that owns machines: what the group's machines (and its users' own) provide, what
    its users hold."""

    __slots__ = ("name", "members")

    def __init__(self, name: str) -> None:
        self.name = name
        #: Every pool user that counts as the owner: the machines' owner names too.
        self.members: list[UserState] = []

    @property
    def provided_power(self) -> float:
        return sum(member.provided_power for member in self.members)

    @property
    def provided_nodes(self) -> int:
        return sum(member.provided_nodes for member in self.members)

    @property
    def allocated_power(self) -> float:
        return sum(member.allocated_power for member in self.members)

    @property
    def running(self) -> int:
        return sum(member.running for member in self.members)

    @property
    def power_diff(self) -> float:
        return power_diff(self.allocated_power, self.provided_power)


#: A user's owner-share figures: its own, or its owning group's.
Account = UserState | OwnerAccount


class GroupOwners:
    """Which users count as which owning group, kept for the pool as its machines and users
    come (recomputed when the pool's generation moves)."""

    def __init__(self, tree: GroupTree) -> None:
        self.tree = tree

    def attach(self, pool: Pool) -> None:
        self.pool = pool
        self._generation = -1
        self._nodes = -1  # how many machines the owning groups were found among
        self._users = 0  # how many of the pool's users have been placed
        self._accounts: dict[int, OwnerAccount] = {}  # user index -> its owning group's
        self._by_group: dict[str, OwnerAccount] = {}
        self._group_of_owner: dict[str, str] = {}  # machine owner name -> its group

    def _refresh(self) -> None:
        """Place the pool's users: all of them when machines came (a group may own its first),
        else the users new since the last time (users only ever join)."""
        pool = self.pool
        self._generation = pool.generation
        if len(pool.nodes) != self._nodes:
            self._nodes = len(pool.nodes)
            listed = set(self.tree.names()) - {NONE_GROUP}
            owning: dict[str, str] = {}
            for node in pool.nodes:
                owner = node.owner
                if owner is None or owner in owning:
                    continue
                group = (owner[len(GROUP_IDENTITY):] if owner.startswith(GROUP_IDENTITY)
                         else owner)
                if group in listed:
                    owning[owner] = group
            self._group_of_owner = owning
            self._by_group = {group: OwnerAccount(group) for group in owning.values()}
            self._accounts = {}
            self._users = 0
        users = list(pool.users.values())
        for user in users[self._users:]:
            group = self._group_of_owner.get(user.name) or self._nearest(user.name,
                                                                          self._by_group)
            if group is not None:
                account = self._accounts[user.index] = self._by_group[group]
                account.members.append(user)
        self._users = len(users)

    def _nearest(self, name: str, accounts: Mapping[str, OwnerAccount]) -> str | None:
        """The nearest group on `name`'s path that owns machines, or None."""
        for group in self.tree.ancestors(self.tree.group_of(name)):
            if group in accounts:
                return group
        return None

    def of(self, user: UserState) -> Account:
        """The figures `user` is judged by: its owning group's, or its own."""
        if self.pool.generation != self._generation:
            self._refresh()
        return self._accounts.get(user.index, user)

    def sharing(self, user: UserState) -> Sequence[UserState]:
        """The users whose figures move with `user`'s: its owning group's, or itself."""
        account = self.of(user)
        return account.members if isinstance(account, OwnerAccount) else (user,)

    def owner_name(self, name: str | None) -> str | None:
        """The owner a user or machine owner of this name counts as: its group, or itself."""
        if self.pool.generation != self._generation:
            self._refresh()
        group = self._group_of_owner.get(name)
        if group is not None:
            return group
        user = self.pool.users.get(name)
        account = None if user is None else self._accounts.get(user.index)
        return name if account is None else account.name


def accounts_of(owners: GroupOwners | None) -> Callable[[UserState], Account]:
    """What an owner-share stage judges a user by (`account`): its owning group's figures
    with `owners`, else its own. The owner-share stages are compiled (`setup.py`), one base
    each: they hold `owners` and this, rather than inherit them."""
    return same if owners is None else owners.of


def group_owners(options: Any) -> GroupOwners | None:
    """The stage's `GroupOwners` for its `groups` option; None with no tree (each user its
    own owner: the stage reads users' own figures, as before groups)."""
    tree = group_tree(options.groups)
    return None if tree.flat else GroupOwners(tree)


def same(user: UserState) -> Account:
    """A user's own figures (no owning groups)."""
    return user


def rekey(owners: GroupOwners | None, user: UserState,
          update: Callable[[UserState], None]) -> None:
    """`update` each user whose figures moved with `user`'s event."""
    users: Iterable[UserState] = (user,) if owners is None else owners.sharing(user)
    for member in users:
        update(member)
