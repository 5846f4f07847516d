"""Fair-share preemption for the DRF family (`--preempt fair`): a waiting user below its
entitlement takes room from users above theirs, by the order stage's own measure.

The DRF family's orders (DRF, weighted DRF, SDRF, DMFA-SRQ) only order free room: on a full
pool an arriving user waits for jobs to end. This stage measures every user with the key its
order ranks by (`share_key`: DRF's dominant share, weighted DRF's dominant share over weight,
SDRF's share plus commitment, DMFA-SRQ's fraction of its target; lower is further below its
entitlement), and allows a preemption only under Kueue's fair-sharing rule
`LessThanOrEqualToFinalShare` (kubernetes-sigs/kueue, apis/config/v1beta1/
configuration_types.go, "only preempt a workload if the share of the preemptor CQ with the
preemptor workload is less than or equal to the share of the preemptee CQ without the workload
to be preempted"), taken per user over every victim of the move:

    key(receiver, after it starts its job) <= key(victim user, after losing its victims)

for each victim user, on the order's key: no victim's user ends below the receiver. Keys are
maxima over resources, so they tie often, and a move may leave a key where it was (a task that
holds none of its user's dominant resource); so that repeated moves cannot trade room back and
forth, gridfair also refines each key (the order's, then the user's shares of cpus, memory,
MFlops and GPUs from the largest down: it rises strictly with anything a user holds) and asks

    refined key(receiver, after) < refined key(victim user, before)

(Kueue's other strategy, `LessThanInitialShare`, on refined keys: it refuses only a receiver
that would end tied with a victim user on the order's key, and above it on the next share).
Every refined key a move changes then ends below the largest victim key before it, so the
refined keys sorted from the largest down fall in lexicographic order with every preemption:
repeated cycles on an unchanged pool (with keys that do not drift: DRF, weighted DRF, DMFA-SRQ)
stop acting, no ping-pong. Free room given out by the order in between can still lift a
receiver above a user a move took from (an indivisible job overshooting: a GPU job takes a
user from 0.06 to 0.5 of the pool's GPUs), which may then take room back; the daemon's
`min_runtime` holds that back while the job it would vacate is younger than that. SDRF's
commitments drift with time (tau of 11.6 days by default), so a move may be undone only once
that drift has crossed the gap a job's share makes: SDRF's own statefulness, not a cycle's.

The move, for one receiver job:
1. receivers: the waiting users of least key first, up to `RECEIVER_USERS`; each one's queue in
   its order, a job asking for no less of anything than one that found no move skipped, up to
   `RECEIVER_JOBS` sizes among `RECEIVER_LOOKS` jobs (as `reclaim` does); a job too big for
   every machine is set aside, reported once by the negotiator, and never a reason to vacate;
2. victims: the users of largest key first, up to `VICTIM_USERS`, each one's running jobs in
   order of work a vacate loses (the run started last first), up to `VICTIM_CANDIDATES`; a
   user whose key is not above the receiver's now is passed over (it could not fall and stay
   at or above it);
3. on the first victim's machine, the further victims needed to free the receiver's cpus,
   memory and GPUs (`core.victims.complete`: fewest vacates, then least work lost), among the
   tasks of other users each of whom, losing that task alone, stays at or above the receiver;
   the whole move is then tested as one, per victim user;
4. the first victim user (largest key first, as Kueue takes from the cohort member of largest
   share first) with a move allowed; of its moves, the fewest vacates, then the least work
   lost.
Every vacate and the allocation carry the keys before and after in their figures. The daemon's
safety rules (`daemon.safety`) apply through the negotiator's guard, as for every stage.

Cost: each user's key is computed on its own events and kept in two rankings (waiting users,
users running something), O(log n) an event; the pool's capacity changing re-keys everyone,
once, at the next preemption phase.
A decision looks at a bounded number of users and tasks, none of it growing with the pool.
SDRF's keys drift between a user's events: its rankings are as of each user's last event, and
every key the rule compares is computed at the decision's time.

Ties: the user seen first in the pool, the task submitted first.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice
from typing import Any

from gridfair.core.pool import CPUS, GPUS, MEMORY, POWER, Node, Pool, Task, UserState
from gridfair.core.stages import (
    DECLINE,
    Decision,
    OrderPolicy,
    Preemption,
    PreemptPolicy,
    ShareKeyed,
)
from gridfair.core.victims import complete
from gridfair.policies.fair_rule import BELOW, ORDER_KEY, TIED, Key, refusal, stays_at_or_above
from gridfair.policies.owner_share import preemption_of
from gridfair.policies.ranking import RunningTasks, UserRanking
from gridfair.policies.reclaim import first_move

#: How many waiting users are tried, least key first, for one preemption.
RECEIVER_USERS = 4
#: How many users are looked at as victims, largest key first, and how many of each one's
#: running tasks.
VICTIM_USERS = 4
VICTIM_CANDIDATES = 16


_VACATE = ("vacate {victim_job} of {victim_user} on {machine} ({order} fair share): "
           "{victim_user}'s {measure} {victim_share:.4g} falls to {victim_share_after:.4g}, "
           "not below {receiver}'s {receiver_share_after:.4g} once it runs {receiver_job} "
           "(from {receiver_share:.4g})")
_ALLOCATE = ("{receiver_job} of {receiver} onto {machine} ({order} fair share): {receiver}'s "
             "{measure} goes from {receiver_share:.4g} to {receiver_share_after:.4g}, not above "
             "{victim_user}'s {victim_share_after:.4g} after (from {victim_share:.4g}); freed "
             "from {victim_user}")


_STOPPED = ("fair share stops: {receiver_job} of {receiver} waits at {measure} "
            "{receiver_share:.4g} ({order}); ")
#: Why the stage stopped, by what held back the move it looked at first (`declined`).
_DECLINED = {
    "none above": _STOPPED + "no user is above the {receiver_share_after:.4g} it would have "
                  "with it: the largest, {victim_user}, is at {victim_share:.4g}",
    BELOW: _STOPPED + "vacating {victim_job} of {victim_user} on {machine} would leave "
             "{victim_user} at {victim_share_after:.4g}, below {receiver}'s "
             "{receiver_share_after:.4g} after (Kueue's LessThanOrEqualToFinalShare)",
    TIED: _STOPPED + "vacating {victim_job} of {victim_user} on {machine} would leave "
            "{receiver} at {receiver_share_after:.4g}, tied with {victim_user} "
            "({victim_share:.4g}) and above it on the next share: they could trade it back",
    "room": _STOPPED + "{machine}, where {victim_user}'s job losing least work runs, cannot "
            "free its cpus, memory and GPUs from users who stay at or above it",
}


def usage_on(task: Task, node: Node | None) -> tuple[float, ...]:
    """What `task` holds (or would) on `node`, as `UserState.usage` counts it (no MFlops on
    no machine)."""
    usage = [0.0, 0.0, 0.0, 0.0]
    usage[CPUS], usage[MEMORY], usage[GPUS] = task.cpus, task.memory, task.gpus
    usage[POWER] = node.power_per_cpu * task.cpus if node is not None else 0.0
    return tuple(usage)


def moved(usage: Sequence[float], change: Sequence[float], sign: float) -> list[float]:
    return [held + sign * part for held, part in zip(usage, change, strict=True)]


class FairPreempt(PreemptPolicy):
    """Room for the waiting user furthest below its entitlement (by its order's key), from
    users who stay at or above it after the move (Kueue's `LessThanOrEqualToFinalShare`)."""

    name = "fair"
    needs_order = ShareKeyed
    needs_order_text = "an order of the DRF family"

    @classmethod
    def from_options(cls, options: Any, order: OrderPolicy) -> FairPreempt:
        return cls(order)

    def __init__(self, order: OrderPolicy) -> None:
        self.order = order
        self._share_key = order.share_key  # type: ignore[attr-defined]  # see needs_order
        self.measure = order.measure

    def attach(self, pool: Pool) -> None:
        self.pool = pool
        self.waiting = UserRanking()  # least key first
        self.holding = UserRanking()  # largest key first
        self.running = RunningTasks(self.victim_key)
        # Node index -> its running tasks by seq, on machines of more than one cpu.
        self.on_node: dict[int, dict[int, Task]] = {}
        self._capacity = list(pool.capacity)
        #: (receiver user, its job, victim user, that user's job losing least work or None):
        #: what `declined` explains.
        self._stopped: tuple[UserState, Task, UserState, Task | None] | None = None

    @staticmethod
    def victim_key(task: Task, node: Node | None = None) -> float:
        """Least work lost first: the run started last."""
        return -task.start_time

    # ------------------------------------------------------------- bookkeeping
    def key(self, user: UserState, now: float, change: Sequence[float] = (),
            sign: float = 1.0) -> Key:
        """The user's key now, holding what it holds plus (`sign` 1) or minus (-1) `change`."""
        usage = moved(user.usage, change, sign) if change else user.usage
        capacity = self.pool.capacity
        shares = [held / total for held, total in zip(usage, capacity, strict=True) if total > 0]
        return (*self._share_key(user, usage, now), *sorted(shares, reverse=True))

    def _rank(self, user: UserState, now: float) -> None:
        if not (user.active or user.running):
            self.waiting.update(user, None)
            self.holding.update(user, None)
            return
        key = self.key(user, now)
        self.waiting.update(user, key if user.active else None)
        self.holding.update(user, tuple(-part for part in key) if user.running else None)

    def user_changed(self, user: UserState, now: float) -> None:
        self._rank(user, now)

    def task_started(self, task: Task, now: float) -> None:
        self.running.started(task)
        node = task.node
        if node.cpus > 1:
            self.on_node.setdefault(node.index, {})[task.seq] = task

    def task_stopped(self, task: Task, now: float, node: Node) -> None:
        self.running.stopped(task, node)
        if node.cpus > 1:
            del self.on_node[node.index][task.seq]

    # ---------------------------------------------------------------- the rule
    def choose(self, now: float) -> Preemption | None:
        self._stopped = None
        pool = self.pool
        if pool.capacity != self._capacity:
            # Every share moved: re-ranked here, once, not on each machine that joins.
            self._capacity = list(pool.capacity)
            for user in pool.users.values():
                self._rank(user, now)
        if not self.holding:
            return None
        # Room a vacate left free holds its receiver: the next cycle's free allocation gives
        # it out in the order's order, without a vacate.
        return first_move(pool, islice(self.waiting, RECEIVER_USERS), self._choose_for, now,
                          free_room_waits=True)

    def _choose_for(self, receiver_user: UserState, receiver: Task,
                    now: float) -> Preemption | None:
        if self.pool.too_big(receiver) is not None:
            return None
        receiver_key = self.key(receiver_user, now)
        # The receiver's least key after, on any machine (its job's MFlops left out): a user
        # not above it on the order's key cannot lose a job and stay at or above the receiver.
        least_after = self.key(receiver_user, now, usage_on(receiver, None))[:ORDER_KEY]
        for victim_user in list(islice(self.holding, VICTIM_USERS)):
            if victim_user is receiver_user:
                continue
            victim_key = self.key(victim_user, now)
            skipped = victim_key <= receiver_key or victim_key[:ORDER_KEY] < least_after
            if self._stopped is None:  # why the most deprived receiver's first job waits
                self._stopped = (receiver_user, receiver, victim_user,
                                 None if skipped else next(self.running.of(victim_user.name)))
            if skipped:
                continue
            best: tuple[Any, ...] | None = None
            for tried, victim in enumerate(self.pool.vacatable(
                    self.running.of(victim_user.name))):
                if tried == VICTIM_CANDIDATES:
                    break
                move = self._allowed(receiver_user, receiver, victim, now)
                if move is None:
                    continue
                lost = sum(self.pool.lost_work_if_vacated(task, now) for task in move[0])
                if best is None or (len(move[0]), lost) < best[:2]:
                    best = (len(move[0]), lost, *move)
                if len(move[0]) == 1:  # none cheaper: its tasks come least work lost first
                    break
            if best is not None:
                return self._preemption(receiver_user, receiver, *best[2:], now)
        return None

    def _allowed(self, receiver_user: UserState, receiver: Task, victim: Task, now: float
                 ) -> tuple[tuple[Task, ...], Key, dict[str, tuple[Key, Key]]] | None:
        """(every victim, the receiver's key after, each victim user's key before and after)
        if `receiver` may take `victim`'s machine, with what more it needs there, under the
        rule; else None."""
        pool = self.pool
        node = victim.node
        receiver_after = self.key(receiver_user, now, usage_on(receiver, node))
        users = pool.users

        def stays_above(task: Task) -> bool:
            """The task's user, losing it alone, stays at or above the receiver after."""
            user = users[task.user]
            return user is not receiver_user and stays_at_or_above(
                self.key(user, now, usage_on(task, node), -1.0), receiver_after)

        if not stays_above(victim):
            return None
        if pool.fits_after_vacate(receiver, victim):
            victims: tuple[Task, ...] = (victim,)
        elif node.cpus > 1:
            candidates = [task for task in pool.vacatable(self.on_node[node.index].values())
                          if task is not victim and stays_above(task)]
            more = complete(pool, receiver, victim, candidates, now)
            if not more:
                return None
            victims = (victim, *more)
        else:
            return None
        losses: dict[str, list[float]] = {}
        for task in victims:
            losses[task.user] = moved(losses.get(task.user, [0.0] * 4), usage_on(task, node),
                                      1.0)
        keys = {}
        for name, loss in losses.items():
            user = users[name]
            before, after = self.key(user, now), self.key(user, now, loss, -1.0)
            if refusal(receiver_after, before, after) is not None:
                return None
            keys[name] = (before, after)
        return victims, receiver_after, keys

    def declined(self, now: float) -> Decision | None:
        """Why the stage stopped although a user waits: the first victim user it looked at
        for the most deprived receiver's first job, and the rule's figures for that user's job
        losing least work (or, when no user is above the receiver, the largest)."""
        if self._stopped is None:
            return None
        receiver_user, receiver, victim_user, victim = self._stopped
        self._stopped = None  # read once, after the cycle's last `choose`
        node = victim.node if victim is not None else None
        receiver_after = self.key(receiver_user, now, usage_on(receiver, node))
        victim_before = self.key(victim_user, now)
        victim_after = (self.key(victim_user, now, usage_on(victim, node), -1.0)
                        if victim is not None else victim_before)
        if victim is None:
            clause = "none above"
        else:
            clause = refusal(receiver_after, victim_before, victim_after) or "room"
        figures = {"order": self.order.name, "measure": self.measure,
                   "receiver": receiver_user.name, "receiver_job": receiver.id,
                   "receiver_share": self.key(receiver_user, now)[1],
                   "receiver_share_after": receiver_after[1], "victim_user": victim_user.name,
                   "victim_share": victim_before[1], "victim_share_after": victim_after[1],
                   "machine": node.name if node is not None else None,
                   "victim_job": victim.id if victim is not None else None, "rule": clause}
        return Decision(DECLINE, receiver, node, self.name, _DECLINED[clause], figures)

    def _preemption(self, receiver_user: UserState, receiver: Task, victims: tuple[Task, ...],
                    receiver_after: Key, keys: dict[str, tuple[Key, Key]], now: float
                    ) -> Preemption:
        common = {"order": self.order.name, "measure": self.measure,
                  "receiver": receiver_user.name, "receiver_job": receiver.id,
                  "receiver_share": self.key(receiver_user, now)[1],
                  "receiver_share_after": receiver_after[1], "machine": victims[0].node.name}

        def figures(task: Task) -> dict[str, Any]:
            before, after = keys[task.user]
            return {**common, "victim_job": task.id, "victim_user": task.user,
                    "victim_share": before[1], "victim_share_after": after[1]}

        return preemption_of(receiver, victims[0], victims[1:], figures, _VACATE, _ALLOCATE)
