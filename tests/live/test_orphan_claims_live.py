"""A claim its schedd forgot, released (gridfair/daemon/backends/htcondor/orphan_claims.py).

Showcase 2 saw a schedd die (signal 11) and come back without the claims it held idle; the
startd kept them, idle and jobless, until its next ALIVE (600-800 s by HTCondor's defaults).
That crash needs its timing, so the test makes the same state for certain: the schedd, the
job's shadow, starter and job killed (SIGKILL), and the schedd's job queue removed, so the
schedd the master restarts knows neither the job nor the claim (it reconnects nothing).
One cycle of the daemon, as its account with the shipped pool configuration (its startd
ADMINISTRATOR grant), once the claim is 30 s idle, must release it and journal the release;
without the release the claim stays."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path

import htcondor2

from gridfair.daemon.backends.htcondor.orphan_claims import IDLE_BOUND
from tests.live.conftest import POOL_CONFIG, QUICK_SAFETY, own_pool, run_daemon, write_daemon_config
from tests.live.harness.personal_pool import JobSpec, PersonalPool, SlotSpec, _processes_of

ORPHAN = 'SlotType == "Dynamic" && State == "Claimed" && Activity == "Idle"'


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _descendants(pid: int) -> list[int]:
    try:
        children = [int(child) for child in
                    Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []
    return children + [grandchild for child in children for grandchild in _descendants(child)]


def _kill_schedd_and_job(pool: PersonalPool) -> None:
    """SIGKILL the schedd, the shadow, the starter and the job (by their ids), and remove
    the schedd's job queue before the master restarts it."""
    pids = _processes_of(pool.directory, pool.config_file)
    doomed = [pid for pid in pids
              if _command(pid) in ("condor_schedd", "condor_shadow", "condor_starter")]
    doomed += [child for pid in pids if _command(pid) == "condor_starter"
               for child in _descendants(pid)]
    for pid in doomed:
        os.kill(pid, signal.SIGKILL)
    for queue in (pool.directory / "local" / "spool").glob("job_queue.log*"):
        queue.unlink()


def test_a_claim_a_restarted_schedd_forgot_is_released(daemon_python: Path,
                                                        daemon_dir: Path) -> None:
    with own_pool([SlotSpec("User1", 8000, cpus=2, memory=1024)], layout="partitionable",
                  extra_config=POOL_CONFIG.read_text().splitlines()) as pool:
        collector = htcondor2.Collector(pool.collector_host)

        def schedd_started() -> list:
            return [ad.get("DaemonStartTime") for ad in collector.query(
                htcondor2.AdType.Schedd, "true", ["DaemonStartTime"])]

        def orphans() -> list:
            return collector.query(htcondor2.AdType.Startd, ORPHAN,
                                   ["Name", "JobId", "EnteredCurrentActivity"])

        pool.submit([JobSpec("User1", 4000 * 600)])  # 10 minutes: it never ends by itself
        pool.wait_until(pool.running, 30)
        before = schedd_started()
        _kill_schedd_and_job(pool)
        pool.wait_until(lambda: schedd_started() and schedd_started() != before, 40, 0.25)
        [orphan] = pool.wait_until(orphans, 20, 0.25)
        assert orphan.get("JobId") is None and not pool.jobs("ClusterId")
        write_daemon_config(daemon_dir, pool, safety=QUICK_SAFETY)
        time.sleep(max(0.0, orphan["EnteredCurrentActivity"] + IDLE_BOUND + 1 - time.time()))
        done = run_daemon(daemon_python, pool, daemon_dir, "--once")
        assert done.returncode == 0, done.stderr
        with sqlite3.connect(daemon_dir / "state.db") as db:
            notes = [note for (events,) in db.execute("select events from cycles")
                     for note in json.loads(events)["notes"]]
        [note] = [note for note in notes if "idle claim" in note]
        assert note.startswith(f"{orphan['Name']}: idle claim of User1@") and " released:" in note
        # The room is back: the dynamic slot is gone from the collector.
        pool.wait_until(lambda: not orphans(), 10, 0.25)
