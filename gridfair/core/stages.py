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

What a stage can do beyond its role is declared on its class, where a reader finds it: its
options (`Options`, a frozen dataclass decoded once by `decode_options`), class attributes
(`state_from_totals`, `owner_share_rule`, `measure`, `needs_order`) and the runtime-checkable
protocols below (`ShareKeyed`, `Stateful`, `Figured`, `Entitled`), which callers test with
`isinstance` rather than by a name list or `hasattr` (as the Kubernetes scheduler framework
declares each optional extension point an interface).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, NamedTuple, Protocol, Self, runtime_checkable

from gridfair.core.pool import Node, PoolListener, Task, UserState, fifo_key
from gridfair.core.shares import ALL_RESOURCES
from gridfair.errors import ConfigError

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

#: The owner-share rules whose invariant `simulate --check` verifies after every cycle
#: (`sim/records.owner_share_violations`): OSEP's Fig. 1 on nodes, HOSEP's Fig. 2 on MFlops.
OWNER_SHARE_RULES = ("osep", "hosep")


# ------------------------------------------------------------------- options
def option(default: Any, help: str, *, choices: Sequence[str] | None = None,
           flag: bool = False, swept: bool = False) -> Any:
    """A field of a stage's `Options`: its default (the stage's own), a line of help, its
    choices when they are a known set; `flag`: `simulate` takes it as a flag; `swept`: a
    sweep takes it as a parameter."""
    return field(default=default, metadata={"help": help, "choices": choices, "flag": flag,
                                            "swept": swept})


@dataclass(frozen=True)
class NoOptions:
    """The options of a stage that reads none."""


def _type_error(default: Any, value: Any) -> str | None:
    """What is wrong with `value` for an option whose default is `default`, by the default's
    type (scalars only: the stages check mappings and sequences themselves), or None."""
    if isinstance(default, bool):
        return None if isinstance(value, bool) else "true or false"
    if isinstance(default, int | float) and (isinstance(value, bool)
                                             or not isinstance(value, int | float)):
        return "a number"
    if isinstance(default, str) and not isinstance(value, str):
        return "a string"
    return None


def decode_options(options_type: type[Any], given: Mapping[str, Any]) -> Any:
    """The options `options_type` declares, from `given` (option name -> value, as a config
    or the command line writes them): an absent or None option takes the stage's default; a
    value of the wrong kind is a ConfigError naming the option."""
    values = {}
    for declared in fields(options_type):
        value = given.get(declared.name)
        if value is None:
            continue
        wrong = _type_error(declared.default, value)
        if wrong is not None:
            raise ConfigError(f"policy option {declared.name}: expected {wrong}, "
                              f"got {value!r}")
        values[declared.name] = value
    return options_type(**values)


def option_names(options_type: type[Any]) -> list[str]:
    """The option names a stage's `Options` declares."""
    return [declared.name for declared in fields(options_type)]


# --------------------------------------------------------------- capabilities
@runtime_checkable
class ShareKeyed(Protocol):
    """An order that can tell a user's key were it to hold something else (`usage`): what
    fair-share preemption (`policies/fair_preempt.py`) weighs moves by."""

    def share_key(self, user: UserState, usage: Sequence[float], now: float) -> tuple: ...


@runtime_checkable
class Stateful(Protocol):
    """A stage whose state outlives a cycle: the daemon saves it after each cycle and
    restores it before the next (`policy_state`)."""

    def export_state(self, now: float) -> dict[str, Any]: ...

    def import_state(self, state: Mapping[str, Any], source: str = "state") -> None: ...


@runtime_checkable
class Figured(Protocol):
    """A stage with per-user figures for `shares`, `explain` and the daemon's usage rows."""

    def key_figures(self, user: UserState, now: float) -> Mapping[str, Any]: ...


class UserWeights(Protocol):
    def unknown(self, users: Mapping[str, UserState]) -> list[str]: ...


@runtime_checkable
class Entitled(Protocol):
    """A stage that weighs users by configured entitlements (the DRF family), which may name
    users the pool does not have."""

    entitlements: UserWeights


class Stage:
    """What every stage declares on its class: its options and what it can do."""

    name: str
    #: The options the stage reads, a frozen dataclass of `option` fields (`decode_options`).
    Options: ClassVar[type[Any]] = NoOptions
    #: The stage's state is a function of the pool's current totals and running tasks, so
    #: what `Pool.announce` gives it equals what a replay of every event would (the daemon's
    #: kept pool may serve it: `classads/kept_pool.py`).
    state_from_totals: ClassVar[bool] = False


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


class OrderPolicy(Stage, PoolListener, ABC):
    """Orders the users who want a slot now (`UserState.active`)."""

    name: str = "order"
    #: What the order's key is, in the sentences of stages that weigh by it (`fair`).
    measure: ClassVar[str] = "share"
    #: The resources (indexes of `UserState.usage`) the order takes shares over: the DRF
    #: family's `resources` option; the daemon's dominant share is over these.
    resources: tuple[int, ...] = ALL_RESOURCES
    #: Task order inside a user's queue, as a key function (FIFO unless a paper says otherwise);
    #: a class's, read off the class too (`Pool(task_key=HosepOrder.task_key)`), compiled or not.
    task_key: ClassVar[staticmethod[[Task], Any]] = staticmethod(fifo_key)
    #: The allocation rule a run uses with this order when neither the run nor its workload
    #: names one (`ALLOCATION_RULES`): the rule of the order's own paper.
    paper_allocation: str = BACKFILL
    #: Whether the pool should keep the SDRF authors' simulator's arithmetic (`Pool`'s
    #: `exact_accounting`): set by the `authors` form of the DRF family.
    exact_accounting: bool = False

    @classmethod
    def from_options(cls, options: Any) -> Self:
        """The stage, from its decoded `Options`."""
        return cls()

    @abstractmethod
    def first(self, now: float) -> UserState | None:
        """The active user who goes next at time `now`, or None when no one is active."""

    def why(self, user: UserState, now: float) -> tuple[str, Mapping[str, Any]]:
        """Why `user` is first: a template and its figures (called just before it is served)."""
        return "{user} is first in {policy} order", {"user": user.name, "policy": self.name}

    def key_figures(self, user: UserState, now: float) -> Mapping[str, float]:
        """The figures this policy orders users by, for `shares` and `explain`."""
        return {}


class PreemptPolicy(Stage, PoolListener, ABC):
    """Picks a running task to vacate so an entitled user's idle task can run."""

    name: str = "preempt"
    #: The capability the run's order stage must have (a protocol), and what it is called in
    #: the error when it lacks it; None: any order.
    needs_order: ClassVar[type | None] = None
    needs_order_text: ClassVar[str] = ""
    #: The owner-share rule (`OWNER_SHARE_RULES`) whose invariant `simulate --check`
    #: verifies for this stage, or None.
    owner_share_rule: ClassVar[str | None] = None
    #: Whether the stage compares omega with |PowerDiff| (Eq. 6), for that check.
    absolute: bool = False

    @classmethod
    def from_options(cls, options: Any, order: OrderPolicy) -> Self:
        """The stage, from its decoded `Options` and the run's order stage."""
        return cls()

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


class AdmitPolicy(Stage, PoolListener, ABC):
    """Admission control: decides on queued tasks before they may be ordered."""

    name: str = "admit"

    @classmethod
    def from_options(cls, options: Any) -> Self:
        """The stage, from its decoded `Options`."""
        return cls()

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
