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

Charging: each job and each slot's running job is charged to a grid owner by a `SubmitterMap`
(`gridfair.classads.submitters`: the user HTCondor authenticated, with the pool's UID domain,
a map file, accounting groups only where the pool validates them) before the snapshot is
used; the snapshot lists each identity's charge and why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import subprocess
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import Any

import classad2
import htcondor2

from gridfair.ad_views import (
    DYNAMIC,
    PARTITIONABLE,
    STATIC,
    Job,
    Machine,
    SkippedAd,
    Snapshot,
)
from gridfair.classads.live_reads import location_problem, probe_side_by_side
from gridfair.classads.matching import (
    JOB_IDENTITY,
    match_key,
    match_references,
    reaches,
)
from gridfair.classads.reader import SourcedAd, skip_reason
from gridfair.classads.submitters import SubmitterMap, charge_snapshot
from gridfair.classads.views import (
    AdConfig,
    JobRequest,
    grouped_job_view,
    job_request,
    jobs_from_ads,
    machines_from_ads,
    request_varies,
)
from gridfair.daemon.backends import (
    ActionFailed,
    PoolBackend,
    PoolUnavailable,
    UnusablePool,
    unusable,
)
from gridfair.daemon.backends.ads import (
    JOB_ATTRIBUTES,
    SLOT_ATTRIBUTES,
    running_as_slots_say,
    snapshot_of,
)
from gridfair.daemon.backends.lease import (
    config_tool,
    not_answering,
    persist,
    warn_not_kept,
)
from gridfair.daemon.backends.pool_watch import PoolLook, ended_runs
from gridfair.daemon.clock import wall_clock
from gridfair.errors import ConfigError, InputError

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

#: The collector's ad type of each kind of daemon the lease is set on.
_DAEMON_AD_TYPES = {"negotiator": htcondor2.AdType.Negotiator,
                    "schedd": htcondor2.AdType.Schedd}

#: Seconds an HTCondor tool (condor_now) may take before the action counts as failed.
TOOL_TIMEOUT = 30.0
#: HTCondor's RESCHEDULE command (condor_commands.h: SCHED_VERS + 21); the bindings name only
#: the master's and daemons' administrative commands, and send any command number.
RESCHEDULE = 421


#: Seconds the schedds may take to answer a probe, side by side, before those that have not
#: are skipped for the snapshot read: under the daemon's `query_timeout` (30 s by default),
#: and the bindings' own wait for a schedd that accepts and never answers (20 s).
SCHEDD_TIMEOUT = 20.0
#: Seconds the collectors, when there are several, may take to answer a probe, side by side,
#: before those that have not are skipped for the snapshot read (`_probe_collectors`).
COLLECTOR_TIMEOUT = 5.0
#: Clusters, and jobs, a query for single job ads names at most (`fetch_constraints`).
FETCH_CLUSTERS = 50
FETCH_JOBS = 10_000
#: How the backend reads demand: autocluster ads and narrow idle rows, or every job ad.
DEMAND_READS = ("autocluster", "jobs")
#: What the backend reads of each idle job when demand comes from autoclusters.
IDLE_ROW_ATTRIBUTES = (
    "ClusterId", "ProcId", "JobStatus", "QDate", "AutoClusterId", "JobCurrentStartDate",
    "RemoteHost", "Owner", "User", "AcctGroup", "AcctGroupUser", "AccountingGroup",
    "JobRunCount",
)
DEFAULT_JOB_CONSTRAINTS = {"autocluster": "JobStatus == 1",
                           "jobs": "JobStatus == 1 || JobStatus == 2"}

#: The suffix of the steering attribute's companion: the size gridfair allocated with the
#: slot (`GridfairSlotSize = {cpus, memory, gpus}`), which a dynamic slot cut for the job may
#: not exceed (configs/htcondor-pool.config, GRIDFAIR_WITHIN_ALLOCATION).
SIZE_SUFFIX = "Size"
#: The steering's run and expiry (`GridfairSteerRunCount`, `GridfairSteerUntil`): it
#: authorizes one start, of the job's run counted then, until then
#: (configs/htcondor-pool.config, GRIDFAIR_STEERED).
RUN_COUNT_ATTRIBUTE = "GridfairSteerRunCount"
UNTIL_ATTRIBUTE = "GridfairSteerUntil"
#: The job attribute naming the slot steered to (`backend.htcondor.steer_attribute`).
DEFAULT_STEER_ATTRIBUTE = "GridfairSlot"
#: Seconds a steering lives by default: `safety.landing_timeout`'s default.
STEERING_LIFE = 120.0


def not_steered(attribute: str) -> str:
    """Why an idle job whose request can vary is not steered. (Its skipped item names no ad
    index: the ad is usable, gridfair declines it; a pool of such jobs alone is not an
    unusable one.)"""
    return (f"not steered: {attribute} reads the slot or the clock (HTCondor evaluates it "
            "against the slot it cuts for the job: gridfair cannot know the size it would "
            "allocate); ask for a number")


def steering_names(steer_attribute: str) -> frozenset[str]:
    """The job attributes a steering writes, lower-case."""
    return frozenset(name.lower() for name in (steer_attribute, steer_attribute + SIZE_SUFFIX,
                                                RUN_COUNT_ATTRIBUTE, UNTIL_ATTRIBUTE))


def unsteerable(ad: classad2.ClassAd, steering: Collection[str],
                slot_reads: Collection[str] = ()) -> str | None:
    """Why an idle job (or an autocluster's jobs) is not steered, or None. Its request can
    vary (`not_steered`), or its match reads the steering itself: gridfair decides on the job
    as it is and the negotiator matches it as gridfair writes it, so a Requirements of
    `MY.GridfairSlot =?= undefined` matches every slot when decided and none once steered
    (issue 43: such a job had other users' jobs vacated for it and held free slots, and never
    ran)."""
    varies = request_varies(ad)
    if varies is not None:
        return not_steered(varies)
    if reaches(ad, slot_reads, steering):
        return ("not steered: its Requirements or Rank read gridfair's steering attributes "
                "(or may: eval), which gridfair sets when it steers the job: it would not "
                "match as steered")
    return None


#: How many query rounds may be spent learning the attributes match expressions read.
LEARNING_ROUNDS = 4
#: New names for a projection learnt as they are; more at once (a flood of jobs each reading
#: an attribute of its own, `TARGET.Flood$(Process)` or `MY.Flood$(Process)`) are first looked
#: for in that side's whole ads (the slots'; the jobs' with `demand = "jobs"`, whose query
#: carries the job projection for every job), and only those some ad has are learnt: the
#: others would make every query carry them, every cycle (ads times names).
DIRECT_LEARNING = 64
#: Names found on no ad are not looked for again for this many reads (an attribute that
#: appears meanwhile is learnt once they are forgotten), nor past this many names.
ABSENT_READS = 10
ABSENT_LIMIT = 100_000


def _learn(projection: dict[str, str], names: set[str]) -> bool:
    """Add `names` to a projection; True if it grew."""
    new = _new_names(projection, names)
    projection.update(new)
    return bool(new)


def _learn_present(projection: dict[str, str], names: set[str], absent: set[str],
                   whole_ads: Callable[[], Iterable[classad2.ClassAd]]) -> bool:
    """Add `names` to a projection, past `DIRECT_LEARNING` new ones only those some ad of
    `whole_ads()` has (the others go to `absent`, not looked for again); True if it grew."""
    new = _new_names(projection, names, absent)
    if len(new) > DIRECT_LEARNING:
        present = {name.lower() for ad in whole_ads() for name in ad}
        absent.update(name for name in new if name not in present)
        new = {lower: name for lower, name in new.items() if lower in present}
    projection.update(new)
    return bool(new)


def _new_names(projection: dict[str, str], names: set[str],
               absent: Collection[str] = ()) -> dict[str, str]:
    """lower-case name -> name of `names` neither in `projection` nor in `absent`."""
    return {name.lower(): name for name in names
            if name and name.lower() not in projection and name.lower() not in absent}


def _schedd_name(location: classad2.ClassAd) -> str:
    return str(location.get("Name", "schedd"))


def _probe_collector(collector: Any) -> None:
    """A query that a collector answers at once (no slot matches `false`)."""
    collector.query(htcondor2.AdType.Startd, "false", ["Name"])


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
    ) -> None:
        if demand not in DEMAND_READS:
            raise ConfigError(f"demand must be one of {', '.join(DEMAND_READS)}, not {demand!r}")
        self.collector = collector  # the first collector (`collectors`)
        self.pool = pool  # the collector's address, for the tools (None: COLLECTOR_HOST)
        # Every collector read, in order (earlier ones win a machine name, `_query_slots`):
        # the first, then `more_collectors` (address -> collector).
        self.collectors: list[tuple[str, Any]] = [(self.collector_name, collector), *(
            (f"collector {address}", other) for address, other in
            (more_collectors or {}).items())]
        self.collector_timeout = collector_timeout
        # Collectors that did not answer in this snapshot read -> why; the cycle's lease and
        # adverts do not wait on them either (`_for_actions`).
        self._silent_collectors: dict[str, str] = {}
        # HOSEP's "vacate this, run that there" in one step (handover); None: vacate + steer.
        self.condor_now = condor_now
        self.tool_environment = dict(tool_environment) if tool_environment else None
        self.schedd_factory = schedd_factory
        self.slot_constraint = slot_constraint
        self.demand = demand
        self.job_constraint = job_constraint or DEFAULT_JOB_CONSTRAINTS[demand]
        self.ad_config = AdConfig.with_attributes(owner_attribute, power_attribute or None)
        self.steer_attribute = steer_attribute
        self.steering = steering_names(steer_attribute)
        # How long a steering authorizes its one start: the allocation's life, after which the
        # daemon gives it up (`safety.landing_timeout`).
        self.steering_life = steering_life
        # The negotiator knob holding gridfair's lease on starts ("": hold none).
        self.lease_knob = lease_knob
        self.leases = bool(lease_knob)
        # Only the schedds' gate, which the lease turns on, keeps a kept claim to the job
        # steered ahead to it (without it the claim starts any of its user's jobs).
        self.steers_ahead = self.leases
        # Charging (None: authenticated users of the UID domain HTCondor's configuration here
        # names, no map file, no accounting group trusted).
        self.submitters = submitters or SubmitterMap(pool_uid_domain())
        power = [name for name, _ in self.ad_config.power_sources]
        # lower-case name -> name: ClassAd attribute names are case-insensitive.
        self.slot_projection: dict[str, str] = {}
        self.job_projection: dict[str, str] = {}
        _learn(self.slot_projection, {*SLOT_ATTRIBUTES, owner_attribute, *power})
        _learn(self.job_projection, set(JOB_ATTRIBUTES))
        self._schedd_of: dict[str, classad2.ClassAd] = {}  # job id -> its schedd's location
        self.schedd_timeout = schedd_timeout
        # Schedds that did not answer in this snapshot read -> why (`_ask_schedds`).
        self._silent: dict[str, str] = {}
        # Schedds steered on since the last `actions_done`, by name (any: ask for a cycle).
        self._steered_on: dict[str, classad2.ClassAd] = {}
        # The daemons of each kind last listed (`_daemons`): the lease is set on the
        # negotiators and the schedds.
        self._known_daemons: dict[str, list[tuple[classad2.ClassAd, Any]]] = {}
        self._last_look: PoolLook | None = None  # what `changed` saw last
        # Names read that no slot (job) had (`DIRECT_LEARNING`), and reads since.
        self._absent_slot_names: set[str] = set()
        self._absent_job_names: set[str] = set()
        self._reads_since_absent = 0
        # (names the jobs' Requirements and Rank read of their own ads, names the slots' read
        # of a job) in the last snapshot read (`_query_learning`, `shared_match_ads`).
        self._job_reads: tuple[set[str], set[str]] = (set(), set())

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

    @property
    def collector_name(self) -> str:
        """The collector in error messages: its address, or where HTCondor looks for it."""
        if self.pool:
            return f"collector {self.pool}"
        host = htcondor2.param.get("COLLECTOR_HOST")
        return (f"collector {host} (COLLECTOR_HOST)" if host else
                "collector COLLECTOR_HOST (not set in HTCondor's configuration here)")

    def read_snapshot(self) -> Snapshot:
        """The pool now; `UnusablePool` when the schedds answered with job ads of which none
        is usable (a pool with no job at all is a quiet one, not an error)."""
        snapshot = self._read_autoclusters() if self.demand == "autocluster" else (
            self._read_jobs())
        bad_jobs = [skip for skip in snapshot.skipped if skip.source.startswith("schedd ")
                    and skip.index > 0]
        if bad_jobs and not snapshot.jobs:
            raise UnusablePool(unusable("job", "the schedds' answers", bad_jobs), snapshot)
        return snapshot

    def _read_autoclusters(self) -> Snapshot:
        """Slots from the collector; demand as autocluster ads and narrow idle rows."""
        taken = time.time()
        # Autocluster ads carry what the schedd finds significant; what the slots read of a
        # job beyond that is asked of the single job ads fetched.
        slots, (jobs, groups, skipped, locations) = self._query_learning(
            self._query_demand, lambda demand: demand[1])
        machines, bad_slots = machines_from_ads(slots, self.ad_config, lenient=True)
        self._schedd_of.update(self._schedds_of_running(slots, machines, locations))
        return charge_snapshot(snapshot_of(taken, machines, jobs, (
            *self._collector_skips(), *skipped, *bad_slots)), self.submitters)

    def _query_demand(
        self,
    ) -> tuple[list[Job], list[classad2.ClassAd], list[SkippedAd], list[classad2.ClassAd]]:
        """Every schedd's idle jobs (from its autoclusters and narrow rows), the ads matching
        reads of them (autocluster ads, and the job ads fetched whole: a schedd may have
        formed no autocluster for them, before a negotiation or at all), the skipped ads and
        sources, and the schedds' locations. A schedd that hangs is skipped
        (`_ask_schedds`)."""
        locations = self._locate_schedds()
        jobs: list[Job] = []
        groups: list[classad2.ClassAd] = []
        skipped: list[SkippedAd] = []
        schedd_of: dict[str, classad2.ClassAd] = {}
        projection = list(self.job_projection.values())
        for location, answer, problem in self._ask_schedds(
                locations, lambda location: self._schedd_demand(location, projection)):
            name = _schedd_name(location)
            if answer is None:
                skipped.append(SkippedAd(f"schedd {name}", 0, name, problem))
                continue
            known, answered_groups, answered_skips = answer
            groups.extend(answered_groups)
            skipped.extend(answered_skips)
            for job in known:
                if job.id in schedd_of:
                    skipped.append(SkippedAd(f"schedd {name}", 0, job.id,
                                             "duplicate job id (another schedd has it)"))
                    continue
                schedd_of[job.id] = location
                jobs.append(job)
        self._schedd_of = schedd_of
        return jobs, groups, skipped, locations

    def _schedd_demand(self, location: classad2.ClassAd, projection: list[str],
                       ) -> tuple[list[Job], list[classad2.ClassAd], list[SkippedAd]]:
        """One schedd's idle jobs, the ads matching reads of them, and its ads skipped; one
        of `POOL_ERRORS` when it does not answer its first queries."""
        name = _schedd_name(location)
        schedd = self.schedd_factory(location)
        clusters = schedd.query("true", [], opts=htcondor2.QueryOpt.AutoCluster)
        # With no autocluster every job's ad is needed whole: one query for the ads, not
        # narrow rows and then the ads by id.
        rows = schedd.query(self.job_constraint,
                            list(IDLE_ROW_ATTRIBUTES) if clusters else projection)
        groups = list(clusters)
        requests, skipped = autocluster_requests(clusters, f"schedd {name} autoclusters",
                                                 self.steering)
        if clusters:
            known, missing, unusable = jobs_of_rows(rows, requests, f"schedd {name}")
        else:
            # Whole ads: a request that can vary is judged here, as for fetched ads.
            steerable, unsteerable = steerable_ads(rows, f"schedd {name}", self.steering)
            known, unusable = jobs_from_ads(steerable, lenient=True)
            unusable = [*unsteerable, *unusable]
            groups.extend(rows)
            missing = []
        skipped.extend(unusable)
        if missing:
            fetched, unfetched, fetched_ads = self._fetch_jobs(schedd, name, missing,
                                                               projection)
            groups.extend(fetched_ads)
            known.extend(fetched)
            skipped.extend(unfetched)
        return known, groups, skipped

    def _ask_schedds(self, locations: Sequence[classad2.ClassAd],
                     ask: Callable[[classad2.ClassAd], Any],
                     ) -> list[tuple[classad2.ClassAd, Any, str | None]]:
        """(location, `ask(location)`, None) for each schedd that answered, (location, None,
        why) for each other, in the locations' order. Whether each answers is first probed,
        side by side (`probe_side_by_side`: schedds that hang cost `schedd_timeout` together,
        where asking them in turn costs the bindings' 20 s each, the whole process waiting);
        those that answered are then asked in turn. One that did not answer in this snapshot
        read is not asked again in it (`_silent`: the learning rounds)."""
        for location in locations:
            problem = location_problem(location)
            if problem is not None:
                self._silent.setdefault(_schedd_name(location), problem)
        pending = [location for location in locations
                   if _schedd_name(location) not in self._silent]
        # One schedd alone is asked at once: a hang costs the same wait with or without a
        # probe, and the probe's fork and extra query would be paid every cycle.
        probed = dict(zip(map(_schedd_name, pending), probe_side_by_side(
            pending, self._probe, self.schedd_timeout) if len(pending) > 1
            else [None] * len(pending), strict=True))
        result = []
        for location in locations:
            name = _schedd_name(location)
            problem, answer = self._silent.get(name) or probed[name], None
            if problem is None:
                try:
                    answer = ask(location)
                except POOL_ERRORS as error:
                    problem = f"query failed: {error}"
            if problem is not None:
                self._silent[name] = problem
            result.append((location, answer, problem))
        return result

    def _probe(self, location: classad2.ClassAd) -> None:
        """A query that the schedd answers at once (no job matches `false`)."""
        self.schedd_factory(location).query("false", ["ClusterId"], limit=1)

    def _fetch_jobs(self, schedd: Any, name: str, job_ids: Sequence[str],
                    projection: list[str],
                    ) -> tuple[list[Job], list[SkippedAd], list[classad2.ClassAd]]:
        """The whole ads (`projection`: the job projection) of these jobs, a query per
        `FETCH_CLUSTERS` clusters, as jobs and as ads; a job the schedd does not answer for
        (it left the queue) is skipped."""
        ads: list[classad2.ClassAd] = []
        skipped: list[SkippedAd] = []
        for constraint, asked in fetch_constraints(job_ids):
            try:
                ads.extend(schedd.query(constraint, projection))
            except POOL_ERRORS as error:
                skipped.extend(SkippedAd(f"schedd {name}", 0, job_id,
                                         f"job ad query failed: {error}") for job_id in asked)
        steerable, unusable = steerable_ads(ads, f"schedd {name}", self.steering)
        jobs, unreadable = jobs_from_ads(steerable, lenient=True)
        unusable.extend(unreadable)
        answered = {job.id for job in jobs} | {skip.name for skip in (*skipped, *unusable)}
        skipped.extend(SkippedAd(f"schedd {name}", 0, job_id, "no job ad in the schedd's "
                                 "answer (left the queue since its idle row?)")
                       for job_id in job_ids if job_id not in answered)
        return jobs, [*skipped, *unusable], ads

    def _schedds_of_running(self, slots: Iterable[SourcedAd], machines: Iterable[Machine],
                            locations: Sequence[classad2.ClassAd]) -> dict[str, classad2.ClassAd]:
        """Running job id -> its schedd's location, from the `GlobalJobId`
        (`schedd#cluster.proc#time`) of the slots kept as `machines` (not a duplicate name's
        ad); with one schedd, that one."""
        by_name = {_schedd_name(location): location for location in locations}
        only = locations[0] if len(locations) == 1 else None
        kept = {machine.name for machine in machines}
        found: dict[str, classad2.ClassAd] = {}
        for slot in (sourced.ad for sourced in slots):
            if slot.get("Name") not in kept:
                continue
            job_id = slot.get("JobId")
            if not isinstance(job_id, str):
                continue
            global_id = slot.get("GlobalJobId")
            name = global_id.partition("#")[0] if isinstance(global_id, str) else None
            location = by_name.get(name, only)
            if location is not None:
                found[job_id] = location
        return found

    def _locate_schedds(self) -> list[classad2.ClassAd]:
        """The schedds every collector that answers lists, each name once (the first
        collector's location of it)."""
        found: dict[str, classad2.ClassAd] = {}
        for _, answer in self._ask_collectors(
                lambda collector: collector.locateAll(htcondor2.DaemonType.Schedd)):
            for location in answer:
                found.setdefault(_schedd_name(location), location)
        return list(found.values())

    def _read_jobs(self) -> Snapshot:
        """Slots from the collector; every job ad of `job_constraint` from the schedds."""
        taken = time.time()
        slots, (job_ads, skipped, locations) = self._query_learning(
            self._query_jobs, lambda demand: (sourced.ad for sourced in demand[0]))
        machines, bad_slots = machines_from_ads(slots, self.ad_config, lenient=True)
        jobs, bad_jobs = jobs_from_ads(job_ads, lenient=True)
        del job_ads  # each job's own ad is let go once `shared_match_ads` gives it a shared one
        jobs = shared_match_ads(jobs, *self._job_reads)
        # A job's owner may edit its JobStatus and RemoteHost: a job runs where a slot says so.
        jobs, not_running = running_as_slots_say(jobs, machines)
        snapshot = snapshot_of(taken, machines, jobs, (*self._collector_skips(), *skipped,
                                                       *bad_slots, *bad_jobs, *not_running))
        return charge_snapshot(snapshot, self.submitters)

    def _query_learning(self, query_demand: Callable[[], tuple],
                        job_ads_of: Callable[[tuple], Iterable[classad2.ClassAd]],
                        ) -> tuple[list[classad2.ClassAd], tuple]:
        """The slots and `query_demand()` (whose last two items are the skipped sources and
        the schedds' locations), queried until the projections hold what they must.

        Matching needs every attribute the Requirements and Rank of either side read, which
        only the ads themselves tell: query, learn what is missing, query again. What is learnt
        is kept, so after the first cycle one query each is enough."""
        self._reads_since_absent += 1
        self._silent = {}
        self._probe_collectors()
        if (self._reads_since_absent > ABSENT_READS or len(self._absent_slot_names)
                + len(self._absent_job_names) > ABSENT_LIMIT):
            self._absent_slot_names.clear()
            self._absent_job_names.clear()
            self._reads_since_absent = 0
        for _ in range(LEARNING_ROUNDS):
            # The last round's ads let go before the next round's come (at 100,000 job ads
            # with `demand = "jobs"`, two rounds' held at once doubled the first cycle's peak).
            slots = demand = None
            slots = self._query_slots()
            demand = query_demand()
            slot_own, slot_other = match_references(sourced.ad for sourced in slots)
            job_own, job_other = match_references(job_ads_of(demand))
            # What matching reads of a job: its own expressions' reads and the slots'.
            self._job_reads = (job_own, slot_other)
            grew = _learn_present(self.slot_projection, slot_own | job_other,
                                  self._absent_slot_names, self._whole_slots)
            if self.demand == "jobs":
                grew = _learn_present(self.job_projection, job_own | slot_other,
                                      self._absent_job_names, self._whole_jobs) or grew
            else:  # the projection of the few jobs fetched one by one (`_fetch_jobs`)
                grew = _learn(self.job_projection, job_own | slot_other) or grew
            if not grew:
                break
        skipped, locations = demand[-2], demand[-1]
        # No schedd at all (all stopped, or not yet advertised) is a partial pool, not an
        # empty queue: the slots' running jobs would have no job ads to act on.
        if not locations:
            raise PoolUnavailable("the collector lists no schedd")
        # A schedd that did not answer is skipped as itself (`schedd NAME`, ad 0, NAME); the
        # other skipped items are ads of schedds that did.
        silent = {skip.name for skip in skipped if skip.index == 0 and skip.source == (
            f"schedd {skip.name}")}
        if len(silent) == len(locations):
            raise PoolUnavailable("no schedd answered its job query")
        return slots, demand

    def _whole_slots(self) -> list[classad2.ClassAd]:
        return [ad for _, answer in self._ask_collectors(lambda collector: collector.query(
            htcondor2.AdType.Startd, self.slot_constraint)) for ad in answer]

    def _whole_jobs(self) -> list[classad2.ClassAd]:
        """Every schedd's jobs of `job_constraint`, whole; a schedd that does not answer
        is left out (the job query that follows reports it)."""
        return [ad for _, answer, _ in self._ask_schedds(
            self._locate_schedds(),
            lambda location: self.schedd_factory(location).query(self.job_constraint))
            for ad in answer or ()]

    def _query_slots(self) -> list[SourcedAd]:
        """The slot ads of every collector that answers, in the collectors' order. The same
        startd heard by two collectors (an HA pair: a startd updates every collector it is
        given) is read once, from the first: an ad whose Name, `MyAddress` and
        `DaemonStartTime` an earlier collector's ad has. Another ad of a Name read already is
        left in, for `machines_from_ads` to skip as a duplicate machine name."""
        projection = list(self.slot_projection.values())
        several = len(self.collectors) > 1
        if several:
            projection += [name for name in ("MyAddress", "DaemonStartTime")
                           if name.lower() not in self.slot_projection]
        first_of: dict[Any, tuple[str, Any, Any]] = {}  # Name -> its first ad's startd
        slots: list[SourcedAd] = []
        for source, answer in self._ask_collectors(lambda collector: collector.query(
                htcondor2.AdType.Startd, self.slot_constraint, projection)):
            for index, ad in enumerate(answer, 1):
                startd = (source, ad.get("MyAddress"), ad.get("DaemonStartTime"))
                first = first_of.setdefault(str(ad.get("Name")), startd)
                if first[0] != source and isinstance(first[1], str) and first[1:] == startd[1:]:
                    continue
                slots.append(SourcedAd(ad, source if several else "collector", index, None))
        return slots

    def _probe_collectors(self) -> None:
        """With several collectors, whether each answers is probed first, side by side
        (`probe_side_by_side`, as for schedds): one that fails, or has not answered within
        `collector_timeout`, is not asked again in this snapshot read, nor by the cycle's
        lease and adverts. One collector alone is asked at once."""
        self._silent_collectors = {}
        if len(self.collectors) > 1:
            problems = probe_side_by_side([collector for _, collector in self.collectors],
                                          _probe_collector, self.collector_timeout)
            self._silent_collectors = {
                name: problem for (name, _), problem in zip(self.collectors, problems,
                                                             strict=True) if problem}
        self._answering()

    def _answering(self) -> list[tuple[str, Any]]:
        """(name, collector) of the collectors not silent in the last snapshot read;
        `PoolUnavailable` naming each one's reason if there is none."""
        answering = [(name, collector) for name, collector in self.collectors
                     if name not in self._silent_collectors]
        if not answering:
            raise PoolUnavailable("; ".join(f"{name}: {problem}" for name, problem
                                            in self._silent_collectors.items()))
        return answering

    def _for_actions(self) -> list[tuple[str, Any]]:
        """The collectors the cycle's lease and adverts go to: those that answered the last
        read (a silent one would hold each for the bindings' wait), or all if none did."""
        return [(name, collector) for name, collector in self.collectors
                if name not in self._silent_collectors] or self.collectors

    def _ask_collectors(self, ask: Callable[[Any], Any]) -> list[tuple[str, Any]]:
        """(name, `ask(collector)`) of each collector that answers, in order; one that
        fails is silent for the rest of the read (`_answering` raises if none is left)."""
        answers = []
        for name, collector in self._answering():
            try:
                answers.append((name, ask(collector)))
            except POOL_ERRORS as error:
                self._silent_collectors[name] = f"query failed: {error}"
        if not answers:
            self._answering()
        return answers

    def _collector_skips(self) -> list[SkippedAd]:
        """The collectors that did not answer the snapshot read, as skipped sources."""
        return [SkippedAd(name, 0, name.removeprefix("collector "), problem)
                for name, problem in self._silent_collectors.items()]

    def _query_jobs(self) -> tuple[list[SourcedAd], list[SkippedAd], list[classad2.ClassAd]]:
        """Every schedd's jobs; a schedd that does not answer becomes a skipped source."""
        locations = self._locate_schedds()
        skipped: list[SkippedAd] = []
        job_ads: list[SourcedAd] = []
        schedd_of: dict[str, classad2.ClassAd] = {}
        projection = list(self.job_projection.values())
        for location, ads, problem in self._ask_schedds(
                locations, lambda location: self.schedd_factory(location).query(
                    self.job_constraint, projection)):
            name = _schedd_name(location)
            if ads is None:
                skipped.append(SkippedAd(f"schedd {name}", 0, name, problem))
                continue
            steerable, unsteerable = steerable_ads(ads, f"schedd {name}", self.steering)
            job_ads.extend(steerable)
            skipped.extend(unsteerable)
            for ad in ads:
                if "ClusterId" in ad and "ProcId" in ad:
                    schedd_of.setdefault(f"{ad['ClusterId']}.{ad['ProcId']}", location)
        self._schedd_of = schedd_of
        return job_ads, skipped, locations

    def _schedd(self, job_id: str) -> Any:
        location = self._schedd_of.get(job_id)
        if location is None:
            raise ActionFailed(f"job {job_id}: its schedd is unknown (not in any schedd's "
                               "answer to the last query)")
        return self.schedd_factory(location)

    def vacate(self, job_ids: Sequence[str]) -> dict[str, str | None]:
        results: dict[str, str | None] = {}
        # Unsteer first: a vacated job still naming its slot is matched straight back to it
        # (seen live: the same job vacated every few cycles, never moved). One edit for the
        # jobs of each schedd; a job the edit cannot reach (gone, not permitted) is reported
        # by its vacate below.
        of_schedd: dict[str, list[str]] = {}
        for job_id in job_ids:
            location = self._schedd_of.get(job_id)
            if location is not None:
                of_schedd.setdefault(_schedd_name(location), []).append(job_id)
        for jobs in of_schedd.values():
            self._edit_each(self._schedd(jobs[0]), self.steer_attribute,
                            dict.fromkeys(jobs, "undefined"))
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
        [problem] = self.allocate_all([(job, machine)])
        if problem is not None:
            raise ActionFailed(problem)

    def allocate_all(self, allocations: Sequence[tuple[Job, Machine]]) -> list[str | None]:
        """Steer each job to its slot, the jobs of one schedd together: first every job's
        size, then every job's slot name (so each job has its size before it names the slot:
        a match between the edits cuts no larger slot), each as one edit of all the jobs
        given the same value. An edit is one connection and one transaction of the schedd
        however many jobs it names, and the connection is what costs it (measured: 0.4-0.8
        ms of its CPU each, the same for one job or a thousand). The size is set only for a
        slot a dynamic slot is cut from (the pool's START reads it there alone, not on a
        static slot). A job the schedd does not take is that allocation's failure, with the
        schedd's reason."""
        problems: list[str | None] = [None] * len(allocations)
        of_schedd: dict[str, list[int]] = {}
        for index, (job, _) in enumerate(allocations):
            location = self._schedd_of.get(job.id)
            if location is None:
                problems[index] = (f"job {job.id}: its schedd is unknown (not in any schedd's "
                                   "answer to the last query)")
            else:
                of_schedd.setdefault(_schedd_name(location), []).append(index)
        until = self._steering_until()
        for name, indices in of_schedd.items():
            location = self._schedd_of[allocations[indices[0]][0].id]
            schedd = self.schedd_factory(location)
            jobs = [allocations[index][0] for index in indices]
            sized = self._edit_each(schedd, self.steer_attribute + SIZE_SUFFIX, {
                allocations[index][0].id: _size_literal(allocations[index][0])
                for index in indices if allocations[index][1].slot_type != STATIC})
            counted = self._edit_each(schedd, RUN_COUNT_ATTRIBUTE, {
                job.id: str(job.run_count) for job in jobs if sized.get(job.id) is None})
            dated = self._edit_each(schedd, UNTIL_ATTRIBUTE, dict.fromkeys(
                (job.id for job in jobs if counted.get(job.id, "") is None), until))
            named = self._edit_each(schedd, self.steer_attribute, {
                allocations[index][0].id: classad2.quote(allocations[index][1].name)
                for index in indices if dated.get(allocations[index][0].id, "") is None})
            for index in indices:
                job_id = allocations[index][0].id
                problems[index] = (sized.get(job_id) or counted.get(job_id)
                                   or dated.get(job_id) or named.get(job_id))
            if any(problem is None for problem in named.values()):
                self._steered_on[name] = location
        return problems

    def steer_ahead(self, allocations: Sequence[tuple[Job, Machine]]) -> list[str | None]:
        """Steered as `allocate_all` steers, with no negotiation asked: the slots are busy,
        and a kept claim starts the job when its slot's job ends (the schedds' gate)."""
        asked = self._steered_on
        self._steered_on = {}
        try:
            return self.allocate_all(allocations)
        finally:
            self._steered_on = asked

    def actions_done(self) -> None:
        """If jobs were steered, ask each negotiator for a negotiation cycle now: its
        RESCHEDULE command, which it takes from an ADMINISTRATOR (gridfair's account is one
        there, for its lease). Not the schedds': since HTCondor 25.14.0 (HTCONDOR-3624) the
        schedd reads a RESCHEDULE sent to it and drops it, asking the negotiator itself only
        when it goes from no idle job to some and on a release; an edit asks nothing, so
        steered jobs waited for the periodic cycle (measured: 51 s at NEGOTIATOR_INTERVAL
        = 60). The negotiator still keeps NEGOTIATOR_MIN_INTERVAL between cycle starts and
        NEGOTIATOR_CYCLE_DELAY after a cycle's end. A refusal is not an action's failure:
        the edits stand, and the negotiator's next cycle starts them."""
        steered, self._steered_on = self._steered_on, {}
        if not steered:
            return
        with contextlib.suppress(ActionFailed):
            for ad, _ in self._negotiators():
                with contextlib.suppress(*POOL_ERRORS):
                    htcondor2.send_command(ad, RESCHEDULE)

    def changed(self) -> bool:
        """A slot freed, a job started or jobs submitted since the last look
        (`pool_watch.PoolLook`), asked of the first collector that answered the last read.
        Nothing is said on the first look, nor when the collector does not answer."""
        try:
            look = PoolLook.of(self._for_actions()[0][1], self.slot_constraint)
        except POOL_ERRORS:
            return False
        previous, self._last_look = self._last_look, look
        return previous is not None and look.changed_since(previous)

    def ended_runs(self, job_ids: Collection[str], since: float) -> dict[str, tuple[str, float]]:
        """From the history of every schedd the collectors list (`pool_watch.ended_runs`);
        a schedd that does not answer tells nothing."""
        if not job_ids:
            return {}
        found: dict[str, tuple[str, float]] = {}
        with contextlib.suppress(ActionFailed, *POOL_ERRORS):
            for location in self._locate_schedds():
                with contextlib.suppress(*POOL_ERRORS):
                    found.update(ended_runs(self.schedd_factory(location), job_ids, since))
        return found

    def can_hand_over(self, machine: Machine) -> bool:
        """condor_now is configured and the slot is a partitionable one (or a dynamic one).
        HTCondor 25 runs the job on the victims' claims only by coalescing dynamic slots: on a
        static slot the schedd logs "coalesce failed: given slot is not dynamic" (and with
        CLAIM_WORKLIFE = 0, "given slot is not claimed"), condor_now still exits 0, and the
        job waits for a negotiation."""
        return self.condor_now is not None and machine.slot_type in (PARTITIONABLE, DYNAMIC)

    def handover(self, victims: Sequence[Job], job: Job, machine: Machine) -> None:
        """Vacate `victims` and start `job` on their claims at once: `condor_now JOB VICTIM
        [VICTIM ...]`, run as a program with an argument list (no shell), on the jobs' schedd,
        which must be the same one; the daemon's account must be a queue super user. The job
        is steered to the partitionable slot too: the dynamic slot condor_now coalesces for it
        is cut from that slot, whose START takes it (configs/htcondor-pool.config), and if the
        claims were not kept the negotiator starts it there. Raises ActionFailed with
        condor_now's own message when it refuses."""
        if self.condor_now is None:
            raise ActionFailed("condor_now is not configured (backend.htcondor.condor_now)")
        victim_ids = [victim.id for victim in victims]
        schedds = {_schedd_name(location) for location in
                   (self._schedd_of.get(job_id) for job_id in (job.id, *victim_ids))
                   if location is not None}
        location = self._schedd_of.get(job.id)
        if location is None or len(schedds) != 1 or any(
                job_id not in self._schedd_of for job_id in victim_ids):
            raise ActionFailed(f"condor_now needs {job.id} and {', '.join(victim_ids)} on one "
                               "schedd")
        # The schedd's address, not its name: condor_now qualifies a short name ("vm") with
        # the domain and then fails to find it (seen live: "Unable to locate schedd 'vm'").
        address = str(location.get("MyAddress", _schedd_name(location)))
        pool = ["-pool", self.pool] if self.pool else []
        command = [self.condor_now, "-name", address, *pool, job.id, *victim_ids]
        # The victims are unsteered, as for a vacate (seen live: a victim still naming its
        # slot started there again).
        schedd = self.schedd_factory(location)
        try:
            for victim_id in victim_ids:
                self._unsteer(schedd, victim_id)
            self._steer(schedd, job, machine)
        except POOL_ERRORS as error:
            raise ActionFailed(f"schedd refused the edit of {job.id} or its victims: "
                               f"{error}") from None
        try:
            done = subprocess.run(command, capture_output=True, text=True, check=False,
                                  timeout=TOOL_TIMEOUT, env=self.tool_environment)
        except (OSError, subprocess.TimeoutExpired) as error:
            raise ActionFailed(f"condor_now {job.id} {' '.join(victim_ids)}: {error}") from None
        if done.returncode != 0:
            message = " ".join((done.stderr.strip() or done.stdout.strip()).split())
            raise ActionFailed(f"condor_now {job.id} {' '.join(victim_ids)} on {machine.name}: "
                               f"exit {done.returncode}: {message or 'no message'}")

    def hold_starts(self, until: float) -> None:
        """Set the lease knob (`GRIDFAIR_LEASE_UNTIL`) on every negotiator, whose
        NEGOTIATOR_JOB_CONSTRAINT compares it with `time()`, and on every schedd the last read
        located, whose START_VANILLA_UNIVERSE does (a schedd starts jobs on claims it keeps
        without a negotiation): as persistent configuration (kept across a restart:
        `backends.lease`), and have each reconfigure. The account needs CONFIG there, for a
        knob in SETTABLE_ATTRS_CONFIG, and ADMINISTRATOR (configs/htcondor-pool.config)."""
        self._set_lease(str(math.ceil(until)))

    def release_starts(self) -> None:
        self._set_lease("0")

    def _set_lease(self, value: str) -> None:
        if not self.lease_knob:
            return
        tool = config_tool(htcondor2.param)
        daemons = [("negotiator", ad) for ad, _ in self._negotiators()]
        daemons += [("schedd", ad) for ad, _ in self._schedds()]
        for kind, ad in daemons:
            name = f"{kind} {ad.get('Name', kind)}"
            try:
                if tool is None:  # runtime configuration only: forgotten at a restart
                    warn_not_kept()
                    htcondor2.RemoteParam(ad)[self.lease_knob] = value
                elif refused := persist(tool, ad, self.lease_knob, value,
                                        self.tool_environment):
                    raise ActionFailed(
                        f"lease: {name} does not answer ({refused})"
                        if not_answering(refused) else
                        f"lease: {name} refused {self.lease_knob} = {value} "
                        f"({refused}; is the daemon's account in its ALLOW_CONFIG and "
                        "ALLOW_ADMINISTRATOR, the knob in SETTABLE_ATTRS_CONFIG, "
                        "ENABLE_PERSISTENT_CONFIG on?)")
                htcondor2.send_command(ad, htcondor2.DaemonCommand.Reconfig)
            except POOL_ERRORS as error:
                raise ActionFailed(f"lease: {name} refused {self.lease_knob} = "
                                   f"{value} ({error}; is the daemon's account in its "
                                   "ALLOW_CONFIG and ALLOW_ADMINISTRATOR, the knob in "
                                   "SETTABLE_ATTRS_CONFIG, ENABLE_RUNTIME_CONFIG on?)") from None

    def clock_skew(self, bound: float) -> float:
        """The negotiators' clock against this host's: each negotiator's against the
        collector's (its ad's `MyCurrentTime`, stamped by the negotiator when it sent the ad,
        less `LastHeardFrom`, stamped by the collector when it came: whatever the ad's age),
        plus that collector's against this host's (`_collector_offset`): the negotiator
        furthest off."""
        offsets: dict[int, float] = {}  # id(collector) -> its offset, asked once
        skews = []
        for ad, collector in self._negotiators():
            if id(collector) not in offsets:
                offsets[id(collector)] = self._collector_offset(collector, bound)
            own = (ad["MyCurrentTime"] - ad["LastHeardFrom"] if type(ad.get("MyCurrentTime"))
                   is int and type(ad.get("LastHeardFrom")) is int else 0)
            skews.append(own + offsets[id(collector)])
        return float(max(skews, key=abs, default=0.0))

    def _collector_offset(self, collector: Any, bound: float) -> float:
        """The collector's clock less this host's, in whole seconds; 0.0 if within `bound`.
        Read by asking the collector for its own ad under `time() >= T`, a constraint it
        evaluates with its own clock: two questions say whether it is within the bound, and
        beyond it, a bisection finds it (32 more, only then)."""
        def at_least(offset: int) -> bool:
            moment = math.floor(wall_clock()) + offset
            try:
                return bool(collector.query(htcondor2.AdType.Collector,
                                            f"time() >= {moment}", ["Name"]))
            except POOL_ERRORS as error:
                raise ActionFailed(f"lease: cannot read the collector's clock: {error}") from None

        within = math.ceil(bound)
        if at_least(-within) and not at_least(within + 1):
            return 0.0
        low, high = -(1 << 32), 1 << 32  # at_least(low) holds, at_least(high) does not
        if not at_least(low):
            raise ActionFailed("lease: cannot read the collector's clock (it sends no ad of "
                               "its own)")
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if at_least(middle) else (low, middle)
        return float(low)

    def _negotiators(self) -> list[tuple[classad2.ClassAd, Any]]:
        return self._daemons("negotiator")

    def _schedds(self) -> list[tuple[classad2.ClassAd, Any]]:
        """The schedds, for the lease: none listed is no failure (a pool with no schedd
        starts no job)."""
        return self._daemons("schedd", required=False)

    def _daemons(self, kind: str, *, required: bool = True) -> list[tuple[classad2.ClassAd, Any]]:
        """(ad, the collector it came from) of each daemon of `kind` ("negotiator",
        "schedd") the collectors that answered the last read list, each name once (the first
        collector's ad of it: both of an HA pair hear it), else the last ones listed: a
        collector that restarts hears from a daemon again only at its update interval (5
        minutes by default for a negotiator), and the lease must not lapse for that."""
        by_name: dict[str, tuple[classad2.ClassAd, Any]] = {}
        problems = []
        ad_type = _DAEMON_AD_TYPES[kind]
        for name, collector in self._for_actions():
            try:
                ads = collector.query(ad_type)
            except POOL_ERRORS as error:
                problems.append(f"{name}: query failed: {error}")
                continue
            for ad in ads:
                by_name.setdefault(str(ad.get("Name")), (ad, collector))
        found = list(by_name.values())
        problem = "; ".join(problems) or (
            f"the collector lists no {kind}" if len(self.collectors) == 1 else
            f"no collector lists a {kind}")
        if found:
            self._known_daemons[kind] = found
        elif self._known_daemons.get(kind):
            found = self._known_daemons[kind]
        elif required:
            raise ActionFailed(f"lease: {problem}")
        return found

    def advertise(self, ad: Mapping[str, Any]) -> None:
        """The daemon's ad to the collector, as a generic ad (UPDATE_AD_GENERIC): the
        collector takes those from DAEMON-authorised accounts only
        (configs/htcondor-pool.config grants it to the daemon's account there alone)."""
        self._to_collector(classad2.ClassAd(dict(ad)), "UPDATE_AD_GENERIC")

    def withdraw_ad(self, ad: Mapping[str, Any]) -> None:
        query = classad2.ClassAd({"MyType": "Query", "TargetType": ad["MyType"],
                                  "Name": ad["Name"]})
        query["Requirements"] = classad2.ExprTree(f"Name == {classad2.quote(ad['Name'])}")
        self._to_collector(query, "INVALIDATE_ADS_GENERIC")

    def _to_collector(self, ad: classad2.ClassAd, command: str) -> None:
        """`command` with `ad` to every collector that answered the last read (a daemon
        updates every collector of its pool; each of an HA pair must list gridfair); an
        ActionFailed naming those that refused, once all were sent to."""
        refusals, silent = [], []
        for name, collector in self._for_actions():
            try:
                collector.advertise([ad], command)
            except POOL_ERRORS as error:
                who = name if len(self.collectors) > 1 else "the collector"
                # At a pool's shutdown the collector simply stopped (the bindings say only
                # "Failed to advertise"): one that answers no query either is said to be
                # gone, without asking whether the account may advertise.
                if self._answers(collector):
                    refusals.append(f"{who} refused {command} ({error})")
                else:
                    silent.append(f"{who} does not answer {command} ({error})")
        if refusals:
            raise ActionFailed(f"advert: {'; '.join(refusals + silent)}: is the daemon's "
                               "account allowed DAEMON there?")
        if silent:
            raise ActionFailed(f"advert: {'; '.join(silent)}")

    @staticmethod
    def _answers(collector: Any) -> bool:
        try:
            _probe_collector(collector)
        except POOL_ERRORS:
            return False
        return True

    def withdraw(self, job_id: str) -> None:
        """An allocation that did not land: the job no longer names a slot, so HTCondor may
        start it anywhere (the slot's START refuses a job steered to another slot)."""
        schedd = self._schedd(job_id)
        try:
            self._unsteer(schedd, job_id)
        except POOL_ERRORS as error:
            raise ActionFailed(f"schedd refused the edit of {job_id}: {error}") from None

    def _steer(self, schedd: Any, job: Job, machine: Machine) -> None:
        """Name the slot in the job, as a string literal, after the size allocated there and
        the run and expiry of the steering (the pool takes a job only with all of them, and
        cuts no larger slot: the order keeps a match between the edits from failing)."""
        schedd.edit([job.id], self.steer_attribute + SIZE_SUFFIX, _size_literal(job))
        schedd.edit([job.id], RUN_COUNT_ATTRIBUTE, str(job.run_count))
        schedd.edit([job.id], UNTIL_ATTRIBUTE, self._steering_until())
        schedd.edit([job.id], self.steer_attribute, classad2.quote(machine.name))

    def _steering_until(self) -> str:
        """When a steering written now expires, as the literal the pool reads."""
        return _number_literal(math.ceil(self.now() + self.steering_life))

    def _unsteer(self, schedd: Any, job_id: str) -> None:
        schedd.edit([job_id], self.steer_attribute, "undefined")

    @staticmethod
    def _edit_each(schedd: Any, attribute: str, values: Mapping[str, str]
                   ) -> dict[str, str | None]:
        """Set `attribute` of each job (id -> value) on one schedd: one edit for all the jobs
        given the same value; per job, None if set or why not. The bindings abort an edit's
        whole transaction when one job refuses it, so a refused edit of several jobs is made
        again job by job, and each job's own outcome is known."""
        jobs_of: dict[str, list[str]] = {}
        for job_id, value in values.items():
            jobs_of.setdefault(value, []).append(job_id)
        problems: dict[str, str | None] = {}
        for value, jobs in jobs_of.items():
            problem = _edit_problem(schedd, jobs, attribute, value)
            if problem is not None and len(jobs) > 1:
                problems.update({job_id: _edit_problem(schedd, [job_id], attribute, value)
                                 for job_id in jobs})
            else:
                problems.update(dict.fromkeys(jobs, problem))
        return problems


def shared_match_ads(jobs: Sequence[Job], own_reads: Collection[str],
                     slot_reads: Collection[str]) -> list[Job]:
    """The jobs, those whose ads differ only in `JOB_IDENTITY` attributes that no match
    expression reads sharing one ad for matching (the first one's), as a schedd's
    autoclusters share one: with `demand = "jobs"` every job ad was kept until the next
    read, a parsed ad of about 3.4 KB a job. `own_reads` are what the jobs' Requirements and
    Rank read of their own ads (`match_references`: with what those read in turn),
    `slot_reads` what the slots' read of a job; a group whose ad reaches an identity
    attribute through one of those (the slot reads `TARGET.A`, the job's `A` reads
    `ClusterId`) keeps each job's own ad. The matcher groups jobs again, by the same rule
    (`classads.matching`): the matches, hence the decisions, are those of the jobs' own ads."""
    read = {name.lower() for name in (*own_reads, *slot_reads)}
    unread = JOB_IDENTITY - read
    # A digest of the ad's text less the unread identity lines -> its group's ad, or None: a
    # digest (collision-resistant, whatever users write), not the text, so that jobs that
    # share nothing cost a few bytes each here, not their ad's text again.
    shared: dict[bytes, Any] = {}
    result = []
    for job in jobs:
        ad = job.ad
        if ad is None:
            result.append(job)
            continue
        try:
            text = ad.printOld()
        except (ValueError, SystemError):  # a string that is not UTF-8: the job keeps its ad
            result.append(job)
            continue
        key = match_key(text, unread)
        first = shared.get(key, False)
        if first is False:
            first = shared[key] = ad if not reaches(ad, slot_reads, unread) else None
        result.append(job if first is None or first is ad else
                      dataclasses.replace(job, ad=first))
    return result


def pool_uid_domain() -> str:
    """The pool's UID_DOMAIN, as HTCondor's configuration where gridfair runs names it (the
    central manager's: `htcondor2.param`, read through CONDOR_CONFIG)."""
    try:
        return str(htcondor2.param["UID_DOMAIN"])
    except KeyError:
        raise ConfigError("HTCondor's configuration here names no UID_DOMAIN: set "
                          "backend.htcondor.uid_domain to the pool's") from None


def _size_literal(job: Job) -> str:
    """The size allocated to a job with its slot, as the pool's START reads it: `{cpus,
    memory, gpus}`."""
    return "{" + ", ".join(map(_number_literal, (job.request_cpus, job.request_memory,
                                                 job.request_gpus))) + "}"


def _edit_problem(schedd: Any, job_ids: list[str], attribute: str, value: str) -> str | None:
    """One `Schedd.edit` of the jobs: None if the schedd set the attribute in each, else why
    not."""
    names = ", ".join(job_ids)
    try:
        edited = schedd.edit(job_ids, attribute, value)
    except POOL_ERRORS as error:
        return f"schedd refused the edit of {names}: {error}"
    if edited != len(job_ids):
        return f"job {names} not found by its schedd"
    return None


def _number_literal(amount: float) -> str:
    """A number as a ClassAd literal (a whole number without a decimal point)."""
    return str(int(amount)) if float(amount).is_integer() else repr(float(amount))


def unsteered(ad: classad2.ClassAd, steering: Collection[str]) -> classad2.ClassAd:
    """An idle job's ad as gridfair decides on it: without the steering it wrote there (a job
    steered ahead names a busy slot, whose START would refuse it everywhere else in
    gridfair's own matching, and the policy may give it another slot)."""
    for name in steering:
        if name in ad:
            del ad[name]
    return ad


def steerable_ads(ads: Iterable[classad2.ClassAd], source: str,
                  steering: Collection[str] = steering_names(DEFAULT_STEER_ATTRIBUTE),
                  ) -> tuple[list[SourcedAd], list[SkippedAd]]:
    """The job ads gridfair may steer, and the idle ones it may not (`unsteerable`), skipped
    with the reason; running and other jobs are kept as they are."""
    kept: list[SourcedAd] = []
    skipped: list[SkippedAd] = []
    for index, ad in enumerate(ads, 1):
        idle = ad.get("JobStatus") == 1
        why = unsteerable(ad, steering) if idle else None
        if why is None:
            kept.append(SourcedAd(unsteered(ad, steering) if idle else ad, source, index, None))
        else:
            job_id = f"{ad.get('ClusterId')}.{ad.get('ProcId')}"
            skipped.append(SkippedAd(source, 0, job_id, why))
    return kept, skipped


def autocluster_requests(
    clusters: Iterable[classad2.ClassAd], source: str,
    steering: Collection[str] = steering_names(DEFAULT_STEER_ATTRIBUTE),
) -> tuple[dict[int, JobRequest | str], list[SkippedAd]]:
    """AutoClusterId -> what its jobs ask for, from a schedd's autocluster ads, or why its
    jobs are not steered (`unsteerable`); unusable ads are skipped with their reasons (their
    jobs are then fetched one by one)."""
    requests: dict[int, JobRequest | str] = {}
    skipped: list[SkippedAd] = []
    for index, ad in enumerate(clusters, 1):
        cluster = ad.get("AutoClusterId")
        try:
            if not isinstance(cluster, int):
                raise InputError("no AutoClusterId", source=source, attribute="AutoClusterId")
            why = unsteerable(ad, steering)
            if why is not None:
                requests[cluster] = why
                continue
            requests[cluster] = job_request(SourcedAd(unsteered(ad, steering), source, index,
                                                      None), f"autocluster {cluster}")
        except InputError as error:
            skipped.append(SkippedAd(source, index, f"autocluster {cluster}",
                                     skip_reason(error)))
    return requests, skipped


def fetch_constraints(job_ids: Iterable[str]) -> Iterator[tuple[str, list[str]]]:
    """Constraints that select these jobs (ids "cluster.proc", as the schedd's integers gave
    them), with the ids each asks for, at most `FETCH_CLUSTERS` clusters and `FETCH_JOBS`
    jobs a constraint. A cluster's procs are a record the job's ProcId is looked up in,
    `[p0 = true; p7 = true][strcat("p", string(ProcId))]`: a hash lookup for the schedd,
    where `member(ProcId, {...})` scans the list for every job of the cluster (25,000 jobs
    of 100,000 in 8 clusters: 0.87 s of the schedd's CPU against 19.0 s, measured by
    `bench/live_fetch_by_id.py`). A schedd answers a constraint of a few hundred `||` terms
    with no ads and no error (a chain of 500 `(ClusterId == c && ProcId == p)` terms, on
    HTCondor 25): one term a cluster."""
    procs: dict[str, list[str]] = {}
    for job_id in job_ids:
        cluster, _, proc = job_id.partition(".")
        procs.setdefault(cluster, []).append(proc)
    pieces = [(cluster, ids[start:start + FETCH_JOBS]) for cluster, ids in procs.items()
              for start in range(0, len(ids), FETCH_JOBS)]
    batch: list[tuple[str, list[str]]] = []
    asked = 0
    for piece in pieces:
        if batch and (len(batch) == FETCH_CLUSTERS or asked + len(piece[1]) > FETCH_JOBS):
            yield _procs_constraint(batch)
            batch, asked = [], 0
        batch.append(piece)
        asked += len(piece[1])
    if batch:
        yield _procs_constraint(batch)


def _procs_constraint(batch: list[tuple[str, list[str]]]) -> tuple[str, list[str]]:
    """`fetch_constraints`' constraint for (cluster, its procs asked) pairs, and the ids."""
    return (" || ".join(
        f"(ClusterId == {cluster} && [{'; '.join(f'p{proc} = true' for proc in ids)}]"
        '[strcat("p", string(ProcId))] =?= true)' for cluster, ids in batch),
        [f"{cluster}.{proc}" for cluster, ids in batch for proc in ids])


def jobs_of_rows(
    rows: Iterable[classad2.ClassAd], requests: dict[int, JobRequest | str], source: str,
) -> tuple[list[Job], list[str], list[SkippedAd]]:
    """(jobs, ids of jobs whose autocluster is not among `requests`, skipped rows): each row
    (`IDLE_ROW_ATTRIBUTES`) a job asking for what its autocluster's ad says, or skipped with
    the reason its autocluster's jobs are not steered."""
    jobs: list[Job] = []
    missing: list[str] = []
    skipped: list[SkippedAd] = []
    for index, row in enumerate(rows, 1):
        request = requests.get(row.get("AutoClusterId"))
        if isinstance(request, str):
            skipped.append(SkippedAd(source, 0, f"{row.get('ClusterId')}.{row.get('ProcId')}",
                                     request))
            continue
        if request is None and isinstance(row.get("ClusterId"), int) and isinstance(
                row.get("ProcId"), int):
            missing.append(f"{row['ClusterId']}.{row['ProcId']}")
            continue
        sourced = SourcedAd(row, source, index, None)
        try:
            jobs.append(grouped_job_view(sourced, request or sourced))
        except InputError as error:
            skipped.append(SkippedAd(source, index, None, skip_reason(error)))
    return jobs, missing, skipped


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
