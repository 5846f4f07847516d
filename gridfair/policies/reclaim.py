"""Owner reclaim: an owner-share preemption rule that keeps HOSEP's promise under periodic
(batch) negotiation.

HOSEP's Fig. 2 (`hosep.py`) takes for the most under-share user u_alpha the *least powerful*
machine of the most over-share user u_beta (Def. 3, 3.3 ii). Under batch negotiation every
waiting user's smallest task takes a fast machine at once; an owner who arrives later (User1
on the paper's Table 1 grid, at 60 s) is handed the victims' slowest machines while others keep
its own fast ones, and ends the least satisfied (docs/owner-share.md). This rule keeps HOSEP's
receiver, its ranking by PowerDiff (Eq. 3) and its free-machine order, and changes which
machine comes back:
1. receiver: u_alpha = argmin PowerDiff < 0 among providers with an idle job (as HOSEP), its
   job of least demand; on a pool with machines of several cpus, its jobs of each size
   (cpus, memory, GPUs) up to `RECEIVER_JOBS` sizes among `RECEIVER_LOOKS` jobs, the job
   whose move brings it closest to its share taken (`closeness`: a move on its own machines
   first, then the least |PowerDiff_alpha'|, then the fewest victims, then queue order): in
   queue order a 7-cpu job would take an owner at -0.5 (8 cpus of its own) to +0.375 where
   its 4-cpu job takes it to 0, and a 1-cpu job at the head would take it a step that the
   next job then overshoots (HTCondor's negotiator likewise tries each autocluster; a job
   asking for no less of anything than one that found no move is not tried); then the next
   most deprived provider's, up to `RECEIVER_USERS` of them;
2. the receiver reclaims its own machines first: among the tasks of other users running on
   the machines it owns (fastest machine first), the one whose user is left most above its
   share (largest omega);
3. otherwise, among the running tasks of the users above their share (most over first), the
   machine that brings the receiver closest to its share (least |PowerDiff_alpha'|; among
   equals, the least powerful, then the run started last);
4. every move must lower Phi = sum_x Provided_x * PowerDiff_x^2 (HOSEP's convergence guard:
   PowerDiff_a + PowerDiff_a' < PowerDiff_b + PowerDiff_b', primes: after the move); a move
   of step 3 must also leave the victim at or above the receiver (omega >= PowerDiff_alpha').
   Step 2 needs only Phi: an owner is entitled to its own machine back from a user above its
   share even if that user then falls below the owner (on Table 1, User4 holding one of
   User1's fast machines). No move leaves a receiver that holds something further from its
   share than it is (`overshoots`: on partitionable machines a big job can take an owner
   just below its share far above it; its job of another size is tried instead). Phi falls
   with every preemption and the pool has finitely many states, so repeated cycles on an
   unchanged pool stop acting: no ping-pong.
A victim is always above its share (PowerDiff > 0); a user who provides nothing is never a
receiver and, holding anything, is above its share (PowerDiff +inf).

On a partitionable machine (more than one cpu) the receiver's job may need room from several
tasks: the machine's further victims, among tasks of users above their share, are the fewest
that free its cpus, memory and GPUs, then those losing least work (`core.victims`); the whole
move is tested as one (Phi over every user it moves, and in step 3 every victim user left at
or above the receiver). A job too big for every machine is set aside and never a receiver.
This is the owner-share rule to run live (docs/owner-share.md).

Cost: for each of up to `RECEIVER_USERS` receivers and `RECEIVER_JOBS` of its jobs,
step 2 looks at up to `VICTIM_CANDIDATES` tasks on the receiver's machines, step 3 at up to
as many tasks of each of the `VICTIM_USERS` most over-share users.

Ties: the user seen first in the pool, the task submitted first (for a receiver's jobs of
equal closeness, the first in its queue).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from typing import Any, ClassVar

from gridfair.core.negotiator import PARK_LIMIT
from gridfair.core.pool import Node, Pool, Task, UserState, power_diff
from gridfair.core.stages import OrderPolicy, Preemption
from gridfair.core.victims import sizes
from gridfair.policies.group_owners import Account, group_owners
from gridfair.policies.hosep import HosepPreempt, hosep_figures, remaining_power
from gridfair.policies.owner_share import (
    PHI_TOLERANCE,
    VICTIM_CANDIDATES,
    GroupOwnerOptions,
    move_lowers_potential,
    potential_falls,
    power_losses,
    preemption_of,
)

#: How many over-share users step 3 looks at, most over first.
VICTIM_USERS = 4
#: How many users below their share are tried, most deprived first, for one preemption.
RECEIVER_USERS = 4
#: How many sizes of a receiver's idle jobs are tried, in its queue order (as many as the
#: negotiator sets aside for free machines), and how many jobs are looked at in all.
RECEIVER_JOBS = PARK_LIMIT
RECEIVER_LOOKS = 16
#: The reason a move of step 2 gives (the receiver's own machine).
OWN_MACHINE = "own machine"


class ReclaimPreempt(HosepPreempt):
    """Owners below their share reclaim their own machines first, then the machine that
    brings them closest to their share, while the victim stays above them."""

    name = "reclaim"
    # HOSEP's order and PowerDiff, not its options nor Fig. 2's invariant; its group tree.
    Options: ClassVar[type[Any]] = GroupOwnerOptions
    owner_share_rule = None

    @classmethod
    def from_options(cls, options: Any, order: OrderPolicy) -> ReclaimPreempt:
        return cls(owners=group_owners(options))

    def attach(self, pool: Pool) -> None:
        super().attach(pool)
        # Owner -> tasks of other users running on its machines, as (-power, -start, seq, task):
        # fastest machine first, then the run started last (least work lost).
        # A machine of no owner (`Node.owner` None) has guests too, under None.
        self.guests_on: dict[str | None, list[tuple[float, float, int, Task]]] = {}
        #: With owning groups: task seq -> the owner it is a guest of.
        self.guest_of: dict[int, str | None] = {}

    @staticmethod
    def _guest_entry(task: Task, node: Node) -> tuple[float, float, int, Task]:
        return (-node.power_per_cpu * task.cpus, -task.start_time, task.seq, task)

    def task_started(self, task: Task, now: float) -> None:
        super().task_started(task, now)
        node = task.node
        assert node is not None  # a started task is on its node
        if self.owners is None:
            if node.owner != task.user:
                insort(self.guests_on.setdefault(node.owner, []), self._guest_entry(task, node))
            return
        owner = self.owners.owner_name(node.owner)
        if owner != self.owners.owner_name(task.user):
            # Kept by task: a group's first machine may make a guest of this job its own.
            self.guest_of[task.seq] = owner
            insort(self.guests_on.setdefault(owner, []), self._guest_entry(task, node))

    def task_stopped(self, task: Task, now: float, node: Node) -> None:
        super().task_stopped(task, now, node)
        if self.owners is None:
            if node.owner == task.user:
                return
            owner = node.owner
        elif task.seq in self.guest_of:
            owner = self.guest_of.pop(task.seq)
        else:
            return
        guests = self.guests_on[owner]
        del guests[bisect_left(guests, self._guest_entry(task, node))]

    def _own_machines(self, receiver_user: UserState) -> Iterator[Task]:
        guests = self.guests_on.get(self.account(receiver_user).name, ())
        return islice(self.pool.vacatable(entry[3] for entry in guests), VICTIM_CANDIDATES)

    def choose(self, now: float) -> Preemption | None:
        if self.excess.first() is None:
            return None
        # The most deprived first; the next one when none of the first's jobs has an allowed
        # move (on partitionable machines it may need more room than any move makes).
        return first_move(self.pool, islice(self.deficit, RECEIVER_USERS), self._choose_for,
                          now, closeness=closeness)

    def _choose_for(self, receiver_user: UserState, receiver: Task,
                    now: float) -> Preemption | None:
        users = self.pool.users
        best = None
        for victim in self._own_machines(receiver_user):
            choice = self._allowed(receiver_user, receiver, users[victim.user], victim, now,
                                   own_machine=True)
            # From the user left most above its share (largest omega); the first of equals.
            if choice is not None and (best is None or choice[3] > best[3]):
                best = choice
        if best is not None:
            return self._chosen_preemption(receiver_user, receiver, best, OWN_MACHINE)
        for rank, victim_user in enumerate(self.excess):
            if rank == VICTIM_USERS:
                break
            for tried, victim in enumerate(self.pool.vacatable(
                    self.running.of(victim_user.name))):
                if tried == VICTIM_CANDIDATES:
                    break
                choice = self._allowed(receiver_user, receiver, victim_user, victim, now)
                # Closest to the share; the victims come least powerful first, so the first
                # of equals is kept.
                if choice is not None and (best is None or abs(choice[2]) < abs(best[2])):
                    best = choice
        if best is None:
            return None
        return self._chosen_preemption(receiver_user, receiver, best, "closest to its share")

    def _allowed(self, receiver_user: UserState, receiver: Task, victim_user: UserState,
                 victim: Task, now: float, own_machine: bool = False
                 ) -> tuple[UserState, Task, float, float, tuple[Task, ...]] | None:
        """(victim user, victim, receiver's PowerDiff after, omega, further victims on the
        machine) if the move is allowed: the victim above its share, Phi falling and, off the
        receiver's own machines, every victim user left at or above the receiver."""
        receiver_owner, victim_owner = self.account(receiver_user), self.account(victim_user)
        victim_diff = victim_owner.power_diff
        if victim_diff <= 0:
            return None
        node = victim.node
        assert node is not None  # a victim runs on its node
        gain = node.power_per_cpu * receiver.cpus
        receiver_after = power_diff(receiver_owner.allocated_power + gain,
                                    receiver_owner.provided_power)
        if overshoots(receiver_owner, receiver_after):
            return None
        loss = node.power_per_cpu * victim.cpus
        omega = remaining_power(victim_owner, loss)
        # Further victims only lower the victim user's omega: refused before the search.
        if not own_machine and omega < receiver_after:
            return None
        if self.pool.fits_after_vacate(receiver, victim):
            if potential_falls(receiver_owner.power_diff, receiver_after, gain, victim_diff,
                               omega, loss):
                return (victim_user, victim, receiver_after, omega, ())
            return None
        more = self.more_victims(receiver, victim, now)
        if not more:
            return None
        losses = power_losses(self.pool.users, (victim, *more), self.account)
        omegas = {user: remaining_power(user, loss) for user, loss in losses.items()}
        if ((own_machine or all(omega >= receiver_after for omega in omegas.values()))
                and move_lowers_potential(receiver_owner, gain, losses)):
            return (victim_user, victim, receiver_after, omegas[victim_owner], more)
        return None

    def _chosen_preemption(self, receiver_user: UserState, receiver: Task,
                           choice: tuple[UserState, Task, float, float, tuple[Task, ...]],
                           why: str) -> Preemption:
        _, victim, receiver_after, _, more = choice
        victim_figures = self.victim_figures(receiver_user, receiver, receiver_after,
                                             (victim, *more))

        def figures(task: Task) -> dict[str, Any]:
            node = task.node
            assert node is not None  # a victim runs on its node
            return {**victim_figures(task), "machine_owner": node.owner, "reason": why}

        return preemption_of(
            receiver, victim, more, figures,
            "vacate {victim_job} of {victim_user} on {machine} (owned by {machine_owner}, "
            "{machine_mflops:.0f} MFlops; {reason}): {victim_user} is above its share "
            "(PowerDiff {victim_power_diff:+.3f}, omega {omega:+.3f} after); {receiver} goes "
            "from {receiver_power_diff:+.3f} to {receiver_power_diff_after:+.3f}",
            "{receiver_job} of {receiver} onto {machine} ({reason}): {receiver} is below its "
            "share (PowerDiff {receiver_power_diff:+.3f}, {receiver_power_diff_after:+.3f} "
            "after); freed from {victim_user}",
        )

    def key_figures(self, user: UserState, now: float) -> Mapping[str, float]:
        return hosep_figures(self.account(user))


def first_move(pool: Pool, receiver_users: Iterable[UserState],
               choose_for: Callable[[UserState, Task, float], Preemption | None], now: float,
               *, free_room_waits: bool = False,
               closeness: Callable[[Preemption], tuple[Any, ...]] | None = None
               ) -> Preemption | None:
    """The first move `choose_for` allows for a receiver's job, receivers in the order given.

    A job finding no move is set aside (parked until the next preemption), the next one
    tried; one asking for no less of anything than a job that found none is set aside untried
    (what held the smaller one back, room, a share rule or overshooting, holds it back too),
    up to `RECEIVER_JOBS` sizes among `RECEIVER_LOOKS` jobs; a job too big for every machine
    does not count. With `free_room_waits`, a receiver whose next job fits free room is
    passed over: the next free allocation gives it out without a vacate. With `closeness`,
    a receiver's jobs of every size are tried as far, and of their moves the one of least
    `closeness` is taken (the first in queue order among equals); a job of a size already
    moved is not tried again (its move would be the same, and it comes later)."""
    # One cpu a machine: every job of a receiver is the same move's size, one try is all.
    sizes_tried = RECEIVER_JOBS if pool.largest[0] > 1 else 1
    for receiver_user in list(receiver_users):
        tried: list[tuple[float, float, float]] = []
        moved: list[tuple[float, float, float]] = []
        best: tuple[tuple[Any, ...], Preemption] | None = None
        looked = 0
        while (receiver := pool.head(receiver_user)) is not None:
            if free_room_waits and pool.best_node(receiver) is not None:
                break
            size = sizes(receiver)
            if size not in moved and not any(no_smaller(size, before) for before in tried):
                choice = choose_for(receiver_user, receiver, now)
                if choice is not None:
                    if closeness is None:
                        return choice
                    key = closeness(choice)
                    if best is None or key < best[0]:
                        best = (key, choice)
                    moved.append(size)
                elif pool.set_aside_if_too_big(receiver_user, now):
                    continue
                else:
                    tried.append(size)
            looked += 1
            if len(tried) + len(moved) == sizes_tried or looked == RECEIVER_LOOKS:
                break
            pool.park(receiver_user, now)
        if best is not None:  # its job may be parked: the negotiator starts it all the same
            return best[1]
    return None


def closeness(move: Preemption) -> tuple[bool, float, int]:
    """How close a move brings its receiver to its share, least first: one on the receiver's
    own machines first (step 2), then the least |PowerDiff| after, then the fewest victims."""
    figures = move.figures
    return (figures["reason"] != OWN_MACHINE, abs(figures["receiver_power_diff_after"]),
            len(move.victims))


def no_smaller(size: tuple[float, ...], tried: tuple[float, ...]) -> bool:
    """`size` asks for at least what `tried` did, of every resource."""
    return all(asked >= before for asked, before in zip(size, tried, strict=True))


def overshoots(receiver: Account, receiver_after: float) -> bool:
    """A move would leave a receiver that holds something further from its share than it
    is (a 4-cpu job taking an owner at -0.08 to +0.25: found live in Showcase 2, where it
    held a fifth of the pool above its share for most of a minute); the receiver's job of
    another size is tried instead. One holding nothing may take any job (else an owner
    whose jobs are all bigger than twice its share would never get one back)."""
    return (receiver.allocated_power > 0
            and abs(receiver_after) > abs(receiver.power_diff) + PHI_TOLERANCE)
