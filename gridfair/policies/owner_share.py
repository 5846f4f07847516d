"""Bookkeeping shared by the owner-share policies (OSEP, HOSEP, reclaim): who is below its
share and wants more, who is above it, each user's running tasks in victim order, the tasks on
each partitionable machine, and the potential every preemption must lower.

The rules themselves (what "below" means, which victim, when a preemption is allowed) live
in `osep.py`, `hosep.py` and `reclaim.py`; this base only keeps their indexes current from
pool events and offers what they share:
- a receiver's task too big for every machine finds no victim: the stages then set it aside
  (`Pool.set_aside_if_too_big`, reported) and look at the next;
- `more_victims`: on a partitionable machine, the further victims the receiver needs room
  from, among tasks of users above their share (`core.victims.complete`: fewest vacates, then
  least work lost);
- `potential_falls` and `move_lowers_potential`: the guard against ping-pong, for one victim
  user or several.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from gridfair.core.groups import GroupTree
from gridfair.core.pool import Node, Pool, Task, UserState, power_diff
from gridfair.core.stages import Preemption, PreemptPolicy, option
from gridfair.core.victims import complete
from gridfair.policies.group_owners import Account, GroupOwners, accounts_of, rekey, same
from gridfair.policies.ranking import RunningTasks, UserRanking

# How many of the victim user's tasks to try when the receiver's job does not fit on the
# first one's machine (memory, Requirements); bounds the cost of a decision.
VICTIM_CANDIDATES = 16

#: How much the convergence guard's sum must fall by, at least. A move that leaves
#: Phi = sum_x Provided_x PowerDiff_x^2 where it was in exact arithmetic (B takes back 25 MFlops
#: from A: -0.2 + 0.0 against 0.4 + -0.6) can round to a fall in floating point (0.4 + -0.6 is
#: -0.19999999999999996), and a move that does not lower Phi can be undone by the next.
PHI_TOLERANCE = 1e-9


def potential_falls(receiver_diff: float, receiver_after: float, gain: float,
                    victim_diff: float, victim_after: float, loss: float) -> bool:
    """HOSEP's convergence guard for a move from one victim user (PowerDiffs before and
    after): the receiver gains `gain` MFlops, the victim loses `loss`. When the two are equal
    (a static slot) it is PowerDiff_a + PowerDiff_a' < PowerDiff_b + PowerDiff_b', which is
    Phi falling, by more than `PHI_TOLERANCE` (a tie does not pass); otherwise Phi's change,
    Provided (PowerDiff'^2 - PowerDiff^2) = change x (PowerDiff + PowerDiff') for each, must
    be below -`PHI_TOLERANCE` per MFlops moved. A victim who provides nothing (PowerDiff
    +inf) loses what such users hold: the potential falls."""
    if loss == gain:
        return (victim_diff + victim_after) - (receiver_diff + receiver_after) > PHI_TOLERANCE
    if victim_diff == math.inf:
        return True
    change = gain * (receiver_diff + receiver_after) - loss * (victim_diff + victim_after)
    return change < -PHI_TOLERANCE * (gain + loss)


def move_lowers_potential(receiver: Account, gain: float,
                          losses: Mapping[Account, float]) -> bool:
    """`potential_falls` for a move from several victim users (each losing its `losses`
    entry): first the MFlops held by users who provide nothing (a victim among them: it
    falls), then Phi summed over the receiver and every victim user."""
    if any(user.provided_power <= 0 for user in losses):
        return True
    if len(losses) == 1:
        (victim, loss), = losses.items()
        return potential_falls(receiver.power_diff, _after(receiver, gain), gain,
                               victim.power_diff, _after(victim, -loss), loss)
    change = _phi_change(receiver, gain) + math.fsum(_phi_change(user, -loss)
                                               for user, loss in losses.items())
    return change < -PHI_TOLERANCE * (gain + math.fsum(losses.values()))


def _after(user: Account, change: float) -> float:
    """The user's PowerDiff once it holds `change` MFlops more."""
    return power_diff(user.allocated_power + change, user.provided_power)


def _phi_change(user: Account, change: float) -> float:
    return change * (user.power_diff + _after(user, change))


def power_losses(users: Mapping[str, UserState], victims: Iterable[Task],
                 account: Callable[[UserState], Account] = same) -> dict[Account, float]:
    """Each victim user's loss of MFlops (its victims' share of their machines' power), in
    the victims' order; `account`: the figures a user is judged by (its owning group's)."""
    losses: dict[Account, float] = {}
    for task in victims:
        node = task.node
        assert node is not None  # a victim runs on its node
        user = account(users[task.user])
        losses[user] = losses.get(user, 0.0) + node.power_per_cpu * task.cpus
    return losses


def preemption_of(receiver: Task, victim: Task, more: tuple[Task, ...],
                  figures: Callable[[Task], dict[str, Any]], vacate_template: str,
                  allocate_template: str) -> Preemption:
    """The preemption of `victim`, and of `more` on its machine, for `receiver`: each vacate
    with its own figures (`figures(task)`); the allocation's are the first victim's, which
    then also list every victim and end the sentence with how many more vacates it took."""
    node = victim.node
    assert node is not None  # a victim runs on its node
    first = figures(victim)
    if more:
        first["victims"] = [task.id for task in (victim, *more)]
        first["more_victims"] = len(more)
        allocate_template += " and {more_victims} more vacate(s) on it"
    return Preemption(victim, receiver, node, vacate_template, allocate_template, first,
                      tuple((task, figures(task)) for task in more))


@dataclass(frozen=True)
class GroupOwnerOptions:
    """The owner-share stages' group tree (`group_owners.py`): compiled with them, as
    HOSEP's options built on it are."""

    groups: Mapping[str, Any] | GroupTree | str | None = option(
        None, "the accounting group tree: a [groups] table (docs/groups.md), or 'condor' "
        "('condor@HOST[:PORT]'): HTCondor's GROUP_* knobs; a machine owned by a group is its "
        "users' (HOSEP, OSEP, reclaim); none: every user its own owner")


class OwnerSharePreempt(PreemptPolicy):
    """Keeps `deficit` (receivers, most deprived first) and `excess` (victims, most over
    first) rankings, each user's running tasks sorted by `victim_key`, and the tasks running
    on each machine of more than one cpu. With `owners` (a group tree), each user's figures
    are its owning group's (`account`, `group_owners.py`)."""

    Options: ClassVar[type[Any]] = GroupOwnerOptions

    def __init__(self, owners: GroupOwners | None = None) -> None:
        self.owners = owners
        self.account = accounts_of(owners)

    def attach(self, pool: Pool) -> None:
        self.pool = pool
        if self.owners is not None:
            self.owners.attach(pool)
        self.deficit = UserRanking()
        self.excess = UserRanking()
        self.running = RunningTasks(self.victim_key)
        # Node index -> its running tasks by seq, for machines of more than one cpu (a
        # one-cpu slot is freed by one vacate: nothing to index there).
        self.on_node: dict[int, dict[int, Task]] = {}

    @abstractmethod
    def deficit_key(self, user: UserState) -> Any | None:
        """Rank of a user owed more than it holds and with idle work; None if it is not."""

    @abstractmethod
    def excess_key(self, user: UserState) -> Any | None:
        """Rank of a user holding more than its share; None if it does not."""

    @staticmethod
    @abstractmethod
    def victim_key(task: Task, node: Node | None = None) -> Any:
        """Order of a user's running tasks as victims, least costly first."""

    def user_changed(self, user: UserState, now: float) -> None:
        if self.owners is None:
            self.deficit.update(user, self.deficit_key(user))
            self.excess.update(user, self.excess_key(user))
        else:
            rekey(self.owners, user, self._rank)

    def _rank(self, user: UserState) -> None:
        self.deficit.update(user, self.deficit_key(user))
        self.excess.update(user, self.excess_key(user))

    def task_started(self, task: Task, now: float) -> None:
        self.running.started(task)
        node = task.node
        assert node is not None  # a started task is on its node
        if node.cpus > 1:
            tasks = self.on_node.get(node.index)
            if tasks is None:
                tasks = self.on_node[node.index] = {}
            tasks[task.seq] = task

    def task_stopped(self, task: Task, now: float, node: Node) -> None:
        self.running.stopped(task, node)
        if node.cpus > 1:
            del self.on_node[node.index][task.seq]

    def more_victims(self, receiver: Task, first: Task, now: float) -> tuple[Task, ...] | None:
        """The further victims on `first`'s machine the receiver needs room from, among the
        tasks of users above their share (`core.victims.complete`); None if none do, or the
        machine is a one-cpu slot."""
        node = first.node
        assert node is not None  # a victim runs on its node
        if node.cpus <= 1:
            return None
        users, excess = self.pool.users, self.excess
        candidates = [task for task in self.pool.vacatable(self.on_node[node.index].values())
                      if task is not first and users[task.user] in excess]
        return complete(self.pool, receiver, first, candidates, now)
