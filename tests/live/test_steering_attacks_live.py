"""Issue 43, live: what an ordinary user could do after gridfair decides, against the shipped
pool configuration and the daemon run as its own account.

1. A squatter shielded by the cool-down: a user who owns nothing fills an owner's machines
   while he is idle; once he asks, every machine goes back within min_runtime plus
   ceil(N / max_vacates_per_cycle) cycles (the cool-down scaled 1:120 from the shipped
   `configs/htcondor.toml`, 3600 -> 30 s; the daemon's interval 1 s; the squatter's jobs past
   min_runtime). Before, one vacate made all of the squatter's jobs immune
   for the cool-down (measured at 1:60: 126.5 s for 6 machines, against 7.0 s after).
2. A job that stops matching once steered (`MY.GridfairSlot =?= undefined` in its
   Requirements) is never steered, so nobody is vacated for it and no slot is held for it.
(3, a steering that restarts a requeued job, is `test_security_live.py`'s
`test_a_steering_authorizes_one_start`.)"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import time
from pathlib import Path

from tests.live.conftest import POOL_CONFIG, own_pool, start_daemon, write_daemon_config
from tests.live.harness.personal_pool import JobSpec, PersonalPool, SlotSpec, daemon_command
from tests.live.test_security_live import ATTACKER, sleep_job

LONG = 132250 * 600
SCALE = 120  # the shipped timers, divided


def write_config(directory: Path, pool: PersonalPool, policy: str) -> None:
    """The shipped safety values scaled, but min_runtime 0: the squatter's jobs have run
    past it (what min_runtime adds to the bound is `tests/test_protection.py`'s)."""
    write_daemon_config(directory, pool, daemon={"interval": 1}, policy={"name": policy},
                        safety={"max_vacates_per_cycle": 2, "min_runtime": 0,
                                "preempt_cooldown": 3600 // SCALE, "max_snapshot_age": 3600,
                                "landing_timeout": 10})


def test_a_squatter_gives_every_machine_back_within_the_bound(daemon_python: Path,
                                                               daemon_dir: Path) -> None:
    machines = 6
    with own_pool([SlotSpec("User1", 132250)] * machines,
                  extra_config=POOL_CONFIG.read_text().splitlines()) as pool:
        done = pool.submit_as(ATTACKER, sleep_job(), count=machines)
        assert done.returncode == 0, done.stderr
        pool.wait_until(lambda: len(pool.running()) == machines, 60)
        write_config(daemon_dir, pool, "reclaim")
        daemon = start_daemon(daemon_python, pool, daemon_dir)
        try:
            asked = time.monotonic()
            owned = set(pool.submit([JobSpec("User1", LONG)] * machines))
            pool.wait_until(lambda: owned <= set(pool.running()), 60)
            took = time.monotonic() - asked
        finally:
            daemon.terminate()
            daemon.wait(30)
        with sqlite3.connect(daemon_dir / "state.db") as db:
            held = [rule for (cycle_held,) in db.execute(
                "select held_back from cycles where held_back != '[]'")
                for rule in (item["rule"] for item in json.loads(cycle_held))]
    # Three cycles of two vacates, each start a negotiation cycle (2 s) later; a user-wide
    # cool-down would have held the second pair back for the whole cool-down.
    assert took < 3600 // SCALE, (took, held)
    assert not any(rule.startswith("preempt_cooldown") for rule in held), held


def test_a_job_that_stops_matching_once_steered_is_never_a_reason_to_vacate(
        static_pool: PersonalPool, daemon_python: Path, daemon_dir: Path) -> None:
    """User2 holds every slot; the attacker (owning nothing) has a job whose Requirements
    read the steering. Under drf-fair, whose order would give the attacker a slot by
    preemption, nothing is vacated for it and the cycles name why it is not steered."""
    pool = static_pool
    pool.clear_queue()
    try:
        fillers = pool.submit([JobSpec("User2", LONG)] * 4)
        pool.wait_until(lambda: set(pool.running()) == set(fillers), 30)
        done = pool.submit_as(ATTACKER, sleep_job(
            "requirements = (MY.GridfairSlot =?= undefined) && (TARGET.Arch == \"X86_64\")"))
        assert done.returncode == 0, done.stderr
        write_config(daemon_dir, pool, "drf-fair")
        ran = subprocess.run(daemon_command(daemon_python, "--cycles", "5"), cwd=daemon_dir,
                             env=pool.daemon_environment(), capture_output=True, text=True,
                             timeout=120, check=False)
        assert ran.returncode == 0, ran.stderr
        with sqlite3.connect(daemon_dir / "state.db") as db:
            vacates = db.execute("select count(*) from actions where kind = 'vacate'").fetchone()
            skipped = " ".join(row for (row,) in db.execute("select skipped from cycles"))
        assert vacates == (0,)
        assert "would not match as steered" in skipped
        assert set(fillers) <= set(pool.running())
    finally:
        pool.clear_queue()
