"""What explains an allocation that does not start: the target machine's ads while it is in flight.

A live bench's daemon journals "not landed: not started within 12 s" and nothing more; the
pool's event log shows what started, not what stood in the way. `LandingWatch` polls, every
`every` seconds while the daemon runs, its store (read-only) for the allocations in flight and,
for each machine one is in flight to, the collector's slot ads of that machine (the
partitionable slot and its dynamic slots: state, activity, claim, job, size) and the schedd's
ads of the flights' jobs and of the jobs those slots name (status, steering, the negotiator's
last reason for not matching). `verdicts` then reads every allocation's history from the
journal. Both go into the bench's `--save` directory beside the run's record, where
`--replay` ignores them, with the pool's own logs (`keep_pool_logs`: a schedd that restarted,
a `condor_now` coalesce that failed, a claim the startd kept).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from gridfair.ad_views import whole_slot

#: Slot attributes kept: what decides whether a machine has room for a steered job.
SLOT_ATTRIBUTES = (
    "Name", "SlotType", "State", "Activity", "EnteredCurrentState", "EnteredCurrentActivity",
    "RemoteUser", "RemoteOwner", "RemoteScheddName", "JobId", "GlobalJobId", "JobStart",
    "PublicClaimId", "ClaimStartTime", "TotalClaimRunTime", "CurrentRank", "Cpus", "Memory",
    "GPUs", "TotalSlotCpus", "ChildState", "ChildActivity", "ChildRemoteUser", "ChildCpus",
    "NumDynamicSlots", "PreemptingUser", "LastHeardFrom", "MyCurrentTime", "Start")
#: The pool's logs kept (`keep_pool_logs`), those of its schedd, startd, negotiator, master,
#: shadows.
POOL_LOGS = ("SchedLog", "ScheddRestartReport", "StartLog", "NegotiatorLog", "MasterLog",
             "ShadowLog")
#: Job attributes kept: where it was steered, where it runs, why the negotiator passed it by.
JOB_ATTRIBUTES = (
    "ClusterId", "ProcId", "Owner", "JobStatus", "EnteredCurrentStatus", "RemoteHost",
    "LastRemoteHost", "GridfairSlot", "GridfairSlotSize", "GridfairRun", "JobRunCount",
    "NumJobStarts", "NumJobMatches", "LastMatchTime", "LastRejMatchReason",
    "LastRejMatchTime", "JobCurrentStartDate", "LastVacateTime", "RequestCpus",
    "RequestMemory")


def _plain(value: Any) -> Any:
    """A ClassAd value as JSON can hold it (an expression, or an undefined, as its text)."""
    return value if isinstance(value, (str, int, float, bool)) or value is None else str(value)


class LandingWatch:
    """A thread polling the store at `store` and the pool at `collector` (module docstring)."""

    def __init__(self, store: Path, collector: str, every: float = 1.0) -> None:
        self.store = store
        self.collector = collector
        self.every = every
        self.polls: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="landing-watch", daemon=True)

    def __enter__(self) -> LandingWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                poll = self.poll()
            except Exception as error:  # noqa: BLE001 - a missed poll is noted, the run goes on
                if len(self.errors) < 50:
                    self.errors.append(f"{time.time():.1f}: {error}")
                continue
            if poll is not None:
                self.polls.append(poll)

    def poll(self) -> dict[str, Any] | None:
        """One look: the flights, their machines' slot ads and the jobs; None with no flight."""
        flights = self._flights()
        if not flights:
            return None
        import htcondor2

        machines = {flight["machine"] for flight in flights}
        collector = htcondor2.Collector(self.collector)
        slots = collector.query(htcondor2.AdType.Startd,
                                constraint="PartitionableSlot || DynamicSlot",
                                projection=list(SLOT_ATTRIBUTES))
        # A dynamic slot slotN_M@host is cut from the partitionable slot slotN@host.
        slot_ads = [{key: _plain(ad.get(key)) for key in SLOT_ATTRIBUTES if key in ad}
                    for ad in slots if whole_slot(str(ad.get("Name"))) in machines]
        job_ids = {flight["job"] for flight in flights}
        job_ids.update(str(ad["JobId"]) for ad in slot_ads if ad.get("JobId"))
        schedd = htcondor2.Schedd(collector.locate(htcondor2.DaemonType.Schedd))
        wanted = " || ".join(
            f"(ClusterId == {job.split('.')[0]} && ProcId == {job.split('.')[1]})"
            for job in sorted(job_ids))
        jobs = [{key: _plain(ad.get(key)) for key in JOB_ATTRIBUTES if key in ad}
                for ad in schedd.query(constraint=wanted, projection=list(JOB_ATTRIBUTES))]
        return {"time": round(time.time(), 2), "flights": flights, "slots": slot_ads,
                "jobs": jobs}

    def _flights(self) -> list[dict[str, Any]]:
        return self._rows("select key, job, user, machine, updated_at as confirmed, cpus, "
                          "memory from actions where kind = 'allocate' and state = 'confirmed'")

    def verdicts(self) -> list[dict[str, Any]]:
        """Every allocation's history in the journal: each state it passed, when, with note."""
        return self._rows("select a.key, a.job, a.user, a.machine, l.cycle, l.time, l.state, "
                          "l.note from action_log l join actions a on a.key = l.key "
                          "where a.kind = 'allocate' order by l.time, l.id")

    def _rows(self, sql: str) -> list[dict[str, Any]]:
        """The store's rows for `sql`, read-only (none before the daemon made the store)."""
        if not self.store.exists():
            return []
        with contextlib.closing(sqlite3.connect(f"file:{self.store}?mode=ro", uri=True,
                                                timeout=5.0)) as db:
            db.row_factory = sqlite3.Row
            return [dict(row) for row in db.execute(sql)]

    def save(self, path: Path) -> None:
        """What the watch kept, and the journal's verdicts, as JSON at `path`."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"every": self.every, "polls": self.polls,
                                    "verdicts": self.verdicts(), "errors": self.errors}))


def keep_pool_logs(pool_directory: Path, target: Path) -> None:
    """Copy the pool's logs (`POOL_LOGS`, those it wrote) to `target`, before the pool and
    its directory go."""
    target.mkdir(parents=True, exist_ok=True)
    for name in POOL_LOGS:
        log = pool_directory / "local" / "log" / name
        if log.exists():
            shutil.copyfile(log, target / name)
