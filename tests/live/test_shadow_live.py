"""Shadow mode on a live pool: HTCondor schedules alone (its own priorities, claims reused)
while `gridfair daemon --shadow` decides with HOSEP every 2 s, acts on nothing, and records
what the pool did. The report's figures are then worked out again from the pool's own event
log (its execute and evict events) and must be the same.

`GRIDFAIR_SHADOW_SECONDS` sets how long the daemon shadows the pool (90 s by default; the
figures in docs/results/live-pool.md come from 360 s). `pytest -s` prints the report."""

from __future__ import annotations

import math
import os
import time
from collections import defaultdict
from pathlib import Path

from gridfair.cli.shadow import report_text
from gridfair.daemon.config import validate
from gridfair.daemon.service import Daemon
from gridfair.daemon.shadow_report import HORIZON, shadow_report
from gridfair.daemon.store import open_readonly
from tests.harness.pool_record import read_runs
from tests.live.conftest import SLOTS, own_pool
from tests.live.harness.personal_pool import UID_DOMAIN, JobSpec

#: Long enough for the arrivals up to 40 s to run and end; GRIDFAIR_SHADOW_SECONDS=90 for all.
SECONDS = float(os.environ.get("GRIDFAIR_SHADOW_SECONDS", "50"))
FAST = 132250.0  # MFlops of the fastest slot: work is seconds there times this
#: Every 90 s: (second, submitter, seconds of work on the fastest slot, jobs). User1 owns
#: the fast slots, User2 the slow ones, guest none.
PERIOD = 90
#: Seconds a start may take to show in a snapshot: the slot ad's update, and the event's.
LAG = 3.0
ARRIVALS = ((10, "User1", 12, 5), (25, "guest", 8, 4), (40, "User1", 6, 6),
            (60, "User2", 10, 4), (85, "User2", 30, 4))


def test_shadow_report_matches_the_pool_event_log(tmp_path: Path) -> None:
    pool = own_pool(SLOTS, extra_config=["EVENT_LOG = $(LOG)/EventLog",
                                         "EVENT_LOG_MAX_SIZE = 0"])
    raw = {"daemon": {"interval": 2.0, "store": "shadow.db"},
           "policy": {"name": "hosep"},
           "safety": {"min_runtime": 0.0, "preempt_cooldown": 0.0, "max_vacates_per_cycle": 4},
           "backend": {"kind": "htcondor", "htcondor": {"collector": pool.collector_host,
                                                        "uid_domain": UID_DOMAIN}}}
    with pool:
        # User2 fills the pool first; User1, who owns the fast slots, and guest, who owns
        # none, come after: HOSEP would vacate for User1, HTCondor lets jobs finish.
        pool.submit([JobSpec("User2", 30 * FAST)], count=6)
        daemon = Daemon(validate(raw, base=tmp_path), shadow=True)
        deadline = time.monotonic() + SECONDS
        arrivals = [(period + second, user, work * FAST, count)
                    for period in range(0, int(SECONDS), PERIOD)
                    for second, user, work, count in ARRIVALS]
        began = time.monotonic()
        try:
            while time.monotonic() < deadline:
                while arrivals and time.monotonic() - began >= arrivals[0][0]:
                    _, user, work, count = arrivals.pop(0)
                    pool.submit([JobSpec(user, work)], count=count)
                report = daemon.tick()
                assert report is not None and report.outcome == "dry-run", report
                time.sleep(2.0)
        finally:
            daemon.close()
        runs = read_runs(pool.directory / "local" / "log" / "EventLog", defaultdict(str),
                         math.inf)
    executes = [(run.job, run.slot, run.start) for run in runs]
    evictions = [(run.job, run.end) for run in runs if run.evicted]
    store = tmp_path / "shadow.db"
    report = shadow_report(str(store))
    print("\n" + report_text(report.as_dict()))
    db = open_readonly(store)
    cycles = {row["id"]: row["snapshot_time"]
              for row in db.query("select id, snapshot_time from cycles order by id")}
    decisions = list(db.query("select cycle, kind, job, machine from decisions "
                              "where kind in ('allocate', 'vacate') order by cycle, seq"))
    first, last = min(cycles), max(cycles)
    starts = list(db.query("select job, machine, started from shadow_starts where cycle > ?",
                           [first]))
    db.conn.close()
    assert report.cycles == len(cycles) and report.cycles >= SECONDS / 3

    # The starts the shadow recorded after its first snapshot are the execute events after
    # it and by its last: the same jobs on the same slots at the same times (the shadow
    # writes the event up to a second after the start the schedd records). An event within
    # a second of the first snapshot, or LAG seconds of the last, may fall on either side.
    assert report.starts["pool_starts"] == len(starts) > 0
    window = [(job, slot, when) for job, slot, when in executes
              if cycles[first] - 1 <= when <= cycles[last] + 1]
    for row in starts:
        assert any(job == row["job"] and slot == row["machine"] and
                   0 <= when - row["started"] <= 1 for job, slot, when in window), row
    recorded = {(row["job"], row["machine"]) for row in starts}
    missed = [(job, slot) for job, slot, when in window if (job, slot) not in recorded
              and cycles[first] + 1 < when < cycles[last] - 1]
    assert missed == []

    # Each judged allocation, judged again from the event log: did the pool start that job,
    # on that slot or another, after the decision's snapshot and by the snapshot two cycles
    # on? A snapshot sees a start only once the slot's ad says so (the collector's copy lags
    # by up to UPDATE_INTERVAL, 2 s here, and the event by a second): a start in the last
    # LAG seconds before that snapshot may be judged either way.
    for row in report.judged:
        start, end = cycles[row["cycle"]] - 1, cycles[row["cycle"] + HORIZON]
        sure = [slot for job, slot, when in executes
                if job == row["job"] and start <= when <= end - LAG]
        maybe = [slot for job, slot, when in executes
                 if job == row["job"] and start <= when <= end + 1]
        allowed = {_outcome(row["slot"], sure)} if sure else {
            _outcome(row["slot"], maybe), "not_started"}
        assert row["outcome"] in allowed, (row, sure, maybe)

    # The vacates gridfair would have issued: the pool evicted none of those jobs (HTCondor
    # preempts nothing in this pool), as the event log says.
    vacated = {row["job"] for row in decisions if row["kind"] == "vacate"}
    assert report.vacates["decided"] == len(vacated)
    assert report.vacates["pool_vacated"] == len(vacated & {job for job, _ in evictions}) == 0
    assert report.vacates["decided"] > 0  # User1 waited below its share: HOSEP preempts
    assert report.allocations["decided"] > 0
    assert report.share_error["gridfair"] < report.share_error["pool"]


def _outcome(slot: str, runs: list[str]) -> str:
    return "made_anyway" if slot in runs else "other_slot" if runs else "not_started"
