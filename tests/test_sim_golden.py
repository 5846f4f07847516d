"""Golden outputs: `gridfair simulate` gives, byte for byte, what it gave before the simulator
streamed its workloads (recorded at commit 15fc068, before any streaming change).

Each case runs the CLI with `--format json` and `--tasks-out`, and compares the sha256 of the
JSON output and of the tasks file with the recorded ones. A change in any figure, in the
order of the tasks file or in its formatting fails the test: results must stay identical
(issue 13, part 1).
"""

from __future__ import annotations

import hashlib

import pytest

from gridfair.sim.grid_loader import embedded_grids
from tests.conftest import TEST_DATA, shared_file

TABLE1 = str(embedded_grids()["hosep-table1"])
MODEL = str(embedded_grids()["multi-owner-hosep"])
KTH_SLICE = str(TEST_DATA / "swf" / "KTH-SP2-1996-2.1-cln.head300.swf")
GOOGLE_SLICE = str(TEST_DATA / "google" / "rows420001-426000.part-00000-of-00500.csv.gz")

# name -> (arguments after `simulate`, sha256 of the JSON output, sha256 of --tasks-out)
CASES: dict[str, tuple[tuple[str, ...], str, str]] = {
    "table1-low-hosep": ((TABLE1, "-w", "low", "-p", "hosep"),
        "4b050e7ae0bfbf6273f91c16300d1515d9dd1f3563be58a901a3f364873d8d1e",
        "fa5ce63b42e07964b883530cd393f6428acf47dd12d3934605a8b949e67ecd1c"),
    "table1-medium-osep": ((TABLE1, "-w", "medium", "-p", "osep"),
        "1fb3b7d28a6a8da88faf0b121b1175883caab2bf387cd1bb115a556ad772ea41",
        "cc774b416e72b525da939c773d1f99bd37c12c311ee4e5d36145756c6dd4d7bd"),
    "table1-high-hosep-interval": ((TABLE1, "-w", "high", "-p", "hosep", "--interval", "30",
                                    "--seed", "7"),
        "3d9c7eef6ea3bfcc7d0d8d14a5f131644b8bb103c75aff3fda4372c23b691680",
        "bf97fc77f4419bd29ff097fe90fc1508c5d0a7aa8cf0d6232c8de2475ce1e4ad"),
    "table1-high-sdrf-checkpoint": ((TABLE1, "-w", "high", "-p", "sdrf", "--checkpoint"),
        "92d4a136c869b499f1a59b6e7a3f15fa39fb99c7e5273334e624d81015351e1b",
        "c92ea7e430111ad9ec65d128280edda3fa0a4f30ee358a70689d7345ffb2f791"),
    "table1-medium-wdrf": ((TABLE1, "-w", "medium", "-p", "wdrf"),
        "40609b0d8f3b3560a1c7c28b2bf242bfa169dbba91164de30b06236c96ef6638",
        "bb2c476689c47a50f651e5e1cdb7e721118bcd65b8c02819a9a106677c12b3cc"),
    "kth-grid-hosep": ((MODEL, "-w", KTH_SLICE, "-p", "hosep", "--user-map", "round-robin",
                        "--compress", "20"),
        "0f5b40e3f7b306b78397f69eb192179a410d08a793f603503d0b919ff7472f5c",
        "f0ceaa5ee23555138fa8682c218b7c33a06f78fa570762e33116f3da2639474a"),
    "kth-justice": (("--workload", KTH_SLICE, "--capacity", "25", "-p", "justice",
                     "--deadlines", "Fixed2x"),
        "248637b5798f44eba3cafad237c33f4bf7372a30ee21b684aa8b739a2f7a01f7",
        "fb4c5427a8a4b80976442a02cc254efbf6c5cffdca5b6625b04b5bf7ad534ae3"),
    "google-grid-hosep": ((MODEL, "-w", GOOGLE_SLICE, "-p", "hosep", "--interval", "60"),
        "24b2ea3681fa83fdd15ce77f2e4836cdf656608c379ed8183c4b4d0e530abf09",
        "67b211a54ff5c1c0f4199162dfd0e25b1e5398c7cd21fcfe6959af9729ad5ec1"),
    "google-grid-sdrf": ((MODEL, "-w", GOOGLE_SLICE, "-p", "sdrf"),
        "c923dae8a022f0f5eb8b183f7d118f35f8901d0e939ba38c85d9ef4ff3e0bb65",
        "be486ebee6f5d7266717932983d9fb1a38cddf5a67ceae88029318768d971e0c"),
}


def digests(gridfair_cli, args: tuple[str, ...], tasks_out) -> tuple[str, str]:
    result = gridfair_cli("simulate", *args, "--format", "json", "-q",
                          "--tasks-out", str(tasks_out))
    assert result.exit_code == 0, result.output
    return (hashlib.sha256(result.stdout.encode()).hexdigest(),
            hashlib.sha256(tasks_out.read_bytes()).hexdigest())


@pytest.mark.parametrize("name", sorted(CASES))
def test_simulate_output_is_byte_identical_to_the_recorded_one(gridfair_cli, tmp_path, name):
    args, json_sha, tasks_sha = CASES[name]
    assert digests(gridfair_cli, args, tmp_path / "tasks.out") == (json_sha, tasks_sha)


def test_google_derived_task_list_is_byte_identical_to_the_recorded_one(gridfair_cli, tmp_path):
    """The whole derived Google file (51,307 tasks) as a task list under SDRF."""
    path = shared_file("google/derived/tasks_parts00000-00001.csv.gz")
    args = ("--workload", str(path), "--capacity-ratio", "0.9", "-p", "sdrf")
    assert digests(gridfair_cli, args, tmp_path / "tasks.csv") == (
        "e2656a0bc75797609294a231ee62d3271796ce574b59cf0f823ee261a9096744",
        "860f4d92194b589537770a90dcce0642a1126537e308e83dad111484329865d4")
