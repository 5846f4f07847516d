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

A restart finds the journal as the killed process left it: `issued` actions are resolved
from the next snapshot and never re-issued; `planned` ones are carried out if the fresh
cycle decides them again (same key), abandoned with a reason otherwise.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

from gridfair.ad_views import JOB_STATUS, AdNote, Job, JobStatus, Machine, Snapshot
from gridfair.classads.kept_pool import KeptPool, unsupported
from gridfair.classads.to_pool import LoadedPool, pool_from_snapshot
from gridfair.core.collector import CycleCollector
from gridfair.core.pool import Pool, Task, UserState
from gridfair.core.shares import dominant_share, flight_usage, share_rows
from gridfair.core.stages import ALLOCATE, VACATE, Decision, Entitled, Figured, Stateful
from gridfair.daemon import inflight, shadow
from gridfair.daemon.backends import (
    ActionFailed,
    PoolBackend,
    PoolUnavailable,
    UnusablePool,
    action_problem,
    require_slots,
)
from gridfair.daemon.backoff import landing_backoff, newly_backed, without_backed_off
from gridfair.daemon.clock import wall_clock
from gridfair.daemon.config import Config
from gridfair.daemon.faults import FaultPoints
from gridfair.daemon.host import host_shortage
from gridfair.daemon.metrics import NullMetrics
from gridfair.daemon.reconcile import JobRow, KnownJobs, Reconciliation, reconcile
from gridfair.daemon.retention import Pruner, Retention
from gridfair.daemon.safety import SafetyLimits, VacateGuard, snapshot_too_old
from gridfair.daemon.steer_ahead import AheadSteerings, ahead_notes, next_jobs
from gridfair.daemon.store import (
    ABANDONED,
    CONFIRMED,
    FAILED,
    ISSUED,
    PLANNED,
    Store,
    StoreError,
    dumps,
)
from gridfair.errors import GridfairError
from gridfair.policies.registry import Stages, build_stages

log = logging.getLogger("gridfair.daemon")

#: The decisions a backend can carry out; others (drop, kill, resize) are recorded only.
ACTION_KINDS = (VACATE, ALLOCATE)
#: Allocations journaled issued, carried out and journaled done together (`_carry_out`).
#: Large, because a backend's cost is per value it sets in a call, not per job (htcondor: an
#: edit, hence a connection, for each slot named and each size given), and the connections
#: of a minute past about 13,000 make each dearer (the kernel's search for a free local port
#: among those in TIME_WAIT: measured, docs/results/scale.md); small enough that a stop waits
#: for one batch only (about 3.5 s at 4,096 allocations, live at 10,000 slots).
ALLOCATION_BATCH = 4096
#: Skipped ads (and warnings) logged one line each per cycle; the others are counted in one.
LOGGED_ADS = 5
#: The clock skew a lease tolerates: this share of its length, and at least this many seconds
#: (HTCondor stamps ads to the second, and a loaded collector takes a while to stamp an ad it
#: received, which reads as skew). Beyond it, no lease is claimed.
CLOCK_SKEW_SHARE = 0.25
MIN_CLOCK_SKEW = 5.0


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


@dataclass
class PlannedAction:
    key: str
    kind: str
    job: Job
    machine: Machine


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


def stage_list(stages: Stages) -> list[tuple[str, Any]]:
    """(store key, stage) of each stage present, e.g. ("order:hosep", HosepOrder)."""
    named = (("order", stages.order), ("preempt", stages.preempt), ("admit", stages.admit))
    return [(f"{role}:{stage.name}", stage) for role, stage in named if stage is not None]


def action_key(kind: str, job: str, machine: str, since: float) -> str:
    """The same decision about the same job in the same state gets the same key."""
    return f"{kind}:{job}@{machine}:{since:.0f}"


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
        self.ahead = AheadSteerings(0.0)  # steerings ahead written, kept across cycles
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
        self.max_retries = config["safety"]["max_retries"]
        self.ahead.life = self.limits.landing_timeout
        self.timeout = config["daemon"]["query_timeout"]
        self.lease = config["daemon"]["lease"]
        # The lease is renewed at most this often (seconds): cycles may come every `poll`
        # seconds, and each renewal reconfigures every negotiator and schedd. Renewed half way
        # through what the lease gives beyond one interval, it never lapses while cycles come
        # at least every interval.
        self.renew_every = max(0.0, (self.lease - config["daemon"]["interval"]) / 2)
        self._renewed: tuple[float, float] | None = None  # (when, until) of the last renewal
        self.label = " ".join(name for name, _ in stage_list(stages_from_config(config["policy"])))
        self.kept: KeptPool | None = None

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
            self.kept = self._known = None  # whatever the cycle left half-done: start afresh
            return self._failed(cycle, clock, f"internal error: {type(error).__name__}: {error}",
                                "internal", error=error)
        self.metrics.cycle(report.outcome, report.duration)
        return report

    def _failed(self, cycle: int, clock: float, message: str, where: str,
                snapshot: Snapshot | None = None,
                error: BaseException | None = None) -> CycleReport:
        duration = time.perf_counter() - clock
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
                                   self.backend.ended_runs)
        if not self.dry_run and snapshot_too_old(self.limits, snapshot.time, now) is None:
            inflight.record(store, flights, cycle, now, self.backend.withdraw)
            self.metrics.settled(len(flights.landed) + len(flights.ended), len(flights.missed),
                                 len(flights.landed_late))
        stages = stages_from_config(self.config["policy"])
        # Jobs whose allocations did not land are left out for a while (backoff.py).
        backoff = landing_backoff(store, now, self.limits.landing_timeout)
        loaded = self._load(without_backed_off(flights.view, backoff), stages)
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
            notes = [f"{item.name}: {item.reason}" for item in loaded.unplaced]
            notes += newly_backed(backoff, self._backed)
            usage = self._usage_rows(pool, stages, cycle, now, flights.held)
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
            states = {key: dumps(stage.export_state(now)) for key, stage in stage_list(stages)
                      if isinstance(stage, Stateful)}
            ahead = (next_jobs(pool, stages.order, snapshot, flights.held, now)
                     if act and self.backend.steers_ahead else [])
            notes += ahead_notes(ahead)
            statuses = Counter(map(JOB_STATUS, snapshot.jobs))
            counts = {"machines": len(snapshot.machines), "jobs": len(snapshot.jobs),
                      "running": statuses[JobStatus.RUNNING],
                      "idle": statuses[JobStatus.IDLE],
                      "decisions": len(decisions), "declined": len(negotiator.declined),
                      "held_back": len(held),
                      "skipped": len(snapshot.skipped)}
            to_run = self._record_plan(cycle, snapshot, recon, decisions, usage, held, notes, now,
                                       act, counts, negotiator.declined)
            self._known = recon.after  # what the cycle just wrote to the `jobs` table
            if self.shadow:
                store.record_shadow(shadow.capacity_row(pool, cycle),
                                    as_run + shadow.side_rows(pool, cycle, shadow.GRIDFAIR),
                                    shadow.start_rows(recon, snapshot, cycle, now))
            self.faults.reached("after_plan", number)
            outcome = "dry-run" if self.dry_run else ("stale" if stale else "ok")
            lease = self._hold_pool(cycle) if act else {}
            if act:  # before the vacates: a vacated job's kept claim would start one
                self.ahead.withdraw(self.backend, self.ahead.stale(
                    ahead, {a.job.id for a in to_run if a.kind == ALLOCATE}, snapshot))
            if to_run:
                if self.stopping.is_set():
                    outcome = "abandoned"  # planned actions stay in the journal for the next start
                else:
                    confirmed, failed, left = self._carry_out(cycle, number, to_run)
                    self.backend.actions_done()
                    counts.update(confirmed=confirmed, failed=failed)
                    if left:
                        outcome = "abandoned"  # stopped part-way: the rest stays planned
            if act and not self.stopping.is_set():
                counts["steered_ahead"] = self.ahead.write(
                    self.backend, self.ahead.to_write(ahead, now), now)
            self.faults.reached("after_actions", number)
            duration = time.perf_counter() - clock
            with store.transaction(f"record the outcome of cycle {cycle}") as db:
                for key, state in states.items():
                    db["policy_state"].upsert({"stage": key, "cycle": cycle, "updated": now,
                                               "state": state}, pk="stage")
                self.faults.reached("before_finish", number)
                db["cycles"].update(cycle, {
                    "finished": time.time(), "duration": duration, "outcome": outcome,
                    "actions_confirmed": counts.get("confirmed", 0),
                    "actions_failed": counts.get("failed", 0), **lease,
                })
            self.metrics.users((row["user"], row["power_diff"], row["dominant_share"])
                               for row in usage)
            return CycleReport(cycle, outcome, duration, counts,
                               lease_until=lease.get("lease_until"),
                               shares=tuple((row["user"], row["provided_mflops"],
                                             row["allocated_mflops"]) for row in usage))

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

    def _hold_pool(self, cycle: int) -> dict[str, Any]:
        """Renew the lease on the pool's starts, before acting: gridfair has just read the
        pool and decided. Never on a dry run, a stale snapshot or a failed cycle, so a daemon
        that cannot decide lets the pool start jobs on its own once the lease runs out.
        Returns the cycle's lease columns."""
        if not self.backend.leases:
            return {}
        bound = max(MIN_CLOCK_SKEW, CLOCK_SKEW_SHARE * self.lease)
        recent, self._renewed = self._renewed, None
        try:
            # The clocks every cycle (two small queries): a skew found hands the lease back
            # at once, whenever it was renewed.
            skew = self.backend.clock_skew(bound)
            self.metrics.clock_skew(skew)
            if abs(skew) > bound:
                return self._refuse_lease(cycle, skew, bound)
            if recent is not None and wall_clock() - recent[0] < self.renew_every:
                self._renewed = recent
                return {"lease_until": recent[1]}
            renewed = wall_clock()
            until = renewed + self.lease
            self.backend.hold_starts(until)
            self._renewed = (renewed, until)
        except ActionFailed as error:
            log.warning("cycle %d: lease not renewed, the pool starts jobs on its own once the "
                        "last one runs out: %s", cycle, error)
            self.metrics.error("lease")
            return {"lease_error": str(error)}
        return {"lease_until": until}

    def _refuse_lease(self, cycle: int, skew: float, bound: float) -> dict[str, Any]:
        """No lease stated in a clock the negotiator does not keep: a day behind, it would
        have run out when set; a day ahead, a dead daemon would block unsteered starts for a
        day. The lease held is handed back, and the cycle goes on unleased."""
        message = (f"clock skew: the negotiator's clock is {skew:+.0f} s off this host's, "
                   f"more than the {bound:.0f} s a {self.lease:.0f} s lease tolerates: no lease "
                   "claimed, the pool starts jobs on its own (keep the clocks of this host and "
                   "the central manager synchronized: NTP)")
        log.error("cycle %d: %s", cycle, message)
        self.metrics.error("clock")
        with contextlib.suppress(ActionFailed):
            self.backend.release_starts()
        return {"lease_error": message}

    def release_pool(self) -> None:
        """End the lease: a daemon that stops hands the starts back to the pool at once."""
        if not self.backend.leases or self.dry_run:
            return
        self._renewed = None
        try:
            self.backend.release_starts()
        except ActionFailed as error:
            log.warning("lease not released (it runs out by itself): %s", error)
            return
        log.info("lease released: the pool starts jobs on its own")

    def _load(self, snapshot: Snapshot, stages: Stages) -> LoadedPool:
        """The negotiator over the snapshot's pool: the kept pool with the snapshot's changes
        applied, or a rebuild when the daemon keeps none or the stages need a replay."""
        reason = unsupported(stages) if self.incremental else "incremental = false"
        if reason is not None:
            if self.kept is not None or self.cycles_run == 1:
                log.info("rebuilding the pool every cycle: %s", reason)
            self.kept = None
            return pool_from_snapshot(snapshot, stages)
        if self.kept is None:
            self.kept = KeptPool(defer=not self.shadow)  # the shadow's rows read every task
        return self.kept.update(snapshot, stages)

    # -------------------------------------------------------------- recording
    @staticmethod
    def _usage_rows(pool: Pool, stages: Stages, cycle: int, now: float,
                    in_flight: Collection[str]) -> list[dict[str, Any]]:
        """Per-user figures as of the snapshot (before this cycle's decisions): the columns of
        `gridfair shares`, plus the dominant share and each stage's own figures. What runs is
        what the slots show: the allocations `in_flight`, which the policy's view runs, are
        counted apart (`share_rows`) and left out of the dominant share."""
        rows = []
        figured = [stage for _, stage in stage_list(stages) if isinstance(stage, Figured)]
        flights = flight_usage(pool, in_flight)
        for share in share_rows(pool, in_flight, flights):
            user = pool.users[share["user"]]
            held = flights.get(user.name, (0, [0.0] * len(user.usage)))[1]
            rows.append({
                "cycle": cycle, "time": now, **share,
                "dominant_share": dominant_share(
                    [used - flying for used, flying in zip(user.usage, held, strict=True)],
                    pool.capacity, stages.order.resources),
                "figures": dumps(policy_figures(figured, user, now)),
            })
        return rows

    def _record_plan(
        self, cycle: int, snapshot: Snapshot, recon: Reconciliation, decisions: list[Decision],
        usage: list[dict[str, Any]], held: list[dict[str, Any]], notes: list[str], now: float,
        act: bool, counts: Mapping[str, int], declined: Sequence[Decision] = (),
    ) -> list[PlannedAction]:
        """Write everything the cycle learnt and decided in one transaction; returns the
        actions to carry out now. `declined` (why the preemption stage stopped) is recorded
        after the decisions, for `explain`, and never acted on."""
        store = self.store
        machines = snapshot.machines_by_name
        jobs = snapshot.jobs_by_id
        to_run: list[PlannedAction] = []
        decision_rows = []
        new_actions = []
        adopted: set[str] = set()
        # Slots whose vacate is not carried out now and was not confirmed before: the
        # allocation paired with it must wait, the slot is not free.
        unfreed: set[str] = set()
        decision_rows += [{"cycle": cycle, "seq": seq, **_decision_columns(decision),
                           "action": None}
                          for seq, decision in enumerate(declined, len(decisions))]
        undone = undone_in_cycle(decisions)
        for seq, decision in enumerate(decisions):
            self.metrics.decision(decision.kind)
            row = {"cycle": cycle, "seq": seq, **_decision_columns(decision), "action": None}
            decision_rows.append(row)
            if (not act or decision.kind not in ACTION_KINDS or decision.node is None
                    or seq in undone):
                continue
            job_id, machine_name = decision.task.id, decision.node.name
            if job_id not in jobs:
                continue  # a claim with no job behind it (to_pool's stand-in): nothing to act on
            key = action_key(decision.kind, job_id, machine_name, recon.since_of(job_id))
            row["action"] = key
            existing = store.action(key)
            if existing is not None and not self._may_run_again(existing):
                if decision.kind == VACATE and existing["state"] != CONFIRMED:
                    unfreed.add(machine_name)
                continue
            if decision.kind == ALLOCATE and machine_name in unfreed:
                continue
            if existing is not None:
                adopted.add(key)
            job = jobs[job_id]
            new_actions.append({"key": key, "kind": decision.kind, "job": job_id,
                                "user": decision.task.user, "machine": machine_name,
                                "cpus": job.request_cpus, "memory": job.request_memory,
                                "gpus": job.request_gpus, "reason": decision.reason})
            to_run.append(PlannedAction(key, decision.kind, job, machines[machine_name]))
        with store.transaction(f"record the decisions of cycle {cycle}") as db:
            self._write_jobs(db, recon, cycle, now)
            self._write_users(db, usage, now)
            self._write_charges(db, snapshot, cycle)
            if decision_rows:
                db["decisions"].insert_all(decision_rows)
            if act:  # a dry run or a stale snapshot tells nothing about what actions did
                self._resolve_interrupted(db, snapshot, cycle, now, adopted)
            store.plan_actions(db, new_actions, cycle, now)
            for action in new_actions:
                self.metrics.action(action["kind"], PLANNED)
            db["cycles"].update(cycle, {
                "snapshot_time": snapshot.time, "now": now, "machines": len(snapshot.machines),
                "jobs": len(snapshot.jobs), "idle": counts["idle"], "running": counts["running"],
                "decisions": len(decisions), "actions_planned": len(new_actions),
                "events": dumps({**recon.counts(), "notes": notes}),
                "held_back": dumps(held), **ad_columns(snapshot),
            })
        return to_run

    def _may_run_again(self, existing: Mapping[str, Any]) -> bool:
        """A journaled action is carried out again only if it never left `planned` (an
        interrupted cycle) or failed in a way the backend reported, within the retries."""
        if existing["state"] == PLANNED:
            return True
        return bool(existing["state"] == FAILED and existing["retryable"]
                    and existing["attempts"] <= self.max_retries)

    @staticmethod
    def _write_jobs(db, recon: Reconciliation, cycle: int, now: float) -> None:
        # Plain executemany: the first cycle on a big pool writes every job, and sqlite-utils'
        # generic upsert costs several times more per row. Rows made as they are written: a
        # list of them would hold a first cycle's million events twice.
        db.conn.executemany(
            f"insert or replace into jobs ({', '.join(JobRow._fields)}) "
            f"values ({', '.join('?' * len(JobRow._fields))})", recon.rows())
        db.conn.executemany("delete from jobs where id = ?", ((job,) for job in recon.gone))
        db.conn.executemany(
            "insert into job_events (cycle, time, job, user, event, machine) "
            "values (?, ?, ?, ?, ?, ?)",
            ((cycle, now, e.job, e.user, e.event, e.machine) for e in recon.events))

    @staticmethod
    def _write_charges(db, snapshot: Snapshot, cycle: int) -> None:
        db.conn.executemany(
            "insert into identities (identity, owner, rule, mapped, first_cycle, last_cycle) "
            "values (?, ?, ?, ?, ?, ?) on conflict(identity) do update set owner = "
            "excluded.owner, rule = excluded.rule, mapped = excluded.mapped, "
            "last_cycle = excluded.last_cycle",
            [(charge.identity, charge.owner, charge.reason, int(charge.mapped), cycle, cycle)
             for charge in snapshot.charges])

    @staticmethod
    def _write_users(db, usage: list[dict[str, Any]], now: float) -> None:
        db.conn.executemany(
            "insert into users (name, first_seen, last_seen, provided_power) values (?, ?, ?, ?) "
            "on conflict(name) do update set last_seen = excluded.last_seen, "
            "provided_power = excluded.provided_power",
            [(row["user"], now, now, row["provided_mflops"]) for row in usage],
        )
        if usage:
            # Plain executemany, as for the jobs: a row per user per cycle, and sqlite-utils'
            # generic insert costs several times more per row (50 ms a cycle at 1,000 users).
            columns = list(usage[0])
            db.conn.executemany(
                f"insert or replace into usage ({', '.join(columns)}) "
                f"values ({', '.join(':' + column for column in columns)})", usage)

    def _resolve_interrupted(self, db, snapshot: Snapshot, cycle: int, now: float,
                             adopted: set[str]) -> None:
        """Journal entries a killed daemon left open: never re-issue `issued` ones; carry
        out `planned` ones only if decided again (`adopted`), else abandon them."""
        store = self.store
        on_slot = snapshot.job_slots
        jobs = snapshot.jobs_by_id
        for action in store.actions_in(ISSUED, PLANNED):
            key = action["key"]
            if action["state"] == PLANNED:
                if key not in adopted:
                    store.set_action_state(
                        key, ABANDONED, cycle, now,
                        "planned by an interrupted cycle and not decided again on a fresh "
                        "snapshot", db=db)
                    self.metrics.action(action["kind"], ABANDONED)
                continue
            where = on_slot.get(action["job"])
            if action["kind"] == VACATE:
                # Landed if the job left the slot, its schedd no longer calls it running (the
                # collector's slot ad lags by an update interval), or it runs there again with
                # a start later than the issue (a pool restarts an evicted job within seconds).
                # Start times are whole seconds: a restart in the issue's own second reads as
                # not seen, which under-reports but never confirms a vacate that did not happen.
                job = jobs.get(action["job"])
                done = not inflight.on_slot(where, action["machine"]) or job is None or (
                    job.status != JobStatus.RUNNING) or (
                    job.start_time is not None and job.start_time > action["updated_at"])
            else:
                done = inflight.on_slot(where, action["machine"])
            if done:
                store.set_action_state(key, CONFIRMED, cycle, now,
                                       "issued before an interruption; effect seen", db=db)
            else:
                store.set_action_state(
                    key, FAILED, cycle, now,
                    "issued before an interruption; effect not seen; not re-issued",
                    retryable=False, db=db)
            self.metrics.action(action["kind"], CONFIRMED if done else FAILED)

    # ------------------------------------------------------------ carrying out
    def _carry_out(self, cycle: int, number: int,
                   actions: list[PlannedAction]) -> tuple[int, int, int]:
        """Carry out the planned actions; returns (confirmed, failed, left planned)."""
        store = self.store
        not_freed: set[str] = set()
        # A preemption's vacates + the allocation of the room they free as one action, where
        # the backend can.
        groups, rest = handover_groups(actions, self.backend.can_hand_over)
        vacates = [a for a in rest if a.kind == VACATE]
        allocations = steering_order([a for a in rest if a.kind == ALLOCATE])
        confirmed, failed, left = self._hand_over(cycle, groups)
        if self.stopping.is_set():
            # Left planned: the next start carries them out if it decides them again.
            return confirmed, failed, left + len(vacates) + len(allocations)
        if vacates:
            self._issue(vacates, cycle)
            self.faults.reached("after_issue", number)
            try:
                results = self.backend.vacate([a.job.id for a in vacates])
            except Exception as error:  # noqa: BLE001 - recorded as the actions' failure
                results = {a.job.id: action_problem(error) for a in vacates}
            self.faults.reached("after_vacate", number)
            now = self.backend.now()
            with store.transaction("record vacate outcomes") as db:
                for action in vacates:
                    problem = results.get(action.job.id, "no result from the backend")
                    self._record_outcome(db, action, problem, cycle, now)
                    if problem is None:
                        confirmed += 1
                    else:
                        not_freed.add(action.machine.name)
                        failed += 1
        for start in range(0, len(allocations), ALLOCATION_BATCH):
            if self.stopping.is_set():
                # Left planned: the next start carries them out if it decides them again.
                return confirmed, failed, len(allocations) - start
            batch = []
            for action in allocations[start:start + ALLOCATION_BATCH]:
                if action.machine.name in not_freed:
                    store.set_action_state(action.key, ABANDONED, cycle, self.backend.now(),
                                           f"{action.machine.name} was not freed: its vacate "
                                           "failed")
                    self.metrics.action(ALLOCATE, ABANDONED)
                else:
                    batch.append(action)
            if not batch:
                continue
            # Journaled issued together and their outcomes together: two transactions a
            # batch, not two an allocation. A crash in between leaves the batch issued, and
            # the restart resolves each from the pool (never issued again).
            self._issue(batch, cycle)
            self.faults.reached("after_issue_allocations", number)
            try:
                problems = self.backend.allocate_all([(a.job, a.machine) for a in batch])
            except Exception as error:  # noqa: BLE001 - recorded as the actions' failure
                problems = [action_problem(error)] * len(batch)
            now = self.backend.now()
            with store.transaction("record allocation outcomes") as db:
                for action, problem in zip(batch, problems, strict=True):
                    self._record_outcome(db, action, problem, cycle, now)
            failed += sum(problem is not None for problem in problems)
            confirmed += sum(problem is None for problem in problems)
        return confirmed, failed, 0

    def _hand_over(self, cycle: int, groups: list[tuple[list[PlannedAction], PlannedAction]]
                   ) -> tuple[int, int, int]:
        """Carry out each (vacates, allocation) group with `backend.handover`; its actions
        share the outcome. Returns (confirmed, failed) actions and the actions left planned
        because the daemon is stopping."""
        confirmed = failed = 0
        for done, (vacates, allocation) in enumerate(groups):
            if self.stopping.is_set():
                return confirmed, failed, sum(len(v) + 1 for v, _ in groups[done:])
            group = [*vacates, allocation]
            self._issue(group, cycle)
            try:
                self.backend.handover([vacate.job for vacate in vacates], allocation.job,
                                      allocation.machine)
                problem = None
            except Exception as error:  # noqa: BLE001 - recorded as the actions' failure
                problem = action_problem(error)
            now = self.backend.now()
            with self.store.transaction("record a handover's outcome") as db:
                for action in group:
                    self._record_outcome(db, action, problem, cycle, now, "handed over")
            confirmed += len(group) * (problem is None)
            failed += len(group) * (problem is not None)
        return confirmed, failed, 0

    def _record_outcome(self, db: Any, action: PlannedAction, problem: str | None, cycle: int,
                        now: float, note: str = "") -> None:
        """Journal a carried-out action as confirmed (a vacate also marks its user preempted,
        for the cool-down) or as a retryable failure, inside the caller's transaction."""
        if problem is None:
            self.store.set_action_state(action.key, CONFIRMED, cycle, now, note, db=db)
            if action.kind == VACATE:
                db.execute("update users set last_preempted = ? where name = ?",
                           [now, action.job.user])
        else:
            self.store.set_action_state(action.key, FAILED, cycle, now, problem,
                                        retryable=True, db=db)
        self.metrics.action(action.kind, CONFIRMED if problem is None else FAILED)

    def _issue(self, actions: list[PlannedAction], cycle: int) -> None:
        now = self.backend.now()
        with self.store.transaction("mark actions issued") as db:
            for action in actions:
                self.store.set_action_state(action.key, ISSUED, cycle, now, attempt=True, db=db)
        for action in actions:
            self.metrics.action(action.kind, ISSUED)


def ad_columns(snapshot: Snapshot) -> dict[str, Any]:
    """The cycle's columns of the snapshot's skipped ads and warnings about ads."""
    return {"skipped": dumps([item.row() for item in snapshot.skipped]),
            "warnings": dumps([item.row() for item in snapshot.warnings])}


def log_ads(cycle: int, snapshot: Snapshot, store: Any) -> None:
    """Each skipped ad and each warning about an ad of the snapshot, at WARNING: one line
    each, the first `LOGGED_ADS` of each kind, then one line with how many more."""
    kinds: tuple[tuple[str, str, tuple[AdNote, ...]], ...] = (
        ("ad skipped", "ads skipped", snapshot.skipped),
        ("ad warning", "ad warnings", snapshot.warnings))
    for one, many, items in kinds:
        for item in items[:LOGGED_ADS]:
            log.warning("cycle %d: %s: %s", cycle, one, item.line())
        if len(items) > LOGGED_ADS:
            log.warning("cycle %d: %d more %s, %d in all (`gridfair shares --db %s` lists "
                        "them)", cycle, len(items) - LOGGED_ADS, many, len(items), store)


def steering_order(allocations: Iterable[PlannedAction]) -> list[PlannedAction]:
    """The allocations with those to one slot side by side (the slots by name, each's jobs in
    decision order): a batch then names each slot once, where the jobs one slot takes would
    otherwise be spread over several batches, an edit each."""
    return sorted(allocations, key=lambda action: action.machine.name)


def undone_in_cycle(decisions: Sequence[Decision]) -> set[int]:
    """The positions of each allocation a later decision of the same cycle vacates, and of
    that vacate: the job never ran, so carrying either out would only start a job to evict
    it (or, the start not yet seen, fail the vacate and hold back the slot's allocation)."""
    allocated: dict[str, int] = {}
    undone: set[int] = set()
    for seq, decision in enumerate(decisions):
        if decision.kind == ALLOCATE:
            allocated[decision.task.id] = seq
        elif decision.kind == VACATE and decision.task.id in allocated:
            undone |= {allocated.pop(decision.task.id), seq}
    return undone


def handover_groups(
    actions: list[PlannedAction], can_hand_over: Callable[[Machine], bool],
) -> tuple[list[tuple[list[PlannedAction], PlannedAction]], list[PlannedAction]]:
    """The preemptions to carry out as one handover: a run of vacates on one slot followed, in
    decision order, by the allocation on it (the negotiator writes a preemption so), on a
    slot `can_hand_over` accepts; and the other actions, in order."""
    groups: list[tuple[list[PlannedAction], PlannedAction]] = []
    rest: list[PlannedAction] = []
    run: list[PlannedAction] = []
    for action in actions:
        if action.kind == VACATE:
            if run and run[0].machine.name != action.machine.name:
                rest += run
                run = []
            run.append(action)
            continue
        if run and run[0].machine.name == action.machine.name and can_hand_over(
                action.machine):
            groups.append((run, action))
        else:
            rest += [*run, action]
        run = []
    return groups, rest + run


def _decision_columns(decision: Decision) -> dict[str, Any]:
    data = decision.as_dict()
    return {"kind": data["kind"], "job": data["job"], "user": data["user"],
            "machine": data["machine"], "policy": data["policy"], "reason": data["reason"],
            "figures": dumps(data["figures"])}


def policy_figures(figured: Sequence[Any], user: UserState, now: float) -> dict[str, Any]:
    """The user's key figures of each of the `figured` stages (those that have some): asked
    once per user each cycle, so the stages are picked once, not per user."""
    figures: dict[str, Any] = {}
    for stage in figured:
        figures.update(stage.key_figures(user, now))
    return figures
