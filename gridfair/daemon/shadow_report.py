"""What a shadow daemon's store says about gridfair against the pool (`gridfair shadow`).

Over the shadow cycles in a window (`--since`, `--until`; every cycle by default):
- share error (`gridfair.core.shares.share_error`) of the pool as it ran (each snapshot, before
  any decision) and of gridfair's decisions (the same pool with the cycle's decisions
  applied), the mean over cycles of each;
- allocations: each distinct (job, slot) gridfair decided, from the first cycle it decided it:
  made by the pool anyway when the pool started that job on that slot (a dynamic slot counts
  as its partitionable slot) within two cycles (the cycle's and the next two's starts); or
  started on another slot within two cycles; or not started within two cycles. Decisions of
  the window's last two cycles cannot be judged yet and are left out;
- vacates gridfair would have issued (distinct jobs; held-back ones are not among them, they
  are counted apart), and how many of those jobs the pool vacated itself within two cycles;
- starts the pool made in the window, of jobs gridfair had seen waiting: gridfair would have
  started the job sooner when it had allocated it more than two cycles before the cycle that
  saw the pool's start (by how much: the job's start time minus the time of gridfair's
  cycle), at about the same time within two cycles, and later when it had not allocated it
  at all while it waited (how long it had waited by then). Starts of jobs gridfair never saw
  waiting are counted as unseen.

Times are the daemon's clock (`cycles.now`) and the jobs' own start times (JobCurrentStartDate).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import sqlite_utils

from gridfair.ad_views import whole_slot
from gridfair.core.shares import share_error
from gridfair.daemon.reports import ReportError, parse_since, reading
from gridfair.daemon.shadow import GRIDFAIR, POOL
from gridfair.daemon.store import open_readonly

#: Cycles after a decision within which the pool's doing the same counts.
HORIZON = 2


@dataclass
class ShadowReport:
    since: float
    until: float
    cycles: int
    interval: float  # median seconds between cycles
    policy: str
    sim_start: float | None  # where a simulated clock began (None: wall time)
    share_error: dict[str, float]  # side -> mean over cycles
    allocations: dict[str, int]
    vacates: dict[str, int]
    starts: dict[str, float]
    #: Per user: provided MFlops and mean share of the pool's power on each side.
    users: list[dict[str, Any]] = field(default_factory=list)
    #: Per cycle: time, share error and each user's share, on each side (the plot's).
    series: dict[str, Any] = field(default_factory=dict)
    #: Every judged allocation: job, slot, cycle decided, and what the pool did.
    judged: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def shadow_report(path: str, since: str | None = None,
                  until: str | None = None) -> ShadowReport:
    """The report of the shadow cycles of the store at `path` whose clock is within `since`
    and `until` (epoch seconds, ISO dates, or `2h`: before the latest cycle)."""
    db = open_readonly(path)
    try:
        with reading(db):
            return _report(db, parse_since(since, db), parse_since(until, db))
    finally:
        db.conn.close()


def _report(db: sqlite_utils.Database, since: float | None,
            until: float | None) -> ShadowReport:
    if not db["shadow_cycles"].exists():
        raise ReportError("the store has no shadow cycles: run gridfair daemon --shadow")
    cycles = [row for row in db.query(
        "select c.id, c.now, c.policy, c.sim_start, s.cpus, s.power from cycles c join "
        "shadow_cycles s "
        "on s.cycle = c.id where c.now is not null order by c.id")
        if (since is None or row["now"] >= since) and (until is None or row["now"] <= until)]
    if not cycles:
        raise ReportError("no shadow cycle in the window" if since or until else
                          "the store has no shadow cycles: run gridfair daemon --shadow")
    ids = [row["id"] for row in cycles]
    first, last = ids[0], ids[-1]
    when = {row["id"]: row["now"] for row in cycles}
    gaps = [later - earlier for earlier, later in zip([row["now"] for row in cycles],
                                                      [row["now"] for row in cycles][1:],
                                                      strict=False)]
    interval = statistics.median(gaps) if gaps else 0.0
    usage = list(db.query("select * from shadow_usage where cycle between ? and ? "
                          "order by cycle, side, user", [first, last]))
    decisions = list(db.query(
        "select cycle, kind, job, machine from decisions where cycle between ? and ? and "
        "kind in ('allocate', 'vacate') order by cycle, seq", [first, last]))
    starts = list(db.query("select cycle, job, machine, started from shadow_starts where "
                           "cycle between ? and ? order by cycle, id", [first, last + HORIZON]))
    events = list(db.query(
        "select cycle, job, event from job_events where cycle between ? and ? and event in "
        "('submitted', 'vacated') order by cycle, id", [first, last]))
    held = sum(row["held"] for row in db.query(
        "select json_array_length(held_back) as held from cycles where id between ? and ? "
        "and held_back is not null", [first, last]))
    series, users, errors = _shares(cycles, usage)
    allocations, judged = _allocations(decisions, starts, last)
    return ShadowReport(
        since=when[first], until=when[last], cycles=len(cycles), interval=interval,
        policy=cycles[-1]["policy"] or "", sim_start=cycles[-1]["sim_start"],
        share_error=errors, allocations=allocations,
        vacates={**_vacates(decisions, db, last), "held_back": held},
        starts=_starts(decisions, starts, events, when, first),
        users=users, series=series, judged=judged)


def _shares(cycles: Sequence[Mapping[str, Any]], usage: Sequence[Mapping[str, Any]],
            ) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, float]]:
    """Per-cycle shares and share error of each side, per-user means, and the mean errors."""
    by_cycle: dict[tuple[int, str], list[Mapping[str, Any]]] = {}
    for row in usage:
        by_cycle.setdefault((row["cycle"], row["side"]), []).append(row)
    names = list(dict.fromkeys(row["user"] for row in usage))
    provided = {row["user"]: row["provided_mflops"] for row in usage}
    series: dict[str, Any] = {"times": [row["now"] for row in cycles]}
    means: dict[str, float] = {}
    share_means: dict[str, dict[str, float]] = {}
    for side in (POOL, GRIDFAIR):
        errors, shares = [], {name: [] for name in names}
        for cycle in cycles:
            rows = by_cycle.get((cycle["id"], side), [])
            total = cycle["power"] or math.fsum(row["provided_mflops"] for row in rows)
            per_cpu = total / cycle["cpus"] if cycle["cpus"] else 0.0
            errors.append(share_error(((row["provided_mflops"], row["allocated_mflops"],
                                        row["waiting_cpus"]) for row in rows), per_cpu, total))
            held = {row["user"]: row["allocated_mflops"] for row in rows}
            for name in names:
                shares[name].append(held.get(name, 0.0) / total if total else 0.0)
        series[side] = {"share_error": errors, "shares": shares}
        means[side] = statistics.fmean(errors)
        share_means[side] = {name: statistics.fmean(values) for name, values in shares.items()}
    users = [{"user": name, "provided_mflops": provided[name],
              "pool_share": share_means[POOL][name], "gridfair_share": share_means[GRIDFAIR][name]}
             for name in names]
    return series, users, means


def _allocations(decisions: Sequence[Mapping[str, Any]], starts: Sequence[Mapping[str, Any]],
                 last: int) -> tuple[dict[str, int], list[dict[str, Any]]]:
    """Each distinct (job, slot) allocation, judged against the pool's starts."""
    decided: dict[tuple[str, str], int] = {}
    for row in decisions:
        if row["kind"] == "allocate":
            decided.setdefault((row["job"], whole_slot(row["machine"])), row["cycle"])
    started: dict[str, list[Mapping[str, Any]]] = {}
    for row in starts:
        started.setdefault(row["job"], []).append(row)
    counts = {"decided": 0, "made_anyway": 0, "other_slot": 0, "not_started": 0,
              "too_recent": 0}
    judged = []
    for (job, slot), cycle in decided.items():
        if cycle + HORIZON > last:
            counts["too_recent"] += 1
            continue
        counts["decided"] += 1
        soon = [row for row in started.get(job, []) if cycle <= row["cycle"] <= cycle + HORIZON]
        if any(whole_slot(row["machine"] or "") == slot for row in soon):
            outcome = "made_anyway"
        elif soon:
            outcome = "other_slot"
        else:
            outcome = "not_started"
        counts[outcome] += 1
        judged.append({"job": job, "slot": slot, "cycle": cycle, "outcome": outcome,
                       "pool": [(row["machine"], row["started"]) for row in soon]})
    return counts, judged


def _vacates(decisions: Sequence[Mapping[str, Any]], db: sqlite_utils.Database,
             last: int) -> dict[str, int]:
    """Distinct jobs gridfair would have vacated, and how many the pool vacated itself."""
    decided: dict[str, int] = {}
    for row in decisions:
        if row["kind"] == "vacate":
            decided.setdefault(row["job"], row["cycle"])
    vacated = 0
    for job, cycle in decided.items():
        vacated += bool(db.execute(
            "select 1 from job_events where job = ? and event in ('vacated', 'moved') and "
            "cycle between ? and ?", [job, cycle, min(cycle + HORIZON, last)]).fetchone())
    return {"decided": len(decided), "pool_vacated": vacated}


def _starts(decisions: Sequence[Mapping[str, Any]], starts: Sequence[Mapping[str, Any]],
            events: Sequence[Mapping[str, Any]], when: Mapping[int, float],
            first: int) -> dict[str, float]:
    """The pool's starts of jobs gridfair saw waiting, against gridfair's allocations."""
    allocated: dict[str, list[int]] = {}
    for row in decisions:
        if row["kind"] == "allocate":
            allocated.setdefault(row["job"], []).append(row["cycle"])
    waiting_from: dict[str, list[int]] = {}
    for row in events:
        waiting_from.setdefault(row["job"], []).append(row["cycle"])
    sooner, same, later = [], 0, []
    unseen = 0
    for row in starts:
        cycle = row["cycle"]
        if cycle not in when or cycle == first:
            continue  # the first cycle's running jobs started before the shadow began
        began = [seen for seen in waiting_from.get(row["job"], []) if seen < cycle]
        if not began:
            unseen += 1
            continue
        idle_since = began[-1]
        chosen = [decided for decided in allocated.get(row["job"], [])
                  if idle_since <= decided < cycle]
        if chosen and cycle - chosen[0] > HORIZON:
            sooner.append(row["started"] - when[chosen[0]])
        elif chosen:
            same += 1
        else:
            later.append(row["started"] - when[idle_since])
    return {"pool_starts": len(sooner) + same + len(later) + unseen, "unseen": unseen,
            "sooner": len(sooner), "sooner_mean_seconds": _mean(sooner), "same_time": same,
            "later": len(later), "later_waited_mean_seconds": _mean(later)}


def _mean(values: Sequence[float]) -> float:
    return statistics.fmean(values) if values else 0.0
