"""The record of a run, and the checks made from it alone.

`RunRecorder` listens to the pool like a policy does and keeps two records:
- runs: one row per run of a task on a node (start, end, how it ended), from which machine
  occupancy over time is rebuilt;
- allocation snapshots: after every negotiation cycle, one row per user whose state changed in
  the cycle or since the last one (allocated and provided power and nodes, running and idle
  tasks, its least powerful running slot, and how many foreign tasks run on its machines).
  Carrying rows forward gives every user's state after every cycle; a run of n tasks costs
  O(n) rows, not O(n x users).

The checks re-derive the policies' rules from those rows with plain loops, independently of
the policies' incremental indexes:
- `check_conservation`: every task is done, queued, dropped or killed (none still running),
  counts add up, no node ever runs more cpus than it has, busy time matches the engine's;
- `owner_share_violations`: after every cycle, no preemption that HOSEP's Fig. 2 (with
  gridfair's convergence guard) or OSEP's Fig. 1 would make is left unmade.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from gridfair.core.pool import (
    DONE,
    DROPPED,
    EPSILON,
    KILLED,
    QUEUED,
    RUNNING,
    STATE_NAMES,
    Node,
    Pool,
    PoolListener,
    Task,
    UserState,
    power_diff,
)
from gridfair.core.stages import OWNER_SHARE_RULES
from gridfair.sim.engine import SimulationResult


class Run(NamedTuple):
    task: str
    user: str
    node: int  # Node.index
    cpus: float
    start: float
    end: float
    outcome: str  # done, queued (vacated) or killed


class UserSnapshot(NamedTuple):
    """A user's state after a negotiation cycle at `time`."""

    time: float
    user: int  # UserState.index
    allocated_power: float
    provided_power: float
    provided_nodes: int
    running: int
    idle: int
    least_power: float  # power of its least powerful running slot; 0 when none runs
    foreign_on_own: int  # tasks of other users running on machines it provides


class RunRecorder(PoolListener):
    """Records runs and per-cycle allocation snapshots of one simulation."""

    def __init__(self, *, snapshots: bool = True) -> None:
        self.runs: list[Run] = []
        self.snapshots: list[UserSnapshot] = []
        self.users: list[str] = []  # by UserState.index
        self.take_snapshots = snapshots
        self._dirty: dict[int, UserState] = {}
        self._slot_powers: dict[int, dict[float, int]] = {}  # user -> power -> running count
        self._foreign: dict[str, int] = {}

    def attach(self, pool: Pool) -> None:
        self.pool = pool

    def user_changed(self, user: UserState, now: float) -> None:
        self._dirty[user.index] = user

    def task_started(self, task: Task, now: float) -> None:
        node = task.node
        if not self.take_snapshots:
            return
        user = self.pool.users[task.user]
        powers = self._slot_powers.setdefault(user.index, {})
        power = node.power_per_cpu * task.cpus
        powers[power] = powers.get(power, 0) + 1
        self._foreign_change(task, node, +1)

    def task_stopped(self, task: Task, now: float, node: Node) -> None:
        outcome = "queued" if task.state == QUEUED else STATE_NAMES[task.state]
        self.runs.append(Run(task.id, task.user, node.index, task.cpus, task.start_time, now,
                             outcome))
        if not self.take_snapshots:
            return
        powers = self._slot_powers[self.pool.users[task.user].index]
        power = node.power_per_cpu * task.cpus
        powers[power] -= 1
        if not powers[power]:
            del powers[power]
        self._foreign_change(task, node, -1)

    def _foreign_change(self, task: Task, node: Node, change: int) -> None:
        if node.owner is not None and node.owner != task.user:
            self._foreign[node.owner] = self._foreign.get(node.owner, 0) + change
            owner = self.pool.users[node.owner]
            self._dirty[owner.index] = owner

    def after_cycle(self, now: float) -> None:
        """Called by the engine when a negotiation cycle has ended."""
        if not self.take_snapshots:
            return
        for index in sorted(self._dirty):
            user = self._dirty[index]
            while len(self.users) <= index:
                self.users.append("")
            self.users[index] = user.name
            powers = self._slot_powers.get(index)
            self.snapshots.append(UserSnapshot(
                now, index, user.allocated_power, user.provided_power, user.provided_nodes,
                user.running, user.idle_count, min(powers) if powers else 0.0,
                self._foreign.get(user.name, 0)))
        self._dirty.clear()

    def states(self) -> Iterator[tuple[float, dict[int, UserSnapshot]]]:
        """Every user's latest state after each cycle that changed something, in time order.

        The dict is shared and updated in place between steps: copy it to keep it."""
        current: dict[int, UserSnapshot] = {}
        snapshots = self.snapshots
        i = 0
        while i < len(snapshots):
            time = snapshots[i].time
            while i < len(snapshots) and snapshots[i].time == time:
                current[snapshots[i].user] = snapshots[i]
                i += 1
            yield time, current


@dataclass(frozen=True)
class Violation:
    time: float
    message: str


def check_conservation(result: SimulationResult, recorder: RunRecorder) -> list[str]:
    """Problems found in the run's records (an empty list: all is conserved)."""
    problems: list[str] = []
    states = {DONE: 0, QUEUED: 0, DROPPED: 0, KILLED: 0, RUNNING: 0}
    for task in result.tasks:
        states[task.state] += 1
    if states[RUNNING]:
        problems.append(f"{states[RUNNING]} tasks still running after the run ended")
    accounted = states[DONE] + states[QUEUED] + states[DROPPED] + states[KILLED]
    if accounted != len(result.tasks):
        problems.append(f"{len(result.tasks)} tasks submitted, {accounted} accounted for")
    by_node: dict[int, list[tuple[float, float]]] = {}
    busy = 0.0
    for run in recorder.runs:
        if run.end < run.start:
            problems.append(f"run of {run.task} ends at {run.end} before it starts")
        busy += (run.end - run.start) * run.cpus
        changes = by_node.setdefault(run.node, [])
        changes.append((run.start, run.cpus))
        changes.append((run.end, -run.cpus))
    for index, changes in by_node.items():
        node = result.nodes[index]
        changes.sort()  # at equal times releases (negative) come before takes
        in_use = 0.0
        for time, change in changes:
            in_use += change
            if in_use > node.cpus + EPSILON:
                problems.append(f"{node.name} runs {in_use:g} cpus of {node.cpus:g} at {time}")
                break
    capacity = sum(node.cpus for node in result.nodes)
    if not math.isclose(busy, result.busy_cpu_seconds, rel_tol=1e-9, abs_tol=1e-6):
        problems.append(f"runs add up to {busy} busy cpu-seconds, the engine counted "
                        f"{result.busy_cpu_seconds}")
    span_start = min((task.submit_time for task in result.tasks), default=0.0)
    span_end = max((run.end for run in recorder.runs), default=span_start)
    if busy > capacity * (span_end - span_start) * (1 + 1e-9) + EPSILON:
        problems.append(f"busy {busy} cpu-seconds exceed capacity {capacity} x span "
                        f"{span_end - span_start}")
    return problems


def _first(candidates: list[tuple[float, int]]) -> int | None:
    return min(candidates)[1] if candidates else None


def owner_share_violations(recorder: RunRecorder, rule: str, *, absolute: bool = False
                           ) -> list[Violation]:
    """States after a cycle in which the preemption rule would still act.

    `rule` is `hosep` (Fig. 2: the most under-share owner with idle work, u_alpha, and the most
    over-share user, u_beta; acting iff omega_beta, u_beta's PowerDiff after losing its least
    powerful slot, exceeds PowerDiff_alpha (|PowerDiff_alpha| with `absolute`) and the move
    lowers Phi, gridfair's convergence guard) or `osep` (Fig. 1: someone owed nodes with idle
    work while someone else uses more nodes than it provides). Ties go to the user seen first,
    as in the policies. The check assumes a vacated slot fits the receiver's next task (one
    task per core, as in iSPD models); with larger tasks a policy may rightly find no victim
    whose slot fits, which this check cannot see.
    """
    if rule not in OWNER_SHARE_RULES:
        raise ValueError(f"rule must be one of {', '.join(OWNER_SHARE_RULES)}, got {rule!r}")
    violations: list[Violation] = []
    for time, state in recorder.states():
        if rule == "osep":
            owed = [(-(s.provided_nodes - s.running), s.user) for s in state.values()
                    if s.idle > 0 and s.provided_nodes > 0 and s.provided_nodes > s.running]
            over = [s for s in state.values() if s.running > s.provided_nodes]
            if owed and over:
                receiver = recorder.users[_first(owed)]
                victim = recorder.users[over[0].user]
                violations.append(Violation(time, f"{receiver} is owed nodes and waits while "
                                                  f"{victim} uses more than it provides"))
            continue
        below = [(power_diff(s.allocated_power, s.provided_power), s.user)
                 for s in state.values()
                 if s.idle > 0 and s.provided_power > 0
                 and power_diff(s.allocated_power, s.provided_power) < 0]
        above = [(-power_diff(s.allocated_power, s.provided_power), s.user)
                 for s in state.values()
                 if s.running > 0 and power_diff(s.allocated_power, s.provided_power) > 0]
        alpha, beta = _first(below), _first(above)
        if alpha is None or beta is None:
            continue
        receiver, victim = state[alpha], state[beta]
        receiver_diff = power_diff(receiver.allocated_power, receiver.provided_power)
        victim_diff = power_diff(victim.allocated_power, victim.provided_power)
        slot = victim.least_power
        omega = power_diff(victim.allocated_power - slot, victim.provided_power)
        receiver_after = power_diff(receiver.allocated_power + slot, receiver.provided_power)
        threshold = abs(receiver_diff) if absolute else receiver_diff
        if omega > threshold and receiver_diff + receiver_after < victim_diff + omega:
            violations.append(Violation(
                time, f"{recorder.users[alpha]} waits at PowerDiff {receiver_diff:+.3f} while "
                      f"{recorder.users[beta]} (PowerDiff {victim_diff:+.3f}) could give up "
                      f"{slot:g} MFlops and stay at omega {omega:+.3f}"))
    return violations
