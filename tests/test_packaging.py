"""What an installed gridfair needs: the embedded grids by name in any directory, the base
install without the experiment tools (a command that needs them says which extra to install),
and `python -m gridfair`. The wheel itself is built and run outside the repository by
`make package-check` (in CI)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib

import pytest

from gridfair.cli.group import EXTRA_OF
from gridfair.daemon.backends.sim import SimBackend
from gridfair.sim.grid_loader import embedded_dir, embedded_grids, load_grid
from tests.conftest import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _requirement_name(requirement: str) -> str:
    return requirement.split(">")[0].split("[")[0].split("=")[0].split("<")[0].strip().lower()


def test_the_embedded_grids_are_listed_by_name(gridfair_cli):
    result = gridfair_cli("grid", "list", "--format", "json")
    assert result.exit_code == 0
    listed = {row["name"]: row for row in json.loads(result.stdout)}
    assert listed["hosep-table1"]["machines"] == 12
    assert listed["hosep-table1"]["workloads"] == "high, low, medium"
    assert listed["multi-owner-hosep"]["machines"] == 20
    assert listed.keys() == embedded_grids().keys()


def test_a_grid_name_works_from_any_directory(gridfair_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = gridfair_cli("simulate", "hosep-table1", "--policy", "hosep", "--workload", "low",
                          "--format", "json")
    assert result.exit_code == 0, result.output
    users = {row["user"]: row for row in json.loads(result.stdout)["users"]}
    # Table 1's shares of the grid's power (paper 004; the paper prints 16.6 for User3).
    assert [round(users[name]["provided_share"] * 100, 2)
            for name in ("User1", "User2", "User3", "User4")] == [45.76, 27.88, 16.06, 10.29]


def test_a_file_of_that_name_comes_before_the_embedded_grid(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosep-table1").write_text(
        '[[machines]]\nname = "only"\nowner = "me"\nmflops = 1\n', encoding="utf-8")
    assert [machine.name for machine in load_grid("hosep-table1").machines] == ["only"]


def test_an_unknown_grid_names_the_embedded_ones(gridfair_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = gridfair_cli("grid", "show", "hosep-table2")
    assert result.exit_code == 2
    assert result.output == ("gridfair: error: hosep-table2: no such grid file, nor an embedded "
                             "grid of that name (embedded: hosep-table1, multi-owner-hosep)\n")


def test_the_sim_backend_runs_on_the_embedded_grid_by_default():
    backend = SimBackend(origin=0.0)
    assert backend.grid.name == "hosep-table1"
    assert len(backend.read_snapshot().machines) == 12


def test_every_embedded_file_is_package_data():
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["gridfair.sim"]
    shipped = {path.name for pattern in patterns
               for path in embedded_dir().parent.glob(pattern)}
    assert shipped == {path.name for path in embedded_dir().iterdir()}
    assert {path.name for path in embedded_grids().values()} == shipped


def test_the_base_install_has_no_experiment_tools():
    base = {_requirement_name(requirement) for requirement in PYPROJECT["project"]["dependencies"]}
    assert not base & {"dask", "distributed", "matplotlib"}
    experiments = PYPROJECT["project"]["optional-dependencies"]["experiments"]
    assert {_requirement_name(requirement) for requirement in experiments} == {"dask",
                                                                              "matplotlib"}
    # dask[distributed] installs the `distributed` module: the CLI knows all three.
    assert set(EXTRA_OF) == {"dask", "distributed", "matplotlib"}
    assert "gridfair[experiments]" in PYPROJECT["project"]["optional-dependencies"]["test"]


def _gridfair_without(blocked: tuple[str, ...], *args: str, cwd) -> subprocess.CompletedProcess:
    """`gridfair ARGS` in a fresh interpreter in which `blocked` modules cannot be imported."""
    code = ("import sys\n"
            f"for name in {blocked!r}: sys.modules[name] = None\n"
            f"sys.argv = ['gridfair', *{list(args)!r}]\n"
            "from gridfair.cli import main\nmain()\n")
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize(("command", "missing"), [
    (("plot", "runs.db", "--kind", "satisfaction", "--out", "x.png"), "matplotlib"),
    (("sweep", str(ROOT / "sim_grids" / "sweeps" / "hosep_vs_osep.toml"), "--db", "runs.db"),
     "distributed"),
])
def test_a_command_whose_extra_is_missing_exits_2_naming_it(tmp_path, command, missing):
    result = _gridfair_without(("dask", "distributed", "matplotlib"), *command, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (f"gridfair: error: gridfair {command[0]} needs the experiments "
                             f"extra ({missing} is not installed): pip install "
                             "'gridfair[experiments]'\n")


def test_the_base_commands_run_without_the_experiments_extra(tmp_path):
    blocked = ("dask", "distributed", "matplotlib")
    assert _gridfair_without(blocked, "--help", cwd=tmp_path).returncode == 0
    result = _gridfair_without(blocked, "simulate", "hosep-table1", "-p", "hosep", "-w", "low",
                               cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "User1" in result.stdout


def test_python_m_gridfair_is_the_gridfair_command(tmp_path):
    result = subprocess.run([sys.executable, "-m", "gridfair", "--version"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert result.stdout.startswith("gridfair, version ")


def test_the_version_is_written_once():
    from importlib.metadata import version

    import gridfair

    assert "version" in PYPROJECT["project"]["dynamic"]
    assert version("gridfair") == gridfair.__version__
