"""Golden outputs: `gridfair simulate` gives, byte for byte, what it gave before the simulator
streamed its workloads (issue 13, part 1).

Each case runs the CLI with `--format json` and `--tasks-out`, and compares the sha256 of the
JSON output and of the tasks file (paths of the checkout made placeholders) with the recorded
ones. A change in any figure, in the order of the tasks file or in its formatting fails.

Recorded at commit 15fc068, before any streaming change; the JSON digests were re-recorded
after main's `4e04dcf` (issue 11), whose JSON adds one key, `"arrivals": "batch"`: loaded as
objects, every output equals 15fc068's but for that key, and every tasks file is unchanged.
Re-recorded again after issue 12's `allocation` key (the run's allocation rule) joined the JSON:
loaded as objects, every output equals the previous one but for that key; tasks files unchanged.
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
        "cadb839e3d66c50c95a67b1f0c1739b4bfd7e00a7512872668a631f4ad9030b7",
        "fa5ce63b42e07964b883530cd393f6428acf47dd12d3934605a8b949e67ecd1c"),
    "table1-medium-osep": ((TABLE1, "-w", "medium", "-p", "osep"),
        "0f5b0cd0531b2df7218b8e4e268e8b276c86f6a6f1e43804ac4cceef03be47be",
        "cc774b416e72b525da939c773d1f99bd37c12c311ee4e5d36145756c6dd4d7bd"),
    "table1-high-hosep-interval": ((TABLE1, "-w", "high", "-p", "hosep", "--interval", "30",
                                    "--seed", "7"),
        "84bc3400643678d256c24dd5a6e6c8d05204c6c4fb78c26b157a3fbe46a69de7",
        "bf97fc77f4419bd29ff097fe90fc1508c5d0a7aa8cf0d6232c8de2475ce1e4ad"),
    "table1-high-sdrf-checkpoint": ((TABLE1, "-w", "high", "-p", "sdrf", "--checkpoint"),
        "e03580c9c37b5637df7cc80c8da5b3d7feaeeced2292782f3ff04fb8b7cec29f",
        "c92ea7e430111ad9ec65d128280edda3fa0a4f30ee358a70689d7345ffb2f791"),
    "table1-medium-wdrf": ((TABLE1, "-w", "medium", "-p", "wdrf"),
        "9e4da8d5bc4b7de180e29e595f65a14bb1050fe097dbf2d5425694a0934f0b80",
        "bb2c476689c47a50f651e5e1cdb7e721118bcd65b8c02819a9a106677c12b3cc"),
    "kth-grid-hosep": ((MODEL, "-w", KTH_SLICE, "-p", "hosep", "--user-map", "round-robin",
                        "--compress", "20"),
        "4cad8fd5856dbffa24bf97514287092b2da622764452b57c43bf74ad3cd0b730",
        "f0ceaa5ee23555138fa8682c218b7c33a06f78fa570762e33116f3da2639474a"),
    "kth-justice": (("--workload", KTH_SLICE, "--capacity", "25", "-p", "justice",
                     "--deadlines", "Fixed2x"),
        "e796837153c7a62dd752a8da4c9e7fe89657a7114b5a1d508e4190a15857eb77",
        "5bc7b7bb694749042581b29c0e051cd6e3ab3b3624fe4a79e1a855f48ca0c28b"),
    "google-grid-hosep": ((MODEL, "-w", GOOGLE_SLICE, "-p", "hosep", "--interval", "60"),
        "29a333951eacfeb26b6b4f2b91c394cd5c404aa7b81926d42fe8f2289c21c2fa",
        "67b211a54ff5c1c0f4199162dfd0e25b1e5398c7cd21fcfe6959af9729ad5ec1"),
    "google-grid-sdrf": ((MODEL, "-w", GOOGLE_SLICE, "-p", "sdrf"),
        "3ac8e2136b7711a6ace132dd4e49c942415dc10df905ad8d015c91757147ed14",
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
        "67695a8c66d5ab6e8632b43972a392a5c7b76686012b43335ecd561110d01de5",
        "860f4d92194b589537770a90dcce0642a1126537e308e83dad111484329865d4")
