"""Claims a restarted schedd left behind, released: a dynamic slot claimed and idle, with no
job, for longer than `IDLE_BOUND`, whose schedd started after the claim was made.

Why: a schedd that restarts (seen live in Showcase 2: signal 11 in `send_vacate` from
`pcccStopCallback`, `docs/results/live-pool.md`) forgets the claims it held idle, and it
reconnects only the claims of running jobs. The startd keeps such a claim until its lease
runs out or the schedd answers one of its ALIVEs with "unknown claim" (`Claim::sendAlive`
and `sendAliveResponseHandler`, HTCondor 25.14 `condor_startd.V6/claim.cpp`): an ALIVE goes
every third of the claim's lease, the lease being the job's `JobLeaseDuration` (2,400 s
by default) or `ALIVE_INTERVAL` (300 s) x `MAX_CLAIM_ALIVES_MISSED` (6), so 600-800 s;
`CLAIM_WORKLIFE` (1,200 s) ends an idle claim later still. Meanwhile the claim's room is
its user's in the policy's view and no job can start there (60-88 s and more, seen live).

What separates an orphan from a claim HTCondor's claim reuse or gridfair's steering ahead
keeps (idle between two jobs of its user for a second or so: a live schedd starts the next
job on it at once or releases it, `configs/htcondor-pool.config`):
- idle with no job for `IDLE_BOUND` (30 s), an order of magnitude beyond the second a kept
  claim waits and far inside HTCondor's own 600-1,200 s;
- and its schedd (the slot's `RemoteScheddName`) advertises a `DaemonStartTime` later than
  the claim's start (the slot's `EnteredCurrentState`, Claimed since then): the process that
  made the claim is gone. A schedd not listed, or listed twice with different start times,
  proves nothing: the claim is kept.
Every figure is read from slot ads the startd writes and schedd ads the schedd writes, never
from a job ad: a user writes its jobs' attributes, so no attribute of any job can get a
claim released, another user's or its own.

The release: `Startd.vacateSlot(name, VacateType.Fast)`, the startd's VACATE_CLAIM_FAST on
that one slot (what `condor_vacate -fast` sends), taken from an ADMINISTRATOR; the startd
ends the claim and the dynamic slot's room goes back to its partitionable slot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import classad2
import htcondor2

from gridfair.daemon.backends.htcondor.state import POOL_ERRORS, PoolState

#: Seconds a dynamic slot's claim must have been idle with no job before it may be released.
IDLE_BOUND = 30.0
#: The slots that may hold an orphaned claim: claimed, idle, dynamic, naming no job.
SLOT_CONSTRAINT = ('SlotType == "Dynamic" && State == "Claimed" && Activity == "Idle" '
                   "&& JobId =?= undefined")
SLOT_ATTRIBUTES = ["Name", "Machine", "MyAddress", "RemoteUser", "RemoteScheddName",
                   "EnteredCurrentState", "EnteredCurrentActivity", "Cpus", "Memory",
                   "State", "Activity", "SlotType", "JobId"]
SCHEDD_ATTRIBUTES = ["Name", "DaemonStartTime"]


@dataclass(frozen=True)
class OrphanedClaim:
    """A claim to release, with the figures that show it orphaned."""
    slot: str
    user: str
    schedd: str
    claimed_at: float  # the slot's EnteredCurrentState
    idle_since: float  # the slot's EnteredCurrentActivity
    schedd_started: float  # the schedd's DaemonStartTime
    cpus: float
    memory: float
    location: Any  # the slot's ad: the startd's address

    def note(self, now: float, problem: str | None) -> str:
        """The journal's line (the cycle's events) of the release and its outcome."""
        done = "released" if problem is None else f"not released ({problem})"
        return (f"{self.slot}: idle claim of {self.user} {done}: claimed at "
                f"{self.claimed_at:.0f}, idle with no job for {now - self.idle_since:.0f} s "
                f"(bound {IDLE_BOUND:.0f} s), its schedd {self.schedd} restarted "
                f"{self.schedd_started - self.claimed_at:.0f} s after the claim was made; "
                f"it held {self.cpus:g} cpus, {self.memory:g} MB")


def orphaned(slot_ads: Iterable[Any], schedd_ads: Iterable[Any], now: float,
             bound: float = IDLE_BOUND) -> list[OrphanedClaim]:
    """The claims of `slot_ads` (startd ads) that are orphaned, as the module says, given
    the `schedd_ads` (collector's schedd ads) and the time `now`."""
    started: dict[str, set[float]] = {}
    for ad in schedd_ads:
        when = _number(ad, "DaemonStartTime")
        if when is not None:
            started.setdefault(str(ad.get("Name")), set()).add(when)
    found = []
    for ad in slot_ads:
        if not (ad.get("SlotType") == "Dynamic" and ad.get("State") == "Claimed"
                and ad.get("Activity") == "Idle" and ad.get("JobId") is None):
            continue
        claimed_at = _number(ad, "EnteredCurrentState")
        idle_since = _number(ad, "EnteredCurrentActivity")
        schedd = ad.get("RemoteScheddName")
        starts = started.get(str(schedd), set()) if isinstance(schedd, str) else set()
        if claimed_at is None or idle_since is None or len(starts) != 1:
            continue
        [schedd_started] = starts
        if now - idle_since < bound or schedd_started <= claimed_at:
            continue
        found.append(OrphanedClaim(
            slot=str(ad.get("Name")), user=str(ad.get("RemoteUser", "?")), schedd=str(schedd),
            claimed_at=claimed_at, idle_since=idle_since, schedd_started=schedd_started,
            cpus=_number(ad, "Cpus") or 0.0, memory=_number(ad, "Memory") or 0.0,
            location=ad))
    return found


def _number(ad: Any, name: str) -> float | None:
    """A literal number of the ad (an expression, or a missing one, is None)."""
    value = ad.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


class ClaimReleaser:
    """Finds the orphaned claims on every collector that answers and releases each."""

    def __init__(self, state: PoolState, *,
                 startd_factory: Callable[[classad2.ClassAd], Any] = htcondor2.Startd) -> None:
        self.state = state
        self.startd_factory = startd_factory

    def release(self, now: float) -> list[str]:
        """Release each orphaned claim; a line per claim (`OrphanedClaim.note`). A
        collector that does not answer is skipped: its claims wait for the next cycle."""
        slots: list[Any] = []
        schedds: list[Any] = []
        for _, collector in self.state.for_actions():
            try:
                slots += collector.query(htcondor2.AdType.Startd, SLOT_CONSTRAINT,
                                         SLOT_ATTRIBUTES)
                if slots:
                    schedds += collector.query(htcondor2.AdType.Schedd, "true",
                                               SCHEDD_ATTRIBUTES)
            except POOL_ERRORS:
                continue
        return [claim.note(now, self._release_one(claim))
                for claim in orphaned(_one_per_name(slots), schedds, now)]

    def _release_one(self, claim: OrphanedClaim) -> str | None:
        try:
            self.startd_factory(claim.location).vacateSlot(claim.slot,
                                                           htcondor2.VacateType.Fast)
        except POOL_ERRORS as error:
            return f"the startd refused: {error}"
        return None


def _one_per_name(ads: Sequence[Any]) -> list[Any]:
    """The slot ads, each name once (the first collector's: both of an HA pair hear it)."""
    by_name: dict[str, Any] = {}
    for ad in ads:
        by_name.setdefault(str(ad.get("Name")), ad)
    return list(by_name.values())
