"""`gridfair sweep --on htcondor` without a pool: what a job is sent and sends back, how each
way a job ends becomes its run's outcome, and the command's usage errors. On a live pool:
tests/live/test_sweep_live.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import gridfair.cli.sweep  # noqa: F401 - registers the command
from gridfair import __version__
from gridfair.cli import cli
from gridfair.experiments.htcondor_runner import (
    JOB_SCRIPT,
    JobEnvironment,
    _queue_summary,
    _Staging,
    job_outcome,
)
from gridfair.experiments.pool_job import read_result, run_job, write_run_file
from gridfair.experiments.runs import RunSpec, execute
from gridfair.experiments.store import ResultsStore
from gridfair.sim.grid_loader import embedded_grids

GRID = embedded_grids()["hosep-table1"]
#: The last five lines of a failed job's stderr (below), as its run's error quotes them.
TAIL = "line 3\nline 4\nline 5\nline 6\nERROR: No matching distribution found for gridfair"


def stored(db: Path, spec: RunSpec, outcome) -> list[tuple]:
    with ResultsStore(db) as store:
        store.record(0, spec, outcome)
    with ResultsStore(db) as store:
        return [(s.params, o.ok, o.users, o.summary, o.stages, o.allocation, o.error)
                for s, o in store.results()]


def test_a_job_sends_back_what_the_run_gives_here(tmp_path: Path) -> None:
    # The grid is sent with the job: it reads it from its sandbox, under another path.
    sandbox = tmp_path / "sandbox"
    (sandbox / "d").mkdir(parents=True)
    (sandbox / "d" / "grid.toml").write_bytes(GRID.read_bytes())
    spec = RunSpec.make({"grid": str(GRID), "workload": "low", "policy": "hosep",
                         "checkpointing": True, "satisfaction_base": "own"})
    write_run_file(sandbox / "run.json", {**spec.params, "grid": "d/grid.toml"})
    run_job(sandbox / "run.json", sandbox / "result.json")
    returned = read_result(spec.key, sandbox / "result.json")
    here = execute(spec)
    assert returned.ok
    assert stored(tmp_path / "job.db", spec, returned) == stored(tmp_path / "here.db", spec,
                                                                 here)


def test_a_result_of_another_gridfair_version_is_a_failed_run(tmp_path: Path) -> None:
    result = tmp_path / "result.json"
    result.write_text(json.dumps({"gridfair_version": "0.0.1", "ok": True}))
    outcome = read_result("k", result)
    assert not outcome.ok and "gridfair 0.0.1" in outcome.error and __version__ in outcome.error
    result.write_text("")
    assert "no readable result" in read_result("k", result).error


@pytest.mark.parametrize(("kind", "event", "expected"), [
    ("held", {"HoldReason": "Transfer input files failure: no such file"},
     "job held: Transfer input files failure: no such file"),
    ("removed", {"Reason": "via condor_rm (by user alice)"},
     "job removed from the queue: via condor_rm (by user alice)"),
    ("terminated", {"TerminatedNormally": True, "ReturnValue": 4},
     f"job exited with code 4: {TAIL}"),
    ("terminated", {"TerminatedNormally": False, "TerminatedBySignal": 9},
     f"job killed by signal 9: {TAIL}"),
])
def test_how_a_job_ended_is_its_runs_error(tmp_path: Path, kind: str, event: dict,
                                           expected: str) -> None:
    stderr = tmp_path / "k.err"
    stderr.write_text("".join(f"line {n}\n" for n in range(7)) +
                      "ERROR: No matching distribution found for gridfair\n")
    outcome = job_outcome("k", kind, event, tmp_path / "none.json", stderr)
    assert not outcome.ok and outcome.error == expected


def test_a_job_that_ended_well_gives_its_result(tmp_path: Path) -> None:
    spec = RunSpec.make({"grid": str(GRID), "workload": "low", "policy": "osep"})
    write_run_file(tmp_path / "run.json", spec.params)
    run_job(tmp_path / "run.json", tmp_path / "result.json")
    outcome = job_outcome(spec.key, "terminated", {"TerminatedNormally": True,
                                                    "ReturnValue": 0},
                          tmp_path / "result.json", tmp_path / "none.err")
    assert outcome.ok and outcome.summary == execute(spec).summary


def test_the_job_script_leaves_a_result_file_and_its_exit(tmp_path: Path) -> None:
    # A Python that fails at once: the job exits with its code, and the (empty) result file
    # is there, so HTCondor does not hold the job for a missing output.
    script = tmp_path / "run.sh"
    script.write_text(JOB_SCRIPT)
    done = subprocess.run(["sh", str(script), "key", "/bin/false"], cwd=tmp_path, check=False)
    assert done.returncode == 1 and (tmp_path / "result.json").read_text() == ""
    done = subprocess.run(["sh", str(script), "key", sys.executable], cwd=tmp_path,
                          check=False, capture_output=True, text=True)
    assert done.returncode == 1 and "key.json" in done.stderr


def test_input_files_of_the_same_name_do_not_collide_in_the_sandbox(tmp_path: Path) -> None:
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "grid.toml").write_bytes(GRID.read_bytes())
    staging = _Staging(tmp_path / "s.htcondor")
    sent = [staging.stage_inputs(RunSpec.make({"grid": f"{folder}/grid.toml",
                                               "workload": "low", "policy": "osep"},
                                              tmp_path))
            for folder in ("a", "b")]
    (params_a, inputs_a), (params_b, inputs_b) = sent
    assert params_a["grid"] != params_b["grid"] and inputs_a != inputs_b
    assert params_a["workload"] == "low"  # a workload the grid defines is not a file
    for params, (folder,) in ((params_a, inputs_a), (params_b, inputs_b)):
        assert (staging.directory / folder).name == params["grid"].split("/")[0]
        assert (staging.directory / "inputs" / params["grid"]).read_bytes() == GRID.read_bytes()
    # An embedded grid's name is found where the job runs: nothing to send.
    params, inputs = staging.stage_inputs(RunSpec.make({"grid": "hosep-table1",
                                                        "workload": "low", "policy": "osep"}))
    assert params["grid"] == "hosep-table1" and inputs == []


def test_wheels_without_this_gridfairs_wheel_are_refused(tmp_path: Path) -> None:
    (tmp_path / "gridfair-0.0.1-py3-none-any.whl").touch()
    with pytest.raises(Exception, match=f"no wheel of gridfair {__version__}"):
        JobEnvironment("/usr/bin/python3", tmp_path).check()
    (tmp_path / f"gridfair-{__version__}-py3-none-any.whl").touch()
    JobEnvironment("/usr/bin/python3", tmp_path).check()


@pytest.mark.parametrize(("args", "message"), [
    (["--on", "htcondor", "--workers", "2", "--job-python", "p"], "no --workers"),
    (["--on", "htcondor", "--in-process", "--job-python", "p"], "no --workers"),
    (["--on", "htcondor"], "needs --job-python"),
    (["--wheels", "w"], "--wheels only go with --on htcondor"),
    (["--schedd", "s", "--pool", "c"], "--pool, --schedd only go with --on htcondor"),
    (["--on", "slurm"], "'slurm' is not one of"),
])
def test_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(f'[parameters]\ngrid = "{GRID.as_posix()}"\nworkload = "low"\n'
                    'policy = "osep"\n')
    result = CliRunner().invoke(cli, ["sweep", str(spec), *args])
    assert result.exit_code == 2 and message in result.output, result.output


def test_wheels_of_another_version_stop_the_command_before_any_job(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(f'[parameters]\ngrid = "{GRID.as_posix()}"\nworkload = "low"\n'
                    'policy = "osep"\n')
    (tmp_path / "wheels").mkdir()
    result = CliRunner().invoke(cli, ["sweep", str(spec), "--db", str(tmp_path / "s.db"),
                                      "--on", "htcondor", "--wheels", str(tmp_path / "wheels")])
    assert result.exit_code == 2 and "no wheel of gridfair" in result.output, result.output
    assert "Traceback" not in result.output


class QueueOf:
    """A schedd whose queue holds these jobs (cluster, proc, JobStatus)."""

    def __init__(self, *jobs: tuple[int, int, int]) -> None:
        self.jobs = jobs

    def query(self, constraint: str, projection: list[str]) -> list[dict]:
        return [{"ClusterId": c, "ProcId": p, "JobStatus": s} for c, p, s in self.jobs
                if f"ClusterId == {c}" in constraint]


def test_progress_counts_the_sweeps_jobs_in_the_queue() -> None:
    pending = {(7, 0): "a", (7, 1): "b", (7, 2): "c", (9, 0): "d"}
    # 7.3 is not the sweep's any more (gathered); cluster 8 is someone else's.
    schedd = QueueOf((7, 0, 2), (7, 1, 1), (7, 2, 5), (7, 3, 2), (8, 0, 2), (9, 0, 1))
    assert _queue_summary(schedd, pending) == "1 held, 2 idle, 1 running"
    assert _queue_summary(QueueOf(), pending) == "no job queued"


def test_an_unreachable_pool_is_a_clear_error(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(f'[parameters]\ngrid = "{GRID.as_posix()}"\nworkload = "low"\n'
                    'policy = "osep"\n')
    result = CliRunner().invoke(cli, ["sweep", str(spec), "--db", str(tmp_path / "s.db"),
                                      "--on", "htcondor", "--job-python", "/usr/bin/python3",
                                      "--pool", "127.0.0.1:1"])
    assert result.exit_code == 2, result.output
    assert "cannot reach the schedd of the pool at 127.0.0.1:1" in result.output
