"""A pool's HTCondor job history as a workload: the reader (three formats, rotated and
compressed files, bad input) and its rules, on a history recorded from a live pool
(tests/data/condor_history), checked against that pool's own event log."""

from __future__ import annotations

import gzip
import json
import shutil
import statistics
from pathlib import Path

import pytest
from click.testing import CliRunner

from gridfair.ad_views import JobStatus, SkippedAd
from gridfair.classads.history import HistoryJob, read_history
from gridfair.classads.reader import read_ads
from gridfair.classads.views import job_view
from gridfair.cli import cli
from gridfair.cli import compare as _compare  # noqa: F401 - registers `compare`
from gridfair.cli import simulate as _simulate  # noqa: F401 - registers `simulate`
from gridfair.errors import InputError
from gridfair.sim.engine import run_rate
from gridfair.sim.engine_options import EngineOptions
from gridfair.sim.scenario import build_scenario

DATA = Path(__file__).resolve().parent / "data" / "condor_history"
SLOTS = DATA / "slots.long"
JOBS = 121  # what the recording submitted (pool.json)
GUEST_JOBS = 40  # jobs of `guest`, who owns no slot, that ran


def unzipped(name: str, directory: Path) -> Path:
    """A recorded file as plain text in `directory`."""
    path = directory / name.removesuffix(".gz")
    path.write_bytes(gzip.decompress((DATA / name).read_bytes()))
    return path


def jobs_of(path: Path) -> dict[str, HistoryJob]:
    items = list(read_history([path]))
    assert all(isinstance(item, HistoryJob) for item in items), [
        item for item in items if isinstance(item, SkippedAd)][:3]
    return {item.id: item for item in items}


def _figures(job: HistoryJob) -> tuple:
    """A job's figures, without where they were read."""
    return (job.user, job.status, job.qdate, job.first_start, job.last_start, job.end,
            job.last_run, job.wall_time, job.starts, job.slot, job.slot_power, job.cpus,
            job.memory, job.gpus, job.global_id)


# ------------------------------------------------------------------------ reading
def test_three_formats_read_the_same_jobs():
    history = jobs_of(DATA / "history.gz")
    assert len(history) == JOBS
    for other in ("history.json.gz", "history.long.gz"):
        read = jobs_of(DATA / other)
        assert {job_id: _figures(job) for job_id, job in read.items()} == {
            job_id: _figures(job) for job_id, job in history.items()}


def test_the_short_parse_reads_each_job_as_the_daemon_does(tmp_path):
    """Only some attributes are parsed; the job must be the one `job_view` makes of the whole
    ad (user, status, requests, times), for every recorded job."""
    history = jobs_of(DATA / "history.gz")
    ads, skipped = read_ads(unzipped("history.long.gz", tmp_path))
    assert not skipped and len(ads) == JOBS
    for sourced in ads:
        whole = job_view(sourced)
        job = history[whole.id]
        assert (job.user, job.status, job.qdate, job.cpus, job.memory) == (
            whole.user, whole.status, whole.qdate, whole.request_cpus, whole.request_memory)
        assert job.last_start == whole.start_time


def test_the_history_agrees_with_the_pool_event_log(tmp_path):
    """Each job's first and last start and last slot are those of its execute events, and
    the evictions are its extra starts: the reader reads what HTCondor did. (The shadow
    writes the execute event once the starter answers: up to a second after the start the
    schedd records, in whole seconds.)"""
    htcondor2 = pytest.importorskip("htcondor2")
    log = htcondor2.JobEventLog(str(unzipped("EventLog.gz", tmp_path)))
    executes: dict[str, list] = {}
    for event in log.events(stop_after=0):
        if event.type == htcondor2.JobEventType.EXECUTE:
            executes.setdefault(f"{event.cluster}.{event.proc}", []).append(
                (event.timestamp, event["SlotName"]))
    history = jobs_of(DATA / "history.gz")
    ran = {job_id: job for job_id, job in history.items() if job.last_start is not None}
    assert set(executes) == set(ran)
    for job_id, job in ran.items():
        runs = executes[job_id]
        assert 0 <= runs[0][0] - job.first_start <= 1
        assert 0 <= runs[-1][0] - job.last_start <= 1
        assert runs[-1][1] == job.slot and len(runs) == job.starts
    assert [job_id for job_id, runs in executes.items() if len(runs) > 1] == ["8.1"]


def test_rotated_files_in_a_directory_are_read_oldest_first_and_once(tmp_path):
    text = gzip.decompress((DATA / "history.gz").read_bytes()).decode()
    cut = text.index("***", len(text) // 2)
    cut = text.index("\n", cut) + 1
    (tmp_path / "history.20261125T223000").write_text(text[:cut])
    (tmp_path / "history").write_text(text[cut:])
    read = list(read_history([tmp_path]))
    assert [job.id for job in read] == [job.id for job in read_history([DATA / "history.gz"])]
    # The same records twice (an overlapping copy): the replay reads each job once.
    shutil.copy(tmp_path / "history", tmp_path / "history.20261125T220000")
    scenario = build_scenario(None, str(tmp_path), options={"machines": str(SLOTS)})
    repeated = sum(number for reason, number in scenario.skipped.items()
                   if reason.startswith("repeated record"))
    assert repeated == len(text[cut:].split("\n***")) - 1
    assert len(scenario.tasks) == JOBS - 2  # 9.0 and 9.1 never ran


def test_a_truncated_file_loses_its_last_ad_only(tmp_path):
    text = gzip.decompress((DATA / "history.gz").read_bytes()).decode()
    path = tmp_path / "history"
    path.write_text(text[: len(text) - 800])  # cut inside the last ad
    read = list(read_history([path]))
    assert sum(isinstance(item, HistoryJob) for item in read) == JOBS - 1
    assert "truncated" in read[-1].reason and read[-1].index == JOBS


def test_a_corrupted_ad_is_skipped_with_its_line(tmp_path):
    text = gzip.decompress((DATA / "history.gz").read_bytes()).decode()
    lines = text.splitlines(keepends=True)
    target = next(number for number, line in enumerate(lines) if line.startswith("QDate"))
    lines[target] = "QDate = ((1795645829\n"
    path = tmp_path / "history"
    path.write_text("".join(lines))
    read = list(read_history([path]))
    bad = [item for item in read if isinstance(item, SkippedAd)]
    assert len(bad) == 1 and f"line {target + 1}" in bad[0].reason
    assert sum(isinstance(item, HistoryJob) for item in read) == JOBS - 1


def test_times_that_run_backwards_are_skipped_and_counted(tmp_path):
    text = gzip.decompress((DATA / "history.gz").read_bytes()).decode()
    first = text.index("JobStartDate = ")
    end = text.index("\n", first)
    started = int(text[first + len("JobStartDate = "):end])
    path = tmp_path / "history"
    path.write_text(text[:first] + f"JobStartDate = {started - 3600}" + text[end:])
    scenario = build_scenario(None, str(path), options={"machines": str(SLOTS)})
    (reason, number), = [(reason, number) for reason, number in scenario.skipped.items()
                         if "backwards" in reason]
    assert number == 1 and "attribute JobStartDate" in reason and "before QDate" in reason


def test_a_corrupted_json_ad_is_skipped_and_reading_goes_on(tmp_path):
    text = gzip.decompress((DATA / "history.json.gz").read_bytes()).decode()
    broken = text.replace('"QDate":', '"QDate" ', 1)
    path = tmp_path / "history.json"
    path.write_text(broken)
    read = list(read_history([path]))
    bad = [item for item in read if isinstance(item, SkippedAd)]
    assert len(bad) == 1 and "corrupted JSON ad" in bad[0].reason
    assert sum(isinstance(item, HistoryJob) for item in read) == JOBS - 1


@pytest.mark.parametrize(("content", "message"), [
    (b"", "empty: no job ads in it"),
    (b"\x00\x01\x02binary\xff" * 50, "not HTCondor job history"),
    (b"Name = \"slot1@vm\"\nMFlops = 3\n", "not HTCondor job history"),
])
def test_a_file_that_is_not_history_is_an_error(tmp_path, content, message):
    path = tmp_path / "history"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        list(read_history([path]))


# ------------------------------------------------------------------------ the rules
def test_each_task_replayed_on_its_own_slot_runs_as_long_as_it_did():
    scenario = build_scenario(None, str(DATA / "history.gz"), options={"machines": str(SLOTS)})
    history = jobs_of(DATA / "history.gz")
    nodes = {node.name: node for node in scenario.nodes}
    tasks = list(scenario.tasks)
    assert len(tasks) == JOBS - 2
    for task in tasks:
        job = history[task.id]
        assert task.work / run_rate(task, nodes[job.slot]) == pytest.approx(job.last_run)
    assert tasks[0].submit_time == 0.0
    assert [task.submit_time for task in tasks] == sorted(task.submit_time for task in tasks)


def test_what_the_rules_leave_out_and_note():
    scenario = build_scenario(None, str(DATA / "history.gz"), options={"machines": str(SLOTS)})
    assert scenario.skipped == {"job removed before it ever ran": 2}
    (note, number), = scenario.notes.items()
    assert number == GUEST_JOBS and "guest@gridfair.test" in note
    dropped = build_scenario(None, str(DATA / "history.gz"),
                             options={"machines": str(SLOTS), "unmapped": "drop"})
    assert dropped.skipped[
        "job of an identity charged to no owner (--unmapped drop)"] == GUEST_JOBS
    assert len(dropped.tasks) == JOBS - 2 - GUEST_JOBS


def test_a_slot_missing_from_the_snapshot(tmp_path):
    """Jobs of a slot the snapshot lacks take their power from MachineAttrMFlops0 (noted);
    without it they are left out, counted with the slot's name."""
    ads = SLOTS.read_text().strip().split("\n\n")
    (tmp_path / "slots").write_text("\n\n".join(ad for ad in ads
                                                if 'Name = "slot4@vm"' not in ad) + "\n")
    on_slot4 = sum(job.slot == "slot4@vm" for job in jobs_of(DATA / "history.gz").values()
                   if job.last_start is not None)
    scenario = build_scenario(None, str(DATA / "history.gz"),
                              options={"machines": str(tmp_path / "slots")})
    assert scenario.notes[next(note for note in scenario.notes if "MachineAttr" in note)] == \
        on_slot4
    text = gzip.decompress((DATA / "history.gz").read_bytes()).decode()
    (tmp_path / "history").write_text("".join(
        line for line in text.splitlines(keepends=True)
        if not line.startswith("MachineAttrMFlops0")))
    blind = build_scenario(None, str(tmp_path / "history"),
                           options={"machines": str(tmp_path / "slots")})
    (reason, number), = [(reason, number) for reason, number in blind.skipped.items()
                         if "not in the machines snapshot" in reason]
    assert number == on_slot4 and f"slot4@vm ({on_slot4})" in reason


def test_as_it_happened_is_the_history_own_figures():
    """The recorded run's waits are JobStartDate - QDate, read here from the JSON output
    with `json` alone; its preemptions are the extra starts."""
    records = json.loads(gzip.decompress((DATA / "history.json.gz").read_bytes()))
    waits: dict[str, list[float]] = {}
    for ad in records:
        if ad.get("JobStartDate"):
            user = ad["AcctGroupUser"]
            waits.setdefault(user, []).append(ad["JobStartDate"] - ad["QDate"])
    scenario = build_scenario(None, str(DATA / "history.gz"), options={"machines": str(SLOTS)})
    tasks, result, _ = scenario.recorded()
    by_user: dict[str, list[float]] = {}
    for task in tasks:
        by_user.setdefault(task.user.partition("@")[0], []).append(
            task.first_start - task.submit_time)
    assert {user: statistics.fmean(values) for user, values in by_user.items()} == \
        pytest.approx({user: statistics.fmean(values) for user, values in waits.items()})
    assert result.vacates == 1  # 8.1, vacated once
    assert sum(task.state != 2 for task in tasks) == 1  # 2.0, removed while it ran (killed)


# ------------------------------------------------------------------------ commands
def test_simulate_recognises_the_history_and_prints_the_same_json_twice(tmp_path):
    path = unzipped("history.gz", tmp_path)
    command = ["simulate", "--workload", str(path), "--machines", str(SLOTS), "--policy",
               "condor", "--interval", "2", "--claim-worklife", "1200", "--format", "json"]
    first = CliRunner().invoke(cli, command)
    second = CliRunner().invoke(cli, command)
    assert first.exit_code == 0, first.output
    assert first.stdout == second.stdout
    report = json.loads(first.stdout)
    assert report["summary"]["tasks"] == JOBS - 2
    assert "skipped 2: job removed before it ever ran" in first.stderr


@pytest.mark.parametrize(("content", "message"), [
    (b"", "empty: no job ads in it"),
    (b"\x00\x01binary\xff" * 40, "cannot tell the workload format"),
])
def test_simulate_refuses_bad_history_in_one_line(tmp_path, content, message):
    path = tmp_path / "history"
    path.write_bytes(content)
    fmt = ["--workload-format", "condor-history"] if not content else []
    result = CliRunner().invoke(cli, ["simulate", "--workload", str(path), "--machines",
                                      str(SLOTS), "--policy", "hosep", *fmt])
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_simulate_with_every_job_unusable_names_why(tmp_path):
    text = gzip.decompress((DATA / "history.gz").read_bytes()).decode()
    (tmp_path / "history").write_text(text.replace("LastRemoteHost = ", "Gone = ").replace(
        "MachineAttrMFlops0", "Gone2"))
    result = CliRunner().invoke(cli, ["simulate", "--workload", str(tmp_path / "history"),
                                      "--machines", str(SLOTS), "--policy", "hosep"])
    assert result.exit_code == 2
    assert "no job of the history can be replayed (left out:" in result.stderr


def test_compare_puts_the_history_as_it_happened_beside_the_policies(tmp_path):
    path = unzipped("history.gz", tmp_path)
    result = CliRunner().invoke(cli, [
        "compare", "--workload", str(path), "--machines", str(SLOTS), "--policies",
        "condor,hosep", "--param", "interval=2", "--format", "json",
        "--plot", str(tmp_path / "compare.png")])
    assert result.exit_code == 0, result.output
    block, = json.loads(result.stdout)["results"]
    policies = [row["policy"] for row in block["summary"]]
    assert policies == ["as-it-happened", "condor", "hosep"]
    errors = {row["policy"]: row["share_error"]["mean"] for row in block["summary"]}
    # HOSEP serves owners first: far less of their share owed while they wait.
    assert errors["hosep"] < errors["as-it-happened"] / 2
    assert (tmp_path / "compare.png").stat().st_size > 10_000


def test_history_statuses_other_than_completed_or_removed_are_left_out(tmp_path):
    text = gzip.decompress((DATA / "history.gz").read_bytes()).decode()
    (tmp_path / "history").write_text(text.replace("JobStatus = 4", "JobStatus = 5", 1))
    scenario = build_scenario(None, str(tmp_path / "history"),
                              options={"machines": str(SLOTS)})
    assert scenario.skipped["job that left the queue held (not completed or removed)"] == 1
    assert JobStatus.HELD.name.lower() == "held"


def test_ads_written_otherwise_are_read_the_same(tmp_path):
    """HTCondor's own tests write history ads as `Name=value` lines and epoch records with a
    typed banner: the first are read by classad2 as any ad is, the second left out."""
    text = gzip.decompress((DATA / "history.gz").read_bytes()).decode()
    first_banner = text.index("\n***") + 1
    ad, banner = text[:first_banner], text[first_banner:text.index("\n", first_banner) + 1]
    squeezed = "".join(line.replace(" = ", "=", 1) for line in ad.splitlines(keepends=True))
    epoch = ad + banner.replace("*** ", "*** EPOCH ", 1)
    (tmp_path / "history").write_text(squeezed + banner + epoch)
    read = list(read_history([tmp_path / "history"]))
    expected = next(iter(jobs_of(DATA / "history.gz").values()))
    assert _figures(read[0]) == _figures(expected)
    assert isinstance(read[1], SkippedAd) and "EPOCH record" in read[1].reason


def test_the_json_slot_dump_makes_the_same_grid():
    from_long = build_scenario(None, str(DATA / "history.gz"), options={"machines": str(SLOTS)})
    from_json = build_scenario(None, str(DATA / "history.gz"),
                               options={"machines": str(DATA / "slots.json")})
    assert [(node.name, node.owner, node.power, node.cpus, node.memory)
            for node in from_long.nodes] == [
        (node.name, node.owner, node.power, node.cpus, node.memory) for node in from_json.nodes]


def test_gpu_jobs_wait_for_a_slot_with_gpus_free(tmp_path):
    """Two jobs ask for a GPU; only slot4 has one (and two cpus, room for both by cpus): they
    run there one after the other. A job asking for two is left out (no slot has two)."""
    text = gzip.decompress((DATA / "history.gz").read_bytes()).decode()
    ads = text.split("\n***")
    gpu_ids = []
    for index in (3, 4, 5):
        cluster = ads[index].split("\nClusterId = ")[1].split("\n")[0]
        proc = ads[index].split("\nProcId = ")[1].split("\n")[0]
        gpu_ids.append(f"{cluster}.{proc}")
        ads[index] = ads[index].replace("\nRequestCpus = 1\n", "\nRequestCpus = 1\n"
                                        f"RequestGpus = {2 if index == 5 else 1}\n", 1)
    (tmp_path / "history").write_text("\n***".join(ads))
    slots = [ad.replace("\nCpus = 1\n", "\nCpus = 2\nGPUs = 1\n") if 'Name = "slot4@vm"' in ad
             else ad for ad in SLOTS.read_text().split("\n\n")]
    (tmp_path / "slots").write_text("\n\n".join(slots))
    scenario = build_scenario(None, str(tmp_path / "history"),
                              options={"machines": str(tmp_path / "slots")})
    assert scenario.skipped[
        "job asking for more cpus, memory or GPUs than any slot has"] == 1
    from gridfair.sim.records import RunRecorder
    from gridfair.sim.scenario import simulation_of

    recorder = RunRecorder(snapshots=False)
    simulation_of(scenario, policy="condor", recorder=recorder,
                  engine=EngineOptions(interval=2.0)).run()
    nodes = [node.name for node in scenario.nodes]
    gpu_runs = sorted((run.start, run.end, nodes[run.node]) for run in recorder.runs
                      if run.task in gpu_ids[:2])
    assert [slot for _, _, slot in gpu_runs] == ["slot4@vm", "slot4@vm"]
    assert gpu_runs[0][1] <= gpu_runs[1][0]  # one GPU: one job at a time
    assert {node.name: node.cpus for node in scenario.nodes}["slot4@vm"] == 2


def test_jobs_are_charged_as_the_daemon_charges_them(tmp_path):
    """By default to the authenticated user (User1@gridfair.test is User1); with trusted
    accounting groups to the group the jobs name (`owners`), here mapped to User2 by a map
    file; a user of another UID domain than the one given owns nothing."""
    history = str(DATA / "history.gz")
    (tmp_path / "map").write_text("owners User2\n")
    trusted = build_scenario(None, history, options={
        "machines": str(SLOTS), "trust_accounting_groups": True,
        "submitter_map": str(tmp_path / "map")})
    assert {task.user for task in trusted.tasks} == {"User2"}
    foreign = build_scenario(None, history, options={"machines": str(SLOTS),
                                                     "uid_domain": "elsewhere.example"})
    assert {task.user for task in foreign.tasks} == {
        "User1@gridfair.test", "User2@gridfair.test", "guest@gridfair.test"}


def test_a_partitionable_slot_is_one_node_of_its_whole_size(tmp_path):
    """HTCondor's own dump of a partitionable slot (4 of 8 cpus left) and four dynamic slots:
    one node of 8 cpus and 15,940 MiB, of 8 times the power of a CPU (its MFlops); a job of
    slot1_3 ran on it."""
    from gridfair.classads.views import AdConfig
    from gridfair.sim.pool_grid import SLOTS as INDEX
    from gridfair.sim.pool_grid import read_pool_grid
    from tests.test_classads_views import owned

    path = owned("partionable8core", tmp_path, ["alice"] * 5, [8000, 1000, 1000, 1000, 1000])
    grid, skipped = read_pool_grid(str(path), None, AdConfig())
    assert skipped == []
    assert [(spec.name, spec.owner, spec.mflops, spec.cpus, spec.memory)
            for spec in grid.machines] == [("slot1@ingwe.cs.wisc.edu", "alice", 64000.0, 8.0,
                                            15940.0)]
    assert grid.settings[INDEX].node_of("slot1_3@ingwe.cs.wisc.edu") == \
        "slot1@ingwe.cs.wisc.edu"
    assert grid.settings[INDEX].node_of("slot2@elsewhere") is None
