"""`simulate` and a sweep's (or compare's) run measure a simulation through one function
(`experiments.measured.MeasuredRun`): the same run gives the same per-user rows and the same
run-wide figures either way, deadline figures included."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import gridfair.cli.simulate  # noqa: F401 - registers the command
from gridfair.cli import cli
from gridfair.cli.output import to_json
from gridfair.experiments.runs import RunSpec, execute
from tests.conftest import TEST_DATA

KTH_SLICE = str(TEST_DATA / "swf" / "KTH-SP2-1996-2.1-cln.head300.swf")


@pytest.mark.parametrize(("params", "flags"), [
    ({"grid": "hosep-table1", "workload": "low", "policy": "hosep", "seed": 2},
     ["hosep-table1", "-w", "low", "-p", "hosep", "--seed", "2"]),
    ({"workload": KTH_SLICE, "policy": "justice", "capacity": 25, "deadlines": "Fixed2x"},
     ["-w", KTH_SLICE, "-p", "justice", "--capacity", "25", "--deadlines", "Fixed2x"]),
])
def test_simulate_and_a_sweeps_run_measure_alike(params, flags):
    done = CliRunner().invoke(cli, ["simulate", *flags, "--format", "json", "-q"])
    assert done.exit_code == 0, done.output
    shown = json.loads(done.output)
    outcome = execute(RunSpec.make(params))
    assert outcome.ok, outcome.error
    # As JSON (a figure of no task is null there), and less what a run adds to `simulate`'s
    # (its curve of shares' error).
    ran = json.loads(to_json({"users": outcome.users, "summary": outcome.summary}))
    assert ran["users"] == shown["users"]
    assert ran["summary"].pop("share_error", None) is not None
    assert ran["summary"] == shown["summary"]
    assert outcome.stages == shown["policy"] and outcome.allocation == shown["allocation"]
