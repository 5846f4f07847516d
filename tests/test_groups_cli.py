"""The group tree on the command line: `simulate --groups FILE` and `shares --tree`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gridfair.cli.group import cli
from gridfair.sim.grid_loader import embedded_grids
from tests.conftest import TEST_DATA

TABLE1 = str(embedded_grids()["hosep-table1"])
MODEL = str(embedded_grids()["multi-owner-hosep"])
GOOGLE_SLICE = str(TEST_DATA / "google" / "rows420001-426000.part-00000-of-00500.csv.gz")
POOL = Path(__file__).parent / "data" / "daemon" / "pool"
SNAPSHOT = ["--machines", str(POOL / "partitionable.status"), "--jobs",
            str(POOL / "jobs.queue"), "--now", "0"]
TREE = """
[groups]
accept_surplus = true
[groups.owners_ab]
quota_dynamic = 0.5
users = ["User1", "User2"]
[groups.owners_cd]
quota_dynamic = 0.3
[groups."owners_cd.c"]
quota = {cpus = 2, memory = 4000}
users = ["User3"]
"""


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args))


def tree_file(tmp_path: Path, text: str = TREE) -> str:
    path = tmp_path / "groups.toml"
    path.write_text(text)
    return str(path)


def simulate_json(*args: str) -> dict:
    result = invoke("simulate", "hosep-table1", "--workload", "medium", "--format", "json",
                    "-q", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_hdrf_without_a_tree_simulates_exactly_as_drf() -> None:
    hdrf, drf = simulate_json("--policy", "hdrf"), simulate_json("--policy", "drf")
    assert hdrf.pop("policy") == "order=hdrf" and drf.pop("policy") == "order=drf"
    assert hdrf == drf


def test_simulate_takes_the_tree_and_it_moves_the_shares(tmp_path: Path) -> None:
    grouped = simulate_json("--order", "hdrf", "--groups", tree_file(tmp_path))
    assert grouped["summary"]["completed"] == grouped["summary"]["tasks"]
    assert grouped["users"] != simulate_json("--policy", "drf")["users"]


def test_a_bad_tree_is_one_line_naming_the_file_and_exit_2(tmp_path: Path) -> None:
    path = tree_file(tmp_path, '[groups.a]\nquota = 1\nquota_dynamic = 0.5\n')
    result = invoke("simulate", "hosep-table1", "-w", "medium", "--order", "hdrf",
                    "--groups", path)
    assert result.exit_code == 2
    assert f'{path} [groups] group "a": both a static and a dynamic quota' in result.output
    assert "Traceback" not in result.output
    no_table = tree_file(tmp_path, "[other]\n")
    result = invoke("simulate", "hosep-table1", "-w", "medium", "--order", "hdrf",
                    "--groups", no_table)
    assert result.exit_code == 2 and "no [groups] table" in result.output


def test_groups_under_a_policy_that_does_not_read_them_is_a_usage_error(tmp_path: Path):
    result = invoke("simulate", "hosep-table1", "-w", "medium", "--policy", "drf",
                    "--groups", tree_file(tmp_path))
    assert result.exit_code == 2
    assert "--groups: policy drf does not read it" in result.output


def test_shares_tree_shows_every_group_per_level(tmp_path: Path) -> None:
    result = invoke("shares", *SNAPSHOT, "--tree", tree_file(tmp_path))
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split()[:3] == ["Group", "Level", "Config"]
    assert [line.split()[0] for line in lines[2:6]] == [
        "<none>", "owners_ab", "owners_cd", "owners_cd.c"]
    assert lines[5].startswith("    owners_cd.c  ")  # indented by its level
    assert lines[-1] == "Number of groups: 3"
    rows = json.loads(invoke("shares", *SNAPSHOT, "--tree", tree_file(tmp_path),
                             "--format", "json").output)["groups"]
    by_name = {row["group"]: row for row in rows}
    assert by_name["owners_cd.c"]["quota"] == {"cpus": 2.0, "memory": 4000.0}
    assert by_name["owners_cd"]["guaranteed_share"] == 0.3
    assert by_name["<none>"]["dominant_share"] == 0.5  # bt's 4 of 8 cpus, in <none>


def test_shares_tree_refuses_another_policy_and_the_store(tmp_path: Path) -> None:
    result = invoke("shares", *SNAPSHOT, "--tree", tree_file(tmp_path), "--policy", "drf")
    assert result.exit_code == 2 and "--tree orders by H-DRF" in result.output
    result = invoke("shares", "--db", str(tmp_path / "none.db"), "--tree", tree_file(tmp_path))
    assert result.exit_code == 2 and "--tree reads ad files or a live pool" in result.output


@pytest.mark.parametrize("run", [
    (TABLE1, "-w", "high", "--checkpoint"),
    (MODEL, "-w", GOOGLE_SLICE, "--interval", "60"),
], ids=["table1-high", "google-grid"])
def test_flat_hdrf_gives_drf_s_tasks_file_byte_for_byte(tmp_path: Path, run) -> None:
    """The golden outputs' way (every task's times, `--tasks-out`): no tree, no change."""
    outputs = {}
    for policy in ("drf", "hdrf"):
        tasks_out = tmp_path / f"{policy}.out"
        result = invoke("simulate", *run, "-p", policy, "--format", "json", "-q",
                        "--tasks-out", str(tasks_out))
        assert result.exit_code == 0, result.output
        outputs[policy] = (result.stdout.replace(f'"order={policy}"', '"order"'),
                           tasks_out.read_bytes())
    assert outputs["hdrf"] == outputs["drf"]
    assert len(outputs["drf"][1]) > 1000


def test_shares_tree_reads_the_knobs_of_htcondor_s_configuration(tmp_path: Path) -> None:
    """`--tree condor` reads GROUP_* through htcondor2.param (a fresh process: the bindings
    read CONDOR_CONFIG once, at import)."""
    pytest.importorskip("htcondor2")
    config = tmp_path / "condor_config"
    config.write_text("GROUP_NAMES = group_a, group_a.x, group_b\n"
                      "GROUP_QUOTA_DYNAMIC_group_a = 0.6\n"
                      "GROUP_QUOTA_DYNAMIC_group_a.x = 0.5\n"
                      "GROUP_QUOTA_group_b = 2\n"
                      "GROUP_ACCEPT_SURPLUS_group_b = True\n")
    result = subprocess.run(
        [sys.executable, "-m", "gridfair", "shares", *SNAPSHOT, "--tree", "condor",
         "--format", "json"], capture_output=True, text=True, check=False,
        env={**os.environ, "CONDOR_CONFIG": str(config)})
    assert result.returncode == 0, result.stderr
    rows = {row["group"]: row for row in json.loads(result.stdout)["groups"]}
    assert list(rows) == ["<none>", "group_a", "group_a.x", "group_b"]
    # group_b's static 2 cpus first; group_a 0.6 of the 6 left; group_a.x half of that.
    assert rows["group_a"]["quota"]["cpus"] == pytest.approx(3.6)
    assert rows["group_a.x"]["quota"]["cpus"] == pytest.approx(1.8)
    assert rows["group_b"]["accept_surplus"] is True
    config.write_text("GROUP_NAMES = group_a.x\nGROUP_QUOTA_group_a.x = 1\n")
    result = subprocess.run(
        [sys.executable, "-m", "gridfair", "shares", *SNAPSHOT, "--tree", "condor"],
        capture_output=True, text=True, check=False,
        env={**os.environ, "CONDOR_CONFIG": str(config)})
    assert result.returncode == 2
    assert "HTCondor configuration: group 'group_a.x' has parent 'group_a', which is not " \
           "listed" in result.stderr


def test_the_daemon_s_policy_reads_the_tree_from_htcondor_s_configuration(
        tmp_path: Path) -> None:
    """`[policy] options = { groups = "condor" }`: the stage reads GROUP_* through
    htcondor2.param when it is built (at the daemon's start)."""
    pytest.importorskip("htcondor2")
    config = tmp_path / "condor_config"
    config.write_text("GROUP_NAMES = group_a, group_b\nGROUP_QUOTA_DYNAMIC_group_a = 0.7\n"
                      "GROUP_QUOTA_DYNAMIC_group_b = 0.3\nGROUP_ACCEPT_SURPLUS = true\n")
    script = ("from gridfair.policies.registry import build_stages\n"
              "order = build_stages(order='hdrf', options={'groups': 'condor'}).order\n"
              "print([group.name for group in order.tree.groups], "
              "order.tree.none_accepts_surplus)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            check=False, env={**os.environ, "CONDOR_CONFIG": str(config)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['group_a', 'group_b'] True"
