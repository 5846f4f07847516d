"""One negotiation cycle of the daemon, from snapshot to recorded outcome.

1. read the snapshot (in a thread, bounded by `query_timeout`); a failure records the cycle
   as failed and takes no action, as does a snapshot with no usable slot ad (or, from the
   `files` backend, job ads none of which is usable). Each skipped ad and each warning about
   an ad is logged at WARNING, every cycle (past `LOGGED_ADS`, one line says how many more)
   and recorded with the cycle, failed or not;
2. reconcile it with the stored jobs (kept in memory after the first cycle); turn it into the
   negotiator's pool: the pool kept from the last cycle with this snapshot's changes applied
   (`gridfair.classads.kept_pool`; after a start or a failed cycle everything in it is new),
   or, with `daemon.incremental = false` or for stages that need it, a fresh pool the whole
   snapshot is replayed into with the policy stages listening; saved policy state is restored
   either way;
3. run the negotiator, its preemptions passed through the safety guard;
4. in ONE transaction: job changes, usage, decisions, and the actions to carry out written
   `planned` (each under an idempotency key derived from the job, the slot and the time its
   current state began, so the same decision on the same pool state has the same key). A job
   the cycle allocated and then vacated again (an order stage gave a free slot to one user,
   the preemption stage gave it to another) never ran: neither decision is an action
   (`undone_in_cycle`);
5. carry them out: each marked `issued` (committed) before the backend call, `confirmed` or
   `failed` after; vacates first (one batch), then allocations;
6. record the outcome, usage and policy state.

This module orchestrates; the journal (`gridfair.daemon.journal`) writes steps 4 and 6, the
actuator (`gridfair.daemon.actuator`) carries out step 5, renewing the lease before it.

A restart finds the journal as the killed process left it: `issued` actions are resolved
from the next snapshot and never re-issued; `planned` ones are carried out if the fresh
cycle decides them again (same key), abandoned with a reason otherwise.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

from gridfair.ad_views import JOB_STATUS, Job, JobStatus, Snapshot
from gridfair.classads.kept_pool import JobsChanged, unsupported
from gridfair.classads.to_pool import LoadedPool, pool_from_snapshot
from gridfair.core.collector import CycleCollector
from gridfair.core.pool import Pool, Task
from gridfair.core.stages import ALLOCATE, Entitled, Stateful
from gridfair.daemon import inflight, shadow
from gridfair.daemon.actuator import Actuator
from gridfair.daemon.backends import PoolBackend, PoolUnavailable, UnusablePool, require_slots
from gridfair.daemon.backoff import landing_backoff, newly_backed, without_backed_off
from gridfair.daemon.carried import CarriedPool
from gridfair.daemon.config import Config
from gridfair.daemon.faults import FaultPoints
from gridfair.daemon.host import host_shortage
from gridfair.daemon.journal import (
    CycleJournal,
    ad_columns,
    exported_states,
    log_ads,
    stage_list,
)
from gridfair.daemon.metrics import NullMetrics
from gridfair.daemon.reconcile import KnownJobs, reconcile
from gridfair.daemon.retention import Pruner, Retention
from gridfair.daemon.safety import SafetyLimits, VacateGuard, snapshot_too_old
from gridfair.daemon.steer_ahead import AheadSteerings, ahead_notes, next_jobs
from gridfair.daemon.store import Store, StoreError, dumps
from gridfair.errors import GridfairError
from gridfair.policies.hdrf import group_rows_of
from gridfair.policies.registry import Stages, build_stages

log = logging.getLogger("gridfair.daemon")


@dataclass
class CycleReport:
    cycle: int
    outcome: str  # ok, failed, dry-run, stale, abandoned
    duration: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    #: When the lease this cycle renewed runs out (None: none renewed).
    lease_until: float | None = None
    #: (user, provided MFlops, allocated MFlops) as of the snapshot, in `share_rows`' order.
    shares: tuple[tuple[str, float, float], ...] = ()

    def line(self) -> str:
        """The one log line per cycle."""
        if self.error:
            return f"cycle {self.cycle} {self.outcome}: {self.error} ({self.duration:.3f} s)"
        c = self.counts
        return (
            f"cycle {self.cycle} {self.outcome}: {c.get('machines', 0)} slots, "
            f"{c.get('jobs', 0)} jobs ({c.get('running', 0)} running, {c.get('idle', 0)} idle), "
            f"{c.get('decisions', 0)} decisions, "
            + (f"{c['declined']} preemption(s) declined, " if c.get("declined") else "")
            + f"{c.get('confirmed', 0)} actions confirmed, "
            f"{c.get('failed', 0)} failed, {c.get('held_back', 0)} held back, "
            f"{c.get('skipped', 0)} ads skipped ({self.duration:.3f} s)"
        )



def stages_from_config(policy: Mapping[str, Any]) -> Stages:
    """The policy stages the config names (raises ConfigError for unknown names)."""
    return build_stages(
        policy["name"] or None,
        order=policy["order"] or None,
        preempt=policy["preempt"] or None,
        admit=policy["admit"] or None,
        options=policy["options"],
        allocation=policy.get("allocation") or None,
        placement=policy.get("placement") or None,
    )



def read_with_timeout(backend: PoolBackend, timeout: float) -> Snapshot:
    """`backend.read_snapshot()`, given up after `timeout` seconds.

    A daemon thread, not an executor: a read that hangs for good must not keep the process
    from exiting.
    """
    outcome: dict[str, Any] = {}

    def read() -> None:
        try:
            outcome["snapshot"] = backend.read_snapshot()
        except BaseException as error:  # noqa: BLE001 - handed to the caller as-is
            outcome["error"] = error

    thread = threading.Thread(target=read, name="snapshot-read", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise PoolUnavailable(f"snapshot read timed out after {timeout:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["snapshot"]


class CycleRunner:
    """Runs cycles against one backend and one store."""

    def __init__(
        self,
        config: Config,
        backend: PoolBackend,
        store: Store,
        *,
        dry_run: bool = False,
        shadow: bool = False,
        faults: FaultPoints | None = None,
        metrics: NullMetrics | None = None,
        stopping: threading.Event | None = None,
    ) -> None:
        self.backend = backend
        self.store = store
        # A shadow daemon is a dry run that also records the pool against its decisions.
        self.shadow = shadow
        self.dry_run = dry_run or shadow
        self.faults = faults or FaultPoints(None, store.path)
        self.metrics = metrics or NullMetrics()
        self.stopping = stopping or threading.Event()
        self.ahead = AheadSteerings(0.0)  # the steerings ahead written, kept across cycles
        # MFlop-seconds each user was allocated since the daemon started, as of `_served_at`:
        # ties between users go to the least served (`to_pool.enrol_in_rotation`).
        self.served: dict[str, float] = {}
        self._served_at: float | None = None
        self.reconfigure(config)
        self.cycles_run = 0
        self.collector = CycleCollector()
        self.incremental = bool(config["daemon"]["incremental"])
        # The store's `jobs` table as of the last recorded cycle: read once, then the jobs of
        # the snapshot each cycle records (a restart reads it again).
        self._known: KnownJobs | None = None
        # Jobs already reported too big for every machine (each is noted once, not per cycle).
        self._too_big: set[str] = set()
        # The jobs and users whose landing backoff the cycles have noted (`backoff`).
        self._backed: set[str] = set()
        # Users named by configured weights and found in no pool (each noted once).
        self._unweighted: set[str] = set()
        self.pruner = Pruner(store, Retention.from_config(config["retention"]))

    def reconfigure(self, config: Config) -> None:
        """Take `config`'s policy, safety limits, timeout and lease from the next cycle on
        (a reload: the backend and store stay; the pool kept between cycles is built afresh
        at the next cycle, under the policy now configured)."""
        self.config = config
        self.limits = SafetyLimits.from_config(config["safety"])
        self.ahead.life = self.limits.landing_timeout
        self.timeout = config["daemon"]["query_timeout"]
        self.journal = CycleJournal(self.store, self.metrics,
                                    max_retries=config["safety"]["max_retries"])
        self.actuator = Actuator(self.backend, self.store, self.metrics, self.faults,
                                 self.stopping, lease=config["daemon"]["lease"],
                                 interval=config["daemon"]["interval"])
        self.label = " ".join(name for name, _ in stage_list(stages_from_config(config["policy"])))
        # The shadow's rows read every task: no idle job's task is deferred for it.
        self.carried = CarriedPool(config["daemon"]["full_rebuild_every"],
                                   defer=not self.shadow, served=self.served)
        self.held_views = inflight.HeldViews()

    # ------------------------------------------------------------------ run
    def run(self) -> CycleReport:
        # A big pool's cycle would spend half its time in the cyclic collector walking what
        # the daemon keeps between cycles (`gridfair.core.collector`).
        with self.collector.cycle():
            report = self._run()
        if report.outcome != "failed":
            self._prune(self.cycles_run)
        return report

    def _prune(self, number: int) -> None:
        """A bounded step of retention, after the cycle is recorded and its actions carried
        out: it never holds up a decision, and a store error in it fails no cycle."""
        try:
            self.pruner.step(self.backend.now(),
                             lambda: self.faults.reached("during_prune", number))
        except StoreError as error:
            self.metrics.error("store")
            log.warning("pruning the store: %s", error)

    def _run(self) -> CycleReport:
        self.cycles_run += 1
        number = self.cycles_run
        clock = time.perf_counter()
        cycle = self.store.begin_cycle(time.time(), self.label, self.dry_run,
                                       self.backend.simulated_since)
        try:
            snapshot = require_slots(read_with_timeout(self.backend, self.timeout),
                                     f"the {self.backend.name} pool")
        except UnusablePool as error:
            log_ads(cycle, error.snapshot, self.store.path)
            return self._failed(cycle, clock, str(error), "snapshot", error.snapshot)
        except Exception as error:  # noqa: BLE001 - any backend failure fails the cycle only
            message = str(error) if isinstance(error, GridfairError) else (
                f"backend error: {type(error).__name__}: {error}")
            return self._failed(cycle, clock, message, "snapshot", error=error)
        log_ads(cycle, snapshot, self.store.path)
        self.faults.reached("after_snapshot", number)
        try:
            report = self._negotiate(cycle, number, snapshot, clock)
        except StoreError:
            raise
        except Exception as error:  # noqa: BLE001 - a bug must not stop the daemon
            log.exception("cycle %d: internal error", cycle)
            self._known = None  # whatever the cycle left half-done: start afresh
            return self._failed(cycle, clock, f"internal error: {type(error).__name__}: {error}",
                                "internal", error=error)
        self.metrics.cycle(report.outcome, report.duration)
        return report

    def _failed(self, cycle: int, clock: float, message: str, where: str,
                snapshot: Snapshot | None = None,
                error: BaseException | None = None) -> CycleReport:
        duration = time.perf_counter() - clock
        self.carried.forget()  # the next cycle starts from a full rebuild
        shortage = host_shortage(error) if error is not None else None
        if shortage is not None:  # no back-off cures it: said apart from the pool's failures
            log.error("cycle %d failed for a reason of %s", cycle, shortage)
            message, where = f"{shortage}: {message}", "host"
        ads = ad_columns(snapshot) if snapshot is not None else {}
        self.store.update_cycle(cycle, outcome="failed", error=message, finished=time.time(),
                                duration=duration, **ads)
        self.metrics.error(where)
        self.metrics.cycle("failed", duration)
        return CycleReport(cycle, "failed", duration, error=message)

    def _negotiate(self, cycle: int, number: int, snapshot: Snapshot,
                   clock: float) -> CycleReport:
        now = self.backend.now()
        store = self.store
        if self._known is None:
            self._known = KnownJobs.from_rows(store.known_jobs())
        recon = reconcile(snapshot, self._known, cycle)
        # Allocations not yet running hold their slots in the policy's view (inflight.py).
        flights = inflight.pending(store, snapshot, self.limits.landing_timeout, cycle,
                                   self.backend.ended_runs, self.held_views)
        if not self.dry_run and snapshot_too_old(self.limits, snapshot.time, now) is None:
            inflight.record(store, flights, cycle, now, self.backend.withdraw)
            self.metrics.settled(len(flights.landed) + len(flights.ended) + len(flights.requeued),
                                 len(flights.missed),
                                 len(flights.landed_late))
        stages = stages_from_config(self.config["policy"])
        # Jobs whose allocations did not land are left out for a while (backoff.py).
        backoff = landing_backoff(store, now, self.limits.landing_timeout)
        viewed = without_backed_off(flights.view, backoff)
        # What reconcile found changed spares the kept pool a look at every job, while the
        # view holds the snapshot's jobs in place (none backed off).
        loaded, rebuilt = self._load(viewed, stages, cycle,
                                     recon.jobs_changed() if viewed is flights.view else None)
        # Closed when the cycle is done with it: freed then, not by the cyclic collector.
        with closing(loaded.pool):
            negotiator, pool = loaded.negotiator, loaded.pool
            negotiator.vacate_guard = VacateGuard(
                self.limits, snapshot.time,
                store.vacated_since(now - self.limits.preempt_cooldown), flights.held)
            saved = store.policy_state()
            for key, stage in stage_list(stages):
                if key in saved and isinstance(stage, Stateful):
                    # Restored after the pool is replayed, so the saved levels (as of the last
                    # finished cycle) win over what the replay of running jobs accrued.
                    stage.import_state(saved[key], source=f"{store.path} policy_state {key}")
            notes = [f"{item.name}: {item.reason}" for item in loaded.unplaced] + rebuilt
            notes += newly_backed(backoff, self._backed)
            usage = self.journal.usage_rows(pool, stages, cycle, now, flights.held)
            groups = group_rows_of(stages.order)
            self._serve(usage, snapshot.time)
            as_run = shadow.side_rows(pool, cycle, shadow.POOL) if self.shadow else []
            decisions = list(loaded.admissions) + negotiator.cycle(now)
            notes += self._newly_too_big(negotiator.unplaceable, snapshot.jobs_by_id)
            notes += self._newly_unweighted(stages, pool)
            stale = snapshot_too_old(self.limits, snapshot.time, now)
            held = [{"rule": h.rule, "victim": h.preemption.victim.id,
                     "victim_user": h.preemption.victim.user, "receiver": h.preemption.receiver.id,
                     "receiver_user": h.preemption.receiver.user, "machine": h.preemption.node.name,
                     **({"more_victims": [task.id for task, _ in h.preemption.more]}
                        if h.preemption.more else {})}
                    for h in negotiator.held_back]
            if stale and not self.dry_run and decisions:
                held.append({"rule": stale, "decisions": len(decisions)})
            act = not self.dry_run and stale is None
            # Exported before the steering ahead, which plays the busy slots' next starts
            # on the pool (and on the stages listening to it).
            states = exported_states(stages, now)
            ahead = (next_jobs(pool, stages.order, snapshot, flights.held, now)
                     if act and self.backend.steers_ahead else [])
            notes += ahead_notes(ahead)
            if act:  # room a restarted schedd's idle claims hold, for no job (orphan_claims)
                notes += self.backend.release_orphaned_claims()
            statuses = Counter(map(JOB_STATUS, snapshot.jobs))
            counts = {"machines": len(snapshot.machines), "jobs": len(snapshot.jobs),
                      "running": statuses[JobStatus.RUNNING],
                      "idle": statuses[JobStatus.IDLE],
                      "decisions": len(decisions), "declined": len(negotiator.declined),
                      "held_back": len(held),
                      "skipped": len(snapshot.skipped)}
            to_run = self.journal.record_plan(cycle, snapshot, recon, decisions, usage, held,
                                              notes, now, act, counts, negotiator.declined)
            self._known = recon.after  # what the cycle just wrote to the `jobs` table
            if self.shadow:
                store.record_shadow(shadow.capacity_row(pool, cycle),
                                    as_run + shadow.side_rows(pool, cycle, shadow.GRIDFAIR),
                                    shadow.start_rows(recon, snapshot, cycle, now))
            self.faults.reached("after_plan", number)
            outcome = "dry-run" if self.dry_run else ("stale" if stale else "ok")
            lease = self.actuator.hold_pool(cycle) if act else {}
            if act:  # before the vacates: a vacated job's kept claim would start one
                self.ahead.adopt(self.backend, flights.held)
                self.ahead.withdraw(self.backend, self.ahead.stale(
                    ahead, {a.job.id for a in to_run if a.kind == ALLOCATE}, snapshot))
            if to_run:
                if self.stopping.is_set():
                    outcome = "abandoned"  # planned actions stay in the journal for the next start
                else:
                    confirmed, failed, left = self.actuator.carry_out(cycle, number, to_run)
                    self.backend.actions_done()
                    counts.update(confirmed=confirmed, failed=failed)
                    if left:
                        outcome = "abandoned"  # stopped part-way: the rest stays planned
            if act and not self.stopping.is_set():
                counts["steered_ahead"] = self.ahead.write(
                    self.backend, self.ahead.to_write(ahead, now), now)
            if act:
                counts["in_flight"] = inflight.count_in_flight(store)
            self.faults.reached("after_actions", number)
            duration = time.perf_counter() - clock
            self.journal.record_outcome(cycle, states, now, {
                "finished": time.time(), "duration": duration, "outcome": outcome,
                "actions_confirmed": counts.get("confirmed", 0),
                "actions_failed": counts.get("failed", 0), **lease,
                "groups": dumps(groups) if groups else None,
            }, lambda: self.faults.reached("before_finish", number))
            self.metrics.users((row["user"], row["power_diff"], row["dominant_share"])
                               for row in usage)
            self.metrics.groups(groups)
            return CycleReport(cycle, outcome, duration, counts,
                               lease_until=lease.get("lease_until"),
                               shares=tuple((row["user"], row["provided_mflops"],
                                             row["allocated_mflops"]) for row in usage))

    def _serve(self, usage: list[dict[str, Any]], now: float) -> None:
        """Count each user's allocation since the last cycle as served (what it ran for
        the time between, as of this cycle's snapshot)."""
        since, self._served_at = self._served_at, now
        if since is None:
            return
        for row in usage:
            self.served[row["user"]] = (self.served.get(row["user"], 0.0)
                                        + row["allocated_mflops"] * max(now - since, 0.0))

    def _newly_too_big(self, found: list[tuple[Task, str]],
                       present: Mapping[str, Job]) -> list[str]:
        """Notes (and a log line) for the jobs first found too big for every machine: never a
        reason to vacate, reported once while they are in the queue (a new negotiator each
        cycle reports them again)."""
        self._too_big &= present.keys()
        notes = []
        for task, reason in found:
            if task.id not in self._too_big:
                self._too_big.add(task.id)
                notes.append(f"{task.id}: too big for every machine: {reason}")
                log.warning("job %s of %s is too big for every machine: %s", task.id,
                            task.user, reason)
        return notes

    def _newly_unweighted(self, stages: Stages, pool: Pool) -> list[str]:
        """Notes (and a log line) for the users configured weights name and the pool does not
        have, once each: a bare name where the pool charges `user@UID_DOMAIN` gives that user
        no weight, which would otherwise pass in silence (weighted DRF run as plain DRF)."""
        if not isinstance(stages.order, Entitled):
            return []
        entitlements = stages.order.entitlements
        notes = []
        for name in entitlements.unknown(pool.users):
            if name not in self._unweighted:
                self._unweighted.add(name)
                example = next(iter(sorted(pool.users)), None)
                notes.append(f"policy.options.weights names {name!r}: no such user in the "
                             "pool (its weight goes to nobody; users are named as charged"
                             + (f", e.g. {example!r})" if example else ")"))
                log.warning("%s", notes[-1])
        return notes

    def release_pool(self) -> None:
        """End the lease (a dry run holds none): a daemon that stops hands the starts back
        to the pool at once."""
        if not self.dry_run:
            self.actuator.release_pool()

    def _load(self, snapshot: Snapshot, stages: Stages, cycle: int,
              changed: JobsChanged | None = None) -> tuple[LoadedPool, list[str]]:
        """The negotiator over the snapshot's pool: the carried pool with the snapshot's
        changes applied (checked against a full rebuild every `full_rebuild_every` cycles:
        the notes of what differed), or a rebuild when the daemon keeps none or the stages
        need a replay."""
        reason = unsupported(stages) if self.incremental else "incremental = false"
        if reason is not None:
            if self.carried.kept is not None or self.cycles_run == 1:
                log.info("rebuilding the pool every cycle: %s", reason)
            self.carried.forget()
            return pool_from_snapshot(snapshot, stages, served=self.served), []
        return self.carried.load(snapshot, lambda: stages_from_config(self.config["policy"]),
                                 cycle, stages, changed)

