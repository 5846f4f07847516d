"""The personal-pool harness owns what it starts: a test run killed outright leaves no daemon
behind once the next live run starts, and jobs run wherever the checkout lies, HTCondor
installed beside it under a directory closed to HTCondor's account included."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.live.conftest import REPOSITORY, htcondor_or_skip, own_pool
from tests.live.harness.accounts import Unreachable
from tests.live.harness.personal_pool import (
    JobSpec,
    PersonalPool,
    SlotSpec,
    _processes_of,
    sweep_abandoned_pools,
)

#: A test run in a process of its own: starts a pool, says where, then waits to be killed.
KILLED_RUN = """
import sys, time
from tests.live.harness.personal_pool import PersonalPool, SlotSpec, find_htcondor
pool = PersonalPool([SlotSpec("User1", 1000)], install=find_htcondor()).start()
print(pool.directory, flush=True)
time.sleep(600)
"""


def test_a_pool_whose_run_was_killed_is_stopped_by_the_next_run() -> None:
    htcondor_or_skip()
    run = subprocess.Popen([sys.executable, "-c", KILLED_RUN], cwd=REPOSITORY,
                           stdout=subprocess.PIPE, text=True)
    try:
        directory = Path(run.stdout.readline().strip())
    finally:
        run.send_signal(signal.SIGKILL)  # no atexit, no signal handler: the daemons run on
        run.wait()
    left = _processes_of(directory, directory / "condor_config")
    assert left, "the killed run's pool should still be running before the sweep"
    sweep_abandoned_pools()
    time.sleep(0.5)
    assert not [pid for pid in left if _alive(pid)]
    assert not directory.exists()


def _alive(pid: int) -> bool:
    """Running, not a zombie (killed, its orphan not yet reaped by init)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def test_a_running_pool_is_not_swept() -> None:
    with own_pool([SlotSpec("User1", 1000)]) as pool:
        sweep_abandoned_pools()
        assert pool.directory.exists()
        assert pool.status("Name"), "the pool still answers"


def test_jobs_run_again_after_a_vacate_wherever_the_submitter_stands(
        tmp_path: Path, monkeypatch) -> None:
    """From a directory under /tmp (where a checkout often is): a job vacated starts again,
    its working directory being the pool's, not the caller's (a starter may see another
    /tmp)."""
    monkeypatch.chdir(tmp_path)
    pool: PersonalPool
    with own_pool([SlotSpec("User1", 1000)]) as pool:
        [job] = pool.submit([JobSpec("User1", 1000 * 600)])  # ten minutes on its slot
        pool.wait_until(lambda: job in pool.running(), 30)
        pool.run_tool(["condor_vacate_job", job])
        pool.wait_until(lambda: pool.jobs("ClusterId", constraint=(
            f"ClusterId == {job.split('.')[0]} && JobStatus == 2 && NumJobStarts >= 2")), 30)
    assert os.getcwd() == str(tmp_path)


@pytest.mark.parametrize("beside", ["copied", "linked"])
def test_a_pool_runs_from_an_install_under_a_directory_closed_to_htcondors_account(
        beside: str) -> None:
    """An install beside a checkout under `mktemp -d` (0700), copied there or reached through a
    symbolic link `shared` (as CI lays it out): its daemons, acting as HTCondor's own account,
    could not reach it; the pool runs from a copy they reach, and runs jobs. (Linked, a check
    that ran the install through setpriv's own exec passed and every pool stayed empty.)"""
    source = htcondor_or_skip().resolve()
    closed = Path(tempfile.mkdtemp())
    install = closed / "shared" / "htcondor"
    if beside == "copied":
        shutil.copytree(source, install)
    else:
        (closed / "shared").mkdir()
        install.symlink_to(source)
    pool = None
    try:
        with PersonalPool([SlotSpec("User1", 1000)], install=install) as pool:
            [job] = pool.submit([JobSpec("User1", 1000 * 600)])
            pool.wait_until(lambda: job in pool.running(), 30)
    finally:
        # A copy of the linked install is the session's own (named by the resolved path):
        # other tests run from it.
        if pool is not None and pool.install != install and beside == "copied":
            shutil.rmtree(pool.install)
        shutil.rmtree(closed)


def test_a_pool_directory_closed_to_htcondors_account_fails_at_once_naming_it() -> None:
    closed = Path(tempfile.mkdtemp())
    try:
        pool = own_pool([SlotSpec("User1", 1000)], directory=closed / "pool")
        began = time.monotonic()
        with pytest.raises(Unreachable, match=f"{closed} \\(mode 0o700\\) is closed"):
            pool.start()
        assert time.monotonic() - began < 10
    finally:
        shutil.rmtree(closed)
