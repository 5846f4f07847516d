"""The `htcondor` backend: a real HTCondor pool through the `htcondor2` bindings.

Reading, each cycle:
- slots: `Collector.query(AdType.Startd, constraint, projection)`; running jobs are read from
  them (`JobId`, `RemoteUser`, `JobStart`, and `GlobalJobId` for the job's schedd);
- demand (`demand = "autocluster"`, the default), the way HTCondor's negotiator reads it, on
  every schedd `Collector.locateAll(DaemonType.Schedd)` finds:
  `Schedd.query(opts=QueryOpt.AutoCluster)`, one ad per group of identical jobs (what they
  ask for and require: the significant attributes) with its `JobCount`, and the idle jobs as
  narrow rows, `Schedd.query("JobStatus == 1", IDLE_ROW_ATTRIBUTES)` (ids, QDate, submitter,
  `AutoClusterId`: no expression, nothing to parse per job). Each idle job asks for what its
  autocluster's ad says, and is matched against slots with that one shared ad. A whole job ad
  is fetched only for a job whose autocluster is not in the answer (submitted between the two
  queries);
- or (`demand = "jobs"`) every job ad of `job_constraint`, as before: `Schedd.query(
  constraint, projection)`.
Projections, never whole ads: the attributes in `backends.ads.SLOT_ATTRIBUTES` /
`JOB_ATTRIBUTES`, the owner and power attributes, and whatever the ads' Requirements and Rank
turn out to read (learnt from the ads, kept; of many new names read at once, only those some
ad has: `DIRECT_LEARNING`). Whether each schedd answers is probed first, side by side (a
child process each: the bindings hold the GIL while they wait on a daemon); one that fails,
or has not answered within `schedd_timeout` (20 s), is reported as a skipped source, not asked
again in that read, and the others are used (its running jobs are still seen on their slots):
schedds that hang cost one wait together, not one each, and the read stays under the daemon's
`query_timeout`. No schedd listed or answering, or the collector not answering, fails the
cycle.

Several collectors (an HA pair, a flock: `backend.htcondor.collector = "A, B"`) are each read,
probed side by side first when there are more than one (`collector_timeout`): one that fails
or hangs is a skipped source, and only none answering fails the cycle. The same startd heard
by two collectors is read once; another ad of a machine name read from an earlier collector
is skipped as a duplicate (`_query_slots`; the rule and why in docs/daemon.md). The daemon's
ad goes to every collector that answered, and the lease to every negotiator they list.

Acting:
- vacate: `Schedd.act(JobAction.Vacate, [job_id])` on the job's own schedd, one job per
  call, because the result ad only has totals (`TotalSuccess`, `TotalNotFound`, ...) and the
  journal needs each job's outcome. A vacate is graceful: the job goes back to idle.
- handover (optional, `condor_now` configured): a vacate and the allocation of the freed
  slot decided together run as one `condor_now JOB VICTIM` (the program; there is no
  binding): the victim is vacated and the job starts on its claim, with no negotiation in
  between for another job to take the slot.
- allocate: HTCondor's negotiator makes the matches; gridfair steers it: the job gets the
  attribute `GridfairSlot = "<slot name>"` (`Schedd.edit`; a batch of allocations with one
  edit for all the jobs given the same value, `allocate_all`), and once the cycle's actions are
  done each negotiator is asked for a cycle (`actions_done`: one RESCHEDULE a cycle, not one
  a job; the schedd ignores one sent to it). The pool's
  configuration makes the negotiator prefer that slot for that job,
  e.g.
  `NEGOTIATOR_PRE_JOB_RANK = 1e15 * (TARGET.GridfairSlot =?= MY.Name) + <the default>`.
  Limits (docs/daemon.md): HTCondor still decides whose turn it is (its own user
  priorities), so an allocation is a strong preference, not a command; a `confirmed`
  allocation means the edit was accepted, and the next snapshot shows whether it ran there.
  The pool configuration that makes steering exact is `configs/htcondor-pool.config`.
- withdraw: an allocation that did not start within the daemon's `landing_timeout`
  (`gridfair.daemon.inflight`) has its steering attribute set back to `undefined`.
- release an orphaned claim (each cycle that acts): a dynamic slot claimed and idle with no
  job for 30 s whose schedd restarted since the claim was made, `Startd.vacateSlot(name,
  VacateType.Fast)` (`orphan_claims`).

Charging: each job and each slot's running job is charged to a grid owner by a `SubmitterMap`
(`gridfair.classads.submitters`: the user HTCondor authenticated, with the pool's UID domain,
a map file, accounting groups only where the pool validates them) before the snapshot is
used; the snapshot lists each identity's charge and why.

The package: `state` (what the parts share: the collectors, each job's schedd, the daemons
of the lease), `reading` (the snapshot, with `demand` and `learning`), `steering` (writes on
jobs), `lease` (the lease on starts, the clocks), `advert` (the daemon's ad); the backend
composes them.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import classad2
import htcondor2

from gridfair.ad_views import Job, Machine, Snapshot
from gridfair.classads.submitters import SubmitterMap
from gridfair.daemon.backends import PoolBackend, PoolUnavailable
from gridfair.daemon.backends.htcondor.advert import CollectorAdvert
from gridfair.daemon.backends.htcondor.lease import StartsLease
from gridfair.daemon.backends.htcondor.orphan_claims import ClaimReleaser
from gridfair.daemon.backends.htcondor.reading import (
    FULL_READ_EVERY,
    SCHEDD_TIMEOUT,
    PoolReader,
)
from gridfair.daemon.backends.htcondor.state import (
    COLLECTOR_TIMEOUT,
    POOL_ERRORS,
    PoolState,
    pool_uid_domain,
)
from gridfair.daemon.backends.htcondor.steering import (
    DEFAULT_STEER_ATTRIBUTE,
    STEERING_LIFE,
    JobSteering,
    steering_names,
)
from gridfair.daemon.config import Config, collector_addresses
from gridfair.errors import ConfigError

__all__ = ["HTCondorBackend", "pool_uid_domain"]

log = logging.getLogger("gridfair.daemon")


def _part_attribute(part: str, name: str, doc: str) -> property:
    """The attribute `name` of the backend's part `part`, read and set through the backend."""
    return property(lambda backend: getattr(getattr(backend, part), name),
                    lambda backend, value: setattr(getattr(backend, part), name, value), doc=doc)


class HTCondorBackend(PoolBackend):
    name = "htcondor"

    def __init__(
        self,
        collector: Any,
        *,
        schedd_factory: Callable[[classad2.ClassAd], Any] = htcondor2.Schedd,
        slot_constraint: str = "true",
        job_constraint: str | None = None,
        demand: str = "autocluster",
        owner_attribute: str = "GridOwner",
        power_attribute: str = "",
        steer_attribute: str = DEFAULT_STEER_ATTRIBUTE,
        submitters: SubmitterMap | None = None,
        condor_now: str | None = None,
        pool: str | None = None,
        tool_environment: Mapping[str, str] | None = None,
        lease_knob: str = "GRIDFAIR_LEASE_UNTIL",
        schedd_timeout: float = SCHEDD_TIMEOUT,
        more_collectors: Mapping[str, Any] | None = None,
        collector_timeout: float = COLLECTOR_TIMEOUT,
        steering_life: float = STEERING_LIFE,
        full_read_every: int = FULL_READ_EVERY,
    ) -> None:
        self.collector = collector  # the first collector (`state.collectors`)
        self.state = PoolState(collector, pool=pool, more_collectors=more_collectors,
                               schedd_factory=schedd_factory, slot_constraint=slot_constraint,
                               tool_environment=tool_environment,
                               collector_timeout=collector_timeout)
        self.reader = PoolReader(
            self.state, demand=demand, job_constraint=job_constraint,
            owner_attribute=owner_attribute, power_attribute=power_attribute,
            steering=steering_names(steer_attribute),
            # Charging (None: authenticated users of the UID domain HTCondor's configuration
            # here names, no map file, no accounting group trusted).
            submitters=submitters or SubmitterMap(pool_uid_domain()),
            schedd_timeout=schedd_timeout, full_read_every=full_read_every)
        self.steering = JobSteering(self.state, steer_attribute=steer_attribute,
                                    condor_now=condor_now, steering_life=steering_life,
                                    now=self.now)
        self.lease = StartsLease(self.state, lease_knob=lease_knob)
        self.leases = bool(lease_knob)
        # Only the schedds' gate, which the lease turns on, keeps a kept claim to the job
        # steered ahead to it (without it the claim starts any of its user's jobs).
        self.steers_ahead = self.leases
        self.advert = CollectorAdvert(self.state)
        self.claims = ClaimReleaser(self.state)

    schedd_factory = _part_attribute("state", "schedd_factory", "Opens a schedd at a location.")
    pool = _part_attribute("state", "pool", "The collector's address (None: COLLECTOR_HOST).")
    demand = _part_attribute("reader", "demand", "How demand is read (`DEMAND_READS`).")
    job_constraint = _part_attribute("reader", "job_constraint", "The jobs read.")
    slot_projection = _part_attribute("reader", "slot_projection", "Slot attributes read.")
    job_projection = _part_attribute("reader", "job_projection", "Job attributes read.")
    steering_life = _part_attribute("steering", "steering_life",
                                    "Seconds a steering authorizes its one start.")

    @classmethod
    def from_config(cls, section: Mapping[str, Any], config: Config
                    ) -> HTCondorBackend:
        """The backend `backend.htcondor` describes, on its collectors; a steering lives as
        long as `safety.landing_timeout`."""
        uid_domain = section["uid_domain"] or pool_uid_domain()
        trust = section["trust_accounting_groups"]
        submitters = SubmitterMap.of(uid_domain, section["submitter_map"], trust)
        log.info("charging jobs to %s of UID_DOMAIN %s%s", "their accounting groups (trusted) "
                 "or authenticated users" if trust else "the users HTCondor authenticated",
                 uid_domain, f", submitter map {section['submitter_map']}"
                 if section["submitter_map"] else "")
        condor_now = None
        if section["condor_now"]:
            condor_now = shutil.which(section["condor_now"])
            if condor_now is None:
                raise ConfigError(f"config key backend.htcondor.condor_now: no program "
                                  f"{section['condor_now']!r} (not executable, not on PATH)")
        pools = collector_addresses(section["collector"]) or [None]
        return cls.connect(
            pools[0], more_pools=pools[1:], collector_timeout=section["collector_timeout"],
            slot_constraint=section["slot_constraint"],
            job_constraint=section["job_constraint"] or None, demand=section["demand"],
            owner_attribute=section["owner_attribute"],
            power_attribute=section["power_attribute"],
            steer_attribute=section["steer_attribute"], submitters=submitters,
            condor_now=condor_now, lease_knob=section["lease_knob"],
            schedd_timeout=section["schedd_timeout"],
            steering_life=config["safety"]["landing_timeout"],
            # Idle rows read whole as often as the kept pool is rebuilt (every read: not kept).
            full_read_every=config["daemon"]["full_rebuild_every"]
            if config["daemon"]["incremental"] else 1,
        )

    @classmethod
    def connect(cls, pool: str | None, *, more_pools: Sequence[str] = (),
                **options: Any) -> HTCondorBackend:
        """A backend on the collector at `pool` (None: the configured COLLECTOR_HOST), and on
        those at `more_pools` (host:port each) after it."""
        collectors = {}
        for address in (pool, *more_pools):
            try:
                collectors[address] = htcondor2.Collector(address)
            except POOL_ERRORS as error:
                raise PoolUnavailable(f"collector {address or 'COLLECTOR_HOST'}: "
                                      f"{error}") from None
        first = collectors.pop(pool)
        return cls(first, pool=pool, more_collectors=collectors, **options)

    def read_snapshot(self) -> Snapshot:
        return self.reader.read_snapshot()

    def changed(self) -> bool:
        return self.reader.changed()

    def ended_runs(self, job_ids: Collection[str], since: float) -> dict[str, tuple[str, float]]:
        return self.reader.ended_runs(job_ids, since)

    def vacate(self, job_ids: Sequence[str]) -> dict[str, str | None]:
        return self.steering.vacate(job_ids)

    def allocate(self, job: Job, machine: Machine) -> None:
        self.steering.allocate(job, machine)

    def allocate_all(self, allocations: Sequence[tuple[Job, Machine]]) -> list[str | None]:
        return self.steering.allocate_all(allocations)

    def withdraw(self, job_id: str) -> None:
        self.steering.withdraw(job_id)

    def steer_ahead(self, allocations: Sequence[tuple[Job, Machine]]) -> list[str | None]:
        return self.steering.steer_ahead(allocations)

    def steered_jobs(self) -> dict[str, str] | None:
        return self.steering.steered_jobs()

    def actions_done(self) -> None:
        self.steering.actions_done()

    def renegotiate(self) -> None:
        self.steering.renegotiate()

    def can_hand_over(self, machine: Machine) -> bool:
        return self.steering.can_hand_over(machine)

    def handover(self, victims: Sequence[Job], job: Job, machine: Machine) -> str | None:
        return self.steering.handover(victims, job, machine)

    def release_orphaned_claims(self) -> list[str]:
        return self.claims.release(self.now())

    def hold_starts(self, until: float) -> None:
        self.lease.hold_starts(until)

    def release_starts(self) -> None:
        self.lease.release_starts()

    def clock_skew(self, bound: float) -> float:
        return self.lease.clock_skew(bound)

    def advertise(self, ad: Mapping[str, Any]) -> None:
        self.advert.advertise(ad)

    def withdraw_ad(self, ad: Mapping[str, Any]) -> None:
        self.advert.withdraw_ad(ad)
