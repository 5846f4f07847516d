"""Golden outputs: `gridfair simulate` gives, byte for byte, what it gave before the simulator
streamed its workloads (issue 13, part 1).

Each case runs the CLI with `--format json` and `--tasks-out`, and compares the sha256 of the
JSON output and of the tasks file (paths of the checkout made placeholders) with the recorded
ones. A change in any figure, in the order of the tasks file or in its formatting fails.

Recorded at commit 15fc068, before any streaming change; the JSON digests were re-recorded
after main's `4e04dcf` (issue 11), whose JSON adds one key, `"arrivals": "batch"`: loaded as
objects, every output equals 15fc068's but for that key, and every tasks file is unchanged.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from gridfair.sim.grid_loader import embedded_grids
from tests.conftest import SHARED_DATA, TEST_DATA, shared_file

TABLE1 = str(embedded_grids()["hosep-table1"])
MODEL = str(embedded_grids()["multi-owner-hosep"])
KTH_SLICE = str(TEST_DATA / "swf" / "KTH-SP2-1996-2.1-cln.head300.swf")
GOOGLE_SLICE = str(TEST_DATA / "google" / "rows420001-426000.part-00000-of-00500.csv.gz")

# name -> (arguments after `simulate`, sha256 of the JSON output, sha256 of --tasks-out)
CASES: dict[str, tuple[tuple[str, ...], str, str]] = {
    "table1-low-hosep": ((TABLE1, "-w", "low", "-p", "hosep"),
        "0edede6d34f93d31da0ab6ef576458dbed1545a4bfca9ebf8e24b832274c61cd",
        "fa5ce63b42e07964b883530cd393f6428acf47dd12d3934605a8b949e67ecd1c"),
    "table1-medium-osep": ((TABLE1, "-w", "medium", "-p", "osep"),
        "7d2d9e91fde5ffc5e3806205bf79a0b2f09da5dae2a9fee6b715b80412681c46",
        "cc774b416e72b525da939c773d1f99bd37c12c311ee4e5d36145756c6dd4d7bd"),
    "table1-high-hosep-interval": ((TABLE1, "-w", "high", "-p", "hosep", "--interval", "30",
                                    "--seed", "7"),
        "769046b8827b729481591fcbdc536d7c6bdf88326ea886cbdfde70d4eaefb01e",
        "bf97fc77f4419bd29ff097fe90fc1508c5d0a7aa8cf0d6232c8de2475ce1e4ad"),
    "table1-high-sdrf-checkpoint": ((TABLE1, "-w", "high", "-p", "sdrf", "--checkpoint"),
        "f4c00b53330c3d7c346b9ed47b992aa2a0fcfd32e5ab130bdaaf35698af39c7e",
        "c92ea7e430111ad9ec65d128280edda3fa0a4f30ee358a70689d7345ffb2f791"),
    "table1-medium-wdrf": ((TABLE1, "-w", "medium", "-p", "wdrf"),
        "ec01dd9572ab022ee04c353e92d0c1bd2c1252167641339950d7c3b73ba088fa",
        "bb2c476689c47a50f651e5e1cdb7e721118bcd65b8c02819a9a106677c12b3cc"),
    "kth-grid-hosep": ((MODEL, "-w", KTH_SLICE, "-p", "hosep", "--user-map", "round-robin",
                        "--compress", "20"),
        "e679f789f79614e654128d1175890723955ca2da74bf28458e592e2d2f52ca42",
        "f0ceaa5ee23555138fa8682c218b7c33a06f78fa570762e33116f3da2639474a"),
    "kth-justice": (("--workload", KTH_SLICE, "--capacity", "25", "-p", "justice",
                     "--deadlines", "Fixed2x"),
        "fe262dc6348bd2986163cb953f4eac97fa5d9b10af9ba89eca433671cac5b85a",
        "5bc7b7bb694749042581b29c0e051cd6e3ab3b3624fe4a79e1a855f48ca0c28b"),
    "google-grid-hosep": ((MODEL, "-w", GOOGLE_SLICE, "-p", "hosep", "--interval", "60"),
        "49897ff80a3458db4f30404db5f80463c491dfe4aaadad03d81d2743560a6a01",
        "67b211a54ff5c1c0f4199162dfd0e25b1e5398c7cd21fcfe6959af9729ad5ec1"),
    "google-grid-sdrf": ((MODEL, "-w", GOOGLE_SLICE, "-p", "sdrf"),
        "a6d01b06607b955fbe445dabb77972e54b80fdefbc8a850bcb2bb09348a7d863",
        "be486ebee6f5d7266717932983d9fb1a38cddf5a67ceae88029318768d971e0c"),
}


def _located(text: str) -> str:
    """Output with the checkout's paths (echoed workload and grid names) made placeholders, so
    the digests do not depend on where the repository or the shared data sit."""
    for path, placeholder in ((SHARED_DATA, "<shared>"), (TEST_DATA, "<test-data>"),
                              (Path(TABLE1).parent, "<embedded>")):
        text = text.replace(str(path.resolve()), placeholder).replace(str(path), placeholder)
    return text


def digests(gridfair_cli, args: tuple[str, ...], tasks_out: Path) -> tuple[str, str]:
    result = gridfair_cli("simulate", *args, "--format", "json", "-q",
                          "--tasks-out", str(tasks_out))
    assert result.exit_code == 0, result.output
    return (hashlib.sha256(_located(result.stdout).encode()).hexdigest(),
            hashlib.sha256(_located(tasks_out.read_text(encoding="utf-8")).encode()).hexdigest())


@pytest.mark.parametrize("name", sorted(CASES))
def test_simulate_output_is_byte_identical_to_the_recorded_one(gridfair_cli, tmp_path, name):
    args, json_sha, tasks_sha = CASES[name]
    assert digests(gridfair_cli, args, tmp_path / "tasks.out") == (json_sha, tasks_sha)


def test_google_derived_task_list_is_byte_identical_to_the_recorded_one(gridfair_cli, tmp_path):
    """The whole derived Google file (51,307 tasks) as a task list under SDRF."""
    path = shared_file("google/derived/tasks_parts00000-00001.csv.gz")
    args = ("--workload", str(path), "--capacity-ratio", "0.9", "-p", "sdrf")
    assert digests(gridfair_cli, args, tmp_path / "tasks.csv") == (
        "5dda59e34e1de524f5212db1169284ff3e69c639c18147fe601a6152c9adb52c",
        "860f4d92194b589537770a90dcce0642a1126537e308e83dad111484329865d4")
