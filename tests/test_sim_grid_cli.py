"""`gridfair simulate` on iSPD models and real traces: determinism, records checks, the SQLite
results file, skipped lines, and bad input (exit 2, one line, no traceback)."""

from __future__ import annotations

import gzip
import json

import pytest
import sqlite_utils

from gridfair.sim.grid_loader import embedded_grids
from tests.conftest import TEST_DATA

MODEL = str(embedded_grids()["multi-owner-hosep"])
TRACE = str(TEST_DATA / "ispd" / "kth_top4_400.wmsx")
KTH_SLICE = str(TEST_DATA / "swf" / "KTH-SP2-1996-2.1-cln.head300.swf")
GOOGLE_SLICE = str(TEST_DATA / "google" / "rows420001-426000.part-00000-of-00500.csv.gz")


@pytest.fixture
def run(gridfair_cli):
    return lambda *args: gridfair_cli("simulate", *args)


@pytest.mark.parametrize("workload, extra", [
    ("node", ()),
    (TRACE, ("--transfer",)),
    (KTH_SLICE, ("--user-map", "round-robin", "--compress", "20")),
    (GOOGLE_SLICE, ("--interval", "60")),
])
def test_two_runs_give_identical_json(run, workload, extra):
    args = (MODEL, "-w", workload, "-p", "hosep", "--format", "json", "-q", "--seed", "5",
            *extra)
    first, second = run(*args), run(*args)
    assert first.exit_code == 0, first.output
    assert first.stdout == second.stdout
    data = json.loads(first.stdout)
    assert data["summary"]["completed"] == data["summary"]["tasks"]


def test_seed_changes_the_model_load(run):
    outputs = {seed: run(MODEL, "-w", "model", "-p", "osep", "--format", "json", "-q",
                         "--seed", seed).stdout for seed in ("1", "2")}
    assert outputs["1"] != outputs["2"]


@pytest.mark.parametrize("policy", ["osep", "hosep"])
def test_check_finds_nothing_wrong_in_owner_share_runs(run, policy):
    result = run(MODEL, "-w", TRACE, "-p", policy, "--check", "-q")
    assert result.exit_code == 0, result.output
    assert "check:" not in result.output


def test_results_database_appends_runs_users_and_tasks(run, tmp_path):
    db_path = tmp_path / "runs.db"
    for policy in ("osep", "hosep"):
        result = run(MODEL, "-w", TRACE, "-p", policy, "-q", "--db", str(db_path),
                     "--unmapped", "drop")
        assert result.exit_code == 0, result.output
    db = sqlite_utils.Database(db_path)
    runs = list(db["runs"].rows)
    assert [row["policy"] for row in runs] == ["order=osep preempt=osep",
                                               "order=hosep preempt=hosep"]
    assert all(row["completed"] == 400 and row["workload"] == TRACE for row in runs)
    assert json.loads(runs[0]["options"]) == {"unmapped": "drop"}
    assert db["users"].count == 8 and db["tasks"].count == 800
    users = list(db["users"].rows_where("run_id = ?", [runs[1]["id"]]))
    assert {row["user"] for row in users} == {"user1", "user2", "user3", "user4"}
    assert sum(row["completed"] for row in users) == 400
    task = next(db["tasks"].rows_where("run_id = ? and task = ?", [runs[0]["id"], "399"]))
    assert task["user"] == "user2" and task["state"] == "done" and task["finish"] > 0


def test_skipped_lines_are_counted_on_stderr(run, tmp_path):
    trace = tmp_path / "t.wmsx"
    trace.write_text('<system><trace><task id="1" arr="0" cpsz="0" usr="user1"/>'
                     '<task id="2" arr="0" cpsz="5000" usr="user1"/></trace></system>')
    result = run(MODEL, "-w", str(trace), "-p", "hosep", "-q")
    assert result.exit_code == 0
    assert "skipped 1: task with no computation (cpsz <= 0)" in result.stderr
    assert "skipped 1" not in result.stdout


def _bad_google(tmp_path):
    path = tmp_path / "part-00001-of-00500.csv.gz"
    with gzip.open(path, "wt") as out:
        out.write("600000000,,1,0,,0,user,0,0,0.1,0.1,0,0\n600000001,,1,0,,1,user\n")
    return str(path)


@pytest.mark.parametrize("make_args, message", [
    (lambda tmp: (_write(tmp, "m.imsx", '<system version="1">\n<machine id="m" owner="a"'
                                        ' power="-4"><icon_id global="0" local="0"/>'
                                        '</machine></system>'), "-w", "model"),
     "m.imsx:2: <machine> attribute 'power' must be positive"),
    (lambda tmp: (MODEL, "-w", _write(tmp, "t.wmsx", "<system><trace>\n<task id='1' arr='0' "
                                                     "cpsz='4' usr='user1'/>\n<tsk/>")),
     "t.wmsx:3: unknown element <tsk>"),
    (lambda tmp: (MODEL, "-w", _bad_google(tmp)),
     "part-00001-of-00500.csv.gz:2: expected 13 columns of task_events, got 7"),
    (lambda tmp: (MODEL, "-w", _write(tmp, "e.wmsx", "<system><trace/></system>")),
     "the workload has no tasks"),
    (lambda tmp: (MODEL, "-w", KTH_SLICE, "--user-map", "names"),
     "none of the workload's"),
    (lambda tmp: (str(embedded_grids()["hosep-table1"]), "-w",
                  TRACE, "--transfer", "--user-map", "round-robin"),
     "transfer delays need a grid with links"),
    (lambda tmp: (MODEL, "-w", "cluster"), "workload 'cluster' is neither"),
])
def test_bad_input_exits_2_with_one_line(run, tmp_path, make_args, message):
    result = run(*make_args(tmp_path), "-p", "hosep", "-q")
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output
    assert len(result.stderr.strip().splitlines()) == 1


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)
