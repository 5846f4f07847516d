"""The Justice setting from SWF traces: scenario building, the CLI, and the real KTH-SP2 trace."""

from __future__ import annotations

import json

import pytest

from gridfair.errors import InputError
from gridfair.sim.deadline_metrics import DeadlineSummary, deadline_summary
from gridfair.sim.scenario import build_scenario, run_scenario
from gridfair.sim.workloads.swf import read_swf
from gridfair.sim.workloads.swf_justice import justice_scenario
from tests.conftest import TEST_DATA, shared_file

SLICE = TEST_DATA / "swf" / "KTH-SP2-1996-2.1-cln.head300.swf"
KTH = "swf/KTH-SP2-1996-2.1-cln.swf.gz"
SUMMARY_KEYS = {"jain_index", "deadlines_met", "jobs_dropped", "jobs_killed", "utilization"}


@pytest.fixture
def run(gridfair_cli):
    return gridfair_cli


def test_slice_becomes_jobs_with_deadlines():
    scenario = build_scenario(None, str(SLICE), seed=3,
                              options={"capacity": 25, "deadlines": "Fixed2x"})
    (node,) = scenario.nodes
    assert node.cpus == 25 and node.owner is None
    tasks = scenario.tasks
    assert len(tasks) == 300 and scenario.skipped == {}
    first = tasks[0]  # job 15: submit 599850, run 3477 s, 4 procs asked, user 12
    assert (first.id, first.user, first.submit_time) == ("15", "u12", 0.0)
    assert (first.requested_cpus, first.cpus, first.duration) == (4, 4, 3477.0)
    assert first.deadline == 2 * 3477.0
    wide = next(task for task in tasks if task.requested_cpus > 25)
    # Given at most the capacity, with its work kept: run time x asked / 25.
    assert wide.cpus == 25
    assert all(task.deadline - task.submit_time == pytest.approx(
        2 * task.duration * task.cpus / task.requested_cpus) for task in tasks)


def test_capacity_defaults_to_the_trace_and_deadlines_are_optional():
    scenario = build_scenario(None, str(SLICE))
    assert scenario.nodes[0].cpus == 100  # MaxProcs
    assert all(task.deadline is None for task in scenario.tasks)


def test_unusable_jobs_and_malformed_lines_are_counted(tmp_path):
    lines = SLICE.read_text().splitlines()
    header = [line for line in lines if line.startswith(";")]
    jobs = [line for line in lines if not line.startswith(";")][:5]
    zero_run = jobs[1].split()
    zero_run[3] = "0"
    no_procs = jobs[2].split()
    no_procs[4] = no_procs[7] = "-1"
    path = tmp_path / "t.swf"
    path.write_text("\n".join(header + [jobs[0], " ".join(zero_run), " ".join(no_procs),
                                        "1 2 3", jobs[3]]) + "\n")
    scenario = build_scenario(None, str(path), options={"deadlines": "Aria1x3x"})
    assert len(scenario.tasks) == 2
    malformed_line = len(header) + 4
    assert scenario.skipped == {
        "job with an unknown or zero run time": 1,
        "job with an unknown processor count": 1,
        f"malformed SWF line (line {malformed_line}: 3 fields, expected 18)": 1,
    }


@pytest.mark.parametrize(("options", "message"), [
    ({"capacity": 0}, "capacity must be at least one processor, got 0"),
    ({"capacity": 0.5}, "capacity must be at least one processor"),
    ({"capacity": 2.5}, "whole number of processors"),
    ({"capacity": 4, "deadlines": "Fixed3x"}, r"unknown deadline type 'Fixed3x' \(known: Fixed1x"),
])
def test_bad_options_are_clear_errors(options, message):
    with pytest.raises(InputError, match=message):
        build_scenario(None, str(SLICE), options=options)


def test_cli_json_summary_has_the_deadline_keys_and_is_repeatable(run):
    args = ("simulate", "--workload", str(SLICE), "--capacity", "25", "--policy", "justice",
            "--deadlines", "Fixed2x", "--format", "json", "--quiet")
    first, second = run(*args), run(*args)
    assert first.exit_code == 0, first.output
    assert first.output == second.output
    summary = json.loads(first.stdout)["summary"]
    assert set(summary) >= SUMMARY_KEYS
    assert summary["deadlines_met"] + summary["jobs_dropped"] + summary["jobs_killed"] + \
        summary["deadlines_missed"] + summary["jobs_unfinished"] == 300
    assert 0 < summary["jain_index"] <= 1


def test_cli_table_reports_deadlines_and_skipped_lines(run, tmp_path):
    path = tmp_path / "t.swf"
    path.write_text(SLICE.read_text() + "garbage line\n")
    result = run("simulate", "--workload", str(path), "--capacity", "50", "--policy", "oracle",
                 "--deadlines", "Jockey2x4x", "--seed", "4", "--quiet")
    assert result.exit_code == 0, result.output
    assert "deadlines met" in result.output and "Jain(60 s)" in result.output
    assert "warning: skipped 1: malformed SWF line (line 325: 2 fields" in result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (("--capacity", "0", "--deadlines", "Fixed2x"), "capacity must be at least one processor"),
    (("--capacity", "25", "--deadlines", "Fixed9x"), "unknown deadline type 'Fixed9x'"),
    (("--capacity", "half", "--deadlines", "Fixed2x"), "'half' is not a valid integer"),
])
def test_cli_bad_input_exits_2(run, args, message):
    result = run("simulate", "--workload", str(SLICE), "--policy", "justice", *args)
    assert result.exit_code == 2
    assert message in result.output + result.stderr


def test_deadline_policies_refuse_jobs_without_deadlines(run):
    result = run("simulate", "--workload", str(SLICE), "--capacity", "25", "--policy",
                 "reactive-fs", "--quiet")
    assert result.exit_code == 2
    assert "policy reactive needs jobs with a deadline" in result.stderr


@pytest.fixture(scope="module")
def kth_quarter() -> dict[str, DeadlineSummary]:
    """Justice and Baseline FS on the whole KTH-SP2 trace, cut to 25 of its 100 processors,
    Fixed2x deadlines (their run times: bench/justice_kth.py)."""
    trace = read_swf(shared_file(KTH))
    return {policy: deadline_summary(run_scenario(
                justice_scenario(trace, 25, "Fixed2x", seed=1), policy=policy)[0])
            for policy in ("justice", "baseline-fs")}


def test_kth_justice_meets_more_deadlines_than_baseline_fs(kth_quarter):
    justice, baseline = kth_quarter["justice"], kth_quarter["baseline-fs"]
    assert justice.jobs == baseline.jobs == 28467  # 9 jobs of the trace are unusable
    assert justice.deadlines_met > baseline.deadlines_met


def test_kth_justice_is_fairer_than_baseline_fs(kth_quarter):
    justice, baseline = kth_quarter["justice"], kth_quarter["baseline-fs"]
    assert justice.jain_index > baseline.jain_index
    assert justice.jain_index_run > baseline.jain_index_run


def test_tasks_out_is_an_swf_file_of_the_simulated_run(run, tmp_path):
    out = tmp_path / "run.swf"
    result = run("simulate", "--workload", str(SLICE), "--capacity", "25", "--policy",
                 "reactive-fs", "--deadlines", "Fixed2x", "--tasks-out", str(out), "--format",
                 "json", "--quiet")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)["summary"]
    simulated = read_swf(out)
    original = read_swf(SLICE)
    assert simulated.header_int("MaxProcs") == 25 and simulated.skipped == []
    statuses = [job.status for job in simulated.jobs]
    assert (statuses.count(1), statuses.count(0), statuses.count(5)) == (
        summary["deadlines_met"] + summary["deadlines_missed"], summary["jobs_killed"],
        summary["jobs_dropped"])
    for before, after in zip(original.jobs, simulated.jobs, strict=True):
        assert (after.job_id, after.submit_time, after.requested_procs, after.user_id) == (
            before.job_id, before.submit_time, before.requested_procs, before.user_id)
        if after.status == 1:  # finished: ran its work with the slots it was given
            assert after.run_time * after.allocated_procs == pytest.approx(
                before.run_time * before.processors)
            assert after.wait_time >= 0
        elif after.status == 5:
            assert after.run_time == after.wait_time == after.allocated_procs == -1
