"""Sweeps on a real Dask `LocalCluster` (two worker processes, started once for the module):
the same results as one by one in-process, the CLI on a running scheduler, a sweep killed
with SIGKILL half-way and resumed, and an unreachable scheduler."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

import gridfair.cli.sweep  # noqa: F401 - registers the command
from gridfair.cli import cli
from gridfair.experiments.runner import dask_client, run_in_process, run_on_dask
from gridfair.experiments.spec import load_sweep
from gridfair.experiments.store import ResultsStore
from gridfair.sim.grid_loader import embedded_grids
from tests.conftest import ROOT

GRID = embedded_grids()["hosep-table1"].as_posix()

# A grid whose runs take about 0.3 s each, so a sweep can be killed while it runs.
SLOW_GRID = """
[[machines]]
name = "fast"
owner = "A"
mflops = 100000
count = 4
[[machines]]
name = "slow"
owner = "B"
mflops = 30000
count = 4
[workloads.many]
kind = "hosep-synthetic"
mix = { small = 8000 }
[synthetic]
users = ["A", "B"]
late_users = ["A"]
late_submit_time = 60
size_minutes = { small = [5, 30] }
"""


@pytest.fixture(scope="module")
def client():
    with dask_client(workers=2) as dask:
        yield dask


def sweep(*args: str):
    return CliRunner().invoke(cli, ["sweep", *args, "-q"])


def comparable(results):
    """Everything stored about each run except how long it took."""
    return [(spec.params, outcome.ok, outcome.users, outcome.summary, outcome.stages,
             outcome.error) for spec, outcome in results]


def test_two_workers_give_the_same_results_as_one_by_one(tmp_path, client):
    spec = tmp_path / "s.toml"
    spec.write_text(f'[parameters]\ngrid = "{GRID}"\nworkload = ["low", "high"]\n'
                    'policy = ["osep", "hosep"]\ncheckpointing = [false, true]\n'
                    'seed = [1, 2]\n', encoding="utf-8")
    runs = load_sweep(spec).runs
    positions = {run.key: index for index, run in enumerate(runs)}
    stored = {}
    for name, run in (("dask", lambda sink: run_on_dask(client, runs, sink)),
                      ("local", lambda sink: run_in_process(runs, sink))):
        with ResultsStore(tmp_path / f"{name}.db") as store:
            run(lambda spec, outcome, store=store: store.record(positions[spec.key], spec,
                                                                 outcome))
            stored[name] = store.results()
    assert len(stored["dask"]) == 16 and all(outcome.ok for _, outcome in stored["dask"])
    assert comparable(stored["dask"]) == comparable(stored["local"])


def test_sweep_command_on_a_running_scheduler(tmp_path, client):
    spec = tmp_path / "s.toml"
    spec.write_text(f'[parameters]\ngrid = "{GRID}"\nworkload = "medium"\n'
                    'policy = ["osep", "hosep"]\nseed = { from = 1, to = 3 }\n',
                    encoding="utf-8")
    db = str(tmp_path / "r.db")
    result = sweep(str(spec), "--scheduler", client.scheduler.address, "--db", db)
    assert result.exit_code == 0, result.output
    assert "6 runs, 6 done now" in result.output
    with ResultsStore(db) as store:
        assert [(s.get("policy"), s.get("seed")) for s, _ in store.results()] == [
            (policy, seed) for policy in ("osep", "hosep") for seed in (1, 2, 3)]


def test_unreachable_scheduler_is_a_clear_error_not_a_hang(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(f'[parameters]\ngrid = "{GRID}"\nworkload = "low"\npolicy = "osep"\n',
                    encoding="utf-8")
    started = time.monotonic()
    result = sweep(str(spec), "--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "2",
                   "--db", str(tmp_path / "r.db"))
    assert result.exit_code == 2
    assert "cannot reach the Dask scheduler at 'tcp://127.0.0.1:9' within 2 s" in result.output
    assert time.monotonic() - started < 15


def count_runs(db) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as connection:
            return connection.execute("select count(*) from runs").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0


def test_sweep_killed_half_way_resumes_with_every_run_done_once(tmp_path, client):
    (tmp_path / "slow.toml").write_text(SLOW_GRID, encoding="utf-8")
    spec = tmp_path / "s.toml"
    spec.write_text('[parameters]\ngrid = "slow.toml"\nworkload = "many"\n'
                    'policy = ["osep", "hosep"]\nseed = { from = 1, to = 8 }\n',
                    encoding="utf-8")
    db = tmp_path / "r.db"
    command = [sys.executable, "-c",
               "from gridfair.cli import cli; import gridfair.cli.sweep; cli()",
               "sweep", str(spec), "--scheduler", client.scheduler.address, "--db", str(db),
               "-q"]
    process = subprocess.Popen(command, cwd=ROOT, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while count_runs(db) < 3 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert process.poll() is None, "the sweep finished before it could be killed"
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    with ResultsStore(db) as store:
        before = {spec.key: outcome.wall_seconds for spec, outcome in store.results()}
    assert 3 <= len(before) < 16

    result = sweep(str(spec), "--scheduler", client.scheduler.address, "--db", str(db),
                   "--resume")
    assert result.exit_code == 0, result.output
    assert (f"16 runs, {16 - len(before)} done now, {len(before)} already done, 0 failed"
            in result.output)
    with ResultsStore(db) as store:
        after = store.results()
        assert store.count("ok") == 16
    assert len({spec.key for spec, _ in after}) == 16
    # Runs stored before the kill were not run again (their timings are untouched).
    assert {spec.key: outcome.wall_seconds for spec, outcome in after
            if spec.key in before} == before
