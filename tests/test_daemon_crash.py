"""Crash safety for real: a daemon process killed with SIGKILL at named points of a cycle,
then restarted; the journal must show no action carried out twice and none lost.

The `files` backend appends each action it carries out to actions.jsonl (fsync'd before it
returns), so that file is the ground truth of what was done. The kill is either the process
sending itself SIGKILL at the point (`crash:`), or the test sending it from outside while the
process waits at the point (`pause:`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from gridfair.daemon.faults import POINTS

POOL = Path(__file__).resolve().parent / "data" / "daemon" / "pool"

CONFIG = """
[daemon]
interval = 0.05
store = "state.db"
[backend]
kind = "files"
[backend.files]
directory = "pool"
actions = "actions.jsonl"
[safety]
max_snapshot_age = 3600
"""


def run_daemon(directory: Path, *args: str, fault: str | None = None,
               wait: bool = True) -> subprocess.Popen:
    env = {key: value for key, value in os.environ.items() if key != "GRIDFAIR_FAULT"}
    if fault:
        env["GRIDFAIR_FAULT"] = fault
    process = subprocess.Popen(
        [sys.executable, "-m", "gridfair.daemon", "--config", "gridfair.toml", *args],
        cwd=directory, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    if wait:
        process.communicate(timeout=60)
    return process


def journal(directory: Path) -> dict[str, tuple[str, str, str, str]]:
    with sqlite3.connect(directory / "state.db") as db:
        return {key: (kind, job, machine, state) for key, kind, job, machine, state in
                db.execute("select key, kind, job, machine, state from actions")}


def carried_out(directory: Path) -> list[tuple[str, str, str | None]]:
    path = directory / "actions.jsonl"
    if not path.exists():
        return []
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [(r["action"], r["job"], r.get("machine")) for r in records]


@pytest.fixture
def pool_dir(tmp_path: Path) -> Path:
    shutil.copytree(POOL, tmp_path / "pool", copy_function=shutil.copy)
    (tmp_path / "gridfair.toml").write_text(CONFIG)
    return tmp_path


def check_after_restart(directory: Path, before: dict[str, tuple]) -> None:
    after = journal(directory)
    done = carried_out(directory)
    # No action carried out twice. (Vacates are logged without a machine.)
    counts = Counter(done)
    assert all(n == 1 for n in counts.values()), counts
    # None lost: everything journaled before the kill is still there, and nothing is left
    # pending; each ended confirmed, failed or abandoned.
    assert set(before) <= set(after)
    assert {state for *_, state in after.values()} <= {"confirmed", "failed", "abandoned"}
    # What the journal calls confirmed was really carried out, exactly once.
    for kind, job, machine, state in after.values():
        if state == "confirmed":
            target = (kind, job, machine if kind == "allocate" else None)
            assert counts[target] == 1, (kind, job, machine)
    # And everything carried out is in the journal as issued at some point.
    journaled = {(kind, job, machine if kind == "allocate" else None)
                 for kind, job, machine, state in after.values() if state != "abandoned"}
    assert set(done) <= journaled


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_at_each_point_then_restart(pool_dir, point):
    crashed = run_daemon(pool_dir, "--once", fault=f"crash:{point}")
    assert crashed.returncode == -signal.SIGKILL
    before = journal(pool_dir)
    restarted = run_daemon(pool_dir, "--cycles", "2")
    assert restarted.returncode == 0, restarted.stderr.read() if restarted.stderr else ""
    check_after_restart(pool_dir, before)
    with sqlite3.connect(pool_dir / "state.db") as db:
        outcomes = [row[0] for row in db.execute("select outcome from cycles order by id")]
    assert outcomes == ["interrupted", "ok", "ok"]
    # Every idle job still got its allocation exactly once, or a recorded reason why not.
    allocated = {job for kind, job, _ in carried_out(pool_dir) if kind == "allocate"}
    with sqlite3.connect(pool_dir / "state.db") as db:
        explained = {job for (job,) in db.execute(
            "select job from actions where kind = 'allocate' and state != 'confirmed' "
            "and error != ''")}
    assert allocated | explained == {f"15.{n}" for n in range(8)}


@pytest.mark.parametrize("point", ["after_plan", "after_vacate"])
def test_sigkill_from_outside_while_paused(pool_dir, point):
    process = run_daemon(pool_dir, fault=f"pause:{point}", wait=False)
    marker = pool_dir / "state.db.paused"
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.read_text() == point
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL
    before = journal(pool_dir)
    assert before  # the cycle had journaled its actions when it was killed
    marker.unlink()
    restarted = run_daemon(pool_dir, "--cycles", "1")
    assert restarted.returncode == 0
    check_after_restart(pool_dir, before)
