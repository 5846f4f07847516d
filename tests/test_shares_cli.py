"""`gridfair shares` through click's CliRunner: table, JSON, bad files, skipped ads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from gridfair.cli import cli
from gridfair.cli.shares import shares
from tests.test_classads_views import REAL, with_lines

NOW = "1417808400"
# Importing the module registers the command; only `shares` is loaded, not every subcommand.
assert cli.get_command(None, "shares") is shares


def run(*args: str):
    return CliRunner().invoke(cli, ["shares", *args])


@pytest.fixture
def machines(tmp_path: Path) -> Path:
    # Slots 1 and 2 run jobs of bt@cs.wisc.edu (not in the jobs file); 3 and 4 are free.
    return with_lines("basic4slot", tmp_path, 'GridOwner = "alice"\nMFlops = 1000',
                      'GridOwner = "bob"\nMFlops = 2000', 'GridOwner = "alice"\nMFlops = 3000',
                      'GridOwner = "carol"\nMFlops = 4000')


def test_table(machines: Path) -> None:
    result = run("--machines", str(machines), "--jobs", str(REAL / "test.old.ad"),
                 "--now", NOW)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    # Labelled as the daemon's store labels it (`shares --db` prints the same).
    assert lines[0] == "Shares at 2014-12-05 19:40:00 UTC (order:hosep preempt:hosep)"
    assert lines[1].split() == ["User", "Name", "Provided", "Allocated", "Power", "Nodes",
                                "Nodes", "Running", "Idle", "In", "Flight"]
    assert set(lines[3]) == {"-", " "}
    rows = [line.split() for line in lines[4:9]]
    # Providers by PowerDiff (all -1, ties by name), then those who provide nothing.
    assert [row[0] for row in rows] == ["alice", "bob", "carol",
                                        "bbockelm@users.opensciencegrid.org", "bt@cs.wisc.edu"]
    assert rows[0] == ["alice", "4000", "0", "-1.000", "2", "0", "0", "0", "0"]
    assert rows[4] == ["bt@cs.wisc.edu", "0", "3000", "inf", "0", "2", "2", "0", "0"]
    assert lines[10].split() == ["Number", "of", "users:", "5", "10000", "3000", "-", "4", "2",
                                 "2", "1", "0"]
    assert "Decisions now (1, none carried out):" in lines
    assert any(line.startswith("  allocate 15.0 (bbockelm@users.opensciencegrid.org) on "
                               "slot4@ingwe.cs.wisc.edu: free machine to") for line in lines)


def test_json(machines: Path) -> None:
    result = run("--machines", str(machines), "--jobs", str(REAL / "test.old.ad"),
                 "--now", NOW, "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert set(report) >= {"users", "totals", "decisions", "skipped"}
    assert report["users"][0] == {
        "user": "alice", "provided_mflops": 4000.0, "allocated_mflops": 0.0,
        "power_diff": -1.0, "nodes_provided": 2, "nodes_used": 0, "running": 0, "idle": 0,
        "in_flight": 0, "in_flight_mflops": 0.0}
    assert report["users"][-1]["power_diff"] is None  # +inf has no JSON form
    assert report["totals"]["users"] == 5
    assert [(d["kind"], d["job"], d["machine"], d["policy"]) for d in report["decisions"]] == [
        ("allocate", "15.0", "slot4@ingwe.cs.wisc.edu", "hosep")]
    assert report["skipped"] == []


def test_skipped_ads_are_listed_and_the_rest_processed(tmp_path: Path) -> None:
    machines = with_lines("basic4slot", tmp_path, 'GridOwner = "alice"\nMFlops = 1000', "",
                          'GridOwner = "bob"\nMFlops = -3', 'GridOwner = "carol"\nMFlops = 4000')
    result = run("--machines", str(machines), "--jobs", str(REAL / "test.old.ad"),
                 "--now", NOW)
    assert result.exit_code == 0, result.output
    assert "Skipped ads (2):" in result.output
    assert (f"  {machines} ad #2 slot2@ingwe.cs.wisc.edu: line 160, attribute GridOwner: "
            "missing") in result.output
    # The attribute's own line (its ad starts on line 317).
    assert "ad #3 slot3@ingwe.cs.wisc.edu: line 458, attribute MFlops: must be positive, is -3" \
        in result.output
    report = json.loads(run("--machines", str(machines), "--jobs", str(REAL / "test.old.ad"),
                            "--now", NOW, "--format", "json").output)
    assert [(s["index"], s["name"]) for s in report["skipped"]] == [
        (2, "slot2@ingwe.cs.wisc.edu"), (3, "slot3@ingwe.cs.wisc.edu")]
    assert [row["user"] for row in report["users"]][:2] == ["alice", "carol"]


def test_owner_and_power_attribute_options(tmp_path: Path) -> None:
    machines = with_lines("small1slot", tmp_path, 'Provider = "eve"\nSpeed = 42')
    result = run("--machines", str(machines), "--jobs", str(REAL / "test.old.ad"), "--now", NOW,
                 "--owner-attr", "Provider", "--power-attr", "Speed", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["users"][0]["provided_mflops"] == 42.0


@pytest.mark.parametrize(
    ("jobs_text", "expected"),
    [
        (None, "no such file or directory"),
        ("\n", "empty: no ads in it"),  # what a failed condor_q writes
        ('[{"ClusterId": 1,', "not valid JSON"),
        (b"\x89PNG\r\n\x1a\n\x00", "not text (a NUL byte at character 7)"),  # binary
        (b"A = 1\n\x00", "not text (a NUL byte"),
    ],
)
def test_bad_files_exit_2_with_one_line_and_no_traceback(
    machines: Path, tmp_path: Path, jobs_text: str | bytes | None, expected: str
) -> None:
    jobs = tmp_path / "jobs"
    if isinstance(jobs_text, bytes):
        jobs.write_bytes(jobs_text)
    elif jobs_text is not None:
        jobs.write_text(jobs_text)
    result = run("--machines", str(machines), "--jobs", str(jobs), "--now", NOW)
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert result.output.strip().splitlines() == [
        line for line in result.output.strip().splitlines() if line.startswith("gridfair: error")
    ]
    assert f"gridfair: error: {jobs}" in result.output
    assert expected in result.output


def test_both_files_are_needed(machines: Path) -> None:
    result = run("--machines", str(machines))
    assert result.exit_code == 2
    assert "give --machines and --jobs (files or directories), --machines DIRECTORY" \
        in result.output


def test_unknown_policy_stage_exits_2(machines: Path) -> None:
    result = run("--machines", str(machines), "--jobs", str(REAL / "test.old.ad"),
                 "--order", "nosuch")
    assert result.exit_code == 2
    assert "unknown order policy 'nosuch'" in result.output


def test_machines_without_a_usable_ad_exit_2_naming_the_file(tmp_path: Path) -> None:
    # Real slots without GridOwner: every ad is skipped, so there is no pool to show.
    bare = with_lines("basic4slot", tmp_path, "MFlops = 1000", "MFlops = 1000",
                      "MFlops = 1000", "MFlops = 1000")
    result = run("--machines", str(bare), "--jobs", str(REAL / "test.old.ad"), "--now", NOW)
    assert result.exit_code == 2
    assert result.output == (f"gridfair: error: no usable machine ad in {bare} (4 skipped; "
                             f"the first: {bare} ad #1 slot1@ingwe.cs.wisc.edu: line 1, "
                             "attribute GridOwner: missing)\n")


def test_submitters_owning_no_slot_are_listed_as_unmapped(machines: Path) -> None:
    result = run("--machines", str(machines), "--jobs", str(REAL / "test.old.ad"),
                 "--now", NOW)
    unmapped = [line for line in result.output.splitlines()
                if line.startswith("Users who own no slot")]
    assert len(unmapped) == 1 and "bt@cs.wisc.edu" in unmapped[0]
    assert "alice" not in unmapped[0]


POOL = Path(__file__).parent / "data" / "daemon" / "pool"


def test_a_jobs_file_whose_only_ad_is_broken_is_an_error_as_for_machines(
        machines: Path, tmp_path: Path) -> None:
    # The same fault in either file is the same error: exit 2, one line naming the ad.
    jobs = with_lines("test.old.ad", tmp_path, "JobStatus = 9")
    result = run("--machines", str(machines), "--jobs", str(jobs), "--now", NOW)
    assert result.exit_code == 2
    assert result.output == (f"gridfair: error: no usable job ad in {jobs} (1 skipped; the "
                             f"first: {jobs} ad #1 15.0: line 97, attribute JobStatus: unknown "
                             "job status 9)\n")


def test_a_jobs_file_of_zero_bytes_is_an_empty_queue(machines: Path, tmp_path: Path) -> None:
    # What `condor_q -long` writes for an empty queue (HTCondor 25, measured).
    jobs = tmp_path / "jobs.queue"
    jobs.write_bytes(b"")
    report = json.loads(run("--machines", str(machines), "--jobs", str(jobs), "--now", NOW,
                            "--format", "json").output)
    assert report["totals"]["idle"] == 0 and report["skipped"] == []


def test_shares_reads_files_and_directories_as_the_files_backend_does() -> None:
    from gridfair.daemon.backends.files import FilesBackend

    by_directory = run("--machines", str(POOL), "--now", NOW, "--format", "json")
    by_files = run("--machines", str(POOL / "basic4slot.status"),
                   "--machines", str(POOL / "partitionable.status"),
                   "--jobs", str(POOL / "jobs.queue"), "--now", NOW, "--format", "json")
    both = run("--machines", str(POOL), "--jobs", str(POOL), "--now", NOW, "--format", "json")
    assert by_directory.exit_code == by_files.exit_code == both.exit_code == 0
    assert json.loads(by_directory.output) == json.loads(by_files.output) \
        == json.loads(both.output)
    report = json.loads(by_directory.output)
    # Both slot dumps are read: 4 static slots and a partitionable slot with 4 dynamic ones.
    assert (report["totals"]["provided_mflops"], report["totals"]["nodes_provided"]) == (
        967080, 5)
    snapshot = FilesBackend(POOL, "unused.jsonl").read_snapshot()
    assert report["totals"]["running"] + report["totals"]["idle"] == len(snapshot.jobs)


def test_two_slot_ads_run_together_are_one_ad_and_a_warning(tmp_path: Path) -> None:
    # The case: 834,830 MFlops and a node fewer (then 8 of 9 slots; now 4 of 5 nodes, the
    # partitionable slot one node) shown instead of 967,080, silently.
    shutil.copytree(POOL, tmp_path / "pool")
    status = tmp_path / "pool" / "basic4slot.status"
    status.write_text(status.read_text().replace("\n\n", "\n", 1))
    result = run("--machines", str(tmp_path / "pool"), "--now", NOW)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[lines.index("Warnings (1):") + 1].startswith(
        f"  {status} ad #1 slot2@ingwe.cs.wisc.edu: line 159, attribute Activity: also set on "
        "line 1, and ")
    assert "the last value is used, as HTCondor's own parser does" in result.output
    report = json.loads(run("--machines", str(tmp_path / "pool"), "--now", NOW,
                            "--format", "json").output)
    assert (report["totals"]["provided_mflops"], report["totals"]["nodes_provided"]) == (
        834830, 4)
    assert [(w["source"], w["index"]) for w in report["warnings"]] == [(str(status), 1)]


def test_a_job_too_big_for_every_machine_is_a_warning(tmp_path: Path) -> None:
    """RequestCpus = 1e9: the job waits for good; shares says so instead of leaving it out."""
    pool = Path(__file__).resolve().parent / "data" / "daemon" / "pool"
    for dump in pool.iterdir():
        text = dump.read_text()
        if dump.suffix == ".queue":  # the queue's first job asks for a billion cpus
            text = text.replace("RequestCpus = 1\n", "RequestCpus = 1e9\n", 1)
        (tmp_path / dump.name).write_text(text)
    result = run("--machines", str(tmp_path), "--format", "json")
    assert result.exit_code == 0, result.output
    [warning] = [item for item in json.loads(result.stdout)["warnings"]
                 if "too big" in item["reason"]]
    assert warning["name"] == "15.0"
    assert "can never run here: asks for 1e+09 cpus; the largest machine has 8" in (
        warning["reason"])
    assert "job 15.0: too big for every machine" in run("--machines", str(tmp_path)).output


def test_the_table_counts_decisions_as_the_cycle_log_does() -> None:
    """A decline (why a preemption was not made) is counted apart in both, never as one of
    the decisions."""
    from gridfair.cli.shares import render_shares
    from gridfair.core.shares import SharesReport, share_totals
    from gridfair.daemon.cycle import CycleReport

    def decision(kind: str) -> dict:
        return {"kind": kind, "job": "1.0", "user": "u", "machine": "m", "reason": "why"}

    report = SharesReport(time=0.0, policy="hosep", users=[], totals=share_totals([]),
                          decisions=[decision("allocate"), decision("vacate"),
                                     decision("decline")])
    assert "Decisions now (2, 1 preemption(s) declined, none carried out):" in (
        render_shares(report))
    line = CycleReport(1, "ok", 0.1, {"decisions": 2, "declined": 1}).line()
    assert "2 decisions, 1 preemption(s) declined, " in line


def test_mflops_are_printed_whole_without_separators_everywhere() -> None:
    """One way for one kind of figure: 867040 in the grid's header as in every table."""
    from gridfair.cli.output import FIGURE, format_cell

    result = CliRunner().invoke(cli, ["grid", "show", "hosep-table1"])
    assert "867040 MFlops" in result.output and "867,040" not in result.output
    assert format_cell(241800.0, FIGURE) == "241800"  # not 2.418e+05
    assert format_cell(0.123456, FIGURE) == "0.1235"


def test_a_collector_that_does_not_answer_is_named(tmp_path: Path) -> None:
    """`shares --pool` (and the daemon, through the same backend) says which collector failed:
    the one given, or where HTCondor's configuration points when none is."""
    result = run("--pool", "127.0.0.1:9", "--uid-domain", "example.org")  # nothing listens
    assert result.exit_code == 2
    assert "collector 127.0.0.1:9: query failed" in result.output


def test_with_no_source_the_daemon_s_store_is_read(tmp_path: Path, monkeypatch) -> None:
    """As `explain`, `history` and `actions` do: ./gridfair.db, the installed config's store,
    HTCondor's GRIDFAIR_STORE; none there, a usage error naming every source."""
    from gridfair.daemon.config import validate
    from gridfair.daemon.service import Daemon

    monkeypatch.chdir(tmp_path)
    empty = run()
    assert empty.exit_code == 2 and "--pool HOST, --config FILE or --db FILE" in empty.output
    daemon = Daemon(validate({"daemon": {"store": "gridfair.db"}, "backend": {"kind": "sim"}},
                             base=tmp_path))
    daemon.tick()
    daemon.close()
    found = run()
    assert found.exit_code == 0, found.output
    assert found.output.startswith("Shares at ") and "Number of users:" in found.output


def test_a_live_pool_is_judged_by_the_daemon_s_configured_policy(machines: Path,
                                                                 monkeypatch) -> None:
    """`shares --pool` shows what the installed daemon would do (here `reclaim`), and says so;
    --policy still picks another."""
    import gridfair.cli.shares as module
    from gridfair.daemon.backends.files import AdDumps

    snapshot = AdDumps([str(machines)], [str(REAL / "test.old.ad")],
                       module.AdConfig.with_attributes(None, None), None).read()
    monkeypatch.setattr(module, "_live_snapshot", lambda *args: snapshot)
    monkeypatch.setattr(module, "configured_policy", lambda: (
        {"name": "reclaim", "order": "", "preempt": "", "admit": "", "options": {}},
        "HTCondor's GRIDFAIR_POLICY_NAME"))
    lines = run("--pool", "cm.example.org").output.splitlines()
    assert lines[0].endswith("(order:hosep preempt:reclaim)")
    assert lines[1] == ("Policy: the daemon's, from HTCondor's GRIDFAIR_POLICY_NAME (--policy to "
                        "try another)")
    chosen = run("--pool", "cm.example.org", "--policy", "drf").output.splitlines()
    assert chosen[0].endswith("(order:drf)") and not chosen[1].startswith("Policy:")
