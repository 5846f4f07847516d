"""Sweep files, the results store, and `gridfair sweep` run in-process: storing, resuming,
failed runs, interrupted sweeps and bad input."""

from __future__ import annotations

import sqlite3

import pytest
from click.testing import CliRunner

import gridfair.cli.sweep  # noqa: F401 - registers the command
import gridfair.experiments.runner as runner
from gridfair.cli import cli
from gridfair.errors import InputError
from gridfair.experiments.runs import RunSpec, execute
from gridfair.experiments.spec import load_sweep, parse_sweep
from gridfair.experiments.store import SCHEMA_VERSION, ResultsStore
from gridfair.sim.grid_loader import embedded_grids
from tests.conftest import ROOT

GRID = embedded_grids()["hosep-table1"].as_posix()


def write_spec(tmp_path, body: str, name: str = "spec.toml"):
    path = tmp_path / name
    path.write_text(f'[parameters]\ngrid = "{GRID}"\n' + body, encoding="utf-8")
    return path


def sweep(*args: str):
    return CliRunner().invoke(cli, ["sweep", *args, "-q"])


def test_product_of_parameters_and_matrix_entries():
    plan = parse_sweep({
        "sweep": {"name": "t"},
        "parameters": {"workload": "low", "seed": {"from": 1, "to": 3},
                       "capacity_ratio": {"from": 0.5, "to": 1.0, "step": 0.1}},
        "matrix": [{"policy": "osep"},
                   {"policy": "hosep", "checkpointing": [False, True]},
                   {"policy": "osep", "seed": 2}],  # already in the first entry: run once
    })
    assert plan.name == "t"
    ratios = sorted({spec.get("capacity_ratio") for spec in plan.runs})
    assert ratios == [0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    assert len(plan.runs) == 3 * 6 + 3 * 6 * 2
    assert len({spec.key for spec in plan.runs}) == len(plan.runs)
    assert plan.runs[0].params == {"capacity_ratio": 0.5, "policy": "osep", "workload": "low"}


def test_keys_are_stable_and_ignore_defaults_and_number_spelling():
    base = {"workload": "low", "policy": "hosep", "grid": "g.toml"}
    key = RunSpec.make(base).key
    assert RunSpec.make({**base, "seed": 1, "checkpointing": False}).key == key
    assert RunSpec.make({**base, "vacate_delay": 0}).key == key
    assert RunSpec.make({**base, "delta": 1}).key == RunSpec.make({**base, "delta": 1.0}).key
    assert RunSpec.make({**base, "seed": 2}).key != key
    # The key is part of every results DB: changing how it is computed orphans them all.
    # sha256 of {"grid":"g.toml","policy":"hosep","workload":"low"}, first 20 hex digits.
    assert key == "87893b30dc9a86de76ab"


@pytest.mark.parametrize("document, message", [
    ({"parameters": {"workload": "low", "policy": "osep", "colour": 1}}, "unknown key(s) colour"),
    ({"parametres": {}}, "unknown key(s) parametres"),
    ({"sweep": {"nmae": "x"}}, "unknown key(s) nmae"),
    ({"parameters": {"workload": "low", "policy": []}}, "empty list"),
    ({"parameters": {"workload": "low", "policy": "osep", "seed": {"from": 5, "to": 1}}},
     "empty range"),
    ({"parameters": {"workload": "low", "policy": "osep", "seed": {"from": 1}}}, "a range is"),
    ({"parameters": {"workload": "low", "policy": "osep", "delta": {"from": 0, "to": 1,
                                                                    "step": 0}}},
     "step must be positive"),
    ({"parameters": {"workload": "low", "policy": "osep", "seed": "1"}}, "must be int"),
    ({"parameters": {"workload": "low", "policy": "nosuch"}}, "must be one of"),
    ({"parameters": {"workload": "low"}}, "needs the parameter 'policy'"),
    ({"parameters": {"workload": "low", "policy": "osep"}, "matrix": []}, "non-empty array"),
])
def test_bad_sweep_files_are_rejected_naming_the_problem(document, message):
    with pytest.raises(InputError) as error:
        parse_sweep(document, source="spec.toml")
    assert message in str(error.value)


def test_bad_sweep_file_exits_2(tmp_path):
    spec = write_spec(tmp_path, 'workload = "low"\npolicy = []\n')
    result = sweep(str(spec), "--in-process", "--db", str(tmp_path / "r.db"))
    assert result.exit_code == 2
    assert "empty list" in result.output and "spec.toml" in result.output
    assert sweep(str(tmp_path / "missing.toml"), "--in-process").exit_code == 2


def test_relative_paths_are_relative_to_the_sweep_file(tmp_path):
    (tmp_path / "grids").mkdir()
    (tmp_path / "grids" / "g.toml").write_text(embedded_grids()["hosep-table1"]
                                              .read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "sweeps").mkdir()
    path = tmp_path / "sweeps" / "s.toml"
    path.write_text('[parameters]\ngrid = "../grids/g.toml"\nworkload = "low"\n'
                    'policy = "osep"\n', encoding="utf-8")
    [spec] = load_sweep(path).runs
    assert spec.params["grid"] == "../grids/g.toml"
    assert execute(spec).ok


def test_sweep_stores_every_run_in_order_and_resume_skips_finished_runs(tmp_path):
    spec = write_spec(tmp_path, 'workload = ["low", "high"]\npolicy = ["osep", "hosep"]\n'
                                'seed = [1, 2]\n')
    db = str(tmp_path / "r.db")
    first = sweep(str(spec), "--in-process", "--db", db)
    assert first.exit_code == 0, first.output
    assert "8 runs, 8 done now, 0 already done, 0 failed" in first.output
    with ResultsStore(db) as store:
        results = store.results()
    assert [(s.get("workload"), s.get("policy"), s.get("seed")) for s, _ in results] == [
        (w, p, seed) for w in ("low", "high") for p in ("osep", "hosep") for seed in (1, 2)]
    expected = execute(RunSpec.make(
        {"grid": GRID, "workload": "high", "policy": "osep", "seed": 2}))
    assert results[5][1].users == expected.users
    assert results[5][1].summary == expected.summary
    assert [user["user"] for user in results[0][1].users] == ["User1", "User2", "User3",
                                                              "User4"]

    again = sweep(str(spec), "--in-process", "--db", db)
    assert again.exit_code == 2 and "--resume" in again.output
    resumed = sweep(str(spec), "--in-process", "--db", db, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "8 runs, 0 done now, 8 already done" in resumed.output


def test_a_failed_run_is_recorded_and_the_others_go_on(tmp_path):
    spec = write_spec(tmp_path, 'workload = ["low", "nosuch", "high"]\npolicy = "hosep"\n')
    db = str(tmp_path / "r.db")
    result = CliRunner().invoke(cli, ["sweep", str(spec), "--in-process", "--db", db])
    assert result.exit_code == 1
    assert "3 runs, 2 done now, 0 already done, 1 failed" in result.output
    assert "workload=nosuch" in result.output
    # Off a terminal, a line per run as it finishes (a sweep was silent until its end).
    progress = [line for line in result.stderr.splitlines() if line.startswith("gridfair sweep")]
    assert [line.rpartition(",")[0] for line in progress] == [
        "gridfair sweep: run 1/3 done (policy=hosep workload=low)",
        "gridfair sweep: run 2/3 FAILED (policy=hosep workload=nosuch)",
        "gridfair sweep: run 3/3 done (policy=hosep workload=high)"]
    with ResultsStore(db) as store:
        [(failed, error)] = store.failures()
        assert failed.get("workload") == "nosuch"
        assert "neither a workload of the grid" in error
        assert store.count("ok") == 2


def test_interrupted_sweep_resumes_running_each_missing_run_once(tmp_path, monkeypatch):
    spec = write_spec(tmp_path, 'workload = ["low", "medium"]\npolicy = ["osep", "hosep"]\n'
                                'seed = [1, 2, 3]\n')
    db = str(tmp_path / "r.db")
    calls: list[str] = []

    def interrupted_at_the_fifth(run):
        if len(calls) == 4:
            raise KeyboardInterrupt
        calls.append(run.key)
        return execute(run)

    monkeypatch.setattr(runner, "execute", interrupted_at_the_fifth)
    assert sweep(str(spec), "--in-process", "--db", db).exit_code != 0
    with ResultsStore(db) as store:
        before = {spec.key: outcome.wall_seconds for spec, outcome in store.results()}
    assert set(before) == set(calls)

    resumed_calls: list[str] = []

    def counted(run):
        resumed_calls.append(run.key)
        return execute(run)

    monkeypatch.setattr(runner, "execute", counted)
    result = sweep(str(spec), "--in-process", "--db", db, "--resume")
    assert result.exit_code == 0, result.output
    assert "12 runs, 8 done now, 4 already done" in result.output
    assert len(resumed_calls) == 8 and not set(resumed_calls) & set(calls)
    with ResultsStore(db) as store:
        after = {spec.key: outcome.wall_seconds for spec, outcome in store.results()}
        assert store.count("ok") == 12
    # The runs finished before the interrupt were left as they were.
    assert {key: after[key] for key in before} == before


def test_a_run_and_its_users_are_stored_together_or_not_at_all(tmp_path, monkeypatch):
    spec = RunSpec.make({"grid": GRID, "workload": "low", "policy": "hosep"})
    outcome = execute(spec)
    with ResultsStore(tmp_path / "r.db") as store:
        def crash(*args, **kwargs):
            raise OSError("disk gone")

        monkeypatch.setattr(type(store.db["users"]), "insert_all", crash)
        with pytest.raises(OSError):
            store.record(0, spec, outcome)
        monkeypatch.undo()
        assert store.count() == 0
        store.record(0, spec, outcome)
        [(_, stored)] = store.results()
        assert stored.users == outcome.users


def test_a_db_of_another_schema_version_is_refused(tmp_path):
    spec = write_spec(tmp_path, 'workload = "low"\npolicy = "osep"\n')
    db = tmp_path / "r.db"
    assert sweep(str(spec), "--in-process", "--db", str(db)).exit_code == 0
    with sqlite3.connect(db) as connection:
        connection.execute("update meta set value = '99' where name = 'schema_version'")
    result = sweep(str(spec), "--in-process", "--db", str(db), "--resume")
    assert result.exit_code == 2
    assert "schema version 99" in result.output
    assert f"reads version {SCHEMA_VERSION}" in result.output

    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    result = sweep(str(spec), "--in-process", "--db", str(junk))
    assert result.exit_code == 2 and "not a gridfair results DB" in result.output


def test_options_that_exclude_each_other(tmp_path):
    spec = write_spec(tmp_path, 'workload = "low"\npolicy = "osep"\n')
    result = sweep(str(spec), "--in-process", "--workers", "2")
    assert result.exit_code == 2 and "at most one of" in result.output


def test_runs_with_deadlines_store_the_deadline_figures(tmp_path):
    trace = (ROOT / "tests" / "data" / "swf" / "KTH-SP2-1996-2.1-cln.head300.swf").as_posix()
    spec = tmp_path / "justice.toml"
    spec.write_text(f'[parameters]\nworkload = "{trace}"\ncapacity = 50\n'
                    'policy = ["justice", "baseline-fs"]\ndeadlines = ["Fixed2x", "Aria1x3x"]\n',
                    encoding="utf-8")
    db = str(tmp_path / "r.db")
    result = sweep(str(spec), "--in-process", "--db", db)
    assert result.exit_code == 0, result.output
    with ResultsStore(db) as store:
        results = store.results()
    assert len(results) == 4
    for _, outcome in results:
        assert 0 <= outcome.summary["deadlines_met_fraction"] <= 1
        assert 0 < outcome.summary["jain_index"] <= 1
        assert outcome.summary["jobs"] == outcome.summary["tasks"]
