"""The policy stages and the decisions they return.

A negotiation cycle runs up to three stages, each a small interface (as the Kubernetes
scheduler framework has one interface per extension point):

- `AdmitPolicy`: on submission, and once per cycle, may drop queued tasks, resize them, or
  kill running ones (Justice);
- `OrderPolicy`: who gets the next free slot (DRF, SDRF, DMFA-SRQ, HTCondor priority, and the
  allocation order of OSEP/HOSEP);
- `PreemptPolicy`: which running task(s) to vacate for whom when no free slot fits (OSEP,
  HOSEP, reclaim); on a partitionable machine a receiver may need several (`victims.py`).

Every stage is a `PoolListener`: it keeps its own incremental state current from the pool's
events, so a decision costs O(log n), not a pass over the pool. Every `Decision` names the
policy that made it and carries the figures behind it, formatted on demand into a sentence.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, NamedTuple

from gridfair.core.pool import Node, PoolListener, Task, UserState, fifo_key

ALLOCATE = "allocate"
VACATE = "vacate"
DROP = "drop"
KILL = "kill"
RESIZE = "resize"
#: A preemption a stage looked at and did not make, by its own rule, with why: recorded (the
#: negotiator's `declined`), never acted on.
DECLINE = "decline"

# Allocation rules: what a cycle does when the first user's next task fits no free node.
#: Stop allocating until the next arrival or completion (SDRF's Algorithm 1; the SDRF authors'
#: simulator does this for every allocator).
STOP = "stop"
#: Set the task aside and go on with the next task or user (HTCondor's negotiator).
BACKFILL = "backfill"
ALLOCATION_RULES = (STOP, BACKFILL)


class Decision(NamedTuple):
    """One action a policy decided, with why, in figures.

    `template` is a `str.format` pattern over `figures`; `reason` renders it. Rendering is
    deferred because the simulator makes millions of decisions and reads few reasons.
    """

    kind: str
    task: Task
    node: Node | None
    policy: str
    template: str
    figures: Mapping[str, Any]

    @property
    def reason(self) -> str:
        return self.template.format(**self.figures)

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "job": self.task.id,
            "user": self.task.user,
            "machine": self.node.name if self.node is not None else None,
            "policy": self.policy,
            "reason": self.reason,
            "figures": dict(self.figures),
        }


class Preemption(NamedTuple):
    """A preemption stage's choice: vacate `victim` (and the tasks of `more`) and start
    `receiver` on `node`.

    `victim` is the stage's own choice; `more` are further victims on the same node, each with
    its figures for `vacate_template`, when the victim alone does not free enough of the
    receiver's cpus, memory and GPUs (`victims.complete`; empty on a one-cpu slot). The
    allocation's figures are `figures`, which then also list every victim ("victims")."""

    victim: Task
    receiver: Task
    node: Node
    vacate_template: str
    allocate_template: str
    figures: Mapping[str, Any]
    more: tuple[tuple[Task, Mapping[str, Any]], ...] = ()

    @property
    def victims(self) -> tuple[Task, ...]:
        """Every task the preemption vacates, the stage's own choice first."""
        return (self.victim, *(task for task, _ in self.more))


class OrderPolicy(PoolListener, ABC):
    """Orders the users who want a slot now (`UserState.active`)."""

    name: str = "order"
    #: Task order inside a user's queue, as a key function (FIFO unless a paper says otherwise).
    task_key = staticmethod(fifo_key)
    #: The allocation rule a run uses with this order when neither the run nor its workload
    #: names one (`ALLOCATION_RULES`): the rule of the order's own paper.
    paper_allocation: str = BACKFILL
    #: Whether the pool should keep the SDRF authors' simulator's arithmetic (`Pool`'s
    #: `exact_accounting`): set by the `authors` form of the DRF family.
    exact_accounting: bool = False

    @abstractmethod
    def first(self, now: float) -> UserState | None:
        """The active user who goes next at time `now`, or None when no one is active."""

    def why(self, user: UserState, now: float) -> tuple[str, Mapping[str, Any]]:
        """Why `user` is first: a template and its figures (called just before it is served)."""
        return "{user} is first in {policy} order", {"user": user.name, "policy": self.name}

    def key_figures(self, user: UserState, now: float) -> Mapping[str, float]:
        """The figures this policy orders users by, for `shares` and `explain`."""
        return {}


class PreemptPolicy(PoolListener, ABC):
    """Picks a running task to vacate so an entitled user's idle task can run."""

    name: str = "preempt"

    @abstractmethod
    def choose(self, now: float) -> Preemption | None:
        """The next preemption the policy allows now, or None when it allows none."""

    def declined(self, now: float) -> Decision | None:
        """Why the stage's own rule stopped it in the cycle just run, although a receiver
        waited (a DECLINE naming the receiver's task, the victim's machine and the figures),
        or None (default: not told). Asked after the cycle's last `choose`, at most once."""
        return None

    def key_figures(self, user: UserState, now: float) -> Mapping[str, float]:
        return {}


class AdmitPolicy(PoolListener, ABC):
    """Admission control: decides on queued tasks before they may be ordered."""

    name: str = "admit"

    @abstractmethod
    def on_submit(self, task: Task, now: float) -> Decision | None:
        """Called before `task` enters the queue: None admits it as it is; a DROP refuses it;
        a RESIZE admits it with `task.cpus` changed."""

    def review(self, now: float) -> list[Decision]:
        """Once per cycle: drops of queued tasks and kills of running ones (default: none)."""
        return []

    def deadline_passed(self, task: Task, now: float) -> Decision | None:
        """Called when a running task's deadline passes: a KILL terminates it (default: no)."""
        return None
