"""Reading, the `htcondor` backend's snapshot of the pool: slots from every collector,
demand from every schedd they list (autocluster ads and narrow idle rows, or every job ad),
through projections learnt from the ads (`learning`); what changed since the last look, and
the runs that ended."""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from itertools import count
from typing import Any

import classad2
import htcondor2

from gridfair.ad_views import JOB_ID, Job, Machine, SkippedAd, Snapshot
from gridfair.classads.live_reads import location_problem, probe_side_by_side
from gridfair.classads.matching import match_references
from gridfair.classads.reader import SourcedAd
from gridfair.classads.submitters import SubmitterMap, charge_snapshot
from gridfair.classads.views import AdConfig, jobs_from_ads
from gridfair.daemon.backends import ActionFailed, PoolUnavailable, UnusablePool, unusable
from gridfair.daemon.backends.ads import (
    JOB_ATTRIBUTES,
    SLOT_ATTRIBUTES,
    running_as_slots_say,
    snapshot_of,
)
from gridfair.daemon.backends.htcondor.demand import (
    IDLE_ROW_ATTRIBUTES,
    autocluster_requests,
    fetch_constraints,
    jobs_of_rows,
    shared_match_ads,
    steerable_ads,
)
from gridfair.daemon.backends.htcondor.kept_charges import KeptCharges
from gridfair.daemon.backends.htcondor.kept_idle import (
    LISTED,
    KeptClusters,
    KeptIdle,
    compare,
    listed_values,
    significant_attributes,
)
from gridfair.daemon.backends.htcondor.kept_idle import job_id as kept_job_id
from gridfair.daemon.backends.htcondor.kept_slots import SAME_AD, KeptSlots
from gridfair.daemon.backends.htcondor.learning import (
    ABSENT_LIMIT,
    ABSENT_READS,
    LEARNING_ROUNDS,
    learn,
    learn_present,
)
from gridfair.daemon.backends.htcondor.state import POOL_ERRORS, PoolState, schedd_name
from gridfair.daemon.backends.pool_watch import PoolLook, ended_runs
from gridfair.errors import ConfigError

#: Seconds the schedds may take to answer a probe, side by side, before those that have not
#: are skipped for the snapshot read: under the daemon's `query_timeout` (30 s by default),
#: and the bindings' own wait for a schedd that accepts and never answers (20 s).
SCHEDD_TIMEOUT = 20.0
#: How the backend reads demand: autocluster ads and narrow idle rows, or every job ad.
DEMAND_READS = ("autocluster", "jobs")
#: Reads of a schedd's idle rows from one full read to the next (`kept_idle`).
FULL_READ_EVERY = 100
#: What a read fetches of each idle row: what a view reads, and what the next read compares.
ROW_ATTRIBUTES = tuple(dict.fromkeys((*IDLE_ROW_ATTRIBUTES, *LISTED)))
DEFAULT_JOB_CONSTRAINTS = {"autocluster": "JobStatus == 1",
                           "jobs": "JobStatus == 1 || JobStatus == 2"}

log = logging.getLogger("gridfair.daemon")


class PoolReader:
    """The pool's snapshots, read through `PoolState`'s collectors; it records there the
    schedd of each job read."""

    def __init__(self, state: PoolState, *, demand: str, job_constraint: str | None,
                 owner_attribute: str, power_attribute: str, steering: frozenset[str],
                 submitters: SubmitterMap,
                 schedd_timeout: float = SCHEDD_TIMEOUT,
                 full_read_every: int = FULL_READ_EVERY) -> None:
        if demand not in DEMAND_READS:
            raise ConfigError(f"demand must be one of {', '.join(DEMAND_READS)}, not {demand!r}")
        self.state = state
        self.demand = demand
        self.job_constraint = job_constraint or DEFAULT_JOB_CONSTRAINTS[demand]
        self.ad_config = AdConfig.with_attributes(owner_attribute, power_attribute or None)
        self.steering = steering  # the attributes a steering writes (`steering_names`)
        self.submitters = submitters
        power = [name for name, _ in self.ad_config.power_sources]
        # lower-case name -> name: ClassAd attribute names are case-insensitive.
        self.slot_projection: dict[str, str] = {}
        self.job_projection: dict[str, str] = {}
        learn(self.slot_projection, {*SLOT_ATTRIBUTES, owner_attribute, *power})
        learn(self.job_projection, set(JOB_ATTRIBUTES))
        self.schedd_timeout = schedd_timeout
        # Each schedd's idle jobs as last read (`kept_idle`), and full reads every this many
        # (1: every read is full; 0: only the first and after the schedd did not answer);
        # full reads that found the kept jobs wrong.
        self._kept: dict[str, KeptIdle] = {}
        self.full_read_every = full_read_every
        # The slot views of the last read, and the projection the slots were last read with.
        self.kept_slots = KeptSlots(self.ad_config, full_read_every)
        self._slots_read_with: list[str] = []
        # Each job's and slot's charge in the last read (`kept_charges`).
        self.kept_charges = KeptCharges(submitters)
        self.idle_repairs = 0
        #: Why schedds' idle rows were read whole, over the reader's life: the count of each
        #: reason (`_schedd_demand`).
        self.whole_reads: Counter[str] = Counter()
        # Schedds that did not answer in this snapshot read -> why (`_ask_schedds`).
        self._silent: dict[str, str] = {}
        self._last_look: PoolLook | None = None  # what `changed` saw last
        # Names read that no slot (job) had (`DIRECT_LEARNING`), and reads since.
        self._absent_slot_names: set[str] = set()
        self._absent_job_names: set[str] = set()
        self._reads_since_absent = 0
        # (names the jobs' Requirements and Rank read of their own ads, names the slots' read
        # of a job) in the last snapshot read (`_query_learning`, `shared_match_ads`).
        self._job_reads: tuple[set[str], set[str]] = (set(), set())
        # Reads begun: a read that timed out (`cycle.read_with_timeout`) still runs in its
        # thread, and keeps what it read for the next only if no read began since
        # (`_latest`): else it would write over its successor's kept idle jobs and charges.
        self._generation = 0

    def read_snapshot(self) -> Snapshot:
        """The pool now; `UnusablePool` when the schedds answered with job ads of which none
        is usable (a pool with no job at all is a quiet one, not an error)."""
        self._generation += 1
        generation = self._generation
        snapshot = self._read_autoclusters(generation) if self.demand == "autocluster" else (
            self._read_jobs())
        bad_jobs = [skip for skip in snapshot.skipped if skip.source.startswith("schedd ")
                    and skip.index > 0]
        if bad_jobs and not snapshot.jobs:
            raise UnusablePool(unusable("job", "the schedds' answers", bad_jobs), snapshot)
        return snapshot

    def _latest(self, generation: int) -> bool:
        """Whether the read of `generation` is the last one begun."""
        return generation == self._generation

    def _read_autoclusters(self, generation: int) -> Snapshot:
        """Slots from the collector; demand as autocluster ads and narrow idle rows."""
        taken = time.time()
        # Autocluster ads carry what the schedd finds significant; what the slots read of a
        # job beyond that is asked of the single job ads fetched.
        slots, (jobs, groups, skipped, locations) = self._query_learning(
            lambda: self._query_demand(generation), lambda demand: demand[1])
        machines, bad_slots = self.kept_slots.machines(slots, self._slots_read_with)
        self.state.schedd_of.update(self._schedds_of_running(slots, machines, locations))
        # `snapshot_of` appends to `jobs` the running jobs known only from their slots.
        snapshot = snapshot_of(taken, machines, jobs, (*self.state.collector_skips(), *skipped,
                                                       *bad_slots))
        return self.kept_charges.charged(snapshot, self._latest(generation))

    def _query_demand(
        self, generation: int,
    ) -> tuple[list[Job], list[classad2.ClassAd], list[SkippedAd], list[classad2.ClassAd]]:
        """Every schedd's idle jobs (from its autoclusters and narrow rows), the ads matching
        reads of them (autocluster ads, and the job ads fetched whole: a schedd may have
        formed no autocluster for them, before a negotiation or at all), the skipped ads and
        sources, and the schedds' locations. A schedd that hangs is skipped
        (`_ask_schedds`)."""
        locations = self.state.locate_schedds()
        jobs: list[Job] = []
        groups: list[classad2.ClassAd] = []
        skipped: list[SkippedAd] = []
        schedd_of: dict[str, classad2.ClassAd] = {}
        projection = list(self.job_projection.values())
        for location, answer, problem in self._ask_schedds(
                locations, lambda location: self._schedd_demand(location, projection, generation)):
            name = schedd_name(location)
            if answer is None:
                skipped.append(SkippedAd(f"schedd {name}", 0, name, problem))
                self._kept.pop(name, None)  # read whole once it answers again
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
        self.state.schedd_of = schedd_of
        return jobs, groups, skipped, locations

    def _schedd_demand(self, location: classad2.ClassAd, projection: list[str],
                       generation: int,
                       ) -> tuple[list[Job], list[classad2.ClassAd], list[SkippedAd]]:
        """One schedd's idle jobs, the ads matching reads of them, and its ads skipped; one
        of `POOL_ERRORS` when it does not answer its first queries. Its rows and autocluster
        ads are read whole every `full_read_every` reads, else those of the jobs that changed
        and the autoclusters they are in (`kept_idle`)."""
        name = schedd_name(location)
        source = f"schedd {name}"
        # Forgotten until this read ends: a read that fails half-way starts the next anew.
        kept = self._kept.pop(name, None)
        schedd = self.state.schedd_factory(location)
        every = self.full_read_every
        read: tuple | str = ("first read, or the schedd did not answer the last" if kept is None
                             else "full_read_every")
        if kept is not None and (not every or kept.reads + 1 < every):
            read = self._steady_demand(schedd, source, kept)
        if isinstance(read, str):
            log.info("%s: its idle rows and autoclusters read whole: %s", source, read)
            self.whole_reads[read] += 1
            read = self._full_demand(schedd, source, projection, kept)
        known, groups, skipped, missing, fresh = read
        if missing:
            fetched_jobs, unfetched, fetched_ads = self._fetch_jobs(schedd, name, missing,
                                                                    projection)
            groups.extend(fetched_ads)
            known.extend(fetched_jobs)
            skipped.extend(unfetched)
        if fresh is not None and self._latest(generation):
            self._kept[name] = fresh
        return known, groups, skipped

    def _full_demand(self, schedd: Any, source: str, projection: list[str],
                     kept: KeptIdle | None) -> tuple:
        """(idle jobs, ads read, skipped, ids of the jobs to fetch whole, what to keep) from
        every autocluster ad and idle row, compared with `kept` (logged, repaired)."""
        significant = significant_attributes(schedd, self.job_constraint)
        clusters = schedd.query("true", [], opts=htcondor2.QueryOpt.AutoCluster)
        groups = list(clusters)
        requests, cluster_skips = autocluster_requests(clusters, f"{source} autoclusters",
                                                       self.steering)
        if not clusters:
            # With no autocluster every job's ad is needed whole: one query for the ads, not
            # narrow rows and then the ads by id.
            rows = schedd.query(self.job_constraint, projection)
            steerable, unsteerable = steerable_ads(rows, source, self.steering)
            known, unusable = jobs_from_ads(steerable, lenient=True)
            groups.extend(rows)
            return known, groups, [*cluster_skips, *unsteerable, *unusable], [], None
        read = schedd.query(self.job_constraint, list(ROW_ATTRIBUTES))
        known, missing, unusable = jobs_of_rows(read, requests, source)
        # Each row's listed values read once (a value read through the bindings costs about
        # a microsecond and a half: 100,000 rows read five times over cost 0.75 s).
        listed = {kept_job_id(row): listed_values(row) for row in read}
        fresh = KeptIdle.of(known, listed,
                            KeptClusters.of(clusters, requests, cluster_skips, significant))
        in_clusters = {values[0] for values in listed.values()}
        del read
        if kept is not None:
            self.idle_repairs += bool(compare(source, kept, fresh))
        return (known, groups, [*fresh.clusters.skips_of(in_clusters), *unusable], missing,
                fresh)

    def _steady_demand(self, schedd: Any, source: str, kept: KeptIdle) -> tuple | str:
        """`_full_demand`'s from the rows of the jobs that changed and the autocluster ads
        they are in, the others kept; or why the kept autoclusters may not be the schedd's:
        its significant attributes changed (it then numbers its autoclusters anew), or one a
        changed job is in has another ad under its id (a schedd restarted)."""
        if significant_attributes(schedd, self.job_constraint) != kept.clusters.significant:
            return "its significant attributes changed"
        listed = schedd.query(self.job_constraint, list(LISTED))
        order, fetch, in_clusters = kept.wanted(listed)
        del listed
        position = dict(zip(order, count(), strict=False))
        fetched = sorted(self._fetch_rows(schedd, fetch), key=lambda row: position.get(
            kept_job_id(row), len(order)))
        answered = schedd.query(kept.clusters.constraint(
            listed_values(row)[0] for row in fetched), [], opts=htcondor2.QueryOpt.AutoCluster)
        clusters = kept.clusters.with_ads(answered, f"{source} autoclusters", self.steering)
        if isinstance(clusters, str):
            log.info("%s: %s", source, clusters)
            return "an autocluster id kept has another ad"
        new, missing, unusable = jobs_of_rows(fetched, clusters.requests, source)
        # A job fetched is what its row made of it now, or nothing (it left the queue, is
        # skipped, or its autocluster is unknown: fetched whole).
        # The other jobs are the kept ones: found over every listed job at once, in C.
        made = {job.id: job for job in new}
        now = kept.views.copy()
        now.update((job_id, made.get(job_id)) for job_id in fetch)
        known = list(filter(None, map(now.get, order)))
        fresh = KeptIdle.of(new, {kept_job_id(row): listed_values(row) for row in fetched},
                            clusters)
        fetched_listed = fresh.listed
        fresh.views.update(zip(map(JOB_ID, known), known, strict=True))
        fresh.listed = dict(zip(fresh.views, map(kept.listed.get, fresh.views), strict=True))
        fresh.listed.update(fetched_listed)
        fresh.reads = kept.reads + 1
        return (known, list(answered), [*clusters.skips_of(in_clusters), *unusable], missing,
                fresh)

    def _fetch_rows(self, schedd: Any, job_ids: Sequence[str]) -> list[classad2.ClassAd]:
        """The rows (`ROW_ATTRIBUTES`) of these jobs; one that left the queue has none."""
        rows: list[classad2.ClassAd] = []
        for constraint, _ in fetch_constraints(job_ids):
            rows.extend(schedd.query(f"({self.job_constraint}) && ({constraint})",
                                     list(ROW_ATTRIBUTES)))
        return rows

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
                self._silent.setdefault(schedd_name(location), problem)
        pending = [location for location in locations
                   if schedd_name(location) not in self._silent]
        # One schedd alone is asked at once: a hang costs the same wait with or without a
        # probe, and the probe's fork and extra query would be paid every cycle.
        probed = dict(zip(map(schedd_name, pending), probe_side_by_side(
            pending, self._probe, self.schedd_timeout) if len(pending) > 1
            else [None] * len(pending), strict=True))
        result = []
        for location in locations:
            name = schedd_name(location)
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
        self.state.schedd_factory(location).query("false", ["ClusterId"], limit=1)

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
        by_name = {schedd_name(location): location for location in locations}
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

    def _read_jobs(self) -> Snapshot:
        """Slots from the collector; every job ad of `job_constraint` from the schedds."""
        taken = time.time()
        slots, (job_ads, skipped, locations) = self._query_learning(
            self._query_jobs, lambda demand: (sourced.ad for sourced in demand[0]))
        machines, bad_slots = self.kept_slots.machines(slots, self._slots_read_with)
        jobs, bad_jobs = jobs_from_ads(job_ads, lenient=True)
        del job_ads  # each job's own ad is let go once `shared_match_ads` gives it a shared one
        jobs = shared_match_ads(jobs, *self._job_reads)
        # A job's owner may edit its JobStatus and RemoteHost: a job runs where a slot says so.
        jobs, not_running = running_as_slots_say(jobs, machines)
        snapshot = snapshot_of(taken, machines, jobs, (*self.state.collector_skips(), *skipped,
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
        self.state.probe_collectors()
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
            grew = learn_present(self.slot_projection, slot_own | job_other,
                                  self._absent_slot_names, self._whole_slots)
            if self.demand == "jobs":
                grew = learn_present(self.job_projection, job_own | slot_other,
                                      self._absent_job_names, self._whole_jobs) or grew
            else:  # the projection of the few jobs fetched one by one (`_fetch_jobs`)
                grew = learn(self.job_projection, job_own | slot_other) or grew
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
        return [ad for _, answer in self.state.ask_collectors(lambda collector: collector.query(
            htcondor2.AdType.Startd, self.state.slot_constraint)) for ad in answer]

    def _whole_jobs(self) -> list[classad2.ClassAd]:
        """Every schedd's jobs of `job_constraint`, whole; a schedd that does not answer
        is left out (the job query that follows reports it)."""
        return [ad for _, answer, _ in self._ask_schedds(
            self.state.locate_schedds(),
            lambda location: self.state.schedd_factory(location).query(self.job_constraint))
            for ad in answer or ()]

    def _query_slots(self) -> list[SourcedAd]:
        """The slot ads of every collector that answers, in the collectors' order. The same
        startd heard by two collectors (an HA pair: a startd updates every collector it is
        given) is read once, from the first: an ad whose Name, `MyAddress` and
        `DaemonStartTime` an earlier collector's ad has. Another ad of a Name read already is
        left in, for `machines_from_ads` to skip as a duplicate machine name."""
        projection = list(self.slot_projection.values())
        several = len(self.state.collectors) > 1
        projection += [name for name in dict.fromkeys((*SAME_AD, "MyAddress") if several
                                                      else SAME_AD)
                       if name.lower() not in self.slot_projection]
        self._slots_read_with = projection
        first_of: dict[Any, tuple[str, Any, Any]] = {}  # Name -> its first ad's startd
        slots: list[SourcedAd] = []
        for source, answer in self.state.ask_collectors(lambda collector: collector.query(
                htcondor2.AdType.Startd, self.state.slot_constraint, projection)):
            for index, ad in enumerate(answer, 1):
                startd = (source, ad.get("MyAddress"), ad.get("DaemonStartTime"))
                first = first_of.setdefault(str(ad.get("Name")), startd)
                if first[0] != source and isinstance(first[1], str) and first[1:] == startd[1:]:
                    continue
                slots.append(SourcedAd(ad, source if several else "collector", index, None))
        return slots

    def _query_jobs(self) -> tuple[list[SourcedAd], list[SkippedAd], list[classad2.ClassAd]]:
        """Every schedd's jobs; a schedd that does not answer becomes a skipped source."""
        locations = self.state.locate_schedds()
        skipped: list[SkippedAd] = []
        job_ads: list[SourcedAd] = []
        schedd_of: dict[str, classad2.ClassAd] = {}
        projection = list(self.job_projection.values())
        for location, ads, problem in self._ask_schedds(
                locations, lambda location: self.state.schedd_factory(location).query(
                    self.job_constraint, projection)):
            name = schedd_name(location)
            if ads is None:
                skipped.append(SkippedAd(f"schedd {name}", 0, name, problem))
                continue
            steerable, unsteerable = steerable_ads(ads, f"schedd {name}", self.steering)
            job_ads.extend(steerable)
            skipped.extend(unsteerable)
            for ad in ads:
                if "ClusterId" in ad and "ProcId" in ad:
                    schedd_of.setdefault(f"{ad['ClusterId']}.{ad['ProcId']}", location)
        self.state.schedd_of = schedd_of
        return job_ads, skipped, locations

    def changed(self) -> bool:
        """A slot freed, a job started or jobs submitted since the last look
        (`pool_watch.PoolLook`), asked of the first collector that answered the last read.
        Nothing is said on the first look, nor when the collector does not answer."""
        try:
            look = PoolLook.of(self.state.for_actions()[0][1], self.state.slot_constraint)
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
            for location in self.state.locate_schedds():
                with contextlib.suppress(*POOL_ERRORS):
                    found.update(ended_runs(self.state.schedd_factory(location), job_ids, since))
        return found

