"""The daemon's journal of a cycle: everything the cycle learnt and decided written to the
store in one transaction (jobs, usage, charges, decisions, the actions planned, under their
idempotency keys), the journal entries a killed daemon left open resolved, and the cycle's
outcome recorded."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gridfair.ad_views import AdNote, Job, JobStatus, Machine, Snapshot
from gridfair.core.pool import Pool, UserState
from gridfair.core.shares import dominant_share, flight_usage, share_rows
from gridfair.core.stages import ALLOCATE, VACATE, Decision, Figured, Stateful
from gridfair.daemon import inflight
from gridfair.daemon.metrics import NullMetrics
from gridfair.daemon.reconcile import JobRow, Reconciliation
from gridfair.daemon.store import (
    ABANDONED,
    CONFIRMED,
    FAILED,
    ISSUED,
    PLANNED,
    Store,
    dumps,
)
from gridfair.policies.registry import Stages

log = logging.getLogger("gridfair.daemon")

#: The decisions a backend can carry out; others (drop, kill, resize) are recorded only.
ACTION_KINDS = (VACATE, ALLOCATE)
#: Skipped ads (and warnings) logged one line each per cycle; the others are counted in one.
LOGGED_ADS = 5


@dataclass
class PlannedAction:
    key: str
    kind: str
    job: Job
    machine: Machine


def stage_list(stages: Stages) -> list[tuple[str, Any]]:
    """(store key, stage) of each stage present, e.g. ("order:hosep", HosepOrder)."""
    named = (("order", stages.order), ("preempt", stages.preempt), ("admit", stages.admit))
    return [(f"{role}:{stage.name}", stage) for role, stage in named if stage is not None]


def action_key(kind: str, job: str, machine: str, since: float, runs: int = 0) -> str:
    """The same decision about the same job in the same state gets the same key. A job's
    run count (`runs`, JobRunCount) is part of its state: a job that started and went back
    to idle between two cycles (requeued) looks idle since the same time, and its next
    allocation is a new one."""
    return f"{kind}:{job}@{machine}:{since:.0f}" + (f":run{runs}" if runs else "")


class CycleJournal:
    """Writes a cycle's records to the store."""

    def __init__(self, store: Store, metrics: NullMetrics, *, max_retries: int) -> None:
        self.store = store
        self.metrics = metrics
        self.max_retries = max_retries

    @staticmethod
    def usage_rows(pool: Pool, stages: Stages, cycle: int, now: float,
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

    def record_plan(
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
                # A claim with no job behind it (to_pool's stand-in): nothing to act on, so
                # nothing frees its room, and the allocation paired with it waits (seen live:
                # a claim left idle by a failed handover, each cycle "vacated" for a start
                # that could not fit beside it, 86 s of allocations that timed out).
                if decision.kind == VACATE:
                    unfreed.add(machine_name)
                continue
            key = action_key(decision.kind, job_id, machine_name, recon.since_of(job_id),
                             jobs[job_id].run_count)
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
                                "gpus": job.request_gpus, "run_count": job.run_count,
                                "reason": decision.reason})
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

    def record_outcome(self, cycle: int, states: Mapping[str, str], now: float,
                       columns: Mapping[str, Any], before_finish: Callable[[], None]) -> None:
        """The stages' policy `states` (`exported_states`) and the cycle's outcome `columns`,
        in one transaction (`before_finish` runs inside it, before the cycle's row is
        finished)."""
        with self.store.transaction(f"record the outcome of cycle {cycle}") as db:
            for key, state in states.items():
                db["policy_state"].upsert({"stage": key, "cycle": cycle, "updated": now,
                                           "state": state}, pk="stage")
            before_finish()
            db["cycles"].update(cycle, dict(columns))


def exported_states(stages: Stages, now: float) -> dict[str, str]:
    """Each stateful stage's state as the store keeps it, by store key."""
    return {key: dumps(stage.export_state(now)) for key, stage in stage_list(stages)
            if isinstance(stage, Stateful)}


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
