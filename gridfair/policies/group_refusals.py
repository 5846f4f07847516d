"""Why `group-fair` (`policies/group_preempt.py`) found no move for a group below its
entitlement: the DECLINE the daemon journals beside its decisions (`explain` shows it), in
figures, so that a group that waits can be told why.

Each phase keeps, per receiver group, the refusal closest to a move among its jobs tried
(`Refusals.note`): a move the rule refused on a machine where the room was there (the least
rise of the distance first) before a machine that lacked room (the least lacking first), and
that before finding no group to take from. At the end of a cycle the stage reports one of
them (`PreemptPolicy.declined` is asked once a cycle): the furthest below of the groups whose
refusal changed since it was last journaled. A refusal is the same as the last one journaled
when its clause, machine, what the machine lacked, the job's size and the group's share and
entitlement (to 3 decimals) are: a steady pool journals one line per receiver group, not one
a cycle. A group that found a move, or waited for nothing, is forgotten, so that its next
refusal is journaled even if it reads as an old one. The daemon keeps this memory from cycle
to cycle with the stage's window (`export_state`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from gridfair.core.pool import Node, Task
from gridfair.core.stages import DECLINE, Decision
from gridfair.core.victims import sizes

_WAITS = ("group-fair finds no move for {receiver_job} of {receiver} (group {receiver_group}: "
          "{receiver_share:.4g} of the pool against an entitlement of "
          "{receiver_entitlement:.4g}, {below:.4g} below): ")
#: Why a receiver group waits, by clause.
TEMPLATES = {
    "none over": _WAITS + "no other group with jobs running holds its guarantee",
    "sides": _WAITS + "the nearest group to take from, {victim_group}, is refused: {why}",
    "room": _WAITS + "the machine closest to holding its job, {machine}, would still lack "
            "{lacked} once every job it may vacate there ({victims}) had left",
    "rule": _WAITS + "on {machine}, vacating {victims} is refused: {why}",
}
#: The order of the clauses, closest to a move first.
_CLOSENESS = {"rule": 0, "room": 1, "sides": 2, "none over": 3}
_NAMES = ("cpus", "MiB of memory", "GPUs")


class Refusal(NamedTuple):
    """Why one job of a receiver group found no move: its clause, how close it came
    (`closeness`, least first) and the figures of `TEMPLATES[clause]`."""

    clause: str
    closeness: tuple[Any, ...]
    receiver: Task
    machine: Node | None
    figures: Mapping[str, Any]

    def signature(self) -> list[Any]:
        """What makes it another refusal than the last journaled (a list, as the daemon's
        saved state gives it back)."""
        figures = self.figures
        return [self.clause, figures.get("machine"), figures.get("lacked"), figures.get("why"),
                list(sizes(self.receiver)), round(figures["receiver_share"], 3),
                round(figures["receiver_entitlement"], 3)]


def lacked_text(short: Sequence[float]) -> str:
    """What a machine lacks, per resource: '2 cpus, 4096 MiB of memory'."""
    return ", ".join(f"{amount:.4g} {name}" for amount, name in zip(short, _NAMES, strict=True)
                     if amount > 0) or "nothing"


def refusal(clause: str, closeness: float, receiver: Task, machine: Node | None,
            figures: Mapping[str, Any]) -> Refusal:
    """A refusal of `clause`, `closeness` (least first) among those of its clause."""
    return Refusal(clause, (_CLOSENESS[clause], closeness,
                            machine.name if machine is not None else ""),
                   receiver, machine, figures)


class Refusals:
    """A phase's refusals per receiver group, and the last one journaled of each."""

    def __init__(self) -> None:
        self.found: dict[str, Refusal] = {}
        #: Receiver group -> the signature of its refusal last journaled.
        self.journaled: dict[str, list[Any]] = {}

    def clear(self) -> None:
        """A new phase: only the last phase of a cycle says why the stage stopped."""
        self.found.clear()

    def note(self, group: str, found: Refusal) -> None:
        """Keep `found` if it is the group's closest to a move this phase."""
        kept = self.found.get(group)
        if kept is None or found.closeness < kept.closeness:
            self.found[group] = found

    def declined(self, policy: str, groups: Sequence[str]) -> Decision | None:
        """The refusal to journal now: the first of `groups` (receivers, furthest below
        first) whose refusal is not the one last journaled for it; groups that found no
        refusal this phase are forgotten."""
        found = self.found
        self.journaled = {group: signature for group, signature in self.journaled.items()
                          if group in found}
        for group in groups:
            chosen = found.get(group)
            if chosen is None:
                continue
            signature = chosen.signature()
            if self.journaled.get(group) == signature:
                continue
            self.journaled[group] = signature
            return Decision(DECLINE, chosen.receiver, chosen.machine, policy,
                            TEMPLATES[chosen.clause], dict(chosen.figures, rule=chosen.clause))
        return None
