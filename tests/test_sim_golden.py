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
Re-recorded after issue 32 made every float sum exactly rounded (`math.fsum`; Python 3.12's
builtin sum() compensates, 3.11's does not, so the recorded bytes depended on the interpreter):
five JSON outputs moved in their last bit (jain_satisfaction, kth-justice's jain_index_run, the
derived Google list's utilization; at most 5.6e-16 relative); tasks files unchanged.
"""

from __future__ import annotations

import hashlib
import math
from functools import reduce
from operator import add
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
        "8aec2002693473fc45ba671eedf3894f2143e678ec8e5951db31eb6af8a0be7a",
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
        "81d5efad1191910a8a4ab3a83719534852495f824961c553ca5bd1ea47d02563",
        "5bc7b7bb694749042581b29c0e051cd6e3ab3b3624fe4a79e1a855f48ca0c28b"),
    "google-grid-hosep": ((MODEL, "-w", GOOGLE_SLICE, "-p", "hosep", "--interval", "60"),
        "90ac7cfa322471f110dc9ff65c7863ebf0a7d62de9409ca5aeb22576321be6e8",
        "67b211a54ff5c1c0f4199162dfd0e25b1e5398c7cd21fcfe6959af9729ad5ec1"),
    "google-grid-sdrf": ((MODEL, "-w", GOOGLE_SLICE, "-p", "sdrf"),
        "15df67f95986808f8608c459fabaac529818f32d5ba7b99c2dbf9f76d4c17824",
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
        "1fd464462f2d1c24c73216b18066e448a667218956dd1aa4ae76b12270794144",
        "860f4d92194b589537770a90dcce0642a1126537e308e83dad111484329865d4")


def compensated_sum(iterable, start=0):
    """Builtin sum() as Python 3.12 and later compute it for floats (Neumaier's compensated
    summation, CPython's `builtin_sum_impl`); integers alone are summed exactly, as ever."""
    items = list(iterable)
    if not any(isinstance(item, float) for item in items):
        return _BUILTIN_SUM(items, start)
    total, compensation = float(start), 0.0
    for item in map(float, items):
        added = total + item
        if abs(total) >= abs(item):
            compensation += (total - added) + item
        else:
            compensation += (item - added) + total
        total = added
    return total + compensation if compensation and math.isfinite(compensation) else total


def left_to_right_sum(iterable, start=0):
    """Builtin sum() as Python 3.11 computes it: one addition after another."""
    return reduce(add, iterable, start)


_BUILTIN_SUM = sum


@pytest.mark.parametrize("summing", [left_to_right_sum, compensated_sum],
                         ids=["python3.11-sum", "python3.12-sum"])
@pytest.mark.parametrize("name", ["table1-medium-osep", "kth-justice"])
def test_the_bytes_do_not_depend_on_how_the_python_version_sums_floats(
        gridfair_cli, tmp_path, monkeypatch, name, summing):
    """Two of the cases that differed on Python 3.12/3.13 (issue 32), run with sum() as 3.11
    and as 3.12+ compute it: every figure sums exactly rounded (math.fsum) or in integers,
    so the recorded bytes come out whichever the interpreter."""
    import builtins

    monkeypatch.setattr(builtins, "sum", summing)
    assert (sum([0.1] * 10) == 1.0) == (summing is compensated_sum)
    args, json_sha, tasks_sha = CASES[name]
    assert digests(gridfair_cli, args, tmp_path / "tasks.out") == (json_sha, tasks_sha)
