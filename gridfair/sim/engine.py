"""The discrete-event simulator: arrivals, negotiation, execution, completion, preemption.

A tiny event loop in the manner of SimPy's core: one heap of `(time, kind, seq, ...)` entries,
so events at the same time run in a fixed order (completions, then deadline checks, then
negotiation) and equal-kind events in the order they were scheduled. Arrivals are not put on
the heap: the workload is merged in as it comes, which keeps the heap as small as the number of
running tasks.

Streaming: the workload is a list (sorted once by submit time, stably) or any iterable that
yields tasks in submit order (checked; out of order is an `InputError`), pulled one arrival
ahead. With `keep_tasks=False` a task leaves memory when it ends (done, killed or dropped): it is
handed to `on_task_done` (metrics, records), forgotten by the pool, and not kept in the result;
tasks still queued at the end are handed over then (in submit order). Memory then grows with
the running and queued tasks, not with the workload; and with a `DeferredWorkload` (a trace
repeated end to end) a queued task behind its user's queue head is kept as one integer
(`Pool.submit_deferred`) and made into a Task when it reaches the head, so a backlog of
millions of tasks costs tens of bytes a task, not hundreds. Streaming is the `batch` loop's;
`sequential` arrivals take the workload as a list and keep their tasks.

The simulator drives the same `Negotiator` and `Pool` as the daemon: it only turns the
workload into submit events and the negotiator's decisions into completion times.

Execution model: a task of `work` MFlop runs at `power_per_cpu x cpus x (1 - load)` of its
node; a task with a `duration` runs for that many seconds wherever it runs. A vacate without
checkpointing throws the current run's progress away (`Task.lost_work`) and the task starts over;
with checkpointing it resumes where it stopped. An optional vacate delay holds the freed node's
new task back for that long (the victim's clean-up time), and an optional transfer delay (iSPD
links) holds a task back while its input reaches the node; the node is taken meanwhile, and a
vacate during either delay loses no computation.

Claim reuse (`claim_worklife`, HTCondor's CLAIM_WORKLIFE; off by default): a finished task's
resources go straight to its user's next waiting task when that asks for no more, with no
negotiation, while the claim is younger than the work life (`_ClaimReuse`). A pool's history
replayed under HTCondor's priority needs it: with claims reused, HTCondor keeps a slot with
its submitter from job to job.

The run's options are one `EngineOptions` (`engine_options.py`: modes as enums, checked when
made); each arrival semantics is a loop of its own (`_BatchLoop`, `_SequentialLoop`), chosen
once when the simulation is made.

Arrival semantics (`arrivals`). `batch` (the default, and the daemon's way): all that happens
at one instant is applied, then one negotiation cycle decides everything it can.
`sequential` reproduces the published simulator, iSPD (the HOSEP paper's figures; its
`CS_Mestre` event loop): same-time arrivals are taken one at a time in submit order; an
arrival wakes the negotiator only when no task was waiting; a negotiation event makes at most
one decision (an allocation, or a preemption when no free node is given out), and the next one
is chained after it, at the same time, while work waits; a completion wakes the negotiator
when work waits. At equal times completions and chained negotiations come before arrivals.

`status_refresh` (sequential only; iSPD 2014's HOSEP refreshes every 15 s) adds iSPD's
periodic machine status: its HOSEP sees a machine's state only through status messages sent
every `status_refresh` seconds (at S, 2S, ..., after everything else at that instant). A
machine given a task, by allocation or preemption, is blocked, uncertain at the next refresh
and known free or busy only at the one after; until then it is neither a free machine nor a
preemption victim, even if its task has ended. A refresh wakes no negotiation.

`same_instant` (sequential only) is the order of the events of one instant: `ordered` (the
default) is the loop above; `ispd2014` replays iSPD 2014's own event list (`ispd_events`), a
Java binary heap keyed by time alone in which every hop of a task or a message is an event,
so that same-time arrivals, dispatches and completions interleave as iSPD's do.
"""

from __future__ import annotations

import heapq
import math
import time as wallclock
from abc import abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any

from gridfair.core.native import mypyc_attr
from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import (
    EPSILON,
    QUEUED,
    RUNNING,
    Node,
    Pool,
    PoolListener,
    Task,
    fifo_key,
)
from gridfair.core.stages import ALLOCATE, DROP, KILL, Decision
from gridfair.errors import InputError
from gridfair.sim.engine_options import (
    ARRIVALS,
    DEFAULT_ENGINE,
    SAME_INSTANT_ORDERS,
    EngineOptions,
)
from gridfair.sim.ispd_events import HeldMachines, IspdEventList

# Event kinds, in the order they run at equal times (a status refresh after arrivals too).
_FINISH, _DEADLINE, _NEGOTIATE, _REFRESH = range(4)

#: Re-exported: the command line and sweeps offer them as choices.
__all__ = ["ARRIVALS", "SAME_INSTANT_ORDERS", "EngineOptions", "Simulation", "SimulationResult"]


@dataclass
class SimulationResult:
    """What a run produced: the tasks with their times (none when they were streamed out as
    they ended), and run-wide counters."""

    tasks: list[Task]
    nodes: list[Node]
    makespan: float
    busy_cpu_seconds: float  # cpu-seconds nodes spent running tasks, lost work included
    events: int
    negotiations: int
    vacates: int
    wall_seconds: float
    decisions: list[Decision] = field(default_factory=list)
    submitted: int = 0  # tasks that arrived (len(tasks) when they are kept)
    #: Tasks too big for every node (they never run), each once, with why.
    unplaceable: list[tuple[Task, str]] = field(default_factory=list)


def run_rate(task: Task, node: Node) -> float:
    """Progress per second of `task` on `node`: MFlops for work tasks, 1 for timed ones."""
    if task.work is None:
        return 1.0
    return node.power_per_cpu * task.cpus * (1.0 - node.load)


def task_size(task: Task) -> float:
    """All the progress a task needs: MFlop for work tasks, seconds for timed ones."""
    return task.work if task.work is not None else (task.duration or 0.0)


@mypyc_attr(allow_interpreted_subclasses=True)
class DeferredWorkload(Iterable[Task]):
    """A streamed workload that can also hand out its tasks as small handles, made into Tasks
    only when they reach the head of their user's queue (`Pool.submit_deferred`): a backlog
    of millions of queued tasks then costs a handle each, not a Task.

    `arrivals()` yields (submit time, user, handle) in the order iteration yields the tasks,
    and `make_task(handle)` makes the same Task that iteration yields there (a fresh one)."""

    @abstractmethod
    def arrivals(self) -> Iterator[tuple[float, str, int]]:
        """(submit time, user, handle) of each task, in submit order."""

    @abstractmethod
    def make_task(self, handle: int) -> Task:
        """A fresh Task for `handle`."""


def _taken(tasks: list[Task]) -> Iterator[Task]:
    """The tasks in order, each let go by the list as it is taken."""
    tasks.reverse()
    take = tasks.pop
    while tasks:
        yield take()


class _Execution(PoolListener):
    """Turns the pool's start and stop events into completion events and accounting."""

    def __init__(self, simulation: Simulation) -> None:
        self.heap: list[tuple] = []
        self.seq = 0
        self.busy = 0.0
        self.vacates = 0
        self.latest_end = 0.0
        self.checkpointing = simulation.pool.checkpointing
        self.vacate_delay = simulation.engine.vacate_delay
        self.watch_deadlines = simulation.negotiator.admit is not None
        self.transfer_delay = simulation.transfer_delay
        # Node index -> time until which a vacated task is still cleaning up there.
        self.cleaning_until: dict[int, float] = {}
        # Task seq -> when its computation begins, for runs that wait before computing.
        self.computing_from: dict[int, float] = {}

    def task_started(self, task: Task, now: float) -> None:
        node = task.node
        assert node is not None  # a started task is on its node
        start = now
        if self.vacate_delay:
            start = max(now, self.cleaning_until.get(node.index, now))
        if self.transfer_delay is not None:
            start += self.transfer_delay(task, node)
        if start != now:
            self.computing_from[task.seq] = start
        # task_size and run_rate, inlined (this runs for every start), same arithmetic.
        work = task.work
        if work is None:
            end = start + ((task.duration or 0.0) - task.done_work)
        else:
            end = start + (work - task.done_work) / (
                node.power_per_cpu * task.cpus * (1.0 - node.load))
        heapq.heappush(self.heap, (end, _FINISH, self.seq, task, task.epoch))
        self.seq += 1
        if self.watch_deadlines and task.deadline is not None and task.deadline < end:
            # A task started after its deadline is checked at once: time never runs backwards.
            check_at = max(task.deadline, now)
            heapq.heappush(self.heap, (check_at, _DEADLINE, self.seq, task, task.epoch))
            self.seq += 1
        if end > self.latest_end:
            self.latest_end = end

    def task_stopped(self, task: Task, now: float, node: Node) -> None:
        ran = now - task.start_time
        self.busy += ran * task.cpus
        computed = ran
        if self.computing_from:
            computed = max(now - self.computing_from.pop(task.seq, task.start_time), 0.0)
        if task.state == QUEUED:  # vacated: keep or lose the run's progress
            self.vacates += 1
            progressed = computed * run_rate(task, node)
            if self.checkpointing:
                task.done_work += progressed
            else:
                task.lost_work += progressed
            if self.vacate_delay:
                self.cleaning_until[node.index] = now + self.vacate_delay



class _StatusRefresh(HeldMachines):
    """iSPD's periodic machine status (`status_refresh`, module docstring): a machine that
    starts a task is held until the second refresh after; held machines fit no task (the
    pool's matcher says no), so they are neither given out nor vacated."""

    def __init__(self, pool, heap: list[tuple], period: float) -> None:
        super().__init__(pool)
        self.heap = heap
        self.period = period

    def task_started(self, task: Task, now: float) -> None:
        # The first refresh at or after now (refreshes run after all else at their instant,
        # so one at `now` comes after this start), and the one after it.
        release = self.period * (max(1, math.ceil(now / self.period)) + 1)
        node = task.node
        assert node is not None  # a started task is on its node
        index = node.index
        if release > self.held.get(index, -math.inf):
            self.held[index] = release
            heapq.heappush(self.heap, (release, _REFRESH, index, None, 0))

    def refreshed(self, index: int, now: float) -> None:
        if self.held.get(index) == now:
            del self.held[index]


class _ClaimReuse:
    """HTCondor's claim reuse (`CLAIM_WORKLIFE`): when a task finishes, its user's next
    waiting task starts at once on the resources it frees, with no negotiation, if it asks
    for no more than the finished one (the claimed slot's size) and the claim is younger than
    the work life (negative: forever). A claim begins at a negotiated start and passes from
    task to task while it is reused."""

    def __init__(self, pool: Pool, worklife: float) -> None:
        self.pool = pool
        self.worklife = worklife
        # Task seq -> (its claim's beginning, the start of the run that holds it).
        self.claims: dict[int, tuple[float, float]] = {}

    def finished(self, task: Task, node: Node, now: float) -> Decision | None:
        """Start the user's next task on the claim `task` held, if the claim allows."""
        began, run = self.claims.pop(task.seq, (task.start_time, task.start_time))
        if run != task.start_time:
            began = task.start_time  # the claim of an earlier run, since vacated
        if 0 <= self.worklife <= now - began:
            return None
        pool = self.pool
        following = pool.head(pool.users[task.user])
        if following is None or following.cpus > task.cpus + EPSILON or (
                following.memory > task.memory + EPSILON) or (
                pool.matcher is not None and not pool.matcher(following, node)):
            return None
        pool.start(following, node, now)
        self.claims[following.seq] = (began, now)
        return Decision(ALLOCATE, following, node, "claim-reuse",
                        "{job} of {user} onto {machine}: the claim of {finished}, which "
                        "finished, is reused (claim {age:.0f} s old)",
                        {"job": following.id, "user": following.user, "machine": node.name,
                         "finished": task.id, "age": now - began})


class Simulation:
    """Runs a workload through a negotiator to completion."""

    def __init__(
        self,
        negotiator: Negotiator,
        tasks: Iterable[Task],
        engine: EngineOptions = DEFAULT_ENGINE,
        *,
        keep_decisions: bool = False,
        progress: Callable[[int, int], None] | None = None,
        transfer_delay: Callable[[Task, Node], float] | None = None,
        on_cycle: Callable[[float], None] | None = None,
        keep_tasks: bool = True,
        on_task_done: Callable[[Task], None] | None = None,
    ) -> None:
        """`engine` says how the run goes (checked when it was made); the rest, what the run
        keeps and whom it tells."""
        if engine.sequential and not keep_tasks:
            raise InputError("sequential arrivals keep their tasks: they do not stream")
        if engine.ispd_event_list and (engine.vacate_delay or transfer_delay is not None):
            raise InputError("iSPD's event list (--same-instant ispd2014) models links that "
                             "take no time and no vacate delay")
        self.negotiator = negotiator
        self.pool = negotiator.pool
        self.total = 0  # the workload's length, if known before the run
        if isinstance(tasks, Sequence):
            if not tasks:
                raise InputError("the workload has no tasks")
            # Stable: equal submit times keep the workload's order.
            ordered = sorted(tasks, key=lambda task: task.submit_time)
            self.total = len(ordered)
            self.tasks: list[Task] | None = ordered if keep_tasks else None
            self.incoming: Iterator[Task] = iter(ordered) if keep_tasks else _taken(ordered)
        elif engine.sequential:
            raise InputError("sequential arrivals take the workload as a list, not a stream")
        else:
            self.tasks = None  # a stream: its length is known at its end, or if it is sized
            self.total = len(tasks) if isinstance(tasks, Sized) else 0
            self.incoming = iter(tasks)
        # A list is not kept: a streamed run lets each task go when it ends.
        self.workload = tasks if isinstance(tasks, DeferredWorkload) else None
        self.keep_tasks = keep_tasks
        self.on_task_done = on_task_done
        self.engine = engine
        self.keep_decisions = keep_decisions
        self.progress = progress
        self.transfer_delay = transfer_delay
        self.on_cycle = on_cycle  # told the time after every negotiation cycle (records)
        self.claims = (_ClaimReuse(self.pool, engine.claim_worklife)
                       if engine.claim_worklife is not None else None)
        # The loop, chosen once.
        self.loop = (_SequentialLoop if engine.sequential else _BatchLoop)(self)

    def run(self) -> SimulationResult:
        return self.loop.run(wallclock.perf_counter())

    def deferrable(self) -> bool:
        """Whether arrivals may stay handles until they reach their user's queue head
        (`Pool.submit_deferred`): a streamed run (no task kept) of a `DeferredWorkload` with
        first-submitted-first queues and no admission stage (which reads every task on
        submit)."""
        return (isinstance(self.workload, DeferredWorkload) and not self.keep_tasks
                and self.pool.task_key is fifo_key and self.negotiator.admit is None)

    @staticmethod
    def _makespan(execution: _Execution, tasks: Sequence[Task]) -> float:
        end_times = [task.finish_time for task in tasks if task.finish_time is not None]
        return max(end_times, default=execution.latest_end) - tasks[0].submit_time

    def _result(self, execution: _Execution, tasks: list[Task], makespan: float,
                submitted: int, events: int, negotiations: int, kept: list[Decision],
                started: float) -> SimulationResult:
        if self.progress is not None:
            self.progress(submitted, submitted)
        return SimulationResult(
            tasks=tasks,
            nodes=self.pool.nodes,
            makespan=makespan,
            busy_cpu_seconds=execution.busy,
            events=events,
            negotiations=negotiations,
            vacates=execution.vacates,
            wall_seconds=wallclock.perf_counter() - started,
            decisions=kept,
            submitted=submitted,
            unplaceable=self.negotiator.reported,
        )


class _BatchLoop:
    """The batch loop (`Arrivals.BATCH`, module docstring): the hot path, with local aliases
    for what it calls per event."""

    def __init__(self, simulation: Simulation) -> None:
        self.simulation = simulation

    def run(self, started: float) -> SimulationResult:
        sim = self.simulation
        pool = sim.pool
        negotiator = sim.negotiator
        admit = negotiator.admit
        execution = _Execution(sim)
        pool.listen(execution)
        heap = execution.heap
        pop = heapq.heappop
        infinity = float("inf")
        arrivals, time_of, id_of, submit = self._arrivals()
        kept_tasks: list[Task] = []
        keep_tasks = sim.keep_tasks
        on_task_done = sim.on_task_done
        forget = pool.forget
        last_end = -infinity  # the latest end of a task streamed out
        # The next arrival, pulled one ahead; its time is endless after the last one, so the
        # loop needs no end-of-workload test per event.
        next_task = next(arrivals, None)
        if next_task is None:
            raise InputError("the workload has no tasks")
        first_submit = next_time = time_of(next_task)
        known_total = sim.total
        submitted = 0
        finish = pool.finish
        cycle = negotiator.cycle
        events = negotiations = finished = 0
        kept: list[Decision] = []
        keep = sim.keep_decisions
        interval = sim.engine.interval
        progress = sim.progress
        on_cycle = sim.on_cycle
        claims = sim.claims
        report_every = max(known_total // 100, 1) if known_total else 100_000
        if interval is not None:
            heapq.heappush(heap, (first_submit, _NEGOTIATE, -1, None, 0))

        def task_ended(task: Task) -> None:
            """A task ended (done, killed, dropped): out of memory, into the records."""
            nonlocal last_end
            finish_time = task.finish_time
            assert finish_time is not None  # an ended task has its end
            if finish_time > last_end:
                last_end = finish_time
            forget(task)
            if on_task_done is not None:
                on_task_done(task)

        while next_task is not None or heap:
            # The next moment anything happens: an arrival or the heap's head.
            now = heap[0][0] if heap and heap[0][0] <= next_time else next_time
            changed = False
            negotiate_now = interval is None
            # Events due now; completions come before arrivals at equal times, so capacity
            # freed now is seen by the tasks arriving now.
            while heap and heap[0][0] == now:
                _, kind, _, task, epoch = pop(heap)
                events += 1
                if kind == _NEGOTIATE:
                    negotiate_now = True
                    continue
                if task.epoch != epoch or task.state != RUNNING:
                    continue  # an event of a run that has since been vacated
                if kind == _FINISH:
                    node = task.node
                    finish(task, now)
                    finished += 1
                    changed = True
                    if claims is not None:
                        reused = claims.finished(task, node, now)
                        if reused is not None and keep:
                            kept.append(reused)
                    if not keep_tasks:
                        task_ended(task)
                    if progress is not None and finished % report_every == 0:
                        progress(finished, known_total or submitted)
                else:  # _DEADLINE: only a run with an admission stage has them
                    assert admit is not None
                    decision = admit.deadline_passed(task, now)
                    if decision is not None and decision.kind == KILL:
                        pool.kill(task, now)
                        changed = True
                        if not keep_tasks:
                            task_ended(task)
                        if keep:
                            kept.append(decision)
            while next_time == now:
                task = next_task
                assert task is not None  # next_time is endless after the last arrival
                next_task = next(arrivals, None)
                if next_task is None:
                    next_time = infinity
                else:
                    next_time = time_of(next_task)
                    if next_time < now:
                        raise InputError(
                            f"the workload is not in submit order: task {id_of(next_task)} is "
                            f"submitted at {next_time:g}, after task {id_of(task)} at {now:g}")
                submitted += 1
                if keep_tasks:
                    kept_tasks.append(task)
                events += 1
                decision = submit(task, now)
                if decision is not None:
                    if keep:
                        kept.append(decision)
                    if not keep_tasks and decision.kind == DROP:
                        task_ended(task)
                changed = True
            if negotiate_now and (changed or interval is not None):
                negotiations += 1
                decisions = cycle(now)
                if keep:
                    kept.extend(decisions)
                if admit is not None and not keep_tasks:  # only admission drops or kills
                    for decision in decisions:
                        if decision.kind in (DROP, KILL):
                            task_ended(decision.task)
                if on_cycle is not None:
                    on_cycle(now)
                # Periodic negotiation goes on while anything can still change: arrivals to
                # come or tasks running. Idle work with neither can never start.
                if interval is not None and (next_task is not None or pool.running):
                    heapq.heappush(heap, (now + interval, _NEGOTIATE, -1, None, 0))

        if keep_tasks:
            end_times = [task.finish_time for task in kept_tasks if task.finish_time is not None]
            makespan = max(end_times, default=execution.latest_end) - first_submit
        else:
            # Tasks never started (nothing could run them) are still in the pool: hand them out.
            for task in pool.left_over():
                if on_task_done is not None:
                    on_task_done(task)
            makespan = (last_end if last_end > -infinity else execution.latest_end) - first_submit
        return sim._result(execution, kept_tasks, makespan, submitted, events, negotiations,
                            kept, started)

    def _arrivals(self) -> tuple[Iterator[Any], Callable[[Any], float], Callable[[Any], str],
                                 Callable[[Any, float], Decision | None]]:
        """The batch loop's arrivals: an iterator of items, and an item's submit time, task id
        and how it is submitted. Items are Tasks, or a `DeferredWorkload`'s arrivals when the
        run may defer them (`deferrable`)."""
        sim = self.simulation
        workload = sim.workload
        if not sim.deferrable():
            return sim.incoming, attrgetter("submit_time"), attrgetter("id"), \
                sim.negotiator.submit
        assert workload is not None  # deferrable
        pool = sim.pool
        pool.make_task = make_task = workload.make_task
        submit_deferred = pool.submit_deferred

        def submit(arrival: tuple[float, str, int], now: float) -> None:
            submit_deferred(arrival[1], arrival[2], now)

        return workload.arrivals(), itemgetter(0), lambda arrival: make_task(arrival[2]).id, \
            submit


class _SequentialLoop:
    """The published simulator's event loop (`Arrivals.SEQUENTIAL`, module docstring), or
    iSPD 2014's event list (`SameInstant.ISPD2014`). Not the hot path: it favours plain code
    over the batch loop's local aliases."""

    def __init__(self, simulation: Simulation) -> None:
        self.simulation = simulation

    def run(self, started: float) -> SimulationResult:
        sim = self.simulation
        pool, negotiator, tasks = sim.pool, sim.negotiator, sim.tasks
        assert tasks is not None  # sequential arrivals keep their tasks (checked when made)
        status_refresh = sim.engine.status_refresh
        execution = _Execution(sim)
        pool.listen(execution)
        if sim.engine.ispd_event_list:
            events, negotiations, decisions = IspdEventList(
                negotiator, tasks, status_refresh, sim.keep_decisions,
                sim.on_cycle).run()
            return sim._result(execution, tasks, sim._makespan(execution, tasks),
                                len(tasks), events, negotiations, decisions, started)
        heap = execution.heap
        refresh = None
        if status_refresh is not None:
            refresh = _StatusRefresh(pool, heap, status_refresh)
            pool.listen(refresh)
        total = len(tasks)
        users = pool.users.values()
        keep = sim.keep_decisions
        on_cycle = sim.on_cycle
        kept: list[Decision] = []
        events = negotiations = 0
        chained = False  # a negotiation event is on the heap

        stuck: Counter[str] = Counter()  # per user, its queued tasks too big for every machine
        counted = 0  # of `negotiator.reported`, the tasks in `stuck`

        def waiting() -> bool:
            # A task too big for every machine waits for ever: counted as waiting, it would
            # keep every later arrival from waking the negotiator (iSPD's rule), so it is not.
            nonlocal counted
            for task, _ in negotiator.reported[counted:]:
                stuck[task.user] += 1
            counted = len(negotiator.reported)
            if not stuck:  # the usual case: no dictionary lookup per user in the event loop
                return any(user.idle_count for user in users)
            return any(user.idle_count > stuck[user.name] for user in users)

        def negotiate(now: float) -> None:
            nonlocal negotiations, chained
            negotiations += 1
            decisions = negotiator.cycle(now, single=True)
            if keep:
                kept.extend(decisions)
            if on_cycle is not None:
                on_cycle(now)
            if decisions and not chained and waiting():
                chained = True
                heapq.heappush(heap, (now, _NEGOTIATE, -1, None, 0))

        next_arrival = 0
        while next_arrival < total or heap:
            if heap and (next_arrival == total or heap[0][0] < tasks[next_arrival].submit_time
                         or heap[0][0] == tasks[next_arrival].submit_time
                         and heap[0][1] != _REFRESH):
                now, kind, index, task, epoch = heapq.heappop(heap)
                events += 1
                if kind == _REFRESH:
                    assert refresh is not None
                    refresh.refreshed(index, now)
                    continue
                if kind == _NEGOTIATE:
                    chained = False
                    negotiate(now)
                    continue
                if task.epoch != epoch or task.state != RUNNING:
                    continue  # an event of a run that has since been vacated
                if kind == _FINISH:
                    pool.finish(task, now)
                else:  # _DEADLINE
                    admit = negotiator.admit
                    assert admit is not None  # only a run with an admission stage has them
                    decision = admit.deadline_passed(task, now)
                    if decision is None or decision.kind != KILL:
                        continue
                    pool.kill(task, now)
                    if keep:
                        kept.append(decision)
                if not chained and waiting():
                    negotiate(now)
                continue
            task = tasks[next_arrival]
            next_arrival += 1
            events += 1
            now = task.submit_time
            idle_before = chained or waiting()
            decision = negotiator.submit(task, now)
            if decision is not None and keep:
                kept.append(decision)
            if not idle_before:
                negotiate(now)
        return sim._result(execution, tasks, sim._makespan(execution, tasks), total,
                            events, negotiations, kept, started)
