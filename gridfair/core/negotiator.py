"""One negotiation cycle: run the policy stages on the pool and apply what they decide.

Phase 1 hands out free capacity in the order stage's order: the first active user's next task
goes to the free node the placement chooses among those it fits (`core/placement.py`; the
fastest by default), and the allocation's reason names the placement and the node's score.
A task that fits no free node is set aside for the phase and the user's next task is tried,
up to `PARK_LIMIT` sizes a user (as HTCondor's negotiator rejects an autocluster, not a job)
among `PARK_LOOKS` tasks; then the user is skipped for the rest of the phase (the `backfill`
rule), or the phase ends there (the `stop` rule, SDRF's Algorithm 1).
The rule belongs to the run, so that every order of a comparison uses the same.
Phase 2 runs only when phase 1 is done: the preemption stage vacates tasks for entitled users
while its rule allows, so free nodes are always used before any preemption (OSEP, HOSEP 3.3).
A preemption the daemon's safety rules hold back for a protected victim (`Hold.spared`: run
too briefly, preempted lately, still in flight) protects that victim for the phase, and the
stage looks for another move; a limit of the whole cycle ends the phase.
A preemption may vacate several tasks of one partitionable machine (one VACATE each, then the
ALLOCATE); the receiver always fits once they are gone. When the stage stops by its own rule it
may say why (`declined`, recorded apart from the decisions). A task too big for every node is
never a reason to vacate, nor to stop phase 1 (under either rule): phase 1 and the preemption
stage set it aside (`Pool.set_aside_if_too_big`) and the negotiator reports it once
(`unplaceable`).

Decisions are applied to the pool as they are made, because each changes what the next one
sees. The daemon journals them and carries them out afterwards; the simulator schedules the
completions of the tasks that started.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gridfair.core.placement import Fastest, Placement
from gridfair.core.pool import EPSILON, Node, Pool, Task
from gridfair.core.stages import (
    ALLOCATE,
    ALLOCATION_RULES,
    DROP,
    KILL,
    STOP,
    VACATE,
    AdmitPolicy,
    Decision,
    OrderPolicy,
    Preemption,
    PreemptPolicy,
)
from gridfair.errors import ConfigError

#: Sizes (cpus, memory, GPUs, matched alike) of one user's tasks that may be set aside in a
#: phase because they fit no free node, and tasks looked at in all: bound the cost of a user
#: whose queue starts with many jobs that match nothing free. Counted in sizes, not tasks, so
#: that a user's smaller job behind a run of one large size is still tried (found live,
#: Showcase 4: fifteen 3-4 cpu jobs kept a 2-cpu job off two idle 2-cpu machines).
PARK_LIMIT = 8
PARK_LOOKS = 64

#: The reason an allocation carries when the negotiator was asked not to explain.
_NOT_EXPLAINED: tuple[str, dict[str, Any]] = ("not explained: this run keeps no decisions", {})

_new_tuple = tuple.__new__

#: Preemptions held back for protected victims in one phase before the phase stops: bounds
#: the search past them (each hold protects at least one more task).
HOLD_LIMIT = 64


@dataclass(frozen=True, slots=True)
class Hold:
    """Why a preemption is held back (the daemon's safety rules). The `spared` victims are
    protected for the rest of the phase, and the stage looks for another move; a hold that
    spares none (a limit of the whole cycle) ends the phase."""

    rule: str
    spared: tuple[Task, ...] = ()


#: Returns why a preemption must be held back, or None to allow it.
VacateGuard = Callable[[Preemption, float], Hold | None]


@dataclass(frozen=True, slots=True)
class _Size:
    """What a task asks for, as the free allocation sets tasks aside: its resources, and its
    ad when the pool matches ads (tasks sharing one ad match alike)."""

    ad: Any
    cpus: float
    memory: float
    gpus: float

    def no_smaller_than(self, other: _Size) -> bool:
        return (self.ad is other.ad and self.cpus >= other.cpus
                and self.memory >= other.memory and self.gpus >= other.gpus)


def _size(pool: Pool, task: Task) -> _Size:
    return _Size(task.ad if pool.matcher is not None else None, task.cpus, task.memory,
                 task.gpus)


@dataclass(frozen=True, slots=True)
class HeldBack:
    """A preemption a policy wanted but a safety rule held back, and which rule."""

    preemption: Preemption
    rule: str


class Negotiator:
    """Runs admit (on submit), order and preempt stages over one pool."""

    def __init__(
        self,
        pool: Pool,
        order: OrderPolicy,
        preempt: PreemptPolicy | None = None,
        admit: AdmitPolicy | None = None,
        *,
        vacate_guard: VacateGuard | None = None,
        explain: bool = True,
        allocation: str | None = None,
        placement: Placement | None = None,
    ) -> None:
        """`allocation` is the rule (`ALLOCATION_RULES`); None takes the order's paper's.
        `placement` chooses the free node of each allocation (None: `fastest`)."""
        self.pool = pool
        self.allocation = order.paper_allocation if allocation is None else allocation
        if self.allocation not in ALLOCATION_RULES:
            raise ConfigError(f"unknown allocation rule {self.allocation!r} (known: "
                              f"{', '.join(ALLOCATION_RULES)})")
        # Allocations carry the order stage's reason and figures. A simulation that keeps no
        # decisions turns this off: nobody reads them, and they cost 10-16 % of its run.
        self.explain = explain
        self.order = order
        self.preempt = preempt
        self.admit = admit
        self.vacate_guard = vacate_guard
        self.held_back: list[HeldBack] = []
        #: Why the preemption stage stopped in the last preemption phase, by its own rule
        #: (DECLINE decisions: never acted on, kept apart from the cycle's decisions).
        self.declined: list[Decision] = []
        #: Tasks first found in the last cycle to be too big for every node, with why; each
        #: task is reported once (`_reported`).
        self.unplaceable: list[tuple[Task, str]] = []
        #: Every task reported in `unplaceable` over the negotiator's life, in order (what a
        #: simulation reports; the daemon makes a negotiator per cycle and keeps its own).
        self.reported: list[tuple[Task, str]] = []
        self._reported: set[int] = set()
        self.placement = placement if placement is not None else Fastest()
        for stage in (order, preempt, admit, self.placement):
            if stage is not None:
                pool.listen(stage)
        # What the allocation loop calls, bound once (after the stages have attached: an order
        # may bind its `first` then): the loop runs about twice per simulated task.
        self._allocation_calls = (pool.has_free, order.first, pool.head, self.placement.choose)

    @property
    def stages(self) -> str:
        """The composition, as `--order/--preempt/--admit` would name it."""
        parts = [f"order={self.order.name}"]
        if self.preempt is not None:
            parts.append(f"preempt={self.preempt.name}")
        if self.admit is not None:
            parts.append(f"admit={self.admit.name}")
        return " ".join(parts)

    def submit(self, task: Task, now: float) -> Decision | None:
        """Admit (or refuse) a new task and queue it; returns the admission decision if any."""
        decision = self.admit.on_submit(task, now) if self.admit is not None else None
        self.pool.submit(task, now)
        if decision is not None and decision.kind == DROP:
            self.pool.drop(task, now)
        return decision

    def cycle(self, now: float, *, single: bool = False) -> list[Decision]:
        """One negotiation at time `now`; returns the decisions in the order they were made.

        `single` makes at most one allocation or one preemption (the published simulator's
        event loop, `Arrivals.SEQUENTIAL` in `sim/engine_options.py`): a preemption only if no
        free node was given out."""
        decisions: list[Decision] = []
        # What the cycle reports, cleared only when it holds something: a simulation runs a
        # cycle per event.
        if self.held_back:
            self.held_back = []
        if self.unplaceable:
            self.unplaceable = []
        if self.admit is not None:
            decisions.extend(self._apply_review(now))
        reviewed = len(decisions)
        self._allocate_free(now, decisions, single)
        # Preemption sees every queued task again, in queue order.
        self.pool.unblock_all(now)
        if self.preempt is not None and not (single and len(decisions) > reviewed):
            self._preempt(now, decisions, single)
            # What the preemption stage's last search set aside is queued again.
            self.pool.unblock_all(now)
        if self.pool.found_too_big:
            self._report_unplaceable()
        return decisions

    def _report_unplaceable(self) -> None:
        found = self.pool.found_too_big
        for task, reason in found:
            if task.seq not in self._reported:
                self._reported.add(task.seq)
                self.unplaceable.append((task, reason))
                self.reported.append((task, reason))
        found.clear()

    def _apply_review(self, now: float) -> list[Decision]:
        assert self.admit is not None
        decisions = self.admit.review(now)
        for decision in decisions:
            if decision.kind == DROP:
                self.pool.drop(decision.task, now)
            elif decision.kind == KILL:
                self.pool.kill(decision.task, now)
        return decisions

    def _allocate_free(self, now: float, decisions: list[Decision], single: bool) -> None:
        has_free, first, head, best_node = self._allocation_calls
        pool = self.pool
        # Made when a head first fits no node: user index -> the sizes that fitted none, and
        # the tasks set aside.
        unfit: dict[int, list[_Size]] | None = None
        looked: dict[int, int] = {}
        whole = pool.largest
        while has_free():
            user = first(now)
            if user is None:
                return
            assert user.idle_count > 0, f"{self.order.name} chose {user.name}, who has no idle task"
            task = head(user)
            if task is None:  # what it has left was set aside in this phase
                pool.block(user, now)
                continue
            sizes_unfit = unfit.get(user.index) if unfit is not None else None
            if sizes_unfit is None:  # the common case: nothing of the user's was set aside
                seen = False
                node = best_node(task)
            else:
                # Free room only shrinks in this phase: a task asking no less of anything
                # than one that fitted nowhere, matched alike, fits nowhere either, and is
                # not asked of the placement again; but a whole-machine task always is (the
                # placement may keep a machine for it).
                seen = any(map(_size(pool, task).no_smaller_than, sizes_unfit))
                node = None if seen and task.cpus < whole[0] - EPSILON else best_node(task)
            if node is None:
                # A task too big for every node is set aside whatever the rule: room freed
                # later can never make it fit, so it must not stop the phase (under `stop`, one
                # user's RequestMemory = 1e9 at the head of the queue stalled the whole pool).
                too_big = pool.set_aside_if_too_big(user, now)
                if self.allocation == STOP and not too_big:
                    return
                if unfit is None:
                    unfit = {}
                if sizes_unfit is None:
                    sizes_unfit = unfit[user.index] = []
                if not too_big and not seen:
                    sizes_unfit.append(_size(pool, task))
                count = looked[user.index] = looked.get(user.index, 0) + 1
                if len(sizes_unfit) > PARK_LIMIT or count > PARK_LOOKS or (
                        not too_big and pool.park(user, now) is None):
                    pool.block(user, now)
                continue
            order = self.order
            if self.explain:
                template, figures = self._placed(*order.why(user, now), task, node)
            else:
                template, figures = _NOT_EXPLAINED
            pool.start(task, node, now)
            # The Decision made as its NamedTuple's own constructor makes it, without the
            # call into that interpreted constructor (one allocation a task).
            decisions.append(_new_tuple(Decision, (ALLOCATE, task, node, order.name, template,
                                                   figures)))
            if single:
                return

    def _placed(self, template: str, figures: Mapping[str, Any], task: Task,
                node: Node) -> tuple[str, Mapping[str, Any]]:
        """The order's reason for an allocation, with the placement's choice of `node`."""
        placement = self.placement
        return (template + "; {placement} placement chose {machine} ({score_text} "
                "{placement_score:.6g})",
                {**figures, "placement": placement.name, "machine": node.name,
                 "score_text": placement.score_text,
                 "placement_score": placement.score(task, node)})

    def _preempt(self, now: float, decisions: list[Decision], single: bool) -> None:
        pool = self.pool
        preempt = self.preempt
        assert preempt is not None
        name = preempt.name
        # What the phase reports, cleared only when it holds something: a simulation runs a
        # phase per event.
        if self.declined:
            self.declined = []
        protected = pool.protected
        if protected:
            protected.clear()
        while (choice := preempt.choose(now)) is not None:
            if self.vacate_guard is not None:
                hold = self.vacate_guard(choice, now)
                if hold is not None:
                    self.held_back.append(HeldBack(choice, hold.rule))
                    if not hold.spared or len(self.held_back) >= HOLD_LIMIT:
                        break
                    # Protection follows the job, never its user: the stage looks past it.
                    protected.update(dict.fromkeys([task.seq for task in hold.spared],
                                                   hold.rule))
                    continue
            node = choice.node
            pool.vacate(choice.victim, now)
            decisions.append(Decision(VACATE, choice.victim, node, name,
                                      choice.vacate_template, choice.figures))
            for victim, figures in choice.more:
                pool.vacate(victim, now)
                decisions.append(Decision(VACATE, victim, node, name, choice.vacate_template,
                                          figures))
            assert pool.fits_free(choice.receiver, node), (
                f"{name} vacated {len(choice.victims)} task(s) on {node.name} and "
                f"{choice.receiver.id} still does not fit")
            pool.start(choice.receiver, node, now)
            decisions.append(
                Decision(ALLOCATE, choice.receiver, node, name,
                         choice.allocate_template, choice.figures)
            )
            # What the stage set aside in its search may have a move now.
            pool.unblock_all(now)
            if single:
                break
        else:
            # The stage stopped: why, asked only of a run that explains (a simulation keeping
            # no decisions runs thousands of phases whose stops nobody reads).
            declined = preempt.declined(now) if self.explain else None
            if declined is not None:
                self.declined.append(declined)
