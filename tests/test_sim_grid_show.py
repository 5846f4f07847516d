"""`gridfair grid show`: machines, owners and their shares of the power, for TOML grids and iSPD
models, as table, JSON and CSV; a bad file exits 2."""

from __future__ import annotations

import json

import pytest

from gridfair.sim.grid_loader import embedded_grids

MODEL = str(embedded_grids()["multi-owner-hosep"])
TABLE1 = str(embedded_grids()["hosep-table1"])


@pytest.fixture
def show(gridfair_cli):
    return lambda *args: gridfair_cli("grid", "show", *args)


def test_model_owners_and_shares_as_json(show):
    result = show(MODEL, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert len(data["machines"]) == 20
    shares = {row["owner"]: (row["machines"], row["mflops"], round(row["share"], 4))
              for row in data["owners"]}
    assert shares == {"user1": (8, 16000, 0.1538), "user2": (6, 24000, 0.2308),
                      "user3": (4, 32000, 0.3077), "user4": (2, 32000, 0.3077)}
    assert data["masters"] == {"icon0": "HOSEP"} and data["load"] == "node"


def test_table_lists_machines_and_owner_shares(show):
    result = show(TABLE1)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith("hosep-table1: 12 machines, 12 cpus, 867040 MFlops")
    assert any(line.startswith("user1-fast-1  User1  132250") for line in lines)
    assert any(line.startswith("User1") and line.endswith("45.76%") for line in lines)
    assert "workloads: high, low, medium" in result.stdout


def test_csv_without_machines_is_the_owner_table(show):
    result = show(TABLE1, "--no-machines", "--format", "csv")
    assert result.stdout.splitlines()[0] == "owner,machines,cpus,mflops,share"
    assert len(result.stdout.splitlines()) == 5


def test_bad_model_exits_2_naming_the_line(show, tmp_path):
    path = tmp_path / "bad.imsx"
    path.write_text('<system version="1">\n<machine id="m" power="9"/></system>')
    result = show(str(path))
    assert result.exit_code == 2
    assert "bad.imsx:2: <machine> lacks attribute 'owner'" in result.stderr
