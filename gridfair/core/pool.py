"""The pool as incremental state: nodes, tasks and per-user totals, updated by events.

This is the one core the simulator and the daemon share. Events (submit, start, stop) update
per-user totals in O(1) and the free-node index in O(log n), and are passed on to listeners
(the policies), which keep their own incremental structures (sorted users, heaps, the live
tree). Nothing here ever walks the whole pool on an event.

Ties everywhere are broken by insertion order (`Node.index`, `Task.seq`), so a run is a pure
function of its inputs. The parts it keeps (nodes, tasks, users) are in `pool_parts`, imported
from here as before.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from operator import attrgetter, itemgetter
from typing import Any

from gridfair.core.native import mypyc_attr
from gridfair.core.pool_parts import (
    CPUS,
    DONE,
    DROPPED,
    EPSILON,
    GPUS,
    KILLED,
    MEMORY,
    POWER,
    QUEUED,
    RESOURCE_NAMES,
    RUNNING,
    STATE_NAMES,
    Node,
    Task,
    UserState,
    fifo_key,
    least_demand_key,
    power_diff,
)

_TASK_ID, _TASK_USER = attrgetter("id"), attrgetter("user")

#: The parts of a pool (`pool_parts`), imported from here by the rest of the code.
__all__ = [
    "QUEUED",
    "RUNNING",
    "DONE",
    "DROPPED",
    "KILLED",
    "STATE_NAMES",
    "CPUS",
    "MEMORY",
    "POWER",
    "GPUS",
    "RESOURCE_NAMES",
    "EPSILON",
    "Node",
    "Task",
    "UserState",
    "PoolListener",
    "power_diff",
    "fifo_key",
    "least_demand_key",
    "Matcher",
    "Pool",
]

@mypyc_attr(allow_interpreted_subclasses=True)  # every policy and recorder is one
class PoolListener:
    """What a policy hears from the pool. Every hook is O(1) for the pool to call."""

    def attach(self, pool: Pool) -> None:
        """Called once when the policy joins the pool, before any event."""

    def user_changed(self, user: UserState, now: float) -> None:
        """A user's totals, idle count or blocked flag changed."""

    def task_started(self, task: Task, now: float) -> None:
        """A task started on `task.node`."""

    def task_stopped(self, task: Task, now: float, node: Node) -> None:
        """A task left `node` (finished, vacated or killed; `task.state` says which)."""


Matcher = Callable[[Task, Node], bool]


class Pool:
    """Nodes, tasks and users, with per-user totals kept current by events."""

    def __init__(
        self,
        *,
        task_key: Callable[[Task], Any] = fifo_key,
        checkpointing: bool = False,
        matcher: Matcher | None = None,
        exact_accounting: bool = False,
    ) -> None:
        """`exact_accounting` is the SDRF authors' simulator's arithmetic: a task fits a node
        when its demand <= capacity - consumed, with no tolerance, and a user's usage is the
        running sum of its tasks' demands, never cleared when it drops to nothing."""
        self.exact_accounting = exact_accounting
        self.nodes: list[Node] = []
        self.nodes_by_name: dict[str, Node] = {}
        self.users: dict[str, UserState] = {}
        self.tasks: dict[str, Task] = {}
        self.task_key = task_key
        self.checkpointing = checkpointing
        self.matcher = matcher
        # Turns the handle of a deferred task into its Task: set by whoever submits deferred
        # tasks (`submit_deferred`).
        self.make_task: Callable[[int], Task] | None = None
        self.capacity = [0.0, 0.0, 0.0, 0.0]
        # Bumped whenever the capacity or the set of users changes (what entitlements and
        # shares are computed from), so a listener can tell it has nothing to recheck with
        # one comparison per event.
        self.generation = 0
        self.used = [0.0, 0.0, 0.0, 0.0]
        # The most cpus, memory and GPUs any one node has: a task asking for more can never
        # run here (`too_big`), and is never a reason to vacate.
        self.largest = [0.0, 0.0, 0.0]
        #: Tasks found too big for every node (`set_aside_if_too_big`), with why, as found;
        #: whoever reports them (the negotiator) takes them out.
        self.found_too_big: list[tuple[Task, str]] = []
        self.running = 0  # tasks running now
        #: Running tasks no preemption may take in this preemption phase, by seq, with why (a
        #: safety rule of the daemon's, `Negotiator`): the stages pass over them to the next
        #: victim (`vacatable`), so one protected job never shields the others.
        self.protected: dict[int, str] = {}
        # Nodes with free cpus as (-power per cpu, index): fastest first, then by index. A flat
        # sorted list: pools have up to thousands of nodes, where it beats a SortedList.
        self._free: list[tuple[float, int]] = []
        self._listeners: list[PoolListener] = []
        # Each hook's bound methods, of the listeners that override it (in listening order):
        # events skip the many no-op hooks.
        self._on_user_changed: list[Callable[[UserState, float], None]] = []
        self._on_task_started: list[Callable[[Task, float], None]] = []
        self._on_task_stopped: list[Callable[[Task, float, Node], None]] = []
        self._blocked: list[UserState] = []
        self._parked: list[tuple[UserState, Task]] = []
        self._seq = 0
        self._loaded_running: list[Task] = []  # what `load` started, in its order

    # ----------------------------------------------------------------- set-up
    def listen(self, listener: PoolListener) -> None:
        self._listeners.append(listener)
        for hook, methods in (("user_changed", self._on_user_changed),
                              ("task_started", self._on_task_started),
                              ("task_stopped", self._on_task_stopped)):
            if getattr(type(listener), hook) is not getattr(PoolListener, hook):
                methods.append(getattr(listener, hook))
        listener.attach(self)

    def close(self) -> None:
        """Let go of the listeners. A stage holds its pool and the pool holds the stage: a
        reference cycle that only the cyclic collector frees, pool and all. A daemon cycle
        that makes a pool per snapshot closes it when done, so it is freed on the spot."""
        self._listeners.clear()
        self._on_user_changed.clear()
        self._on_task_started.clear()
        self._on_task_stopped.clear()

    def user(self, name: str) -> UserState:
        """The user's state, created on first mention."""
        user = self.users.get(name)
        if user is None:
            user = self.users[name] = UserState(name, len(self.users))
            self.generation += 1
        return user

    def add_node(self, node: Node) -> Node:
        if node.name in self.nodes_by_name:
            raise ValueError(f"duplicate node name {node.name!r}")
        node.index = len(self.nodes)
        self.nodes.append(node)
        self.nodes_by_name[node.name] = node
        self.capacity[CPUS] += node.cpus
        self.capacity[MEMORY] += node.memory
        self.capacity[POWER] += node.power
        self.capacity[GPUS] += node.gpus
        self._note_size(node)
        self.generation += 1
        if node.owner is not None:
            owner = self.user(node.owner)
            owner.provided_power += node.power
            owner.provided_nodes += 1
            for user_changed in self._on_user_changed:
                user_changed(owner, 0.0)
        if node.free_cpus > EPSILON:
            insort(self._free, (-node.power_per_cpu, node.index))
        return node

    def load(self, nodes: Iterable[Node], queued: Iterable[Task],
             running: Iterable[tuple[Task, Node, float]], *,
             deferred: Sequence[str] = ()) -> None:
        """Fill an empty pool in one pass: the state that `add_node` for each node, `submit`
        for each queued task, then `submit_deferred` for the users in `deferred` (the i-th
        task is `make_task(i)`), then `submit` and `start` for each running one (on its node,
        at its start time), in these orders, would leave, but without calling listeners (none
        may listen yet) and with the free index sorted once instead of per node. Deferred
        tasks need each user's keys not to decrease in the order given (`submit_deferred`).

        For the daemon's kept pool, laid out again each cycle from the objects it keeps: totals
        are summed in the same order as those events would sum them, so they are equal to the
        last bit and decisions equal those on a pool built event by event. Heaps hold no stale
        entries (the event path may), which changes no `head`.
        """
        if self.nodes or self.tasks or self._listeners:
            raise ValueError("load needs an empty pool that nobody listens to")
        capacity = self.capacity
        for node in nodes:
            if node.name in self.nodes_by_name:
                raise ValueError(f"duplicate node name {node.name!r}")
            node.index = len(self.nodes)
            self.nodes.append(node)
            self.nodes_by_name[node.name] = node
            capacity[CPUS] += node.cpus
            capacity[MEMORY] += node.memory
            capacity[POWER] += node.power
            capacity[GPUS] += node.gpus
            self._note_size(node)
            self.generation += 1
            if node.owner is not None:
                owner = self.user(node.owner)
                owner.provided_power += node.power
                owner.provided_nodes += 1
        # `_enrol` and `_enqueue` for every queued task, the per-task steps left in Python kept
        # to the attributes a task must carry: the rest runs over all of them at once, as a
        # big pool has a million queued jobs to lay out every cycle.
        queued = list(queued)
        self.tasks.update(zip(map(_TASK_ID, queued), queued, strict=True))
        owners = list(map(_TASK_USER, queued))
        for name, tasks in Counter(owners).items():  # users made in order of first mention
            user = self.user(name)
            user.submitted += tasks
            user.idle_count += tasks
        appends = {name: user.idle.append for name, user in self.users.items()}
        task_key = self.task_key
        for seq, task in enumerate(queued, self._seq):  # one visit per task: they are many
            task.seq = seq
            task.state = QUEUED
            task.node = None
            appends[task.user]((task_key(task), seq, task))
        self._seq += len(queued)
        for user in self.users.values():
            heapq.heapify(user.idle)
        if deferred:
            self._load_deferred(deferred)
        running = list(running)
        self._loaded_running = [task for task, _, _ in running]  # for `announce`
        for task, node, started in running:
            user = self._enrol(task)
            task.state = RUNNING
            task.node = node
            # The free list is rebuilt once below, not kept up slot by slot as `_take` does.
            node.free_cpus -= task.cpus
            node.free_memory -= task.memory
            node.used_cpus += task.cpus
            node.used_memory += task.memory
            self._charge(user, task, node, started)
            if task.gpus:
                self._hold_gpus(user, node, task.gpus)
        self._free = sorted((-node.power_per_cpu, node.index) for node in self.nodes
                            if node.free_cpus > EPSILON)

    def _load_deferred(self, deferred: Sequence[str]) -> None:
        """`load`'s deferred tasks: a handle each in its user's queue, the first made now."""
        counts = Counter(deferred)
        appends: dict[str, Callable[[int], None]] = {}
        for name, tasks in counts.items():  # users made in order of first mention
            user = self.user(name)
            user.submitted += tasks
            user.idle_count += tasks
            if user.deferred is None:
                user.deferred = deque()
            appends[name] = user.deferred.append
        base = self._seq
        for handle, name in enumerate(deferred):  # one visit per task, as in `load`
            append = appends[name]
            append(base + handle if base else handle)  # its seq: in a fresh pool, the handle
            append(handle)
        self._seq += len(deferred)
        for name in counts:
            user = self.users[name]
            queue = user.deferred
            assert queue is not None
            self._materialise(user, queue.popleft(), queue.popleft())

    def announce(self, now: float) -> None:
        """Tell the listeners that joined a `load`ed pool what it holds: `task_started` for
        each running task (at its start) and then `user_changed` for each user, in the pool's
        orders. Enough for listeners whose state follows from the pool as it is now (rankings
        by current totals, running tasks by victim key); not for ones that integrate over the
        events' times."""
        if self._on_task_started:
            for task in self._loaded_running:
                for task_started in self._on_task_started:
                    task_started(task, task.start_time)
        for user in self.users.values():
            for user_changed in self._on_user_changed:
                user_changed(user, now)

    # ----------------------------------------------------------------- events
    def submit(self, task: Task, now: float) -> None:
        """A task arrives in its user's queue."""
        task.seq = self._seq
        self._seq += 1
        self.tasks[task.id] = task
        user = self.user(task.user)
        user.submitted += 1
        self._enqueue(user, task)
        for user_changed in self._on_user_changed:
            user_changed(user, now)

    def submit_deferred(self, user_name: str, handle: int, now: float) -> None:
        """A task arrives that stays a small handle until it reaches its user's queue head,
        where `make_task(handle)` makes it (with the seq it was given now).

        Same events and order as `submit`; only memory differs: a long backlog costs a
        handle, not a Task, per queued task. Valid for first-submitted-first queues
        (`fifo_key`) fed in submit order: then a deferred task never goes ahead of a task
        already in the queue, so the queue's head is always a Task."""
        seq = self._seq
        self._seq += 1
        user = self.user(user_name)
        user.submitted += 1
        user.idle_count += 1
        if user.idle:
            if user.deferred is None:
                user.deferred = deque()
            user.deferred.append(seq)
            user.deferred.append(handle)
        else:
            self._materialise(user, seq, handle)
        for user_changed in self._on_user_changed:
            user_changed(user, now)

    def start(self, task: Task, node: Node, now: float) -> None:
        """`task` starts on `node`; the caller has checked that it fits."""
        user = self.users[task.user]
        was_queued = task.state == QUEUED
        task.state = RUNNING
        if was_queued:
            user.idle_count -= 1
            self._drop_stale_heads(user)
        task.node = node
        self._take(node, task.cpus, task.memory)
        self._charge(user, task, node, now)
        if task.gpus:  # one test for all a task's GPUs touch: none, in a pool without them
            self._hold_gpus(user, node, task.gpus)
        for task_started in self._on_task_started:
            task_started(task, now)
        for user_changed in self._on_user_changed:
            user_changed(user, now)

    def finish(self, task: Task, now: float) -> None:
        """`task` completed."""
        task.finish_time = now
        self._stop(task, now, DONE)

    def vacate(self, task: Task, now: float) -> None:
        """`task` is evicted from its node and goes back to its user's queue."""
        task.preemptions += 1
        self._stop(task, now, QUEUED)

    def kill(self, task: Task, now: float) -> None:
        """`task` is terminated (a running job past its deadline) and will not run again."""
        task.finish_time = now
        self._stop(task, now, KILLED)

    def drop(self, task: Task, now: float) -> None:
        """A queued `task` is refused (admission control) and leaves the queue."""
        if task.state != QUEUED:
            raise ValueError(f"cannot drop {task!r}: it is not queued")
        user = self.users[task.user]
        task.state = DROPPED
        task.finish_time = now
        user.idle_count -= 1
        self._drop_stale_heads(user)
        for user_changed in self._on_user_changed:
            user_changed(user, now)

    def left_over(self) -> list[Task]:
        """Every task the pool still holds (deferred ones made into Tasks), in submit order."""
        for user in self.users.values():
            deferred = user.deferred
            while deferred:
                self._materialise(user, deferred.popleft(), deferred.popleft())
        return sorted(self.tasks.values(), key=lambda task: task.seq)

    def forget(self, task: Task) -> None:
        """Remove a task that has ended from the index (the daemon forgets finished jobs)."""
        if task.state in (QUEUED, RUNNING):
            raise ValueError(f"cannot forget {task!r}: it has not ended")
        self.tasks.pop(task.id, None)

    # ------------------------------------------------------- negotiation help
    def head(self, user: UserState) -> Task | None:
        """The user's next idle task by the pool's task key (parked ones aside), or None."""
        return user.idle[0][2] if user.idle_count > 0 and user.idle else None

    def vacatable(self, tasks: Iterable[Task]) -> Iterator[Task]:
        """`tasks`, less those protected from preemption now (`protected`)."""
        protected = self.protected
        if not protected:
            return iter(tasks)
        return filter(lambda task: task.seq not in protected, tasks)

    def has_free(self) -> bool:
        return bool(self._free)

    def free_nodes(self) -> Iterable[Node]:
        """Nodes with free cpus, fastest first (ties by index)."""
        return map(self.nodes.__getitem__, map(itemgetter(1), self._free))

    def best_node(self, task: Task) -> Node | None:
        """The fastest node with room for `task` that matches it, or None."""
        nodes = self.nodes
        matcher = self.matcher
        if task.gpus:
            return self._best_gpu_node(task)
        if self.exact_accounting:  # demand <= capacity - consumed, no tolerance
            cpus, memory = task.cpus, task.memory
            for _, index in self._free:
                node = nodes[index]
                if cpus <= node.cpus - node.used_cpus and \
                        memory <= node.memory - node.used_memory and (
                            matcher is None or matcher(task, node)):
                    return node
            return None
        cpus = task.cpus - EPSILON
        memory = task.memory - EPSILON
        for _, index in self._free:
            node = nodes[index]
            if node.free_cpus >= cpus and node.free_memory >= memory and (
                matcher is None or matcher(task, node)
            ):
                return node
        return None

    def _best_gpu_node(self, task: Task) -> Node | None:
        """`best_node` for a task asking for GPUs, apart so that a pool without them pays
        nothing for them where every allocation passes."""
        return next((node for node in self.free_nodes() if self.fits_free(task, node)), None)

    def fits_free(self, task: Task, node: Node) -> bool:
        """Whether `task` fits what is free on `node` now (the exact test of the SDRF
        authors' arithmetic, else with `EPSILON`'s tolerance), Requirements included."""
        if self.exact_accounting:
            fits = (task.cpus <= node.cpus - node.used_cpus
                    and task.memory <= node.memory - node.used_memory
                    and task.gpus <= node.gpus - node.used_gpus)
        else:
            fits = (node.free_cpus >= task.cpus - EPSILON
                    and node.free_memory >= task.memory - EPSILON
                    and node.free_gpus >= task.gpus - EPSILON)
        return fits and (self.matcher is None or self.matcher(task, node))

    def room(self, node: Node) -> tuple[float, float, float]:
        """What is free on `node` (cpus, memory, GPUs) as the fit tests count it: capacity
        minus what runs there under the SDRF authors' arithmetic, else the running free."""
        if self.exact_accounting:
            return (node.cpus - node.used_cpus, node.memory - node.used_memory,
                    node.gpus - node.used_gpus)
        return (node.free_cpus, node.free_memory, node.free_gpus)

    @property
    def fit_tolerance(self) -> float:
        """How much a fit may fall short by: none in the SDRF authors' arithmetic."""
        return 0.0 if self.exact_accounting else EPSILON

    def too_big(self, task: Task) -> str | None:
        """Why no node of the pool could ever hold `task` (it asks for more cpus, memory or
        GPUs than the largest node has), or None."""
        largest = self.largest
        if task.cpus <= largest[0] and task.memory <= largest[1] and task.gpus <= largest[2]:
            return None  # what nearly every task is told, as cheaply as possible
        tolerance = self.fit_tolerance
        for name, asked, most in zip(("cpus", "MiB of memory", "GPUs"),
                                     (task.cpus, task.memory, task.gpus), self.largest,
                                     strict=True):
            if asked - tolerance > most:
                return f"asks for {asked:g} {name}; the largest machine has {most:g}"
        return None

    def set_aside_if_too_big(self, user: UserState, now: float) -> bool:
        """If the user's next idle task is too big for every node, set it aside (`park`,
        until `unblock_all`), list it in `found_too_big` and return True. The negotiator's
        free allocation asks this of a task that fits no free node, and a preemption stage of a
        receiver it found no victim for: such a task is never a reason to vacate or to stop
        allocating, and must not stop either from looking at the next one."""
        task = self.head(user)
        reason = self.too_big(task) if task is not None else None
        if task is None or reason is None:
            return False
        self.found_too_big.append((task, reason))
        self.park(user, now)
        return True

    def fits_after_vacate(self, task: Task, victim: Task) -> bool:
        """Whether `task` fits on the victim's node once the victim has left it."""
        node = victim.node
        assert node is not None
        return (
            node.free_cpus + victim.cpus >= task.cpus - EPSILON
            and node.free_memory + victim.memory >= task.memory - EPSILON
            and node.free_gpus + victim.gpus >= task.gpus - EPSILON
            and (self.matcher is None or self.matcher(task, node))
        )

    def block(self, user: UserState, now: float) -> None:
        """Nothing of the user's fits now: skip it until `unblock_all`."""
        user.blocked = True
        self._blocked.append(user)
        for user_changed in self._on_user_changed:
            user_changed(user, now)

    def park(self, user: UserState, now: float) -> Task | None:
        """Set the user's head task aside until `unblock_all` (it fits no free node now), so
        its later tasks, which may fit, get their turn; returns the new head, or None.

        This is what keeps one unmatchable job from starving a user's other jobs (HTCondor
        negotiates per autocluster for the same reason). The task stays queued and counted.
        """
        task = heapq.heappop(user.idle)[2]
        self._parked.append((user, task))
        if task is user.frontier and user.deferred:
            self._materialise(user, user.deferred.popleft(), user.deferred.popleft())
        self._drop_stale_heads(user)
        for user_changed in self._on_user_changed:  # its head, which orders may rank by, moved
            user_changed(user, now)
        return self.head(user)

    def unblock_all(self, now: float) -> None:
        """End of a negotiation phase: blocked users are active again and parked tasks return
        to their queues."""
        if not self._blocked and not self._parked:
            return  # the common case, once per simulated event
        changed = {user.index: user for user in self._blocked}
        for user in self._blocked:
            user.blocked = False
        for user, task in self._parked:
            if task.state == QUEUED:  # admission may have dropped it meanwhile
                heapq.heappush(user.idle, (self.task_key(task), task.seq, task))
                changed[user.index] = user
        self._blocked.clear()
        self._parked.clear()
        for user in changed.values():
            for user_changed in self._on_user_changed:
                user_changed(user, now)

    def lost_work_if_vacated(self, task: Task, now: float) -> float:
        """OSEP's omega: the computation a vacate would throw away (seconds of running).

        With checkpointing on, a vacate keeps the work done (the task checkpoints when it is
        vacated), so nothing is lost.
        """
        return 0.0 if self.checkpointing else now - task.start_time

    # ------------------------------------------------------------- internals
    def _note_size(self, node: Node) -> None:
        largest = self.largest
        largest[0] = max(largest[0], node.cpus)
        largest[1] = max(largest[1], node.memory)
        largest[2] = max(largest[2], node.gpus)

    def _enqueue(self, user: UserState, task: Task) -> None:
        task.state = QUEUED
        task.node = None
        heapq.heappush(user.idle, (self.task_key(task), task.seq, task))
        user.idle_count += 1

    def _drop_stale_heads(self, user: UserState) -> None:
        """Pop heap heads that are no longer queued (started, dropped) - lazy deletion; the
        oldest deferred task is made when the last one made leaves the heap, or the heap
        empties (`UserState.frontier`)."""
        idle = user.idle
        deferred = user.deferred
        while idle and idle[0][2].state != QUEUED:
            if heapq.heappop(idle)[2] is user.frontier and deferred:
                self._materialise(user, deferred.popleft(), deferred.popleft())
        if user.idle_count == 0:
            idle.clear()
        elif not idle and deferred:
            self._materialise(user, deferred.popleft(), deferred.popleft())

    def _materialise(self, user: UserState, seq: int, handle: int) -> None:
        """A deferred task becomes a Task at the head of its user's queue."""
        make_task = self.make_task
        assert make_task is not None  # set by whoever submits deferred tasks
        task = make_task(handle)
        task.seq = seq
        self.tasks[task.id] = task
        user.frontier = task
        heapq.heappush(user.idle, (self.task_key(task), seq, task))

    def _enrol(self, task: Task) -> UserState:
        """Give a `load`ed task its sequence number and count it as its user's."""
        task.seq = self._seq
        self._seq += 1
        self.tasks[task.id] = task
        user = self.users.get(task.user) or self.user(task.user)
        user.submitted += 1
        return user

    def _charge(self, user: UserState, task: Task, node: Node, started: float) -> None:
        """Count `task`, started on `node` at `started`, in its user's and the pool's totals."""
        task.start_time = started
        if task.first_start is None:
            task.first_start = started
        cpus = task.cpus
        memory = task.memory
        power = node.power_per_cpu * cpus
        user.allocated_power += power
        user.running += 1
        self.running += 1
        usage = user.usage
        usage[CPUS] += cpus
        usage[MEMORY] += memory
        usage[POWER] += power
        used = self.used
        used[CPUS] += cpus
        used[MEMORY] += memory
        used[POWER] += power

    def _hold_gpus(self, user: UserState, node: Node, gpus: float) -> None:
        """`gpus` more GPUs held on `node` by `user` (fewer, when negative)."""
        node.free_gpus -= gpus
        node.used_gpus += gpus
        user.usage[GPUS] += gpus
        self.used[GPUS] += gpus

    def _take(self, node: Node, cpus: float, memory: float) -> None:
        was_free = node.free_cpus > EPSILON
        node.free_cpus -= cpus
        node.free_memory -= memory
        node.used_cpus += cpus
        node.used_memory += memory
        if was_free and node.free_cpus <= EPSILON:
            free = self._free
            del free[bisect_left(free, (-node.power_per_cpu, node.index))]

    def _give_back(self, node: Node, cpus: float, memory: float) -> None:
        was_free = node.free_cpus > EPSILON
        node.free_cpus += cpus
        node.free_memory += memory
        node.used_cpus -= cpus
        node.used_memory -= memory
        if not was_free and node.free_cpus > EPSILON:
            insort(self._free, (-node.power_per_cpu, node.index))

    def _stop(self, task: Task, now: float, new_state: int) -> None:
        if task.state != RUNNING:
            raise ValueError(f"cannot stop {task!r}: it is not running")
        node = task.node
        assert node is not None
        user = self.users[task.user]
        cpus = task.cpus
        memory = task.memory
        self._give_back(node, cpus, memory)
        power = node.power_per_cpu * cpus
        user.allocated_power -= power
        user.running -= 1
        self.running -= 1
        usage = user.usage
        usage[CPUS] -= cpus
        usage[MEMORY] -= memory
        usage[POWER] -= power
        used = self.used
        if task.gpus:
            self._hold_gpus(user, node, -task.gpus)
        if user.running == 0 and not self.exact_accounting:
            # Clear float drift: an idle user holds exactly nothing.
            user.allocated_power = 0.0
            usage[CPUS] = usage[MEMORY] = usage[POWER] = usage[GPUS] = 0.0
        used[CPUS] -= cpus
        used[MEMORY] -= memory
        used[POWER] -= power
        task.epoch += 1
        if new_state == QUEUED:
            self._enqueue(user, task)
        else:
            task.state = new_state
            task.node = None
        for task_stopped in self._on_task_stopped:
            task_stopped(task, now, node)
        for user_changed in self._on_user_changed:
            user_changed(user, now)
