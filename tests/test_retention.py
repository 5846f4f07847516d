"""Retention: each kind of record kept for its window, usage downsampled, the journal's open
actions never pruned, space given back, and a daemon killed mid-prune losing nothing."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client import generate_latest

from gridfair.cli import admin as _admin_commands  # noqa: F401 - registers the commands
from gridfair.cli import cli
from gridfair.core.pool import Pool
from gridfair.daemon.config import validate
from gridfair.daemon.metrics import PrometheusMetrics
from gridfair.daemon.retention import DAY, HOUR, Pruner, Retention
from gridfair.daemon.store import Store
from gridfair.errors import ConfigError
from gridfair.policies.condor_priority import CondorPriorityOrder
from tests.test_daemon_crash import CONFIG, POOL, carried_out, journal, run_daemon

STEP = 600.0  # seconds between the synthetic cycles
USERS = ("ann", "bob")


def fill(store: Store, days: float, first: int = 1) -> int:
    """Cycles every STEP seconds for `days` from cycle `first` (at `first` x STEP), each with
    usage for USERS, a decision, a job event and skipped ads; returns the last cycle's id."""
    last = first + int(days * DAY / STEP) - 1
    with store.transaction("fill") as tx:
        for n in range(first, last + 1):
            now = n * STEP
            tx.execute("insert into cycles (id, started, now, outcome, skipped, warnings) "
                       "values (?, ?, ?, 'ok', '[1]', '[2]')", [n, now, now])
            for user in USERS:
                tx.execute("insert into usage (cycle, time, user, running) values (?, ?, ?, 1)",
                           [n, now, user])
            tx.execute("insert into decisions (cycle, seq, kind, job) values (?, 0, 'allocate', ?)",
                       [n, f"{n}.0"])
            tx.execute("insert into job_events (cycle, time, job, event) values (?, ?, ?, 'x')",
                       [n, now, f"{n}.0"])
    return last


def usage_cycles(store: Store) -> list[int]:
    return [row[0] for row in store.db.execute("select distinct cycle from usage order by cycle")]


def expected_samples(last: int, now: float, retention: Retention) -> list[int]:
    """Past usage_full, the first cycle of each hour; of those, past usage_hourly, the first
    of each day."""
    def thin(cycles: list[int], older: float, width: float) -> list[int]:
        seen: set[float] = set()
        kept = []
        for n in cycles:
            bucket = n * STEP // width
            if n * STEP >= now - older or bucket not in seen:
                kept.append(n)
                seen.add(bucket)
        return kept

    hourly = thin(list(range(1, last + 1)), retention.usage_full, HOUR)
    return thin(hourly, retention.usage_hourly, DAY)


WINDOWS = Retention(decisions=2 * DAY, job_events=3 * DAY, cycle_details=1 * DAY,
                    usage_full=1 * DAY, usage_hourly=2 * DAY, usage_daily=0.0,
                    shadow=DAY, users=0.0, prune_rows=10**9)


def test_windows_and_downsampling(tmp_path: Path):
    store = Store(tmp_path / "s.db")
    last = fill(store, 5)
    now = last * STEP
    Pruner(store, WINDOWS).step(now)
    assert usage_cycles(store) == expected_samples(last, now, WINDOWS)
    db = store.db
    oldest = db.execute("select min(cycle) from decisions").fetchone()[0]
    assert oldest * STEP >= now - 2 * DAY > (oldest - 1) * STEP
    oldest = db.execute("select min(cycle) from job_events").fetchone()[0]
    assert oldest * STEP >= now - 3 * DAY > (oldest - 1) * STEP
    detailed = db.execute("select min(id) from cycles where skipped is not null").fetchone()[0]
    assert detailed * STEP >= now - DAY > (detailed - 1) * STEP
    # Cycle rows go past the longest of the windows (job events: 3 days) unless usage kept
    # points at them.
    rows = {row[0] for row in db.execute("select id from cycles")}
    assert rows == {n for n in range(1, last + 1) if n * STEP >= now - 3 * DAY} | set(
        usage_cycles(store))
    store.close()


def test_small_budget_reaches_the_same_store(tmp_path: Path):
    """A few rows a step: many steps, the same result as one unbounded step, and every step
    within its budget."""
    store = Store(tmp_path / "s.db")
    last = fill(store, 4)
    now = last * STEP
    pruner = Pruner(store, Retention(**{**WINDOWS.__dict__, "prune_rows": 7}))
    steps = 0
    while (done := pruner.step(now)) and steps < 10_000:
        assert done <= 7 + 2  # a cycle's usage rows go together
        steps += 1
    assert steps > 50
    assert usage_cycles(store) == expected_samples(last, now, WINDOWS)
    # Later steps, as time goes on, go on from where the walk stopped.
    last = fill(store, 1, first=last + 1)
    now = last * STEP
    while pruner.step(now):
        pass
    assert usage_cycles(store) == expected_samples(last, now, WINDOWS)
    store.close()


def test_open_actions_and_jobs_in_the_pool_are_never_pruned(tmp_path: Path):
    store = Store(tmp_path / "s.db")
    last = fill(store, 3)
    now = last * STEP
    states = {"planned": "1.1", "issued": "1.2", "confirmed": "1.3", "landed": "1.4",
              "failed": "1.5", "abandoned": "1.6"}
    with store.transaction("journal") as tx:
        for kind in ("allocate", "vacate"):
            for state, job in states.items():
                key = f"{kind}:{job}@slot:{state}"
                tx.execute("insert into actions (key, cycle, planned_cycle, kind, job, state, "
                           "updated_at) values (?, 1, 1, ?, ?, ?, ?)",
                           [key, kind, job, state, STEP])
                tx.execute("insert into action_log (key, cycle, time, state) "
                           "values (?, 1, ?, ?)", [key, STEP, state])
            # The same, for a job still in the pool: never pruned.
            tx.execute("insert into actions (key, cycle, planned_cycle, kind, job, state, "
                       "updated_at) values (?, 1, 1, ?, '9.9', 'landed', ?)",
                       [f"{kind}:9.9", kind, STEP])
        tx.execute("insert into jobs (id, user, status) values ('9.9', 'ann', 'running')")
    Pruner(store, WINDOWS).step(now)
    left = {row[0] for row in store.db.execute("select key from actions")}
    assert left == {
        "allocate:1.1@slot:planned", "allocate:1.2@slot:issued",
        "allocate:1.3@slot:confirmed",  # in flight: not yet seen landing
        "vacate:1.1@slot:planned", "vacate:1.2@slot:issued",
        "allocate:9.9", "vacate:9.9",
    }
    logged = {row[0] for row in store.db.execute("select key from action_log")}
    assert logged == left - {"allocate:9.9", "vacate:9.9"}
    store.close()


def test_a_cycle_row_goes_once_its_last_action_has(tmp_path: Path):
    """An action planned in a cycle lands in a later one: pruned only a cycle after its
    planning cycle passed the window, after which that cycle's row goes too."""
    store = Store(tmp_path / "s.db")
    last = fill(store, 4)
    with store.transaction("journal") as tx:
        tx.execute("insert into actions (key, cycle, planned_cycle, kind, job, state, "
                   "updated_at) values ('a', 11, 10, 'allocate', '1.1', 'landed', ?)",
                   [11 * STEP])
    same = {name: 2 * DAY for name in ("decisions", "job_events", "cycle_details", "shadow")}
    pruner = Pruner(store, Retention(**{**WINDOWS.__dict__, **same}))
    cycle_ten_past = 10 * STEP + 2 * DAY + 1  # every window past cycle 10, not 11
    pruner.step(cycle_ten_past)
    assert store.db.execute("select count(*) from cycles where id = 10").fetchone()[0] == 1
    for _ in range(2):
        pruner.step(cycle_ten_past + STEP)
    assert store.db.execute("select count(*) from actions").fetchone()[0] == 0
    assert store.db.execute("select count(*) from cycles where id = 10").fetchone()[0] == 0
    assert last > 10
    store.close()


def test_space_is_given_back_and_old_stores_are_converted(tmp_path: Path):
    path = tmp_path / "s.db"
    with sqlite3.connect(path) as old:  # a store from before: no auto_vacuum
        old.execute("create table filler (x)")
    store = Store(path)
    assert store.db.execute("pragma auto_vacuum").fetchone()[0] == 2
    last = fill(store, 6)
    store.db.execute("pragma wal_checkpoint(truncate)")
    before = path.stat().st_size
    pruner = Pruner(store, Retention(**{**WINDOWS.__dict__, "usage_hourly": 1.5 * DAY,
                                        "usage_daily": 2 * DAY, "vacuum_pages": 10**6}))
    pruner.step(last * STEP)
    store.db.execute("pragma wal_checkpoint(truncate)")
    assert path.stat().st_size < 0.8 * before
    free, pages = (store.db.execute(f"pragma {name}").fetchone()[0]
                   for name in ("freelist_count", "page_count"))
    assert free * 8 <= pages
    store.close()


def test_the_write_ahead_log_is_cut_back_once_a_long_reader_lets_go(tmp_path: Path):
    """A reader holding a snapshot (an admin command, a backup) keeps every checkpoint from
    resetting the log, which grows meanwhile; SQLite keeps the file at its largest unless
    `journal_size_limit` is set. After the reader lets go, the next checkpoint cuts it back."""
    from gridfair.daemon.store import WAL_SIZE_LIMIT

    def write(megabytes: int) -> None:
        for _ in range(megabytes):
            with store.transaction("write") as tx:
                tx.conn.executemany("insert into job_events (cycle, time, job, event) "
                               "values (1, 0, 'j', ?)", [("x" * 1000,)] * 1000)

    store = Store(tmp_path / "s.db")
    reader = sqlite3.connect(tmp_path / "s.db")
    reader.execute("begin")
    reader.execute("select count(*) from usage").fetchone()  # the snapshot is held from here
    write(24)
    wal = tmp_path / "s.db-wal"
    assert wal.stat().st_size > 2 * WAL_SIZE_LIMIT
    reader.rollback()
    reader.close()
    write(6)  # past an automatic checkpoint, which resets the log and cuts it back
    assert wal.stat().st_size <= WAL_SIZE_LIMIT
    store.close()


def test_retention_config_keys():
    base = {"backend": {"kind": "sim"}}
    config = validate({**base, "retention": {"decisions": 3, "usage_daily": 365}},
                      base=Path("."))
    assert Retention.from_config(config["retention"]).decisions == 3 * DAY
    with pytest.raises(ConfigError, match=r"^config key retention.usage_hourly: must be at "
                       r"least retention.usage_full \(2 days\), got 1$"):
        validate({**base, "retention": {"usage_full": 2, "usage_hourly": 1}}, base=Path("."))
    with pytest.raises(ConfigError, match="retention.decisions: must be at least 0"):
        validate({**base, "retention": {"decisions": -1}}, base=Path("."))
    with pytest.raises(ConfigError, match="retention.prune_rows: expected an integer"):
        validate({**base, "retention": {"prune_rows": "many"}}, base=Path("."))


def test_explain_of_a_pruned_user_says_when_it_was_last_seen(tmp_path: Path):
    """Past `retention.users` a user's record goes, but its downsampled usage stays, so
    `explain` still answers for it: when it was last in the pool, and that the record is
    pruned, instead of "no such user"."""
    store = Store(tmp_path / "s.db")
    fill(store, 1)  # ann and bob for a day
    with store.transaction("ann alone") as tx:
        tx.execute("insert into users (name, first_seen, last_seen) values "
                   "('ann', 600, 1e9), ('bob', 600, 86400)")
        for n in range(145, 289):  # a second day: ann alone
            tx.execute("insert into cycles (id, started, now, outcome) values (?, ?, ?, 'ok')",
                       [n, n * STEP, n * STEP])
            tx.execute("insert into usage (cycle, time, user, running) values (?, ?, 'ann', 1)",
                       [n, n * STEP])
    Pruner(store, Retention(users=0.5 * DAY, prune_rows=10**9)).step(288 * STEP)
    assert [row[0] for row in store.db.execute("select name from users")] == ["ann"]
    store.close()
    result = CliRunner().invoke(cli, ["explain", "bob", "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 0, result.output
    assert "not in the pool at the latest cycle" in result.output
    assert "last in the pool at cycle 144" in result.output
    assert "its user record is pruned" in result.output
    report = json.loads(CliRunner().invoke(
        cli, ["explain", "bob", "--db", str(tmp_path / "s.db"), "--format", "json"]).output)
    assert report["record_pruned"] is True and report["last_seen"]["cycle"] == 144


def test_series_of_users_gone_are_removed():
    metrics = PrometheusMetrics("127.0.0.1", 0, user_labels=True)
    try:
        metrics.users([("ann", 1.0, 0.5), ("bob", -1.0, 0.25)])
        metrics.users([("ann", 2.0, 0.5)])
        text = generate_latest(metrics.registry).decode()
    finally:
        metrics.close()
    assert 'user="ann"' in text
    assert 'user="bob"' not in text


def test_priorities_of_users_gone_decay_and_are_dropped():
    """A user imported from the state but not in the pool decays like an idle user and is
    forgotten once back at the floor: the state is bounded by recent pools."""
    order = CondorPriorityOrder(halflife=100.0)
    order.attach(Pool())
    order.import_state({"policy": "condor", "time": 0.0, "priorities": {"gone": [64.0]}})
    assert order.export_state(100.0)["priorities"] == {"gone": [32.0]}
    assert order.export_state(600.0)["priorities"]["gone"] == [pytest.approx(1.0)]
    assert order.export_state(800.0)["priorities"] == {}


# ------------------------------------------------------------- killed mid-prune
PRUNING = """
[retention]
decisions = 0.00001
job_events = 0.00001
cycle_details = 0.00001
usage_full = 0.00001
prune_rows = 3
"""


def test_sigkill_mid_prune_loses_and_repeats_nothing(tmp_path: Path):
    shutil.copytree(POOL, tmp_path / "pool", copy_function=shutil.copy)
    (tmp_path / "gridfair.toml").write_text(CONFIG + PRUNING)
    # Cycles a second apart and more: the windows (0.86 s) are crossed while it runs.
    process = run_daemon(tmp_path, fault="pause:during_prune:40", wait=False)
    marker = tmp_path / "state.db.paused"
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), "the daemon never reached a prune"
    # What a reader sees while the prune's chunk is open: its deletions are not in it.
    with sqlite3.connect(tmp_path / "state.db") as db:
        seen = {table: db.execute(f"select * from {table} order by rowid").fetchall()
                for table in ("actions", "action_log", "usage", "decisions", "meta")}
        outcome = db.execute("select outcome from cycles order by id desc limit 1").fetchone()
    assert outcome == ("ok",)  # the cycle was recorded before its prune
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL
    marker.unlink()
    with sqlite3.connect(tmp_path / "state.db") as db:
        after = {table: db.execute(f"select * from {table} order by rowid").fetchall()
                 for table in seen}
    assert after == seen  # the killed chunk left nothing half done
    before = journal(tmp_path)
    restarted = run_daemon(tmp_path, "--cycles", "30")
    assert restarted.returncode == 0
    done = carried_out(tmp_path)
    assert len(done) == len(set(done))  # nothing carried out twice
    after = journal(tmp_path)
    # The jobs are all still in the pool: nothing of their journal is pruned.
    assert set(before) <= set(after)
    with sqlite3.connect(tmp_path / "state.db") as db:
        assert db.execute("pragma integrity_check").fetchone() == ("ok",)
        # Every action has its history from its plan; no history without its action.
        first = dict(db.execute("select key, state from action_log where id in "
                                "(select min(id) from action_log group by key)"))
        assert first.keys() == set(after)
        assert set(first.values()) == {"planned"}
        # Usage downsampled as far as the walk went, nothing lost: one cycle an hour, the
        # first one.
        walked = int(db.execute("select value from meta where key = "
                                "'retention.hourly_through'").fetchone()[0])
        kept = db.execute("select cycle, min(time) from usage where cycle <= ? "
                          "group by cycle", [walked]).fetchall()
        hours = [moment // HOUR for _, moment in kept]
        assert walked > 10 and kept and len(hours) == len(set(hours))
        assert kept[0][0] == 1
