"""iSPD 2014's event list, an option of the sequential semantics
(`EngineOptions(arrivals=Arrivals.SEQUENTIAL, same_instant=SameInstant.ISPD2014)`,
`--same-instant ispd2014`).

iSPD (github gspd-unesp/ispd, commit 196cdf6, the HOSEP paper's simulator) keeps its events in
one `java.util.PriorityQueue` ordered by time alone (`SimulacaoSequencial`, `EventoFuturo`),
and every step of a task or a message is an event of its own: the master's arrivals,
scheduling and dispatches, each link's transfers and each machine's start and end. Events of
one instant therefore run in the order of Java's binary heap (`java_heap`), which depends on
everything the heap holds, the arrivals of later instants and the ends of running tasks
included. At t = 0 on the HOSEP paper's Table 1 that order interleaves the users' arrivals
with the dispatches, where the default sequential loop takes arrivals in submit order, each
one's decisions before the next.

This module replays that event list on the grid iSPD is given by `bench/ispd_inputs.py`: a
master linked to every machine by two links (out and back) of no latency and 10^9 Mbit/s,
tasks with nothing to transfer, machines of one processor, in the pool's node order. The
events and what each adds, in the order its handler adds them (`CS_Mestre`, `CS_Link`,
`CS_Maquina`; M the master, L a link, P a machine):
- arrival at M of a new task: queued; if the master's scheduler is idle it becomes busy and a
  scheduling event is added (`escDisp`);
- scheduling at M: one negotiation of a single decision; an allocation adds the task's
  departure from M, a preemption a recall message to the victim's machine;
- departure from M: the task's arrival at L (out); then a scheduling event if tasks wait,
  else the scheduler is idle;
- arrival at L (free), service at L, departure from L (at once: nothing to transfer), then
  arrival at the next hop; a busy link queues;
- arrival at P, then service at P, which adds the task's end at now + work / power;
- end at P: the task's arrival at L (back), then at M: the master learns the completion; a
  scheduling event if tasks wait, else the scheduler is idle;
- a message hop: message at L, its departure, and its arrival at the next hop 1.14e-11 s later
  (0.011444 Mbit at 10^9 Mbit/s);
- recall at P: the victim's end event is taken out of the heap and it arrives at M, which
  dispatches the receiver (its departure from M); if the scheduler is idle it becomes busy
  and a scheduling event follows;
- with a status refresh of S seconds, before each event past the next refresh time iSPD adds
  an update message to every machine at that time (`realizarSimulacaoAtualizaTime`); each
  machine answers the master, and each answer counts towards releasing the machine
  (`HeldMachines`: iSPD's HOSEP knows a machine given a task only at the second answer after).

gridfair's pool and negotiator decide as in the default loop; two things are simplified. A
preemption vacates and starts at once where iSPD does both when the recall reaches the
machine, 1.14e-11 s later (the hops of the recall and the victim's return are still events,
so the heap holds what iSPD's holds); and the master learns a completion at the end's last
hop, as iSPD's, but a machine's own queue is not kept (HOSEP gives out only machines it knows
are free).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence

from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import RUNNING, Pool, PoolListener, Task
from gridfair.core.stages import ALLOCATE, VACATE, Decision
from gridfair.errors import InputError
from gridfair.sim.java_heap import JavaPriorityQueue

#: iSPD's message size (`Mensagem`), Mbit, and the links' bandwidth in the star model
#: `bench/ispd_inputs.py` writes, Mbit/s (no latency): a message hop takes their ratio.
MESSAGE_MBITS = 0.011444091796875
LINK_MBITS_PER_SECOND = 1.0e9
MESSAGE_HOP_SECONDS = MESSAGE_MBITS / LINK_MBITS_PER_SECOND

# iSPD's event kinds (`EventoFuturo`): arrival, service, departure, scheduling, message, and
# a message's departure from a link.
ARRIVAL, SERVICE, DEPARTURE, SCHEDULING, MESSAGE, MESSAGE_OUT = range(1, 7)
# Where an event happens: the master, the link out to a machine or back from it, a machine.
MASTER, LINK_OUT, LINK_BACK, MACHINE = range(4)
# What a task arriving at the master is, and what a message asks.
NEW, COMPLETED, RECALLED = range(3)
UPDATE, STATUS, RECALL = range(3)


class Event:
    """One entry of the event list: kind, place, machine index and what it carries (a task or
    a message; an arriving task also says what it is, a recalled one names its receiver)."""

    __slots__ = ("kind", "place", "machine", "task", "what", "other")

    def __init__(self, kind: int, place: int, machine: int, task: Task | None = None,
                 what: int = NEW, other: Task | None = None) -> None:
        self.kind = kind
        self.place = place
        self.machine = machine
        self.task = task
        self.what = what  # NEW, COMPLETED or RECALLED (a task); UPDATE, STATUS or RECALL
        self.other = other  # a recalled victim's receiver


class HeldMachines(PoolListener):
    """iSPD 2014's HOSEP sees a machine given a task (by allocation or preemption) as blocked,
    uncertain at the next status answer and free or busy only at the one after: until then it
    is neither given out nor a victim (the pool's matcher says no). `refreshed` counts the
    answers; subclasses may count them otherwise."""

    #: Status answers a machine given a task waits for before it is seen again.
    ANSWERS = 2

    def __init__(self, pool: Pool) -> None:
        self.held: dict[int, float] = {}  # node index -> what releases it
        matcher = pool.matcher
        held = self.held
        pool.matcher = lambda task, node: node.index not in held and (
            matcher is None or matcher(task, node))

    def task_started(self, task: Task, now: float) -> None:
        assert task.node is not None
        self.held[task.node.index] = self.ANSWERS

    def refreshed(self, index: int, now: float) -> None:
        left = self.held.get(index)
        if left is not None:
            if left > 1:
                self.held[index] = left - 1
            else:
                del self.held[index]


class IspdEventList:
    """Runs a workload on iSPD 2014's event list (module docstring)."""

    def __init__(self, negotiator: Negotiator, tasks: Sequence[Task],
                 status_refresh: float | None, keep_decisions: bool,
                 on_cycle: Callable[[float], None] | None) -> None:
        pool = negotiator.pool
        if negotiator.admit is not None:
            raise InputError("iSPD's event list (--same-instant ispd2014) takes no admission "
                             "stage")
        if any(node.cpus != 1 for node in pool.nodes):
            raise InputError("iSPD's event list (--same-instant ispd2014) models machines of "
                             "one cpu each")
        if any(task.work is None for task in tasks):
            raise InputError("iSPD's event list (--same-instant ispd2014) takes tasks sized "
                             "in MFlop, not durations")
        self.pool = pool
        self.negotiator = negotiator
        self.tasks = tasks
        self.period = status_refresh
        self.held: HeldMachines | None = None
        if status_refresh is not None:
            self.held = HeldMachines(pool)
            pool.listen(self.held)
        self.keep = keep_decisions
        self.on_cycle = on_cycle
        self.kept: list[Decision] = []
        self.events = 0
        self.negotiations = 0
        self.heap: JavaPriorityQueue[Event] = JavaPriorityQueue()
        self.scheduler_idle = True  # iSPD's escDisp
        self.recalls_in_flight = 0  # victims vacated here, not yet back at iSPD's master
        machines = len(pool.nodes)
        # Each link's two channels, tasks and messages: busy or not, and what waits.
        self.link_busy = [[False] * machines, [False] * machines]
        self.message_busy = [[False] * machines, [False] * machines]
        self.link_queue: list[list[deque[Event]]] = [
            [deque() for _ in range(machines)] for _ in range(2)]
        self.message_queue: list[list[deque[Event]]] = [
            [deque() for _ in range(machines)] for _ in range(2)]
        self.ends: dict[int, Event] = {}  # task seq -> its end event while it runs

    def run(self) -> tuple[int, int, list[Decision]]:
        """Run to the end; returns the events, the negotiations and the decisions kept."""
        heap = self.heap
        for task in self.tasks:
            heap.offer(task.submit_time, Event(ARRIVAL, MASTER, -1, task, NEW))
        period = self.period
        next_refresh = period
        handlers = {ARRIVAL: self._arrival, SERVICE: self._service,
                    DEPARTURE: self._departure, SCHEDULING: self._schedule,
                    MESSAGE: self._message, MESSAGE_OUT: self._message_out}
        while heap:
            if next_refresh is not None and next_refresh < heap.peek_key():
                for index in range(len(self.pool.nodes)):
                    heap.offer(next_refresh, Event(MESSAGE, LINK_OUT, index, what=UPDATE))
                next_refresh += period
            now, event = heap.poll()
            self.events += 1
            handlers[event.kind](event, now)
        return self.events, self.negotiations, self.kept

    # ------------------------------------------------------------ the master
    def _waiting(self) -> bool:
        """Whether iSPD's master has tasks in its queue (a victim still on its way back is
        not there yet)."""
        idle = sum(user.idle_count for user in self.pool.users.values())
        return idle > self.recalls_in_flight

    def _wake(self, now: float) -> None:
        if self.scheduler_idle:
            self.scheduler_idle = False
            self.heap.offer(now, Event(SCHEDULING, MASTER, -1))

    def _arrival_at_master(self, event: Event, now: float) -> None:
        task = event.task
        assert task is not None
        if event.what == COMPLETED:
            self.pool.finish(task, now)
            if self._waiting():
                self.heap.offer(now, Event(SCHEDULING, MASTER, -1))
            else:
                self.scheduler_idle = True
            return
        if event.what == NEW:
            decision = self.negotiator.submit(task, now)
            if decision is not None and self.keep:
                self.kept.append(decision)
            self._wake(now)
            return
        # A recalled victim is back: the receiver waiting for its machine leaves (HOSEP's
        # adicionarTarefa), then the scheduler is woken if idle.
        self.recalls_in_flight -= 1
        receiver = event.other
        assert receiver is not None
        self.heap.offer(now, Event(DEPARTURE, MASTER, event.machine, receiver))
        self._wake(now)

    def _schedule(self, event: Event, now: float) -> None:
        self.negotiations += 1
        decisions = self.negotiator.cycle(now, single=True)
        if self.keep:
            self.kept.extend(decisions)
        if self.on_cycle is not None:
            self.on_cycle(now)
        if not decisions:
            return
        vacated = [decision.task for decision in decisions if decision.kind == VACATE]
        started = decisions[-1]
        assert started.kind == ALLOCATE and started.node is not None
        if vacated:
            (victim,) = vacated  # one-cpu machines: one victim
            self.recalls_in_flight += 1
            self.heap.offer(now, Event(MESSAGE, LINK_OUT, started.node.index, victim, RECALL,
                                       started.task))
        else:
            self.heap.offer(now, Event(DEPARTURE, MASTER, started.node.index, started.task))

    # ------------------------------------------------------------ tasks
    def _arrival(self, event: Event, now: float) -> None:
        place = event.place
        if place == MASTER:
            self._arrival_at_master(event, now)
        elif place == MACHINE:
            self.heap.offer(now, Event(SERVICE, MACHINE, event.machine, event.task))
        else:
            direction = place - LINK_OUT
            if self.link_busy[direction][event.machine]:
                self.link_queue[direction][event.machine].append(event)
            else:
                self.link_busy[direction][event.machine] = True
                self.heap.offer(now, Event(SERVICE, place, event.machine, event.task,
                                           event.what))

    def _service(self, event: Event, now: float) -> None:
        if event.place != MACHINE:  # a link: nothing to transfer, it leaves at once
            self.heap.offer(now, Event(DEPARTURE, event.place, event.machine, event.task,
                                       event.what))
            return
        task = event.task
        assert task is not None and task.node is not None
        if task.state != RUNNING or task.node.index != event.machine:
            return  # vacated before it reached the machine
        assert task.work is not None
        power = task.node.power_per_cpu * task.cpus * (1.0 - task.node.load)
        end = Event(DEPARTURE, MACHINE, event.machine, task)
        self.ends[task.seq] = end
        self.heap.offer(now + (task.work - task.done_work) / power, end)

    def _departure(self, event: Event, now: float) -> None:
        place, machine = event.place, event.machine
        heap = self.heap
        if place == MASTER:
            heap.offer(now, Event(ARRIVAL, LINK_OUT, machine, event.task))
            if self._waiting():
                heap.offer(now, Event(SCHEDULING, MASTER, -1))
            else:
                self.scheduler_idle = True
        elif place == MACHINE:
            task = event.task
            assert task is not None
            del self.ends[task.seq]
            if task.state != RUNNING:
                return  # vacated here, its recall not yet at the machine
            heap.offer(now, Event(ARRIVAL, LINK_BACK, machine, task, COMPLETED))
        else:
            direction = place - LINK_OUT
            heap.offer(now, Event(ARRIVAL, MACHINE if place == LINK_OUT else MASTER, machine,
                                  event.task, event.what))
            waiting = self.link_queue[direction][machine]
            if waiting:
                follower = waiting.popleft()
                heap.offer(now, Event(SERVICE, place, machine, follower.task, follower.what))
            else:
                self.link_busy[direction][machine] = False

    # ------------------------------------------------------------ messages
    def _message(self, event: Event, now: float) -> None:
        place, machine = event.place, event.machine
        if place == MACHINE:
            self._message_at_machine(event, now)
        elif place == MASTER:  # a machine's status answer
            if self.held is not None:
                self.held.refreshed(machine, now)
        else:
            direction = place - LINK_OUT
            if self.message_busy[direction][machine]:
                self.message_queue[direction][machine].append(event)
            else:
                self.message_busy[direction][machine] = True
                self.heap.offer(now, _copy(event, MESSAGE_OUT))

    def _message_out(self, event: Event, now: float) -> None:
        place, machine = event.place, event.machine
        direction = place - LINK_OUT
        arrives = now + MESSAGE_HOP_SECONDS
        self.heap.offer(arrives, _copy(event, MESSAGE, MACHINE if place == LINK_OUT
                                       else MASTER))
        waiting = self.message_queue[direction][machine]
        if waiting:
            self.heap.offer(arrives, _copy(waiting.popleft(), MESSAGE_OUT))
        else:
            self.message_busy[direction][machine] = False

    def _message_at_machine(self, event: Event, now: float) -> None:
        machine = event.machine
        if event.what == UPDATE:
            self.heap.offer(now, Event(MESSAGE, LINK_BACK, machine, what=STATUS))
            return
        victim = event.task
        assert victim is not None
        end = self.ends.pop(victim.seq, None)
        if end is not None:
            self.heap.remove(end)
        self.heap.offer(now, Event(ARRIVAL, MASTER, machine, victim, RECALLED, event.other))


def _copy(event: Event, kind: int, place: int | None = None) -> Event:
    return Event(kind, event.place if place is None else place, event.machine, event.task,
                 event.what, event.other)

