"""How long the store keeps each kind of record, and the pruning that makes it so.

Windows are on the backend's clock (`cycles.now`: wall time, or the simulation's seconds), in
days; 0 keeps that kind of record for ever. A kind's records older than its window go:
- `decisions`: the decisions, and the journal's closed actions (landed, failed, abandoned,
  confirmed vacates) whose job has left the pool, with their `action_log` history. An action
  still open (planned, issued, a confirmed allocation not yet seen landing) and any action of
  a job still in the pool are never pruned: a restart needs the first, and the second keeps
  the same decision on the same job from being carried out again (its idempotency key);
- `job_events`, `shadow` (the three shadow tables): deleted;
- `cycle_details`: a cycle's skipped ads, warnings, events and held-back preemptions are
  emptied; its row goes once past all four windows above, unless usage or an action kept
  points at it (its row dates them);
- `usage_full`: every cycle's usage rows; older, one cycle an hour is kept (the first of each
  hour that has usage), then after `usage_hourly` one a day, deleted after `usage_daily`;
- `users`: users and identities not seen for that long.

Pruning runs after each cycle is recorded (`CycleRunner.run`), at most `prune_rows` rows a
cycle, each chunk one transaction together with the progress of its walk (`meta`), so a kill
at any point leaves the store as before that chunk or after it, never between. Pages freed
are given back to the file system (auto_vacuum = INCREMENTAL, `Store`) once more than an
eighth of the file is free, at most `vacuum_pages` pages a cycle.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gridfair.daemon.store import ABANDONED, CONFIRMED, FAILED, LANDED, Store

DAY = 86400.0
HOUR = 3600.0
#: States of a journaled action that nothing reads again once its job has left the pool.
_CLOSED = (LANDED, FAILED, ABANDONED)
#: The cycle columns emptied after `cycle_details`.
_DETAILS = ("skipped", "warnings", "events", "held_back")


@dataclass(frozen=True)
class Retention:
    """The windows in seconds (0: for ever) and the per-cycle budgets."""

    decisions: float = 7 * DAY
    job_events: float = 7 * DAY
    cycle_details: float = 7 * DAY
    usage_full: float = 1 * DAY
    usage_hourly: float = 30 * DAY
    usage_daily: float = 0.0
    shadow: float = 7 * DAY
    users: float = 30 * DAY
    prune_rows: int = 20_000
    vacuum_pages: int = 4096

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> Retention:
        windows = {name: section[name] * DAY for name in WINDOWS}
        return cls(**windows, prune_rows=section["prune_rows"],
                   vacuum_pages=section["vacuum_pages"])


#: The config keys (`[retention]`, in days) that are windows.
WINDOWS = ("decisions", "job_events", "cycle_details", "usage_full", "usage_hourly",
           "usage_daily", "shadow", "users")


class Pruner:
    """Brings the store within its retention, a bounded amount per `step`."""

    def __init__(self, store: Store, retention: Retention) -> None:
        self.store = store
        self.retention = retention
        self._tasks: tuple[Callable[[float, int], int], ...] = (
            self._downsample_hourly, self._downsample_daily, self._usage, self._decisions,
            self._actions, self._job_events, self._details, self._shadow, self._cycles,
            self._users,
        )
        self._first = 0  # which task goes first: turn about, so none waits on the others
        self._chunk_done: Callable[[], None] = lambda: None

    def step(self, now: float, chunk_done: Callable[[], None] = lambda: None) -> int:
        """Prune up to `prune_rows` rows as of `now` (the backend's clock); returns how many
        rows were deleted or emptied. `chunk_done` is called inside each chunk's transaction,
        before it commits (a fault point for the crash tests)."""
        self._chunk_done = chunk_done
        budget = self.retention.prune_rows
        count = len(self._tasks)
        for turn in range(count):
            if budget <= 0:
                break
            budget -= self._tasks[(self._first + turn) % count](now, budget)
        self._first = (self._first + 1) % count
        self._give_back()
        return self.retention.prune_rows - budget

    # ---------------------------------------------------------------- helpers
    def _cutoff(self, now: float, window: float) -> int | None:
        """The latest cycle that read the pool more than `window` seconds before `now`; None
        if none did or the window is for ever."""
        if not window:
            return None
        row = self.store.db.execute(
            "select id from cycles where now < ? order by now desc limit 1",
            [now - window]).fetchone()
        return row[0] if row else None

    def _delete_old(self, table: str, cutoff: int | None, limit: int) -> int:
        if cutoff is None:
            return 0
        with self.store.transaction(f"prune {table}") as db:
            deleted = db.execute(
                f"delete from {table} where rowid in (select rowid from {table} "
                "where cycle <= ? limit ?)", [cutoff, limit]).rowcount
            self._chunk_done()
        return deleted

    def _marker(self, name: str) -> int | None:
        row = self.store.db.execute("select value from meta where key = ?",
                                    [f"retention.{name}"]).fetchone()
        return int(row[0]) if row else None

    @staticmethod
    def _set_marker(db: Any, name: str, value: int) -> None:
        db.execute("insert into meta (key, value) values (?, ?) on conflict(key) do update "
                   "set value = excluded.value", [f"retention.{name}", str(value)])

    # ------------------------------------------------------------------ tasks
    def _downsample(self, name: str, width: float, newer: float, now: float,
                    budget: int) -> int:
        """Past `newer` seconds, keep one cycle's usage per `width` seconds (the first with
        usage in each): the walk goes through the cycles in order, its progress (the last
        cycle walked and the bucket of the last one kept) committed with each chunk."""
        if not newer:
            return 0
        cutoff = self._cutoff(now, newer)
        through = self._marker(f"{name}_through") or 0
        if cutoff is None or cutoff <= through:
            return 0
        kept_bucket = self._marker(f"{name}_bucket")
        db = self.store.db
        cycles = db.execute(
            "select id, now from cycles where id > ? and id <= ? and now is not null "
            "and exists (select 1 from usage where usage.cycle = cycles.id) "
            "order by id limit 1000", [through, cutoff]).fetchall()
        last = cutoff if len(cycles) < 1000 else cycles[-1][0]
        deleted = 0
        with self.store.transaction(f"downsample usage ({name})") as db:
            for cycle, time in cycles:
                bucket = math.floor(time / width)
                if bucket != kept_bucket:
                    kept_bucket = bucket
                    continue
                if deleted >= budget:
                    last = cycle - 1
                    break
                deleted += db.execute("delete from usage where cycle = ?", [cycle]).rowcount
            self._set_marker(db, f"{name}_through", last)
            if kept_bucket is not None:
                self._set_marker(db, f"{name}_bucket", kept_bucket)
            self._chunk_done()
        return deleted

    def _downsample_hourly(self, now: float, budget: int) -> int:
        r = self.retention
        return self._downsample("hourly", HOUR, r.usage_full, now, budget)

    def _downsample_daily(self, now: float, budget: int) -> int:
        r = self.retention
        return self._downsample("daily", DAY, r.usage_hourly if r.usage_full else 0.0, now,
                                budget)

    def _usage(self, now: float, budget: int) -> int:
        return self._delete_old("usage", self._cutoff(now, self.retention.usage_daily), budget)

    def _decisions(self, now: float, budget: int) -> int:
        return self._delete_old("decisions", self._cutoff(now, self.retention.decisions),
                                budget)

    def _job_events(self, now: float, budget: int) -> int:
        return self._delete_old("job_events", self._cutoff(now, self.retention.job_events),
                                budget)

    def _shadow(self, now: float, budget: int) -> int:
        cutoff = self._cutoff(now, self.retention.shadow)
        deleted = 0
        for table in ("shadow_usage", "shadow_starts", "shadow_cycles"):
            deleted += self._delete_old(table, cutoff, budget - deleted)
            if deleted >= budget:
                break
        return deleted

    def _actions(self, now: float, budget: int) -> int:
        """Closed actions of jobs no longer in the pool, with their history, together."""
        cutoff = self._cutoff(now, self.retention.decisions)
        if cutoff is None:
            return 0
        marks = ",".join("?" * len(_CLOSED))
        with self.store.transaction("prune the action journal") as db:
            keys = [row[0] for row in db.execute(
                f"select key from actions where cycle <= ? and (state in ({marks}) or "
                "(state = ? and kind = 'vacate')) and not exists "
                "(select 1 from jobs where jobs.id = actions.job) limit ?",
                [cutoff, *_CLOSED, CONFIRMED, max(1, budget // 4)])]
            deleted = 0
            for key in keys:
                deleted += db.execute("delete from action_log where key = ?", [key]).rowcount
                deleted += db.execute("delete from actions where key = ?", [key]).rowcount
            self._chunk_done()
        return deleted

    def _details(self, now: float, budget: int) -> int:
        cutoff = self._cutoff(now, self.retention.cycle_details)
        through = self._marker("details_through") or 0
        if cutoff is None or cutoff <= through:
            return 0
        last = min(cutoff, through + budget)
        emptied = ", ".join(f"{column} = null" for column in _DETAILS)
        with self.store.transaction("empty old cycles' details") as db:
            changed = db.execute(f"update cycles set {emptied} where id > ? and id <= ?",
                                 [through, last]).rowcount
            self._set_marker(db, "details_through", last)
            self._chunk_done()
        return changed

    def _cycles(self, now: float, budget: int) -> int:
        """Cycle rows past every window of what points at them (decisions, job events,
        details, shadow records), unless usage or an action kept still does. No walk: an
        action outlives its planning cycle's window by a cycle or more (it lands later), so
        each step looks again from the first row; the rows it passes over are the usage
        samples and the cycles of actions kept, a few thousand at most."""
        r = self.retention
        windows = (r.decisions, r.job_events, r.cycle_details, r.shadow)
        cutoff = self._cutoff(now, max(windows)) if all(windows) else None
        if cutoff is None:
            return 0
        with self.store.transaction("prune old cycles") as db:
            deleted = db.execute(
                "delete from cycles where id in (select id from cycles where id <= ? and not "
                "exists (select 1 from usage where usage.cycle = cycles.id) and not exists "
                "(select 1 from actions where actions.planned_cycle = cycles.id) limit ?)",
                [cutoff, budget]).rowcount
            self._chunk_done()
        return deleted

    def _users(self, now: float, budget: int) -> int:
        window = self.retention.users
        if not window:
            return 0
        cutoff = self._cutoff(now, window)
        with self.store.transaction("prune users not seen") as db:
            deleted = db.execute(
                "delete from users where rowid in (select rowid from users where "
                "last_seen < ? limit ?)", [now - window, budget]).rowcount
            if cutoff is not None:
                deleted += db.execute(
                    "delete from identities where rowid in (select rowid from identities "
                    "where last_cycle <= ? limit ?)", [cutoff, budget]).rowcount
            self._chunk_done()
        return deleted

    def _give_back(self) -> None:
        """Return free pages to the file system once more than an eighth of the file is free
        (below that they are reused by the next cycles' rows)."""
        db = self.store.db
        free = db.execute("pragma freelist_count").fetchone()[0]
        pages = db.execute("pragma page_count").fetchone()[0]
        if free * 8 > pages:
            excess = free - pages // 16
            # Each step of the statement frees a page; executescript steps it to its end
            # (execute would stop after the first).
            db.conn.executescript(
                f"pragma incremental_vacuum({min(excess, self.retention.vacuum_pages)})")
