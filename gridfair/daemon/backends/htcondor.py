"""The `htcondor` backend: a real HTCondor pool through the `htcondor2` bindings.

Reading, each cycle:
- slots: `Collector.query(AdType.Startd, constraint, projection)`;
- jobs: `Collector.locateAll(DaemonType.Schedd)`, then `Schedd.query(constraint, projection)`
  on every schedd found. Projections, never whole ads: the attributes in
  `backends.ads.SLOT_ATTRIBUTES` / `JOB_ATTRIBUTES` plus the owner and power attributes.
  A schedd that does not answer is reported as a skipped source and the others are used
  (its running jobs are still seen on their slots); no schedd answering, or the collector
  not answering, fails the cycle.

Acting:
- vacate: `Schedd.act(JobAction.Vacate, [job_id])` on the job's own schedd, one job per
  call, because the result ad only has totals (`TotalSuccess`, `TotalNotFound`, ...) and the
  journal needs each job's outcome. A vacate is graceful: the job goes back to idle.
- allocate: there is no binding for `condor_now`, and HTCondor's negotiator makes the
  matches. gridfair steers it: the job gets the attribute `GridfairSlot = "<slot name>"`
  (`Schedd.edit`) and the schedd is asked to reschedule. The pool's configuration makes the
  negotiator prefer that slot for that job, e.g.
  `NEGOTIATOR_PRE_JOB_RANK = 1e15 * (TARGET.GridfairSlot =?= MY.Name) + <the default>`.
  Limits (docs/daemon.md): HTCondor still decides whose turn it is (its own user
  priorities), so an allocation is a strong preference, not a command; a `confirmed`
  allocation means the edit was accepted, and the next snapshot shows whether it ran there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import classad2
import htcondor2

from gridfair.classads.reader import SourcedAd
from gridfair.classads.views import AdConfig
from gridfair.daemon.backends import ActionFailed, PoolBackend, PoolUnavailable
from gridfair.daemon.backends.ads import JOB_ATTRIBUTES, SLOT_ATTRIBUTES, snapshot_from_ads
from gridfair.model import Job, Machine, SkippedAd, Snapshot

#: The result attributes of `Schedd.act` that explain a failure, in the order checked.
ACT_FAILURES = (
    ("TotalNotFound", "job not found"),
    ("TotalBadStatus", "job not in a state that can be vacated"),
    ("TotalAlreadyDone", "already done"),
    ("TotalPermissionDenied", "permission denied"),
    ("TotalError", "schedd error"),
)

# The bindings raise HTCondorException for daemon errors, and plain OSError/RuntimeError/
# ValueError from the lower layers (no route, refused, bad reply).
POOL_ERRORS = (htcondor2.HTCondorException, OSError, RuntimeError, ValueError)


def _schedd_name(location: classad2.ClassAd) -> str:
    return str(location.get("Name", "schedd"))


class HTCondorBackend(PoolBackend):
    name = "htcondor"

    def __init__(
        self,
        collector: Any,
        *,
        schedd_factory: Callable[[classad2.ClassAd], Any] = htcondor2.Schedd,
        slot_constraint: str = "true",
        job_constraint: str = "JobStatus == 1 || JobStatus == 2",
        owner_attribute: str = "GridOwner",
        power_attribute: str = "",
        steer_attribute: str = "GridfairSlot",
    ) -> None:
        self.collector = collector
        self.schedd_factory = schedd_factory
        self.slot_constraint = slot_constraint
        self.job_constraint = job_constraint
        self.ad_config = AdConfig.with_attributes(owner_attribute, power_attribute or None)
        self.steer_attribute = steer_attribute
        power = [name for name, _ in self.ad_config.power_sources]
        self.slot_projection = list(dict.fromkeys([*SLOT_ATTRIBUTES, owner_attribute, *power]))
        self.job_projection = list(JOB_ATTRIBUTES)
        self._schedd_of: dict[str, classad2.ClassAd] = {}  # job id -> its schedd's location

    @classmethod
    def connect(cls, pool: str | None, **options: Any) -> HTCondorBackend:
        """A backend on the collector at `pool` (None: the configured COLLECTOR_HOST)."""
        try:
            collector = htcondor2.Collector(pool)
        except POOL_ERRORS as error:
            raise PoolUnavailable(f"collector {pool or 'COLLECTOR_HOST'}: {error}") from None
        return cls(collector, **options)

    def read_snapshot(self) -> Snapshot:
        taken = time.time()
        try:
            slots = self.collector.query(htcondor2.AdType.Startd, self.slot_constraint,
                                         self.slot_projection)
            locations = self.collector.locateAll(htcondor2.DaemonType.Schedd)
        except POOL_ERRORS as error:
            raise PoolUnavailable(f"collector query failed: {error}") from None
        skipped: list[SkippedAd] = []
        job_ads: list[SourcedAd] = []
        schedd_of: dict[str, classad2.ClassAd] = {}
        answered = 0
        for location in locations:
            name = _schedd_name(location)
            try:
                ads = self.schedd_factory(location).query(self.job_constraint,
                                                          self.job_projection)
            except POOL_ERRORS as error:
                skipped.append(SkippedAd(f"schedd {name}", 0, name, f"query failed: {error}"))
                continue
            answered += 1
            for index, ad in enumerate(ads, start=1):
                job_ads.append(SourcedAd(ad, f"schedd {name}", index, None))
                if "ClusterId" in ad and "ProcId" in ad:
                    schedd_of.setdefault(f"{ad['ClusterId']}.{ad['ProcId']}", location)
        if locations and not answered:
            raise PoolUnavailable("no schedd answered its job query")
        self._schedd_of = schedd_of
        slot_ads = [SourcedAd(ad, "collector", index, None)
                    for index, ad in enumerate(slots, start=1)]
        return snapshot_from_ads(taken, slot_ads, job_ads, self.ad_config, skipped)

    def _schedd(self, job_id: str) -> Any:
        location = self._schedd_of.get(job_id)
        if location is None:
            raise ActionFailed(f"job {job_id}: its schedd is unknown (not in any schedd's "
                               "answer to the last query)")
        return self.schedd_factory(location)

    def vacate(self, job_ids: Sequence[str]) -> dict[str, str | None]:
        results: dict[str, str | None] = {}
        for job_id in job_ids:
            try:
                result = self._schedd(job_id).act(htcondor2.JobAction.Vacate, [job_id])
            except ActionFailed as error:
                results[job_id] = str(error)
                continue
            except POOL_ERRORS as error:
                results[job_id] = f"schedd refused: {error}"
                continue
            results[job_id] = _act_problem(result)
        return results

    def allocate(self, job: Job, machine: Machine) -> None:
        schedd = self._schedd(job.id)
        try:
            edited = schedd.edit([job.id], self.steer_attribute, classad2.quote(machine.name))
            schedd.reschedule()
        except POOL_ERRORS as error:
            raise ActionFailed(f"schedd refused the edit of {job.id}: {error}") from None
        if not edited:
            raise ActionFailed(f"job {job.id} not found by its schedd")


def _act_problem(result: classad2.ClassAd | None) -> str | None:
    """None if `Schedd.act` vacated the job, else why not."""
    if result is None:
        return "no answer from the schedd"
    if result.get("TotalSuccess", 0) >= 1:
        return None
    for attribute, meaning in ACT_FAILURES:
        if result.get(attribute, 0):
            return meaning
    return "not vacated (no success reported)"
