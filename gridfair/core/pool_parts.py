"""The parts of a pool: its nodes, tasks and users, and the constants they are indexed by
(`pool.Pool` keeps them current by events)."""

from __future__ import annotations

from collections import deque
from typing import Any

# Task states.
QUEUED, RUNNING, DONE, DROPPED, KILLED = range(5)
STATE_NAMES = ("queued", "running", "done", "dropped", "killed")

# Indexes of the per-user usage vector (`UserState.usage`) and of `Pool.capacity`.
CPUS, MEMORY, POWER, GPUS = range(4)
RESOURCE_NAMES = ("cpus", "memory", "power", "gpus")

# Free capacity below this is treated as none (capacities may be fractional).
EPSILON = 1e-9

#: A quantity from the input (cpus, memory, power, times), kept as given, int or float: the
#: compiled build (setup.py) would otherwise turn an int into a float, and outputs print it.
Number = int | float


class Node:
    """A machine (or slot) at run time. `power` is MFlops of the whole node's cpus; a
    partitionable machine is one node running as many tasks as its cpus, memory and GPUs hold.
    GPUs add nothing to power: they are a resource tasks ask for and users are charged for."""

    __slots__ = (
        "name", "owner", "power", "cpus", "memory", "gpus", "load", "power_per_cpu",
        "free_cpus", "free_memory", "free_gpus", "used_cpus", "used_memory", "used_gpus",
        "index", "ad",
    )

    def __init__(
        self,
        name: str,
        owner: str | None,
        power: Number,
        cpus: Number = 1.0,
        memory: Number = 0.0,
        load: Number = 0.0,
        ad: Any = None,
        *,
        gpus: Number = 0.0,
    ) -> None:
        self.name = name
        self.owner = owner
        self.power = power
        self.cpus = cpus
        self.memory = memory
        self.gpus = gpus
        self.load = load
        self.power_per_cpu = power / cpus
        self.free_cpus: Number = cpus
        self.free_memory: Number = memory
        self.free_gpus: Number = gpus
        # What runs here, as running sums (the exact fit test compares against them).
        self.used_cpus = 0.0
        self.used_memory = 0.0
        self.used_gpus = 0.0
        self.index = -1  # set by Pool.add_node: the stable tie-break
        self.ad = ad

    def __repr__(self) -> str:
        return f"Node({self.name!r}, owner={self.owner!r}, power={self.power:g})"


class Task:
    """A job (one task, or a parallel job's slots taken together) at run time.

    Exactly one of `work` (MFlop: run time depends on the node's power) and `duration`
    (seconds: fixed, as in trace-driven runs) drives its run time.
    """

    __slots__ = (
        "id", "user", "cpus", "memory", "gpus", "work", "duration", "submit_time", "deadline",
        "requested_cpus", "state", "node", "start_time", "first_start", "finish_time",
        "done_work", "lost_work", "preemptions", "epoch", "seq", "ad", "source_index",
    )

    def __init__(
        self,
        id: str,  # noqa: A002 - the job's id is its name everywhere in HTCondor
        user: str,
        submit_time: Number,
        *,
        cpus: Number = 1.0,
        memory: Number = 0.0,
        gpus: Number = 0.0,
        work: Number | None = None,
        duration: Number | None = None,
        deadline: Number | None = None,
        ad: Any = None,
        source_index: int = -1,
    ) -> None:
        self.id = id
        self.user = user
        self.cpus = cpus
        self.memory = memory
        self.gpus = gpus
        self.work = work
        self.duration = duration
        self.submit_time = submit_time
        self.deadline = deadline
        self.requested_cpus = cpus  # what the job asked for; `cpus` is what it is given
        self.state = QUEUED
        self.node: Node | None = None
        self.start_time: Number = 0.0  # start of the current run
        self.first_start: Number | None = None
        self.finish_time: Number | None = None
        self.done_work = 0.0  # work (MFlop, or seconds for duration tasks) kept across vacates
        self.lost_work = 0.0  # work thrown away by vacates without checkpointing
        self.preemptions = 0
        self.epoch = 0  # bumped on every stop: completion events of older runs are stale
        self.seq = -1  # set by Pool.submit: the stable tie-break
        self.ad = ad
        self.source_index = source_index  # position in the input workload, for output order

    def __repr__(self) -> str:
        return f"Task({self.id!r}, user={self.user!r}, state={STATE_NAMES[self.state]})"


class UserState:
    """Per-user totals, kept current by the pool's events."""

    __slots__ = (
        "name", "provided_power", "provided_nodes", "allocated_power", "running",
        "usage", "idle", "idle_count", "blocked", "index", "submitted", "deferred", "frontier",
    )

    def __init__(self, name: str, index: int) -> None:
        self.name = name
        self.provided_power = 0.0
        self.provided_nodes = 0
        self.allocated_power = 0.0
        self.running = 0  # running tasks (OSEP counts these as used nodes)
        self.usage = [0.0, 0.0, 0.0, 0.0]  # cpus, memory, power, gpus held now
        self.idle: list[tuple[Any, int, Task]] = []  # heap by the pool's task key
        self.idle_count = 0
        self.blocked = False  # nothing of its fits this cycle: skipped until the cycle ends
        self.index = index  # stable tie-break: order of first appearance
        self.submitted = 0
        # Queued tasks not yet made into Task objects (`Pool.submit_deferred`), oldest first,
        # flat as seq, handle, seq, handle, ... (no tuple per task); None until the first one.
        self.deferred: deque[int] | None = None
        # The last of them made into a Task: while it is in `idle`, every task still deferred
        # ranks after `idle`'s head, whatever else (a vacated task) joined the heap.
        self.frontier: Task | None = None

    @property
    def power_diff(self) -> float:
        """HOSEP's PowerDiff (Eq. 3); +inf for a user holding power it does not provide."""
        provided = self.provided_power  # `power_diff` inlined: policies read this per event
        if provided > 0:
            return (self.allocated_power - provided) / provided
        return float("inf") if self.allocated_power > 0 else 0.0

    @property
    def active(self) -> bool:
        """Wants a slot now: has an idle task in line (not only ones set aside by `Pool.park`)
        and is not blocked in this cycle."""
        return self.idle_count > 0 and not self.blocked and bool(self.idle)

    def __repr__(self) -> str:
        return f"UserState({self.name!r})"


def power_diff(allocated: float, provided: float) -> float:
    """PowerDiff = (Allocated - Provided) / Provided (HOSEP Eq. 3).

    A user who provides nothing has no entitlement: any use puts it infinitely above its share
    (first to be preempted), no use leaves it at 0 (never a receiver of preemption).
    """
    if provided > 0:
        return (allocated - provided) / provided
    return float("inf") if allocated > 0 else 0.0


def fifo_key(task: Task) -> float:
    """Queue order of a user's idle tasks: first submitted first."""
    return task.submit_time


def least_demand_key(task: Task) -> float:
    """HOSEP 3.3 (i): the task of least demand first (work, else duration x cpus)."""
    if task.work is not None:
        return task.work
    if not task.duration:
        # The same 0.0, not a new float a task: the daemon's tasks have no duration, and a
        # million queued ones held a million keys of 0.0 (24 MB).
        return 0.0
    return task.duration * task.cpus
