"""HTCondor's user priority, the baseline a grid would use today (notes/htcondor.md, 1).

Real user priority (Accountant.cpp, UpdatePriorities):
    beta = 0.5 ^ (dt / PRIORITY_HALFLIFE)
    RUP(t) = beta RUP(t - dt) + (1 - beta) RecentUsage,   floored at MinPriority = 0.5
RecentUsage is the user's weighted resources in use: each running job weighs its slot's
SLOT_WEIGHT, by default Cpus (cpus held now). `slot_weight` takes another weight as HTCondor's
config writes one, a linear expression in the job's Cpus, Memory (MiB) and GPUs, e.g.
"Cpus + 10 * GPUs" (`SlotWeight`): linear, so a user's weighted usage is the weight of its
summed usage and stays O(1) per event.
Usage changes only on the user's own events, so the update is taken in closed form between
them (exactly the formula above with dt the time since the last event), and the floor is
applied whenever RUP is committed or read. A new user starts at MinPriority.
Effective priority EUP = RUP x priority factor. This implementation's default factor is
HTCondor's DEFAULT_PRIO_FACTOR, 1000 (so figures read as condor_userprio prints them; a common
factor does not change the order); per-user factors may be configured (> 0).

Order (default): the waiting user of least EUP first (HTCondor's submitter order, EUP
ascending). The pie: each submitter's slice is (1/EUP_i) / sum_j (1/EUP_j) of the pool
(`pie_shares`). With the order alone, the submitter of least EUP takes every slot it can use
in a negotiation (EUPs do not move within one instant); HTCondor stops it at its slice and
spins again with what is left. The `pie` option reaches that allocation slot by slot without
the per-cycle normalisation: the next slot goes to the submitter whose slice would be least
filled after taking it, i.e. least (cpus in use + its next job's cpus) x EUP, since slices
are proportional to 1/EUP (users using nothing go in EUP order).
PRIORITY_HALFLIFE defaults to 86400 s and must be > 0.

EUPs drift between events (they decay towards usage), so users are kept in a `LiveTree`:
EUP = factor x max(0.5, U + (RUP(t0) - U) x) is a max of two lines in x (scaled by
cpus in use + next job's cpus under `pie`).
Ties: equal keys go to the user seen first in the pool (`UserState.index`).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gridfair.core.pool import CPUS, GPUS, MEMORY, Task, UserState
from gridfair.core.stages import option
from gridfair.errors import ConfigError
from gridfair.policies.decaying_order import DecayingOrder
from gridfair.policies.live_tree import Line

DEFAULT_HALFLIFE = 86400.0
DEFAULT_PRIORITY_FACTOR = 1000.0
MIN_PRIORITY = 0.5

#: The attribute names a slot weight may read, as HTCondor spells them (matched in any case);
#: a module constant, not a class one: a compiled dataclass would take it for a field.
WEIGHT_ATTRIBUTES = ("Cpus", "Memory", "GPUs")


@dataclass(frozen=True)
class SlotWeight:
    """A job's weight: cpus x Cpus + memory x Memory + gpus x GPUs + slot (per job), the
    coefficients >= 0. `parse` reads it from an expression as HTCondor's SLOT_WEIGHT is
    written (attribute names in any case, + - * / and parentheses, numbers)."""

    cpus: float = 1.0
    memory: float = 0.0
    gpus: float = 0.0
    slot: float = 0.0
    text: str = "Cpus"

    @property
    def is_cpus(self) -> bool:
        """HTCondor's default, Cpus."""
        return (self.cpus, self.memory, self.gpus, self.slot) == (1.0, 0.0, 0.0, 0.0)

    def of_usage(self, user: UserState) -> float:
        """The weight of everything the user runs now."""
        usage = user.usage
        return (self.cpus * usage[CPUS] + self.memory * usage[MEMORY] + self.gpus * usage[GPUS]
                + self.slot * user.running)

    def of_task(self, task: Task) -> float:
        return self.cpus * task.cpus + self.memory * task.memory + self.gpus * task.gpus + \
            self.slot

    @classmethod
    def parse(cls, text: str) -> SlotWeight:
        """The weight an expression gives; a ConfigError names what is not linear in Cpus,
        Memory and GPUs with coefficients >= 0."""
        if not isinstance(text, str):
            raise ConfigError(f"slot_weight must be an expression (a string), not {text!r}")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError:
            raise ConfigError(f"slot_weight {text!r} is not an expression") from None
        terms = _linear(tree.body, text)
        coefficients = [terms.get(name.lower(), 0.0) for name in WEIGHT_ATTRIBUTES]
        slot = terms.get("", 0.0)
        if any(value < 0 or not math.isfinite(value) for value in (*coefficients, slot)):
            raise ConfigError(f"slot_weight {text!r}: every coefficient must be finite and "
                              ">= 0 (a job never weighs less than nothing)")
        if not any(coefficients):
            raise ConfigError(f"slot_weight {text!r} reads none of "
                              f"{', '.join(WEIGHT_ATTRIBUTES)}")
        cpus, memory, gpus = coefficients
        return cls(cpus, memory, gpus, slot, text.strip())


def _linear(node: ast.expr, text: str) -> dict[str, float]:
    """An expression as {attribute (lower case), "" for the constant: coefficient}."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and \
            not isinstance(node.value, bool):
        return {"": float(node.value)}
    if isinstance(node, ast.Name):
        name = node.id.lower()
        if name not in {attribute.lower() for attribute in WEIGHT_ATTRIBUTES}:
            raise ConfigError(f"slot_weight {text!r}: unknown attribute {node.id!r} (known: "
                              f"{', '.join(WEIGHT_ATTRIBUTES)})")
        return {name: 1.0}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
        return {key: sign * value for key, value in _linear(node.operand, text).items()}
    if isinstance(node, ast.BinOp):
        left, right = _linear(node.left, text), _linear(node.right, text)
        if isinstance(node.op, ast.Add | ast.Sub):
            sign = 1.0 if isinstance(node.op, ast.Add) else -1.0
            return {key: left.get(key, 0.0) + sign * right.get(key, 0.0)
                    for key in {**left, **right}}
        constant = right if isinstance(node.op, ast.Div) else (
            right if set(right) <= {""} else left if set(left) <= {""} else None)
        if constant is not None and set(constant) <= {""}:
            factor = constant.get("", 0.0)
            other = left if constant is right else right
            if isinstance(node.op, ast.Mult):
                return {key: value * factor for key, value in other.items()}
            if isinstance(node.op, ast.Div) and factor != 0:
                return {key: value / factor for key, value in other.items()}
    raise ConfigError(f"slot_weight {text!r}: only sums of Cpus, Memory and GPUs times or "
                      "over numbers are supported (a weight linear in what a job holds)")


def _positive(name: str, value: Any) -> float:
    if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name} must be a number > 0, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class CondorPriorityOptions:
    """The HTCondor priority's options (HTCondor's knobs of the same meaning)."""

    halflife: float = option(DEFAULT_HALFLIFE, "PRIORITY_HALFLIFE, seconds")
    priority_factor: float = option(DEFAULT_PRIORITY_FACTOR, "DEFAULT_PRIO_FACTOR")
    priority_factors: Mapping[str, float] | None = option(None, "each user's priority factor")
    condor_pie: bool = option(False, "pie spin: serve the least-filled pie slice first")
    slot_weight: str = option(
        "Cpus", "HTCondor priority: a job's weight, as SLOT_WEIGHT (default Cpus), linear in "
        "Cpus, Memory and GPUs", flag=True, swept=True)


class CondorPriorityOrder(DecayingOrder):
    """Free slots to the waiting user of least effective priority."""

    name = "condor"
    state_name = "priorities"
    level_size = 1
    Options = CondorPriorityOptions

    @classmethod
    def from_options(cls, options: CondorPriorityOptions) -> CondorPriorityOrder:
        return cls(halflife=options.halflife, factor=options.priority_factor,
                   factors=options.priority_factors, pie=options.condor_pie,
                   slot_weight=options.slot_weight)

    def __init__(
        self,
        *,
        halflife: float = DEFAULT_HALFLIFE,
        factor: float = DEFAULT_PRIORITY_FACTOR,
        factors: Mapping[str, float] | None = None,
        pie: bool = False,
        slot_weight: str = "Cpus",
    ) -> None:
        self.halflife = _positive("PRIORITY_HALFLIFE", halflife)
        super().__init__(self.halflife / math.log(2.0))
        self.factor = _positive("the priority factor", factor)
        self.factors = {name: _positive(f"the priority factor of {name!r}", value)
                        for name, value in (factors or {}).items()}
        self.pie = pie
        self.slot_weight = SlotWeight.parse(slot_weight)
        # The default weight is read straight from the usage: the same figures, bit for bit,
        # and no arithmetic per event.
        self.weighs_cpus = self.slot_weight.is_cpus
        if pie:
            held = "cpus" if self.weighs_cpus else "weighted use (SLOT_WEIGHT {slot_weight})"
            self.why_template = (
                "free slot to {user}: least-filled pie slice, (" + held + " in use "
                "{cpus_in_use:g} + next job's {next_cpus:g}) x effective priority "
                "{effective_priority:.4g} = {priority:.4g}, ")

    def factor_of(self, user: UserState) -> float:
        return self.factors.get(user.name, self.factor)

    # ------------------------------------------------------------ the rule
    def inputs(self, user: UserState) -> tuple[float, float]:
        head = self.pool.head(user) if self.pie else None
        if self.weighs_cpus:
            return (user.usage[CPUS], head.cpus if head is not None else 0.0)
        weight = self.slot_weight
        return (weight.of_usage(user), weight.of_task(head) if head is not None else 0.0)

    def basis(self, user: UserState) -> tuple:
        return (*self.inputs(user), self.factor_of(user))

    def target(self, user: UserState, basis: tuple) -> list[float]:
        return [basis[0]]

    def initial_level(self) -> list[float]:
        return [MIN_PRIORITY]

    def settle(self, level: list[float]) -> list[float]:
        return [max(level[0], MIN_PRIORITY)]

    def idle_target(self) -> list[float]:
        return [0.0]  # no usage; `settle` floors it at MIN_PRIORITY

    def curve(self, user: UserState, basis: tuple, level: list[float], target: list[float],
              scale: float = 1.0) -> list[Line]:
        usage, next_cpus, factor = basis
        weight = factor * (usage + next_cpus if self.pie else 1.0)
        return [(weight * usage, weight * (level[0] - usage) * scale),
                (weight * MIN_PRIORITY, 0.0)]

    # ------------------------------------------------------- explanations
    why_template = ("free slot to {user}: least effective priority {priority:.4g} (real "
                    "priority {real_priority:.4g} x factor {priority_factor:g}), ")

    def real_priority(self, user: UserState, now: float) -> float:
        return self.settle(self.levels(user, now))[0]

    def effective_priority(self, user: UserState, now: float) -> float:
        return self.real_priority(user, now) * self.factor_of(user)

    def waiting(self, now: float) -> Iterator[UserState]:
        """The waiting submitters by effective priority (a report: O(n))."""
        return self.tree.ordered(now)

    def pie_shares(self, now: float) -> dict[str, float]:
        """Each waiting submitter's slice, (1/EUP_i) / sum_j (1/EUP_j) (a report: O(n))."""
        inverse = {user.name: 1.0 / self.effective_priority(user, now)
                   for user in self.waiting(now)}
        total = math.fsum(inverse.values())
        return {name: value / total for name, value in inverse.items()}

    def describe(self, basis: tuple, level: list[float]) -> dict[str, Any]:
        usage, next_cpus, factor = basis
        real = self.settle(level)[0]
        figures = {
            "real_priority": real,
            "priority_factor": factor,
            "effective_priority": real * factor,
            "cpus_in_use": usage,  # weighted by SLOT_WEIGHT, when it is not Cpus
        }
        if not self.weighs_cpus:
            figures["slot_weight"] = self.slot_weight.text
        if self.pie:
            figures["next_cpus"] = next_cpus
        return figures
