"""A claim its schedd forgot, released (gridfair/daemon/backends/htcondor/orphan_claims.py).

Showcase 2 saw a schedd die (signal 11) and come back without the claims it held idle; the
startd kept them, idle and jobless, until its next ALIVE (600-800 s by HTCondor's defaults).
That crash needs its timing, so the test makes the same state for certain: the schedd, the
job's shadow, starter and job killed (SIGKILL), and the schedd's job queue removed, so the
schedd the master restarts knows neither the job nor the claim (it reconnects nothing).
The backend's release must free the slot; without it the claim stays."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import htcondor2

from gridfair.daemon.backends.htcondor import HTCondorBackend
from tests.live.conftest import POOL_CONFIG, own_pool
from tests.live.harness.personal_pool import JobSpec, PersonalPool, SlotSpec, _processes_of

#: Seconds idle with no job before the test's release (30 s in production: `IDLE_BOUND`).
TEST_BOUND = 3.0
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


def test_a_claim_a_restarted_schedd_forgot_is_released() -> None:
    with own_pool([SlotSpec("User1", 8000, cpus=2, memory=1024)], layout="partitionable",
                  extra_config=POOL_CONFIG.read_text().splitlines()) as pool:
        collector = htcondor2.Collector(pool.collector_host)

        def schedd_started() -> list:
            return [ad.get("DaemonStartTime") for ad in collector.query(
                htcondor2.AdType.Schedd, "true", ["DaemonStartTime"])]

        def orphans() -> list:
            return collector.query(htcondor2.AdType.Startd, ORPHAN, ["Name", "JobId"])

        pool.submit([JobSpec("User1", 4000 * 600)])  # 10 minutes: it never ends by itself
        pool.wait_until(pool.running, 30)
        before = schedd_started()
        _kill_schedd_and_job(pool)
        pool.wait_until(lambda: schedd_started() and schedd_started() != before, 40, 0.25)
        [orphan] = pool.wait_until(orphans, 20, 0.25)
        assert orphan.get("JobId") is None and not pool.jobs("ClusterId")
        backend = HTCondorBackend.connect(pool.collector_host, lease_knob="")
        backend.claims.bound = TEST_BOUND
        time.sleep(TEST_BOUND)
        [note] = backend.release_orphaned_claims()
        assert note.startswith(f"{orphan['Name']}: idle claim of User1@") and " released:" in note
        # The room is back: the dynamic slot is gone from the collector.
        pool.wait_until(lambda: not orphans(), 10, 0.25)
