"""The daemon's safety rules, applied through the negotiator's `vacate_guard` hook.

A preemption the policy wants is held back when:
- the cycle has already issued `max_vacates_per_cycle` vacates (no preemption storms);
- the snapshot is older than `max_snapshot_age` seconds (the pool has moved on);
and these two end the cycle's preemptions. It is also held back, for that victim alone, when:
- the victim has run less than `min_runtime` seconds (no thrashing of fresh starts; a start
  is gridfair's decision, since a steering authorizes one start);
- the victim job was itself preempted less than `preempt_cooldown` seconds ago (YuniKorn's
  15 s check and YARN's wait before kill are the same idea);
- the victim is an allocation still in flight (`gridfair.daemon.inflight`): gridfair's own
  decision, not yet started, is not undone before the pool has carried it out.
Protection follows the job, never its user: the preemption stage passes over a protected
victim to the next (`core.negotiator.Hold`), so one vacate, or one fresh start, shields no
other job of the same user (issue 43: a user-wide cool-down let a squatter keep an owner's
machines for hours).

`landing_timeout` is how long such an allocation holds its slot.

Each hold-back is recorded in the cycle's `held_back` so an administrator sees why a share was
not enforced.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from gridfair.core.negotiator import Hold
from gridfair.core.pool import Task
from gridfair.core.stages import Preemption


@dataclass(frozen=True)
class SafetyLimits:
    """The `[safety]` settings (their defaults live in the config schema)."""

    max_vacates_per_cycle: int
    min_runtime: float
    preempt_cooldown: float
    max_snapshot_age: float
    landing_timeout: float

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> SafetyLimits:
        return cls(
            max_vacates_per_cycle=section["max_vacates_per_cycle"],
            min_runtime=section["min_runtime"],
            preempt_cooldown=section["preempt_cooldown"],
            max_snapshot_age=section["max_snapshot_age"],
            landing_timeout=section["landing_timeout"],
        )


def snapshot_too_old(limits: SafetyLimits, snapshot_time: float, now: float) -> str | None:
    """The rule against acting on a stale snapshot, or None when it is fresh enough."""
    age = now - snapshot_time
    if age > limits.max_snapshot_age:
        return (f"max_snapshot_age: the snapshot is {age:.0f} s old "
                f"(limit {limits.max_snapshot_age:.0f} s)")
    return None


class VacateGuard:
    """One cycle's guard: call it as the negotiator's `vacate_guard`. `last_preempted` is
    when each job was last vacated (job id -> time), within the cool-down."""

    def __init__(
        self, limits: SafetyLimits, snapshot_time: float, last_preempted: Mapping[str, float],
        in_flight: Collection[str] = (),
    ) -> None:
        self.limits = limits
        self.snapshot_time = snapshot_time
        self.last_preempted = last_preempted
        self.in_flight = in_flight
        self.allowed = 0

    def __call__(self, choice: Preemption, now: float) -> Hold | None:
        limits = self.limits
        stale = snapshot_too_old(limits, self.snapshot_time, now)
        if stale:
            return Hold(stale)
        # A preemption on a partitionable machine may vacate several tasks: each is a vacate,
        # and each must pass every rule.
        victims = choice.victims
        if self.allowed >= limits.max_vacates_per_cycle:
            return Hold(f"max_vacates_per_cycle: {limits.max_vacates_per_cycle} already this "
                        "cycle")
        if self.allowed + len(victims) > limits.max_vacates_per_cycle:
            return Hold(f"max_vacates_per_cycle: {self.allowed} already this cycle, and this "
                        f"preemption vacates {len(victims)} (limit "
                        f"{limits.max_vacates_per_cycle})")
        for victim in victims:
            rule = self.protects(victim, choice, now)
            if rule is not None:
                return Hold(rule, (victim,))
        self.allowed += len(victims)
        return None

    def protects(self, victim: Task, choice: Preemption, now: float) -> str | None:
        """The rule that spares this victim now, or None."""
        limits = self.limits
        if victim.id in self.in_flight:
            return (f"in_flight: {victim.id} was allocated to {choice.node.name} and has not "
                    "started yet")
        ran = now - victim.start_time
        if ran < limits.min_runtime:
            return (f"min_runtime: {victim.id} has run {ran:.0f} s "
                    f"(minimum {limits.min_runtime:.0f} s)")
        preempted = self.last_preempted.get(victim.id)
        if preempted is not None and now - preempted < limits.preempt_cooldown:
            return (f"preempt_cooldown: {victim.id} was preempted {now - preempted:.0f} s ago "
                    f"(cool-down {limits.preempt_cooldown:.0f} s)")
        return None
