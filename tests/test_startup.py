"""Start-up (issue 27): `gridfair --help`, `--version` and `gridfair simulate` without --db
load no heavy module; a command loads its module only when it runs. The modules loaded are
read from `sys.modules` in a fresh interpreter after the command, as a user would run it."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from gridfair.cli.group import COMMANDS, cli
from gridfair.sim.grid_loader import embedded_grids

#: Top-level packages (or gridfair packages) too heavy for start-up: the store's library (it
#: pulls numpy when installed), numpy itself, and gridfair's experiments and daemon code.
HEAVY = ("sqlite_utils", "numpy", "gridfair.experiments", "gridfair.daemon", "dask",
         "matplotlib")

RUN_AND_LIST_MODULES = """
import json, sys
from gridfair.cli import cli
try:
    cli(sys.argv[1:])
except SystemExit:
    pass
print("\\nMODULES " + json.dumps(sorted(sys.modules)))
"""


def modules_after(*args: str) -> list[str]:
    output = subprocess.run([sys.executable, "-c", RUN_AND_LIST_MODULES, *args], check=True,
                            capture_output=True, text=True).stdout
    return json.loads(output.rpartition("\nMODULES ")[2])


def heavy_modules_after(*args: str) -> list[str]:
    modules = modules_after(*args)
    return [name for name in modules
            if any(name == heavy or name.startswith(heavy + ".") for heavy in HEAVY)]


@pytest.mark.parametrize("args", [
    ("--version",),
    ("--help",),
    ("simulate", "hosep-table1", "--policy", "hosep", "--workload", "low", "--quiet"),
])
def test_start_up_and_a_plain_simulation_load_no_heavy_module(args):
    assert heavy_modules_after(*args) == []


def test_a_simulation_with_a_db_loads_the_store(tmp_path):
    # The same check sees the heavy modules when they are needed (it can fail).
    loaded = heavy_modules_after("simulate", "hosep-table1", "--policy", "hosep",
                                 "--workload", "low", "--quiet", "--db",
                                 str(tmp_path / "runs.db"))
    assert "sqlite_utils" in loaded


def test_the_listing_matches_the_commands_it_does_not_load():
    lazy_help = cli.get_help(click.Context(cli, info_name="gridfair"))
    eager = click.Group(name="gridfair", help=cli.help, params=cli.params)
    for name in COMMANDS:
        eager.add_command(cli.get_command(click.Context(cli), name), name)
    assert lazy_help == eager.get_help(click.Context(eager, info_name="gridfair"))
    assert sorted(COMMANDS) == sorted(cli.commands)


#: What a simulation of a task list has no use for (issue 50): the ClassAd bindings and layer
#: (a pool's slots or history) and the daemon's views of slot and job ads, iSPD's model
#: reader, the group tree's reader.
NOT_FOR_A_TASK_LIST = ("classad2", "htcondor2", "gridfair.classads.views", "gridfair.ad_views",
                       "gridfair.sim.workloads.condor_history", "gridfair.sim.ispd",
                       "gridfair.cli.group_tree",
                       # a grid file's reader, HOSEP's stages and its synthetic workloads
                       "tomllib", "gridfair.policies.hosep", "gridfair.sim.workloads.hosep")


def test_a_task_list_simulation_loads_no_classad_layer_nor_ispd_model(tmp_path):
    tasks = tmp_path / "tasks.csv"
    tasks.write_text("0,0,2000000,u1,1-0,0.5,0.5\n1000000,1000000,3000000,u2,2-0,0.5,0.5\n")
    modules = modules_after("simulate", "--workload", str(tasks), "-p", "drf", "--quiet")
    assert "gridfair.sim.workloads.taskcsv" in modules
    assert [name for name in modules if any(name == unneeded or name.startswith(unneeded + ".")
                                            for unneeded in NOT_FOR_A_TASK_LIST)] == []


#: What a HOSEP run of a grid's own workload has no use for (issue 50): the registry imports a
#: run's own stages, the scenario its input's reader only.
NOT_FOR_HOSEP = ("gridfair.policies.sdrf", "gridfair.policies.condor_priority",
                 "gridfair.policies.hdrf", "gridfair.policies.dmfa_srq",
                 "gridfair.policies.deadline_baselines", "gridfair.policies.fair_preempt",
                 "gridfair.policies.group_preempt", "gridfair.policies.reclaim",
                 "gridfair.policies.justice", "gridfair.sim.workloads.taskcsv",
                 "gridfair.sim.workloads.google", "gridfair.sim.workloads.swf",
                 "gridfair.sim.workloads.swf_grid", "gridfair.sim.workloads.swf_justice",
                 "importlib.resources")


def test_a_hosep_simulation_loads_no_other_policy_nor_reader(tmp_path):
    grid = tmp_path / "grid.toml"  # a grid file: no embedded grid looked up
    grid.write_text(embedded_grids()["hosep-table1"].read_text())
    modules = modules_after("simulate", str(grid), "--policy", "hosep", "--workload", "low",
                            "--quiet")
    assert "gridfair.policies.hosep" in modules
    assert [name for name in modules if name in NOT_FOR_HOSEP] == []


def test_every_registered_stage_imports_and_is_the_stage_it_names():
    from gridfair.core.stages import AdmitPolicy, OrderPolicy, PreemptPolicy, decode_options
    from gridfair.policies import registry

    for table, base in ((registry.ORDERS, OrderPolicy), (registry.PREEMPTS, PreemptPolicy),
                        (registry.ADMITS, AdmitPolicy)):
        for name in table:
            stage = table[name]
            assert issubclass(stage, base), name
            if base is PreemptPolicy:  # built only with an order it accepts
                assert stage.name == name
            else:
                assert stage.from_options(decode_options(stage.Options, {})).name == name


def test_simulate_takes_as_flags_the_options_the_stages_declare_so():
    from gridfair.cli.simulate import OPTION_FLAGS
    from gridfair.policies.registry import every_option

    assert sorted(OPTION_FLAGS) == sorted(name for name, declared in every_option().items()
                                          if declared.metadata["flag"])


def test_every_format_s_reader_module_registers_it():
    from gridfair.sim.workloads.registry import FORMAT_BY_SUFFIX, READER_MODULES, reader

    assert set(FORMAT_BY_SUFFIX.values()) <= set(READER_MODULES)
    for format_name in READER_MODULES:
        assert callable(reader(format_name)), format_name


#: Runs the `gridfair` program as installed (`gridfair.cli.main`), with an exit handler the
#: interpreter's teardown would run.
RUN_THE_PROGRAM = """
import atexit, sys
atexit.register(print, "TEARDOWN")
from gridfair.cli import main
sys.argv[0] = "gridfair"
main()
"""


def test_a_simulation_ends_without_teardown_once_its_files_are_closed(tmp_path):
    # Without --db every file is closed when simulate returns: the process ends at once
    # (os._exit), its output and task file complete; with --db it exits as Python does.
    args = ["simulate", "hosep-table1", "--policy", "hosep", "--workload", "low", "--quiet",
            "--format", "csv"]
    quick = subprocess.run([sys.executable, "-c", RUN_THE_PROGRAM, *args, "--tasks-out",
                            str(tmp_path / "tasks.csv")], capture_output=True, text=True)
    in_process = CliRunner().invoke(cli, [*args, "--tasks-out", str(tmp_path / "kept.csv")])
    assert quick.returncode == 0, quick.stderr
    assert quick.stdout == in_process.output  # flushed, nothing after it
    assert (tmp_path / "tasks.csv").read_text() == (tmp_path / "kept.csv").read_text()
    stored = subprocess.run([sys.executable, "-c", RUN_THE_PROGRAM, *args, "--db",
                             str(tmp_path / "runs.db")], capture_output=True, text=True)
    assert stored.returncode == 0, stored.stderr
    assert stored.stdout == in_process.output + "TEARDOWN\n"
