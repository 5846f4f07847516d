"""OSEP: owner-share enforcement for homogeneous grids, counting nodes (paper 004, Fig. 1).

Per user i: f_i = provided_nodes_i - used_nodes_i. Decision Algorithm, repeated while it acts,
after every free node has been used:
1. u_max = argmax f with f_max > 0 and an idle job (someone below its share wants more);
2. u_min = argmin f with f_min < 0 (someone above its share);
3. among u_min's running jobs, the one of least impact omega_j: the least computation lost,
   i.e. the least run time since it started (with checkpointing on, vacates lose nothing and
   every omega is 0); among equal run times, the job on the slowest node, which has done the
   fewest operations (OSEP itself is blind to power; this only breaks its ties);
4. vacate it and start u_max's next idle job on the freed node.
Each preemption moves f_max down and f_min up by one, never across zero: it terminates.

Free nodes go, in `OsepOrder`, to the user with the most unused owned nodes (largest f) first.
A user who provides nothing is served after every provider and is preempted before any.
Ties (f is a small integer, so they are common): among users owed equally, the one whose next
job was submitted first, then the user seen first in the pool; among receivers the same.
With a group tree (`groups`), a group that owns machines is an owner, its users judged by its
figures (`group_owners.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from typing import Any, ClassVar

from gridfair.core.pool import Node, Task, UserState
from gridfair.core.stages import OrderPolicy, Preemption
from gridfair.policies.group_owners import (
    Account,
    GroupOwners,
    accounts_of,
    group_owners,
    rekey,
    same,
)
from gridfair.policies.owner_share import (
    VICTIM_CANDIDATES,
    GroupOwnerOptions,
    OwnerSharePreempt,
    preemption_of,
)
from gridfair.policies.ranking import UserRanking


def node_balance(user: Account) -> int:
    """OSEP's f_i: nodes provided minus nodes used (positive: owed nodes)."""
    return user.provided_nodes - user.running


def balances_fall(receiver: Account, users: Mapping[str, UserState],
                  victims: Sequence[Task], account: Callable[[UserState], Account] = same
                  ) -> bool:
    """Whether a preemption of several tasks for one lowers OSEP's potential: the tasks run by
    users who provide nothing (one of theirs among the victims: it falls), else the sum over
    providers of f^2 (the receiver's f falls by one, each victim user's rises by its count).
    One victim for one receiver always does (f moves by one on each side, never across 0).
    `account` gives the figures a user is judged by (its owning group's)."""
    counts: dict[Account, int] = {}
    for task in victims:
        owner = account(users[task.user])
        counts[owner] = counts.get(owner, 0) + 1
    if any(owner.provided_nodes == 0 for owner in counts):
        return True
    balance = node_balance(receiver)
    change = (balance - 1) ** 2 - balance ** 2
    for owner, count in counts.items():
        before = node_balance(owner)
        change += (before + count) ** 2 - before ** 2
    return change < 0


def osep_figures(user: Account) -> dict[str, float]:
    return {
        "provided_nodes": user.provided_nodes,
        "used_nodes": user.running,
        "node_balance": node_balance(user),
    }


class OsepOrder(OrderPolicy):
    """Free nodes to the user with the largest f (most owed nodes) first, FIFO within it."""

    name = "osep"
    # Node balances are of the running tasks and the machines owned as they are now.
    state_from_totals = True

    Options: ClassVar[type[Any]] = GroupOwnerOptions

    @classmethod
    def from_options(cls, options: Any) -> OsepOrder:
        return cls(group_owners(options))

    def __init__(self, owners: GroupOwners | None = None) -> None:
        self.owners = owners
        self.account = accounts_of(owners)

    def attach(self, pool) -> None:
        self.pool = pool
        self.ranking = UserRanking()
        if self.owners is not None:
            self.owners.attach(pool)

    def user_changed(self, user: UserState, now: float) -> None:
        if self.owners is None:
            self._rank(user)
        else:
            rekey(self.owners, user, self._rank)

    def _rank(self, user: UserState) -> None:
        key = None
        if user.active:
            owner = user if self.owners is None else self.owners.of(user)  # every event: no call
            key = ((0 if owner.provided_nodes > 0 else 1), -node_balance(owner),
                   self.pool.head(user).submit_time)
        self.ranking.update(user, key)

    def first(self, now: float) -> UserState | None:
        return self.ranking.first()

    def why(self, user: UserState, now: float) -> tuple[str, Mapping[str, Any]]:
        return (
            "free node to {user}: largest f = {node_balance} among waiting users "
            "({used_nodes} used of {provided_nodes} provided)",
            {"user": user.name, **osep_figures(self.account(user))},
        )

    def key_figures(self, user: UserState, now: float) -> Mapping[str, float]:
        return osep_figures(self.account(user))


class OsepPreempt(OwnerSharePreempt):
    """Fig. 1: vacate the least costly job of the user furthest above its node share for the
    user furthest below it."""

    name = "osep"
    state_from_totals = True
    owner_share_rule = "osep"

    @classmethod
    def from_options(cls, options: Any, order: OrderPolicy) -> OsepPreempt:
        return cls(group_owners(options))

    def deficit_key(self, user: UserState) -> Any | None:
        owner = user if self.owners is None else self.owners.of(user)  # every event: no call
        balance = node_balance(owner)
        head = self.pool.head(user)
        if head is not None and owner.provided_nodes > 0 and balance > 0:
            return (-balance, head.submit_time)
        return None

    def excess_key(self, user: UserState) -> Any | None:
        owner = user if self.owners is None else self.owners.of(user)
        balance = node_balance(owner)
        if user.running > 0 and balance < 0:
            # Users who provide nothing are victims before any provider.
            return (0 if owner.provided_nodes == 0 else 1, balance)
        return None

    @staticmethod
    def victim_key(task: Task, node: Node | None = None) -> Any:
        # Least run time lost (latest start); equal run times: the slowest node lost least.
        node = node or task.node
        assert node is not None  # a victim runs on its node, or has just left `node`
        return (-task.start_time, node.power_per_cpu * task.cpus)

    def choose(self, now: float) -> Preemption | None:
        while (receiver_user := self.deficit.first()) is not None:
            victim_user = self.excess.first()
            if victim_user is None:
                return None
            receiver = self.pool.head(receiver_user)
            assert receiver is not None  # `deficit_key` ranks only users with an idle job
            choice = self._choose_for(receiver_user, receiver, victim_user, now)
            if choice is not None or not self.pool.set_aside_if_too_big(receiver_user, now):
                return choice
        return None

    def _choose_for(self, receiver_user: UserState, receiver: Task, victim_user: UserState,
                    now: float) -> Preemption | None:
        for victim in islice(self.pool.vacatable(self.running.of(victim_user.name)),
                             VICTIM_CANDIDATES):
            if self.pool.fits_after_vacate(receiver, victim):
                return self._preemption(receiver_user, receiver, victim, (), now)
            more = self.more_victims(receiver, victim, now)
            if more and balances_fall(self.account(receiver_user), self.pool.users,
                                      (victim, *more), self.account):
                return self._preemption(receiver_user, receiver, victim, more, now)
        return None

    def _preemption(self, receiver_user: UserState, receiver: Task, victim: Task,
                    more: tuple[Task, ...], now: float) -> Preemption:
        users = self.pool.users
        node = victim.node
        assert node is not None  # a victim runs on its node

        def figures(task: Task) -> dict[str, Any]:
            return {
                "receiver": receiver_user.name,
                "receiver_job": receiver.id,
                "receiver_balance": node_balance(self.account(receiver_user)),
                "victim_user": task.user,
                "victim_job": task.id,
                "victim_balance": node_balance(self.account(users[task.user])),
                "omega": self.pool.lost_work_if_vacated(task, now),
                "machine": node.name,
            }

        return preemption_of(
            receiver, victim, more, figures,
            "vacate {victim_job} of {victim_user} on {machine}: {victim_user} uses "
            "{victim_balance:+d} nodes beyond its share; least work lost "
            "(omega {omega:.0f} s)",
            "{receiver_job} of {receiver} onto {machine}: {receiver} is owed "
            "{receiver_balance} nodes; freed from {victim_user}",
        )

    def key_figures(self, user: UserState, now: float) -> Mapping[str, float]:
        return osep_figures(self.account(user))
