"""A dead gridfair never stops the pool, live: the daemon, as its own account from a
wheel-built venv, holds the lease on the pool's starts; SIGKILLed with jobs waiting, the pool
starts them on its own once the lease runs out; restarted, it takes the starts back, and its
journal shows every action carried out once. And what its account may not do is a named,
journaled failure, not a crash."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.live.conftest import (
    POOL_CONFIG,
    QUICK_SAFETY,
    SLOTS,
    own_pool,
    run_daemon,
    start_daemon,
    write_daemon_config,
)
from tests.live.harness.personal_pool import (
    JobSpec,
    PersonalPool,
    _processes_of,
)

LONG = 132250 * 600
LANDING_TIMEOUT = 6.0  # three negotiation cycles of the harness's pools (2 s): room for load


def write_config(directory: Path, pool: PersonalPool, *, interval: float = 1,
                 lease: float = 0, **safety: float) -> None:
    write_daemon_config(directory, pool, daemon={"interval": interval, "lease": lease},
                        safety={**QUICK_SAFETY, "landing_timeout": LANDING_TIMEOUT, **safety})


def holds_lease(directory: Path) -> bool:
    """Whether the daemon has renewed its lease on the pool's starts (its store says so)."""
    try:  # read-only: made by root, the store would be closed to the daemon
        with sqlite3.connect(f"file:{directory / 'state.db'}?mode=ro", uri=True) as db:
            return bool(db.execute("select 1 from cycles where lease_until > ?",
                                   [time.time()]).fetchone())
    except sqlite3.Error:  # not made yet
        return False


def journal(directory: Path) -> tuple[list[tuple], Counter]:
    with sqlite3.connect(directory / "state.db") as db:
        actions = list(db.execute("select key, kind, job, machine, state, attempts "
                                  "from actions"))
        issued = Counter(key for (key,) in db.execute(
            "select key from action_log where state = 'issued'"))
    return actions, issued


@pytest.mark.parametrize("layout", ["static", "partitionable"])
def test_a_killed_daemon_never_stops_the_pool(daemon_python: Path, daemon_dir: Path,
                                              layout: str) -> None:
    pool = own_pool(SLOTS, layout=layout, extra_config=POOL_CONFIG.read_text().splitlines())
    with pool:
        write_config(daemon_dir, pool)
        daemon = start_daemon(daemon_python, pool, daemon_dir)
        try:
            pool.wait_until(lambda: holds_lease(daemon_dir), 30)
            # Up: the two jobs start where gridfair sends them, and nothing else starts.
            first = pool.submit([JobSpec("User2", LONG)] * 2)
            pool.wait_until(lambda: set(first) <= set(pool.running()), 30)
            # Killed with jobs waiting: the pool starts them itself once the lease runs out.
            daemon.send_signal(signal.SIGKILL)
            died = time.time()
            daemon.wait()
            waiting = pool.submit([JobSpec("User1", LONG)])
            pool.wait_until(lambda: set(waiting) <= set(pool.running()),
                            3 * LANDING_TIMEOUT + 10)
            outage_start = time.time() - died
            assert outage_start <= 2 * LANDING_TIMEOUT + 2, outage_start
            actions_before, _ = journal(daemon_dir)
            assert not any(job in waiting for _, _, job, *_ in actions_before)
            # Restarted: the next job starts by its decision again.
            daemon = start_daemon(daemon_python, pool, daemon_dir)
            pool.wait_until(lambda: holds_lease(daemon_dir), 30)
            [last] = pool.submit([JobSpec("User1", LONG)])
            pool.wait_until(lambda: last in pool.running(), 30)
            pool.wait_until(lambda: any(job == last and state == "landed"
                                        for _, _, job, _, state, _ in journal(daemon_dir)[0]),
                            20)
        finally:
            daemon.send_signal(signal.SIGTERM)
            stderr = daemon.communicate(timeout=60)[1]
        assert daemon.returncode == 0, stderr
        assert "lease released: the pool starts jobs on its own" in stderr
        actions, issued = journal(daemon_dir)
        allocations = {job: (machine, state) for _, kind, job, machine, state, _ in actions
                       if kind == "allocate"}
        watched = (*first, last)
        with sqlite3.connect(daemon_dir / "state.db") as db:
            # The journal of the jobs watched alone: all of it is too long for a failure's
            # message, which would cut off what says why.
            notes = list(db.execute(
                "select action_log.key, action_log.cycle, action_log.time, action_log.state, "
                "action_log.note "
                "from action_log join actions on actions.key = action_log.key "
                f"where actions.job in ({', '.join('?' * len(watched))}) "
                "order by action_log.rowid", watched))
            notes += list(db.execute("select id, started, snapshot_time, now from cycles"))
        running = pool.running_on_nodes()
        assert {job: allocations[job] for job in watched} == {
            job: (running[job], "landed") for job in watched}, "\n".join(map(str, notes))
        # Every action carried out once: one 'issued' entry per attempt, none repeated.
        assert all(issued[key] == attempts for key, *_, attempts in actions), (actions, issued)
        assert all(attempts == 1 for *_, state, attempts in actions if state == "landed")


def test_a_vacate_its_account_may_not_make_is_a_named_journaled_failure(
        daemon_python: Path, daemon_dir: Path) -> None:
    """The daemon's account is no longer a queue super user: its vacate of another user's job
    fails with the schedd's answer in the journal, and the daemon goes on."""
    pool = own_pool(SLOTS, extra_config=[*POOL_CONFIG.read_text().splitlines(),
                                         "QUEUE_SUPER_USERS = root, nobody"])
    with pool:
        fillers = pool.submit([JobSpec("User2", LONG)] * 4)
        pool.wait_until(lambda: set(fillers) == set(pool.running()), 30)
        pool.submit([JobSpec("User1", LONG)])
        write_config(daemon_dir, pool)
        done = run_daemon(daemon_python, pool, daemon_dir, "--cycles", "3")
        assert done.returncode == 0, done.stderr
        actions, _ = journal(daemon_dir)
        with sqlite3.connect(daemon_dir / "state.db") as db:
            errors = [error for (error,) in db.execute(
                "select error from actions where kind = 'vacate'")]
        assert set(pool.running()) == set(fillers)  # nothing vacated
    assert errors and all(error == "permission denied" or error.startswith("schedd refused")
                          for error in errors), errors
    assert {state for _, kind, _, _, state, _ in actions if kind == "vacate"} == {"failed"}


def negotiator_started(pool: PersonalPool) -> int:
    """The running negotiator's DaemonStartTime (0: none listed)."""
    out = pool.run_tool(["condor_status", "-negotiator", "-af", "DaemonStartTime"],
                        check=False).stdout
    return max((int(line) for line in out.split() if line.isdigit()), default=0)


def negotiator_back(pool: PersonalPool, after: int) -> None:
    """Until the collector lists a negotiator started after `after`."""
    pool.wait_until(lambda: negotiator_started(pool) > after, 60)


def lease_end(directory: Path) -> float:
    with sqlite3.connect(f"file:{directory / 'state.db'}?mode=ro", uri=True) as db:
        return float(db.execute("select max(lease_until) from cycles").fetchone()[0] or 0)


def unsteered_running(pool: PersonalPool) -> list[list[str]]:
    return pool.jobs("ClusterId", "GridfairSlot", constraint="JobStatus == 2 && "
                     "GridfairSlot =?= undefined")


def test_the_lease_outlives_a_negotiator_restart_and_a_dead_daemon_s_runs_out(
        daemon_python: Path, daemon_dir: Path, record_property: Any) -> None:
    """Alive, with cycles 15 s apart: across `condor_restart -negotiator` no job starts
    unsteered (the lease is read back from the persistent configuration). Dead, its
    negotiator then crashing: the pool starts the job itself once the lease it kept runs
    out."""
    pool = own_pool(SLOTS, extra_config=POOL_CONFIG.read_text().splitlines())
    with pool:
        write_config(daemon_dir, pool, interval=15, lease=20)
        daemon = start_daemon(daemon_python, pool, daemon_dir)
        try:
            pool.wait_until(lambda: holds_lease(daemon_dir), 30)
            before = negotiator_started(pool)
            pool.run_tool(["condor_restart", "-negotiator"])
            negotiator_back(pool, before)
            # Four of the restarted negotiator's cycles: an open pool starts the job itself.
            waiting = pool.submit([JobSpec("User1", LONG)])
            deadline = time.monotonic() + 8
            while time.monotonic() < deadline:
                assert not unsteered_running(pool), "a job started unsteered after the restart"
                time.sleep(0.5)
            pool.wait_until(lambda: set(waiting) <= set(pool.running()), 30)  # by gridfair
        finally:
            daemon.send_signal(signal.SIGKILL)
            daemon.wait()
        # Dead, then its negotiator crashes and the master starts it again: the lease the
        # dead daemon kept still runs out by itself.
        kept_until = lease_end(daemon_dir)
        before = negotiator_started(pool)
        for pid in _processes_of(pool.directory, pool.config_file):
            if Path(f"/proc/{pid}/comm").read_text().strip() == "condor_negotiat":
                os.kill(pid, signal.SIGKILL)
        negotiator_back(pool, before)
        [orphan] = pool.submit([JobSpec("User2", LONG)])
        pool.wait_until(lambda: orphan in pool.running(), kept_until - time.time() + 30)
        opened = time.time() - kept_until
        record_property("started_after_lease_end_s", round(opened, 1))
        # Within two of the pool's negotiation cycles (2 s) and its update of the slot ad.
        assert opened <= 3 * pool.interval + 2, opened
