"""`gridfair sweep --on htcondor` on a personal pool: a researcher's sweep of a few hundred
short runs submitted as one cluster by their own account, with gridfair installed from its
wheel where jobs run; one run fails in the simulator and one job is removed from the queue
half-way; `--resume` submits exactly the failed ones. The results DB is the same, row for row
and byte for byte apart from `wall_seconds`, as run in process and on local Dask."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import gridfair.cli.sweep  # noqa: F401 - registers the command
from gridfair.cli import cli
from gridfair.sim.grid_loader import embedded_grids
from tests.live.conftest import own_pool
from tests.live.harness.personal_pool import PersonalPool, SlotSpec, as_account, ensure_account

#: The researcher's Unix account: jobs are not run for root.
RESEARCHER = "researcher"
#: More slots than cores: the runs are short and mostly HTCondor's start-up.
SLOTS = tuple(SlotSpec("User1", 100000) for _ in range(8))
SEEDS = 50  # x 2 policies + the failing run: 101 runs (501: bench/sweep_pool.py)

#: The grid, sent with every job as a file of the sweep's (a copy of an embedded grid).
GRID = embedded_grids()["hosep-table1"]


def sweep_text(seeds: int) -> str:
    """A sweep of 2 x `seeds` short runs of GRID (grid.toml beside it), and a run that fails
    in the simulator (its workload is not the grid's)."""
    return f"""
[parameters]
grid = "grid.toml"
workload = "low"
policy = ["osep", "hosep"]
seed = {{ from = 1, to = {seeds} }}
[[matrix]]
[[matrix]]
workload = "not-in-the-grid"
policy = "osep"
seed = 1
"""


def researcher_directory(pool: PersonalPool, seeds: int) -> Path:
    """The researcher's own directory with the sweep file and its grid, where the pool's
    daemons (running as the researcher for the researcher's jobs) reach it."""
    ensure_account(RESEARCHER)
    directory = pool.jobs_folder / f"sweep-{time.monotonic_ns()}"
    directory.mkdir()
    (directory / "grid.toml").write_bytes(GRID.read_bytes())
    (directory / "s.toml").write_text(sweep_text(seeds), encoding="utf-8")
    shutil.chown(directory, RESEARCHER)
    for path in directory.iterdir():
        shutil.chown(path, RESEARCHER)
    return directory


@pytest.fixture(scope="module")
def pool() -> Iterator[PersonalPool]:
    with own_pool(SLOTS) as running:
        yield running


@pytest.fixture
def sweep_dir(pool: PersonalPool) -> Iterator[Path]:
    directory = researcher_directory(pool, SEEDS)
    yield directory
    pool.clear_queue()
    shutil.rmtree(directory, ignore_errors=True)


def researcher_sweep(pool: PersonalPool, python: Path, directory: Path,
                     *args: str, quiet: bool = True) -> subprocess.Popen[str]:
    """`gridfair sweep s.toml --on htcondor ARGS` run by the researcher in `directory`."""
    return subprocess.Popen(
        as_account(RESEARCHER, [str(python), "-m", "gridfair", "sweep", "s.toml", "--on",
                                "htcondor", *(["-q"] if quiet else []), *args]),
        cwd=directory, env=pool.daemon_environment(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def rows(db: Path) -> list[str]:
    """The DB's content as SQL, timing left out, sorted (rows are stored as runs finish)."""
    copy = db.with_suffix(".compare")
    shutil.copyfile(db, copy)
    with sqlite3.connect(copy) as connection:
        connection.execute("update runs set wall_seconds = null")
        connection.commit()
        dump = sorted(connection.iterdump())
    copy.unlink()
    return dump


def test_a_sweep_on_the_pool_stores_what_a_local_sweep_stores(
        pool: PersonalPool, daemon_python: Path, sweep_dir: Path) -> None:
    sweep = researcher_sweep(pool, daemon_python, sweep_dir, "--job-python",
                             str(daemon_python))
    # Hold one job and remove another near the cluster's end while they wait in the queue
    # (101 runs on 8 slots; the last is the failing run).
    ids = pool.wait_until(lambda: pool.jobs("ClusterId", "ProcId", "GridfairRun"), 60)
    in_order = sorted(ids, key=lambda row: int(row[1]))
    (cluster, held_proc, held), (_, removed_proc, removed) = in_order[-3], in_order[-2]
    pool.run_tool(["condor_hold", f"{cluster}.{held_proc}"])
    pool.run_tool(["condor_rm", f"{cluster}.{removed_proc}"])
    out, err = sweep.communicate(timeout=240)
    assert sweep.returncode == 1, err
    db = sweep_dir / "s.db"
    with sqlite3.connect(db) as connection:
        failed = dict(connection.execute("select key, error from runs where status = 'error'"))
        assert connection.execute("select count(*) from runs").fetchone() == (2 * SEEDS + 1,)
    assert failed[removed].startswith("job removed from the queue: via condor_rm")
    assert failed[held].startswith("job held: via condor_hold")
    assert pool.jobs("ProcId", constraint=f"ClusterId == {cluster}") == []  # held: removed
    assert sum(error.startswith("InputError: workload 'not-in-the-grid'")
               for error in failed.values()) == 1, failed

    resumed = researcher_sweep(pool, daemon_python, sweep_dir, "--job-python",
                               str(daemon_python), "--resume")
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 1, err  # the simulator's failure is the run's, every time
    clusters = sorted((sweep_dir / "s.htcondor" / "clusters").glob("*.json"),
                      key=lambda path: int(path.stem))
    assert len(clusters) == 2 and len(json.loads(clusters[1].read_text())) == 3

    for flags in (["--in-process"], ["--workers", "2"]):
        local = sweep_dir / f"local{len(flags)}.db"
        result = CliRunner().invoke(cli, ["sweep", str(sweep_dir / "s.toml"), "--db", str(local),
                                          "-q", *flags])
        assert result.exit_code == 1, result.output
        assert rows(local) == rows(db)


def test_jobs_install_gridfair_from_wheels_sent_with_them(
        pool: PersonalPool, daemon_python: Path, sweep_dir: Path) -> None:
    wheels = sweep_dir / "wheels"
    installed = daemon_python.parents[2] / "wheel"
    subprocess.run([str(daemon_python.parent / "pip"), "wheel", "--quiet", "--wheel-dir",
                    str(wheels), *map(str, installed.glob("gridfair-*.whl"))], check=True)
    subprocess.run(["chmod", "-R", "a+rX", str(wheels)], check=True)
    (sweep_dir / "s.toml").write_text(sweep_text(2))
    sweep = researcher_sweep(pool, daemon_python, sweep_dir, "--wheels", str(wheels),
                             "--job-python", os.path.realpath(daemon_python))
    out, err = sweep.communicate(timeout=120)
    assert sweep.returncode == 1, err
    local = sweep_dir / "local.db"
    CliRunner().invoke(cli, ["sweep", str(sweep_dir / "s.toml"), "--db", str(local), "-q",
                             "--in-process"])
    assert rows(local) == rows(sweep_dir / "s.db")


def stored_runs(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as connection:
            return connection.execute("select count(*) from runs").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def test_a_sweep_whose_command_is_killed_is_gathered_by_resume(
        pool: PersonalPool, daemon_python: Path, sweep_dir: Path) -> None:
    (sweep_dir / "s.toml").write_text(sweep_text(20))
    sweep = researcher_sweep(pool, daemon_python, sweep_dir, "--job-python",
                             str(daemon_python))
    db = sweep_dir / "s.db"
    pool.wait_until(lambda: stored_runs(db) >= 5, 60)
    sweep.kill()  # the client goes; its jobs stay queued and go on
    sweep.wait()
    assert stored_runs(db) < 41
    resumed = researcher_sweep(pool, daemon_python, sweep_dir, "--job-python",
                               str(daemon_python), "--resume", quiet=False)
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 1, err
    # Progress from the queue, and from the runs as they are stored.
    assert "gridfair sweep: jobs: " in err and "gridfair sweep: run 1/" in err
    # Nothing submitted twice but the run that failed before the kill (the simulator's).
    clusters = sorted((sweep_dir / "s.htcondor" / "clusters").glob("*.json"),
                      key=lambda path: int(path.stem))
    first = json.loads(clusters[0].read_text())
    again = [key for path in clusters[1:] for key in json.loads(path.read_text())]
    assert len(first) == 41 and again in ([], [first[-1]])
    local = sweep_dir / "local.db"
    CliRunner().invoke(cli, ["sweep", str(sweep_dir / "s.toml"), "--db", str(local), "-q",
                             "--in-process"])
    assert rows(local) == rows(db)
