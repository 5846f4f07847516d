"""The discrete-event simulator: arrivals, negotiation, execution, completion, preemption.

A tiny event loop in the manner of SimPy's core: one heap of `(time, kind, seq, ...)` entries,
so events at the same time run in a fixed order (completions, then deadline checks, then
negotiation) and equal-kind events in the order they were scheduled. Arrivals are not put on
the heap: the workload is sorted once and merged in, which keeps the heap as small as the
number of running tasks.

The simulator drives the same `Negotiator` and `Pool` as the daemon: it only turns the
workload into submit events and the negotiator's decisions into completion times.

Execution model: a task of `work` MFlop runs at `power_per_cpu x cpus x (1 - load)` of its
node; a task with a `duration` runs for that many seconds wherever it runs. A vacate without
checkpointing throws the current run's progress away (`Task.lost_work`) and the task starts over;
with checkpointing it resumes where it stopped. An optional vacate delay holds the freed node's
new task back for that long (the victim's clean-up time), and an optional transfer delay (iSPD
links) holds a task back while its input reaches the node; the node is taken meanwhile, and a
vacate during either delay loses no computation.
"""

from __future__ import annotations

import heapq
import time as wallclock
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import QUEUED, RUNNING, Node, PoolListener, Task
from gridfair.core.stages import KILL, Decision
from gridfair.errors import InputError

# Event kinds, in the order they run at equal times.
_FINISH, _DEADLINE, _NEGOTIATE = range(3)


@dataclass
class SimulationResult:
    """What a run produced: the tasks with their times, and run-wide counters."""

    tasks: list[Task]
    nodes: list[Node]
    makespan: float
    busy_cpu_seconds: float  # cpu-seconds nodes spent running tasks, lost work included
    events: int
    negotiations: int
    vacates: int
    wall_seconds: float
    decisions: list[Decision] = field(default_factory=list)


def run_rate(task: Task, node: Node) -> float:
    """Progress per second of `task` on `node`: MFlop/s for work tasks, 1 for timed ones."""
    if task.work is None:
        return 1.0
    return node.power_per_cpu * task.cpus * (1.0 - node.load)


def task_size(task: Task) -> float:
    """All the progress a task needs: MFlop for work tasks, seconds for timed ones."""
    return task.work if task.work is not None else (task.duration or 0.0)


class _Execution(PoolListener):
    """Turns the pool's start and stop events into completion events and accounting."""

    def __init__(self, simulation: Simulation) -> None:
        self.heap: list[tuple] = []
        self.seq = 0
        self.busy = 0.0
        self.vacates = 0
        self.latest_end = 0.0
        self.checkpointing = simulation.pool.checkpointing
        self.vacate_delay = simulation.vacate_delay
        self.watch_deadlines = simulation.negotiator.admit is not None
        self.transfer_delay = simulation.transfer_delay
        # Node index -> time until which a vacated task is still cleaning up there.
        self.cleaning_until: dict[int, float] = {}
        # Task seq -> when its computation begins, for runs that wait before computing.
        self.computing_from: dict[int, float] = {}

    def task_started(self, task: Task, now: float) -> None:
        node = task.node
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


class Simulation:
    """Runs a workload through a negotiator to completion."""

    def __init__(
        self,
        negotiator: Negotiator,
        tasks: Sequence[Task],
        *,
        interval: float | None = None,
        vacate_delay: float = 0.0,
        keep_decisions: bool = False,
        progress: Callable[[int, int], None] | None = None,
        transfer_delay: Callable[[Task, Node], float] | None = None,
        on_cycle: Callable[[float], None] | None = None,
    ) -> None:
        if interval is not None and interval <= 0:
            raise InputError(f"negotiation interval must be positive, got {interval}")
        if vacate_delay < 0:
            raise InputError(f"vacate delay must be zero or positive, got {vacate_delay}")
        if not tasks:
            raise InputError("the workload has no tasks")
        self.negotiator = negotiator
        self.pool = negotiator.pool
        # Stable: equal submit times keep the workload's order.
        self.tasks = sorted(tasks, key=lambda task: task.submit_time)
        self.interval = interval
        self.vacate_delay = vacate_delay
        self.keep_decisions = keep_decisions
        self.progress = progress
        self.transfer_delay = transfer_delay
        self.on_cycle = on_cycle  # told the time after every negotiation cycle (records)

    def run(self) -> SimulationResult:
        started = wallclock.perf_counter()
        pool = self.pool
        negotiator = self.negotiator
        admit = negotiator.admit
        execution = _Execution(self)
        pool.listen(execution)
        heap = execution.heap
        pop = heapq.heappop
        tasks = self.tasks
        total = len(tasks)
        next_arrival = 0
        # Submit times, with an endless one after the last: no end-of-list test per event.
        arrivals = [task.submit_time for task in tasks]
        arrivals.append(float("inf"))
        finish = pool.finish
        submit = negotiator.submit
        cycle = negotiator.cycle
        events = negotiations = finished = 0
        kept: list[Decision] = []
        keep = self.keep_decisions
        interval = self.interval
        progress = self.progress
        on_cycle = self.on_cycle
        report_every = max(total // 100, 1)
        if interval is not None:
            first = tasks[0].submit_time
            heapq.heappush(heap, (first, _NEGOTIATE, -1, None, 0))

        while next_arrival < total or heap:
            # The next moment anything happens: an arrival or the heap's head.
            if heap and heap[0][0] <= arrivals[next_arrival]:
                now = heap[0][0]
            else:
                now = arrivals[next_arrival]
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
                    finish(task, now)
                    finished += 1
                    changed = True
                    if progress is not None and finished % report_every == 0:
                        progress(finished, total)
                else:  # _DEADLINE
                    decision = admit.deadline_passed(task, now)
                    if decision is not None and decision.kind == KILL:
                        pool.kill(task, now)
                        changed = True
                        if keep:
                            kept.append(decision)
            while next_arrival < total and arrivals[next_arrival] == now:
                task = tasks[next_arrival]
                next_arrival += 1
                events += 1
                decision = submit(task, now)
                if decision is not None and keep:
                    kept.append(decision)
                changed = True
            if negotiate_now and (changed or interval is not None):
                negotiations += 1
                decisions = cycle(now)
                if keep:
                    kept.extend(decisions)
                if on_cycle is not None:
                    on_cycle(now)
                # Periodic negotiation goes on while anything can still change: arrivals to
                # come or tasks running. Idle work with neither can never start.
                if interval is not None and (next_arrival < total or pool.running):
                    heapq.heappush(heap, (now + interval, _NEGOTIATE, -1, None, 0))

        end_times = [task.finish_time for task in tasks if task.finish_time is not None]
        makespan = max(end_times, default=execution.latest_end) - tasks[0].submit_time
        if progress is not None:
            progress(total, total)
        return SimulationResult(
            tasks=tasks,
            nodes=pool.nodes,
            makespan=makespan,
            busy_cpu_seconds=execution.busy,
            events=events,
            negotiations=negotiations,
            vacates=execution.vacates,
            wall_seconds=wallclock.perf_counter() - started,
            decisions=kept,
        )
