"""The daemon's durable state: one SQLite file in WAL mode, through sqlite-utils.

Tables (docs/daemon.md has the columns):
- `cycles`: one row per cycle (times, counts, outcome, skipped ads and warnings about ads,
  held-back preemptions);
- `decisions`: every policy decision with its reason and figures;
- `actions`: the action journal, one row per idempotency key, and `action_log`, its history;
- `jobs`: the pool's jobs as last seen (what the next cycle reconciles against), each with the
  identity it is charged as;
- `identities`: who each identity's jobs are charged to, and why;
- `job_events`: what reconciliation saw happen to jobs between cycles;
- `users`, `usage`: per-user totals now and per cycle (the history);
- `policy_state`: each stateful stage's exported state, so a restart keeps the shares;
- `shadow_cycles`, `shadow_usage`, `shadow_starts`: a shadow daemon's record of the pool
  as it ran against its decisions (`gridfair.daemon.shadow`).

The journal's rule: an action is written `planned` (in the same transaction as its cycle's
decisions) before it is carried out, marked `issued` (committed) before the backend is
called, and `confirmed` or `failed` after. A restart therefore never calls the backend for an
`issued` or `confirmed` action again, and finds every `planned` one. A confirmed allocation
then holds its slot until it is seen running there (`landed`) or not (`failed`, "not landed"):
`gridfair.daemon.inflight`.

WAL lets the admin commands read while the daemon writes; they open the file read-only.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import sqlite3
import stat
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

import sqlite_utils

from gridfair.core.stages import VACATE
from gridfair.errors import GridfairError

SCHEMA_VERSION = 1
#: Bytes the write-ahead log is cut back to after a checkpoint (`journal_size_limit`).
WAL_SIZE_LIMIT = 8 * 1024 * 1024

log = logging.getLogger("gridfair.daemon")

PLANNED, ISSUED, CONFIRMED, FAILED, ABANDONED = (
    "planned", "issued", "confirmed", "failed", "abandoned",
)
#: An allocation seen running on its slot (`gridfair.daemon.inflight`); one that never
#: started there ends `failed` ("not landed: ...").
LANDED = "landed"
ACTION_STATES = (PLANNED, ISSUED, CONFIRMED, LANDED, FAILED, ABANDONED)

_TABLES: dict[str, tuple[dict[str, type], str | tuple[str, ...]]] = {
    "meta": ({"key": str, "value": str}, "key"),
    "cycles": ({
        "id": int, "started": float, "finished": float, "snapshot_time": float, "now": float,
        "duration": float, "outcome": str, "machines": int, "jobs": int, "idle": int,
        "running": int, "decisions": int, "actions_planned": int, "actions_confirmed": int,
        "actions_failed": int, "events": str, "held_back": str, "skipped": str, "error": str,
        "policy": str, "dry_run": int, "warnings": str,
        # The sim backend's clock at its start (its times are simulated seconds after it);
        # NULL for a wall clock.
        "sim_start": float,
        # gridfair's lease on the pool's starts as renewed this cycle, or why it was not.
        "lease_until": float, "lease_error": str,
        # Under the hdrf order with a tree: its rows per accounting group before the cycle's
        # decisions, allocations in flight counted (`HdrfOrder.group_rows`, JSON; `history
        # --group`, `explain GROUP`).
        "groups": str,
    }, "id"),
    "decisions": ({
        "id": int, "cycle": int, "seq": int, "kind": str, "job": str, "user": str,
        "machine": str, "policy": str, "reason": str, "figures": str, "action": str,
    }, "id"),
    "actions": ({
        # `cycle`: of the last change of state; `planned_cycle`: of the first plan.
        "key": str, "cycle": int, "planned_cycle": int, "kind": str, "job": str, "user": str,
        "machine": str,
        # What the job asked for: an allocation in flight holds it while no ad lists the job
        # (NULL in older stores: 1 CPU).
        "cpus": float, "memory": float, "gpus": float,
        "state": str, "attempts": int, "retryable": int, "planned_at": float,
        "updated_at": float, "error": str, "reason": str,
    }, "key"),
    "action_log": ({"id": int, "key": str, "cycle": int, "time": float, "state": str,
                    "note": str}, "id"),
    "jobs": ({"id": str, "user": str, "status": str, "machine": str, "since": float,
              "last_seen": float, "cycle": int, "identity": str}, "id"),
    # Who each identity's jobs are charged to and why (`gridfair.classads.submitters`).
    "identities": ({"identity": str, "owner": str, "rule": str, "mapped": int,
                    "first_cycle": int, "last_cycle": int}, "identity"),
    "job_events": ({"id": int, "cycle": int, "time": float, "job": str, "user": str,
                    "event": str, "machine": str}, "id"),
    "users": ({"name": str, "first_seen": float, "last_seen": float, "provided_power": float,
               "last_preempted": float}, "name"),
    # The columns of `gridfair shares` (gridfair.core.shares.share_rows), per cycle.
    "usage": ({
        "cycle": int, "time": float, "user": str, "provided_mflops": float,
        "allocated_mflops": float, "power_diff": float, "nodes_provided": int,
        "nodes_used": int, "running": int, "idle": int, "dominant_share": float,
        "figures": str,
        # Allocations the pool has not started yet: idle as HTCondor counts them, apart from
        # what the slots show running (NULL in older stores).
        "in_flight": int, "in_flight_mflops": float,
    }, ("cycle", "user")),
    "policy_state": ({"stage": str, "cycle": int, "updated": float, "state": str}, "stage"),
    # A shadow daemon's record of the pool against its decisions (gridfair.daemon.shadow).
    "shadow_cycles": ({"cycle": int, "cpus": float, "power": float}, "cycle"),
    "shadow_usage": ({
        "cycle": int, "side": str, "user": str, "provided_mflops": float,
        "allocated_mflops": float, "running": int, "waiting_cpus": float,
    }, ("cycle", "side", "user")),
    "shadow_starts": ({"id": int, "cycle": int, "job": str, "user": str, "machine": str,
                       "started": float}, "id"),
}
#: Columns added since the first schema whose value in an older store can be worked out:
#: (table, column) -> the SQL of it for a row of `table` (else it is NULL).
_DERIVED = {
    ("actions", "planned_cycle"): "(select min(cycle) from main.action_log "
                                  "where action_log.key = actions.key)",
}
_INDEXES = (
    ("decisions", ["cycle"]), ("decisions", ["job"]), ("decisions", ["user"]),
    ("actions", ["state"]), ("actions", ["job"]), ("action_log", ["key"]),
    ("job_events", ["job"]), ("usage", ["user"]), ("cycles", ["started"]),
    ("shadow_starts", ["job"]), ("shadow_starts", ["cycle"]),
    # What retention prunes by (`gridfair.daemon.retention`).
    ("cycles", ["now"]), ("actions", ["cycle"]), ("actions", ["planned_cycle"]),
    ("job_events", ["cycle"]),
    # The jobs vacated lately (`vacated_since`: the cool-down, per job).
    ("actions", ["kind", "state", "updated_at"]),
)


class StoreError(GridfairError):
    """The store cannot be opened or written: the daemon takes no action."""


_LOG_ACTION = "insert into action_log (key, cycle, time, state, note) values (?, ?, ?, ?, ?)"


def dumps(value: Any) -> str:
    """JSON for a column: infinities (PowerDiff of a user who provides nothing) as strings."""
    return json.dumps(value, default=str, allow_nan=True)


def private_file(path: Path) -> None:
    """Make `path` (if missing) readable and writable by the daemon's account alone, and
    close it to others if it exists: the journal, its lock and log name every user's jobs.
    SQLite gives the -wal and -shm files the database's permissions.

    The file is opened without following a symbolic link, and must be a regular file of the
    daemon's own account, in a directory of its own (`own_directory`): else a PermissionError
    says why. Files opened by name afterwards (by SQLite, by the log) are then these: no other
    account can replace them in such a directory."""
    own_directory(path.parent)
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW
                             | os.O_CLOEXEC, 0o600)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise PermissionError(errno.EPERM, f"{path} is a symbolic link: refused (give the "
                                               f"file itself)") from None
        raise
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise PermissionError(errno.EPERM, f"{path} is not a regular file")
        if status.st_uid != os.geteuid():
            raise PermissionError(errno.EPERM, f"{path} belongs to uid {status.st_uid}, not "
                                               f"to the daemon's (uid {os.geteuid()})")
        os.fchmod(descriptor, 0o600)
    finally:
        os.close(descriptor)


def own_directory(directory: Path) -> None:
    """A PermissionError unless `directory` is the daemon's own: owned by its account (or
    root), and not writable by group or others, sticky bit or not (in /tmp another account
    could make the journal's -wal file, or a link in its place, first)."""
    try:
        status = os.stat(directory)
    except FileNotFoundError:
        raise PermissionError(errno.ENOENT, f"directory {directory} does not exist") from None
    if status.st_uid not in (os.geteuid(), 0):
        raise PermissionError(errno.EPERM, f"directory {directory} belongs to uid "
                                           f"{status.st_uid}, not to the daemon's "
                                           f"(uid {os.geteuid()}) or root")
    if status.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PermissionError(errno.EPERM, f"directory {directory} is writable by others "
                                           f"(mode {stat.S_IMODE(status.st_mode):04o}): give a "
                                           f"directory only the daemon's account can write")


@contextmanager
def _guard(path: Path, doing: str) -> Iterator[None]:
    try:
        yield
    except sqlite3.Error as error:
        raise StoreError(f"store {path}: cannot {doing}: {error}") from None


class Store:
    """The daemon's read-write handle on the state file."""

    def __init__(self, path: str | Path, *, timeout: float = 10.0) -> None:
        self.path = Path(path)
        with _guard(self.path, "open it for writing"):
            if not self.path.parent.exists():
                raise StoreError(f"store {self.path}: directory {self.path.parent} does not exist")
            self._lock = self._take_lock()
        try:
            private_file(self.path)
        except OSError as error:
            self._lock.close()
            raise StoreError(f"store {self.path}: cannot create it: {error.strerror}") from None
        try:
            with _guard(self.path, "open it for writing"):
                # The scheduler runs cycles in its worker thread; one thread uses it at a time.
                connection = sqlite3.connect(self.path, timeout=timeout, check_same_thread=False)
                self.db = sqlite_utils.Database(connection)
                self._incremental_vacuum()
                self.db.enable_wal()
                # The write-ahead log grows while a reader (an admin command, a backup) holds
                # a snapshot, and SQLite keeps the file at its largest; past this size it is
                # cut back at the next checkpoint (measured: a 5 s backup during a long run
                # left a 33.6 MB log for good, 15 % of the store).
                connection.execute(f"pragma journal_size_limit = {WAL_SIZE_LIMIT}")
                self._create()
                with self.db.atomic():
                    self.db["meta"].upsert({"key": "schema", "value": str(SCHEMA_VERSION)},
                                           pk="key")
        except StoreError:
            self._lock.close()
            raise

    def _take_lock(self) -> TextIO:
        """One writer per store: two daemons on one journal would both carry out its actions.
        The lock is the kernel's (flock), so a killed daemon never leaves it held."""
        lock_path = self.path.with_name(self.path.name + ".lock")
        try:
            private_file(lock_path)
            handle = lock_path.open("a")
        except OSError as error:
            raise StoreError(f"store {self.path}: cannot create {lock_path}: "
                             f"{error.strerror}") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise StoreError(f"store {self.path}: another daemon is using it") from None
        return handle

    def _incremental_vacuum(self) -> None:
        """auto_vacuum = INCREMENTAL, so the pages retention frees can be given back to the
        file system (`gridfair.daemon.retention`). A new file takes it as it is; a store made
        before it needs one VACUUM (a copy of the file: once, at this start)."""
        connection = self.db.conn
        if connection.execute("pragma auto_vacuum").fetchone()[0] == 2:
            return
        empty = not connection.execute("pragma page_count").fetchone()[0]
        connection.execute("pragma auto_vacuum = incremental")
        if not empty:
            log.info("store %s: compacting it once to give freed space back from now on",
                     self.path)
            connection.execute("vacuum")

    def _create(self) -> None:
        for name, (columns, pk) in _TABLES.items():
            table = self.db[name]
            if not table.exists():
                table.create(columns, pk=pk)
                continue
            # A store made by an earlier gridfair gets the columns added since: empty, or
            # worked out from what it has.
            for column in sorted(columns.keys() - table.columns_dict.keys()):
                table.add_column(column, columns[column])
                if (name, column) in _DERIVED:
                    with self.db.atomic():
                        self.db.execute(f"update {name} set {column} = "
                                        f"{_DERIVED[name, column]}")
        for table, columns in _INDEXES:
            self.db[table].create_index(columns, if_not_exists=True)

    def close(self) -> None:
        self.db.conn.close()
        self._lock.close()

    @contextmanager
    def transaction(self, doing: str) -> Iterator[sqlite_utils.Database]:
        """All writes inside commit together or not at all."""
        # sqlite-utils' atomic() nests as savepoints, so its own writes inside stay in ours.
        with _guard(self.path, doing), self.db.atomic():
            yield self.db

    # ---------------------------------------------------------------- cycles
    def begin_cycle(self, started: float, policy: str, dry_run: bool,
                    sim_start: float | None = None) -> int:
        with self.transaction("record a new cycle") as db:
            return db["cycles"].insert(
                {"started": started, "outcome": "running", "policy": policy,
                 "dry_run": int(dry_run), "sim_start": sim_start}
            ).last_pk

    def update_cycle(self, cycle: int, **fields: Any) -> None:
        with self.transaction(f"update cycle {cycle}") as db:
            db["cycles"].update(cycle, fields)

    def mark_interrupted(self) -> int:
        """Cycles a killed daemon left `running`; returns how many."""
        with self.transaction("close interrupted cycles") as db:
            cursor = db.execute(
                "update cycles set outcome = 'interrupted' where outcome = 'running'"
            )
            return cursor.rowcount

    # ------------------------------------------------------------ the journal
    def action(self, key: str) -> dict[str, Any] | None:
        rows = list(self.db.query("select * from actions where key = ?", [key]))
        return rows[0] if rows else None

    def actions_in(self, *states: str) -> list[dict[str, Any]]:
        marks = ",".join("?" * len(states))
        return list(self.db.query(
            f"select * from actions where state in ({marks}) order by planned_at, key", states
        ))

    def set_action_state(
        self, key: str, state: str, cycle: int, time: float, note: str = "", *,
        retryable: bool | None = None, attempt: bool = False,
        db: sqlite_utils.Database | None = None,
    ) -> None:
        """Move an action to `state` and log it; inside `db`'s transaction if given."""
        if db is None:
            with self.transaction(f"mark action {key} {state}") as own:
                self.set_action_state(key, state, cycle, time, note, retryable=retryable,
                                      attempt=attempt, db=own)
            return
        # Plain statements: sqlite-utils' update and insert look the table up each time, five
        # queries more per change, and a first cycle at 1M jobs makes tens of thousands.
        assignments = ["state = ?", "updated_at = ?", "cycle = ?"]
        values: list[Any] = [state, time, cycle]
        if state in (FAILED, ABANDONED):
            assignments.append("error = ?")
            values.append(note)
        if retryable is not None:
            assignments.append("retryable = ?")
            values.append(int(retryable))
        if attempt:
            assignments.append("attempts = attempts + 1")
        changed = db.execute(f"update actions set {', '.join(assignments)} where key = ?",
                             [*values, key]).rowcount
        if changed != 1:
            raise LookupError(f"action {key!r} is not in the journal")
        db.execute(_LOG_ACTION, [key, cycle, time, state, note])

    def plan_actions(self, db: sqlite_utils.Database, actions: Iterable[Mapping[str, Any]],
                     cycle: int, time: float) -> None:
        for action in actions:
            key = action["key"]
            if db.execute("select 1 from actions where key = ?", [key]).fetchone():
                db.execute("update actions set reason = ? where key = ?",
                           [action["reason"], key])
                self.set_action_state(key, PLANNED, cycle, time, "planned again", db=db)
                continue
            row = {**action, "cycle": cycle, "planned_cycle": cycle, "state": PLANNED,
                   "attempts": 0, "retryable": 1, "planned_at": time, "updated_at": time,
                   "error": ""}
            db.execute(f"insert into actions ({', '.join(row)}) "
                       f"values ({', '.join('?' * len(row))})", list(row.values()))
            db.execute(_LOG_ACTION, [key, cycle, time, PLANNED, ""])

    def record_shadow(self, capacity: dict[str, Any], usage: list[dict[str, Any]],
                      starts: list[dict[str, Any]]) -> None:
        """A shadow cycle's rows (`gridfair.daemon.shadow`), in one transaction."""
        with self.transaction("record the shadow cycle") as db:
            db["shadow_cycles"].insert(capacity, replace=True)
            db["shadow_usage"].insert_all(usage, replace=True)
            if starts:
                db["shadow_starts"].insert_all(starts)

    # --------------------------------------------------------- pool knowledge
    def known_jobs(self) -> dict[str, dict[str, Any]]:
        return {row["id"]: row for row in self.db.query("select * from jobs")}

    def vacated_since(self, since: float) -> dict[str, float]:
        """Job id -> when it was last vacated, for the jobs vacated at `since` or later (a
        confirmed vacate)."""
        return {row["job"]: row["at"] for row in self.db.query(
            "select job, max(updated_at) as at from actions where kind = ? and state = ? "
            "and updated_at >= ? group by job", [VACATE, CONFIRMED, since])}

    def policy_state(self) -> dict[str, Any]:
        return {row["stage"]: json.loads(row["state"])
                for row in self.db.query("select stage, state from policy_state")}


def open_readonly(path: str | Path) -> sqlite_utils.Database:
    """The store for reading only, safe while the daemon writes (WAL readers never block it)."""
    path = Path(path)
    if not path.exists():
        raise StoreError(f"store {path}: no such file")
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10.0)
        db = sqlite_utils.Database(connection)
        if not db["cycles"].exists():
            raise StoreError(f"store {path}: not a gridfair store (no cycles table)")
        _newer_columns(db)
    except sqlite3.Error as error:
        raise StoreError(f"store {path}: cannot read it: {error}") from None
    return db


def _newer_columns(db: sqlite_utils.Database) -> None:
    """A store made by an earlier gridfair, which the daemon has not opened since, read as a
    current one: each table lacking columns is shadowed by a view of it (in the connection's
    own temp schema; the file is not written) that adds them, worked out or NULL."""
    for name, (columns, _) in _TABLES.items():
        table = db[name]
        if not table.exists():
            continue
        missing = [column for column in columns if column not in table.columns_dict]
        if missing:
            added = ", ".join(f"{_DERIVED.get((name, column), 'NULL')} as {column}"
                              for column in missing)
            db.execute(f"create temp view {name} as select *, {added} from main.{name}")
