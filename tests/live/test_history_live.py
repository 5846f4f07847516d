"""A live pool's own history replayed: the schedd's history file, `condor_history -json` and
`Schedd.history()` (through `--pool`) read the same jobs, and `gridfair simulate --pool`
replays them on the collector's slots."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gridfair.classads.history import HistoryJob, read_history
from gridfair.cli import cli
from tests.live.conftest import ghost_schedd
from tests.live.harness.personal_pool import JobSpec, PersonalPool

FAST = 132250.0


def test_the_live_history_is_read_as_the_files_are(clean_queue: PersonalPool,
                                                   tmp_path: Path) -> None:
    pool = clean_queue
    since = int(time.time())
    ids = pool.submit([JobSpec("User1", 3 * FAST), JobSpec("User2", 4 * FAST),
                       JobSpec("guest", 2 * FAST)], count=2)
    clusters = {job.split(".")[0] for job in ids}
    pool.wait_until(lambda: not pool.jobs("ClusterId"), 120, every=1)
    (tmp_path / "history.json").write_text(pool._run(["condor_history", "-json"]))
    ours = {f"{cluster}.{proc}" for cluster in clusters for proc in (0, 1)}

    def read(path: Path) -> dict[str, tuple]:
        return {job.id: (job.user, job.qdate, job.first_start, job.end, job.slot)
                for job in read_history([path])
                if isinstance(job, HistoryJob) and job.id in ours}

    from_file = read(pool.directory / "local" / "spool" / "history")
    assert len(from_file) == 6 and read(tmp_path / "history.json") == from_file

    runner = CliRunner()
    result = runner.invoke(cli, ["simulate", "--pool", pool.collector_host, "--since",
                                 str(since), "--policy", "condor", "--interval", "2",
                                 "--format", "json", "-q"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["summary"]["tasks"] == 6
    users = {row["user"]: row["submitted"] for row in report["users"]}
    assert users == {"User1": 2, "User2": 2, "guest@gridfair.test": 2}
    assert "guest@gridfair.test (2)" in result.stderr  # mapped to no owner: a note
    table = runner.invoke(cli, ["simulate", "--pool", pool.collector_host, "--since",
                                str(since), "--policy", "condor", "--interval", "2", "-q"])
    assert f"workload=history of pool {pool.collector_host}  " in table.stdout.splitlines()[0]


def test_an_unreachable_pool_is_one_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["simulate", "--pool", "127.0.0.1:9", "--policy",
                                      "condor"])
    assert result.exit_code == 2
    assert result.stderr.startswith("gridfair: error: ") and "collector" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_jobs_of_dynamic_slots_replay_on_their_partitionable_slots(
        partitionable_pool: PersonalPool) -> None:
    """Jobs ran on dynamic slots (slot1_1@vm, ...) that are gone when the history is read;
    each is replayed on the partitionable slot it was cut from, with that slot's power."""
    pool = partitionable_pool
    pool.clear_queue()
    since = int(time.time())
    pool.submit([JobSpec("User1", 2 * FAST), JobSpec("User2", 3 * FAST)], count=2)
    pool.wait_until(lambda: not pool.jobs("ClusterId"), 120, every=1)
    result = CliRunner().invoke(cli, ["simulate", "--pool", pool.collector_host, "--since",
                                      str(since), "--policy", "condor", "--format", "json",
                                      "-q"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["tasks"] == 4, result.stderr
    assert "skipped" not in result.stderr  # every slot named by a job was found
    slots = {job.slot for job in read_history([pool.directory / "local" / "spool" / "history"])
             if isinstance(job, HistoryJob) and job.qdate >= since}
    assert slots and all("_" in slot.partition("@")[0] for slot in slots)


@pytest.mark.parametrize("with_version", [True, False])
def test_a_schedd_whose_history_cannot_be_read_is_skipped_and_the_others_replayed(
        static_pool: PersonalPool, with_version: bool) -> None:
    """A schedd the collector lists whose history cannot be read (its ad outlived it: an
    address that refuses connections; or its ad lacks what the bindings need to reach it) is
    skipped with the reason; the other schedd's history is replayed."""
    pool = static_pool
    pool.clear_queue()
    since = int(time.time())
    pool.submit([JobSpec("User1", 2 * FAST)], count=2)
    pool.wait_until(lambda: not pool.jobs("ClusterId"), 120, every=1)
    with ghost_schedd(pool, with_version=with_version) as ghost:
        result = CliRunner().invoke(cli, ["simulate", "--pool", pool.collector_host, "--since",
                                          str(since), "--policy", "condor", "--interval", "2",
                                          "--format", "json", "-q"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["tasks"] == 2
    why = "cannot read its history: " + ("" if with_version else
                                         "its collector ad has no CondorVersion")
    assert (f"schedd whose history cannot be read (first: schedd {ghost}: {why}"
            in result.stderr), result.stderr
