"""Real workloads on grids: SWF traces and raw Google shards load with the counts their READMEs
state, become grid tasks as documented, map their users to owners, and run to completion."""

from __future__ import annotations

import csv
import gzip

import pytest

from gridfair.core.pool import DONE
from gridfair.errors import InputError
from gridfair.sim.grid_loader import embedded_grids
from gridfair.sim.records import RunRecorder, check_conservation
from gridfair.sim.scenario import build_scenario, run_scenario, workload_format
from gridfair.sim.workloads.common import map_users
from gridfair.sim.workloads.google import read_task_events
from gridfair.sim.workloads.swf import read_swf
from tests.conftest import TEST_DATA, shared_file

MODEL = str(embedded_grids()["multi-owner-hosep"])
KTH_SLICE = TEST_DATA / "swf" / "KTH-SP2-1996-2.1-cln.head300.swf"
GOOGLE_SLICE = TEST_DATA / "google" / "rows420001-426000.part-00000-of-00500.csv.gz"
SHARD = "google/task_events/part-00000-of-00500.csv.gz"

# ../shared/data/swf/README.md: jobs, users, groups; and jobs with no run time (skipped here).
SWF_TRACES = {
    "KTH-SP2-1996-2.1-cln.swf.gz": (28_476, 214, 252, 8),
    "NASA-iPSC-1993-3.1-cln.swf.gz": (18_239, 69, 2, 173),
    "CTC-SP2-1996-3.1-cln.swf.gz": (77_222, 679, 1, 17),
}


@pytest.mark.parametrize("name", sorted(SWF_TRACES))
def test_each_real_swf_trace_loads_onto_the_grid_with_its_readme_counts(name):
    jobs, users, groups, no_run_time = SWF_TRACES[name]
    path = shared_file(f"swf/{name}")
    trace = read_swf(path)
    assert len(trace.jobs) == jobs and trace.skipped == []
    assert len({job.user_id for job in trace.jobs}) == users
    assert len({job.group_id for job in trace.jobs}) == groups
    scenario = build_scenario(MODEL, str(path))
    assert len(scenario.tasks) == jobs - no_run_time
    assert scenario.skipped == {
        "job with unknown run time or shorter than --min-run-time": no_run_time}
    accounts = {task.user for task in scenario.tasks}
    assert len(accounts) == users  # the 4 busiest became owners, the rest kept their ids
    assert {"user1", "user2", "user3", "user4"} <= accounts


def test_swf_jobs_become_tasks_by_reference_power_compression_and_busiest_users():
    scenario = build_scenario(MODEL, str(KTH_SLICE), options={
        "compress": 10, "reference_power": 1000, "user_map": "busiest", "unmapped": "drop"})
    trace = read_swf(KTH_SLICE)
    usable = [job for job in trace.jobs if job.run_time > 0]
    counts: dict[int, int] = {}
    for job in usable:
        counts[job.user_id] = counts.get(job.user_id, 0) + 1
    busiest = sorted(counts, key=lambda user: -counts[user])[:4]  # stable: first seen first
    kept = [job for job in usable if job.user_id in busiest]
    assert len(scenario.tasks) == len(kept)
    first = usable[0].submit_time
    for task, job in zip(scenario.tasks, kept, strict=True):
        assert task.id == str(job.job_id)
        assert task.user == f"user{busiest.index(job.user_id) + 1}"
        assert task.submit_time == pytest.approx((job.submit_time - first) / 10)
        assert task.work == pytest.approx(job.run_time * 1000) and task.cpus == 1
    assert scenario.skipped["task of a user mapped to no owner (--unmapped drop)"] == (
        len(usable) - len(kept))


def test_swf_procs_as_cpus_skips_jobs_larger_than_every_machine():
    scenario = build_scenario(MODEL, str(KTH_SLICE), options={"swf_procs": "cpus"})
    assert all(task.cpus == 1 for task in scenario.tasks)  # the model's machines have 1 core
    assert scenario.skipped["job asking for unknown processors or more than any machine has "
                            "(--swf-procs cpus)"] > 0


def test_first_15000_kth_jobs_on_the_4_owner_model_run_under_hosep():
    path = shared_file("swf/KTH-SP2-1996-2.1-cln.swf.gz")
    scenario = build_scenario(MODEL, str(path), options={"limit": 15_000, "compress": 50})
    assert len(scenario.tasks) == 15_000
    recorder = RunRecorder(snapshots=False)
    result, _ = run_scenario(scenario, policy="hosep", recorder=recorder)
    assert all(task.state == DONE for task in result.tasks)
    assert check_conservation(result, recorder) == []


def test_google_shard_loads_with_its_readme_counts_and_matches_the_derived_file():
    shard = shared_file(SHARD)
    derived = shared_file("google/derived/tasks_parts00000-00001.csv.gz")
    events = read_task_events(shard, keep_failed=True)
    assert (events.rows, len(events.users), len(events.jobs)) == (450_146, 519, 4_895)
    # The derived file (parts 0 and 1, FINISH or FAIL) holds exactly these tasks among those
    # that end within part 0's time span.
    span_end = 5_611_086_346
    with gzip.open(derived, "rt", newline="") as stream:
        expected = {tuple(row) for row in csv.reader(stream) if int(row[2]) <= span_end}
    mine = {(str(t.submit_us), str(t.start_us), str(t.finish_us), t.user, t.task_id,
             _text(t.cpu), _text(t.memory)) for t in events.tasks}
    assert len(expected) == 38_663 and mine == expected
    # The paper's filter proper ends at FINISH only.
    assert len(read_task_events(shard).tasks) == 38_326


def _text(value: float) -> str:
    """A request as the trace writes it (0.0625, 0.006218)."""
    return repr(value).removesuffix(".0") if value != int(value) else str(int(value))


def test_google_slice_filter_and_counts():
    events = read_task_events(GOOGLE_SLICE)
    assert (events.rows, len(events.users), len(events.jobs), len(events.tasks)) == (
        6000, 42, 84, 813)
    assert len(read_task_events(GOOGLE_SLICE, keep_failed=True).tasks) == 817
    assert all(t.submit_us <= t.start_us <= t.finish_us and t.cpu > 0 and t.memory > 0
               for t in events.tasks)
    assert [t.submit_us for t in events.tasks] == sorted(t.submit_us for t in events.tasks)


def test_google_shard_runs_on_the_grid():
    assert workload_format(GOOGLE_SLICE, None) == "google"
    scenario = build_scenario(MODEL, str(GOOGLE_SLICE))
    assert len(scenario.tasks) == 813
    task = scenario.tasks[0]
    assert task.duration is not None and task.work is None and 0 < task.cpus <= 1
    recorder = RunRecorder()
    result, _ = run_scenario(scenario, policy="hosep", recorder=recorder)
    assert all(task.state == DONE for task in result.tasks)
    assert check_conservation(result, recorder) == []


def test_google_shard_with_the_wrong_column_count_names_the_line(tmp_path):
    path = tmp_path / "part-00007-of-00500.csv.gz"
    with gzip.open(GOOGLE_SLICE, "rt") as source, gzip.open(path, "wt") as out:
        lines = [next(source) for _ in range(3)]
        out.write(lines[0] + lines[1].rstrip("\n").rsplit(",", 1)[0] + "\n" + lines[2])
    with pytest.raises(InputError, match=r"part-00007-of-00500.csv.gz:2: expected 13 columns "
                                         r"of task_events, got 12"):
        read_task_events(path)


def test_user_maps():
    users = ["a", "b", "b", "c", "c", "c", "d"]
    owners = ["o1", "o2"]
    assert map_users(users, owners, "busiest") == {"a": "a", "b": "o2", "c": "o1", "d": "d"}
    assert map_users(users, owners, "round-robin") == {"a": "o1", "b": "o2", "c": "o1",
                                                       "d": "o2"}
    assert map_users(users, owners, "busiest", unmapped="drop") == {
        "a": None, "b": "o2", "c": "o1", "d": None}
    assert map_users(["o1", "x"], owners, "names") == {"o1": "o1", "x": "x"}
    with pytest.raises(InputError, match="none of the workload's 2 users"):
        map_users(["x", "y"], owners, "names")


def test_user_map_file(tmp_path):
    path = tmp_path / "map.csv"
    path.write_text("# workload user, owner\na,o2\nb,\n")
    assert map_users(["a", "b", "c"], ["o1", "o2"], str(path)) == {"a": "o2", "b": "b",
                                                                    "c": "c"}
    path.write_text("a,o9\n")
    with pytest.raises(InputError, match="'o9' owns no machine"):
        map_users(["a"], ["o1"], str(path))
    path.write_text("a,o1,extra\n")
    with pytest.raises(InputError, match=r"map.csv:1: expected 2 columns"):
        map_users(["a"], ["o1"], str(path))


def test_google_shard_that_is_not_gzip_or_not_text_is_a_clear_error(tmp_path):
    plain = tmp_path / "part-00003-of-00500.csv.gz"
    plain.write_text("0,,1,0,,0,user,0,0,0.1,0.1,0,0\n")
    with pytest.raises(InputError, match="cannot read gzip shard: Not a gzipped file"):
        read_task_events(plain)
    binary = tmp_path / "part-00004-of-00500.csv.gz"
    with gzip.open(binary, "wb") as out:
        out.write(b"\xff\xfe,bad\n")
    with pytest.raises(InputError, match="cannot read gzip shard: 'utf-8' codec"):
        read_task_events(binary)


# ------------------------------------------------------- SWF read as a stream
def swf_line(job_id: int, submit: float, user: int, *, run: float = 100, procs: int = 1,
             status: int = 1) -> str:
    fields = [job_id, submit, 0, run, procs, -1, -1, procs, -1, -1, status, user, 1, -1, -1,
              -1, -1, -1]
    return " ".join(map(str, fields)) + "\n"


def test_an_swf_trace_is_streamed_the_same_on_every_pass(tmp_path):
    from gridfair.sim.workloads.swf_grid import SwfGridTasks

    lines = [swf_line(1, 0, 7), swf_line(2, 10, 8, run=0), swf_line(3, 20, 7),
             swf_line(3, 30, 9), swf_line(-1, 40, 8), swf_line(-1, 50, 8),
             "; a comment\n", "not a job line\n", swf_line(6, 60, 7, procs=64)]
    path = tmp_path / "trace.swf"
    path.write_text("".join(lines))
    scenario = build_scenario(MODEL, str(path), options={"swf_procs": "cpus"})
    assert isinstance(scenario.tasks, SwfGridTasks) and len(scenario.tasks) == 5
    passes = [[(task.id, task.user, task.submit_time, task.source_index)
               for task in scenario.tasks] for _ in range(2)]
    assert passes[0] == passes[1]
    # A repeated id (3, and SWF's unknown -1) is made unique with its line; u7 and u8 are the
    # busiest users, so they run as the grid's first two owners.
    assert [(task_id, submit) for task_id, _, submit, _ in passes[0]] == [
        ("1", 0.0), ("3", 20.0), ("3@4", 30.0), ("-1", 40.0), ("-1@6", 50.0)]
    assert scenario.skipped == {
        "malformed SWF line": 1,
        "job with unknown run time or shorter than --min-run-time": 1,
        "job asking for unknown processors or more than any machine has (--swf-procs cpus)": 1}


def test_repeated_ids_past_the_dense_range_are_made_unique_too(tmp_path, monkeypatch):
    from gridfair.sim.workloads import swf_grid

    monkeypatch.setattr(swf_grid, "DENSE_IDS", 2)  # ids above 2 go to the set
    path = tmp_path / "trace.swf"
    path.write_text("".join(swf_line(job_id, submit, 7) for submit, job_id in
                            enumerate([1, 9, 2, 9, 1, 5])))
    scenario = build_scenario(MODEL, str(path))
    assert [task.id for task in scenario.tasks] == ["1", "9", "2", "9@4", "1@5", "5"]


def test_an_swf_trace_out_of_submit_order_is_refused_naming_the_line(tmp_path):
    path = tmp_path / "trace.swf"
    path.write_text(swf_line(1, 0, 7) + swf_line(2, 30, 7) + swf_line(3, 20, 7))
    with pytest.raises(InputError, match=r"trace.swf:3: submit time 20 is before the "
                                         r"previous job's \(30\)"):
        build_scenario(MODEL, str(path))


def test_wide_jobs_of_dropped_users_are_counted_as_dropped_not_as_too_wide(tmp_path):
    # Five users, four owners: the least busy user (u5) is dropped with its wide job.
    lines = [swf_line(number, number, user) for number, user in
             enumerate([1, 1, 1, 1, 2, 2, 2, 3, 3, 4, 4], start=1)]
    lines.append(swf_line(12, 12, 5, procs=64))
    lines.append(swf_line(13, 13, 1, procs=64))
    path = tmp_path / "trace.swf"
    path.write_text("".join(lines))
    scenario = build_scenario(MODEL, str(path), options={"swf_procs": "cpus",
                                                         "unmapped": "drop"})
    assert len(scenario.tasks) == len(list(scenario.tasks)) == 11
    assert scenario.skipped == {
        "job asking for unknown processors or more than any machine has (--swf-procs cpus)": 1,
        "task of a user mapped to no owner (--unmapped drop)": 1}
