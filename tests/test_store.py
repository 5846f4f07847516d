"""The daemon's store: WAL, atomic transactions, the journal's state log, read-only readers."""

from __future__ import annotations

import sqlite3

import pytest

from gridfair.daemon import reports
from gridfair.daemon.store import (
    CONFIRMED,
    FAILED,
    ISSUED,
    PLANNED,
    Store,
    StoreError,
    open_readonly,
)

ACTION = {"key": "vacate:2.0@slot1:100", "kind": "vacate", "job": "2.0", "user": "bt",
          "machine": "slot1", "reason": "over its share"}


@pytest.fixture
def store(tmp_path):
    store = Store(tmp_path / "state.db")
    yield store
    store.close()


def test_wal_mode(store):
    assert store.db.execute("pragma journal_mode").fetchone()[0] == "wal"


def test_journal_states_are_logged_in_order(store):
    cycle = store.begin_cycle(0.0, "order:hosep", False)
    with store.transaction("plan") as db:
        store.plan_actions(db, [ACTION], cycle, 1.0)
    store.set_action_state(ACTION["key"], ISSUED, cycle, 2.0, attempt=True)
    store.set_action_state(ACTION["key"], FAILED, cycle, 3.0, "schedd said no", retryable=True)
    with store.transaction("plan again") as db:
        store.plan_actions(db, [ACTION], cycle, 4.0)
    store.set_action_state(ACTION["key"], ISSUED, cycle, 5.0, attempt=True)
    store.set_action_state(ACTION["key"], CONFIRMED, cycle, 6.0)
    row = store.action(ACTION["key"])
    assert (row["state"], row["attempts"], row["error"]) == (CONFIRMED, 2, "schedd said no")
    log = store.db.execute("select state, note from action_log order by id").fetchall()
    assert log == [(PLANNED, ""), (ISSUED, ""), (FAILED, "schedd said no"),
                   (PLANNED, "planned again"), (ISSUED, ""), (CONFIRMED, "")]
    assert store.actions_in(PLANNED, ISSUED) == []


def test_a_failed_transaction_writes_nothing(store):
    cycle = store.begin_cycle(0.0, "order:hosep", False)
    with pytest.raises(RuntimeError), store.transaction("plan") as db:
        store.plan_actions(db, [ACTION], cycle, 1.0)
        raise RuntimeError("crash in the middle")
    assert store.action(ACTION["key"]) is None
    assert store.db.execute("select count(*) from action_log").fetchone()[0] == 0


def test_interrupted_cycles_are_marked(store):
    store.begin_cycle(0.0, "order:hosep", False)
    assert store.mark_interrupted() == 1
    assert store.db.execute("select outcome from cycles").fetchone()[0] == "interrupted"


def test_readers_cannot_write_and_see_committed_state(store, tmp_path):
    store.begin_cycle(0.0, "order:hosep", False)
    reader = open_readonly(tmp_path / "state.db")
    assert reader.execute("select count(*) from cycles").fetchone()[0] == 1
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.execute("delete from cycles")


def test_reader_of_something_else_is_a_clear_error(tmp_path):
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("create table t (x)").connection.commit()
    with pytest.raises(StoreError, match="not a gridfair store"):
        open_readonly(other)


def test_a_store_of_an_earlier_gridfair_gets_the_new_columns(tmp_path):
    # Made before the cycles' warnings and simulated clock and the actions' planning cycle.
    store = Store(tmp_path / "state.db")
    store.begin_cycle(0.0, "order:hosep", False)
    with store.transaction("plan") as db:
        store.plan_actions(db, [{"key": "k", "kind": "vacate", "job": "1.0", "user": "u",
                                 "machine": "m", "reason": "r"}], 1, 0.0)
    store.begin_cycle(1.0, "order:hosep", False)
    store.set_action_state("k", "confirmed", 2, 1.0)
    store.db.execute("drop index idx_actions_planned_cycle")  # retention's, newer still
    for table, column in (("cycles", "warnings"), ("cycles", "sim_start"),
                          ("actions", "planned_cycle")):
        store.db.execute(f"alter table {table} drop column {column}")
    store.close()
    # Read as it is (the admin commands open it read-only, and write nothing)...
    db = open_readonly(tmp_path / "state.db")
    assert [(row["planned_cycle"], row["cycle"]) for row in reports.actions(db, None, None)
            ] == [(1, 2)]
    assert reports.cycle_notes(db, None) == []
    db.conn.close()
    # ... and brought up to date when the daemon opens it.
    store = Store(tmp_path / "state.db")
    assert {"warnings", "sim_start"} <= store.db["cycles"].columns_dict.keys()
    # The planning cycle of an action it had is read from the action's log.
    assert [(row["planned_cycle"], row["cycle"]) for row in store.db["actions"].rows] == [(1, 2)]
    store.close()
