"""Showcase 3's maths (bench/live_drf_showcase.py): DRF's entitlement, the dominant-share error
and the lower bounds on it, against hand-worked examples."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))  # the bench imports its siblings
_spec = importlib.util.spec_from_file_location("live_drf_showcase",
                                               BENCH / "live_drf_showcase.py")
showcase = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = showcase
_spec.loader.exec_module(showcase)

#: The DRF paper's example (Ghodsi et al., NSDI 2011, section 4): 9 cpus and 18 GB; user A's
#: tasks ask for <1 cpu, 4 GB>, B's for <3 cpus, 1 GB>; DRF gives A 3 tasks and B 2 tasks,
#: a dominant share of 2/3 each (A: 12 of 18 GB, B: 6 of 9 cpus).
PAPER = (9, 18)
A_TASK, B_TASK = (1, 4), (3, 1)


def test_drf_entitlement_is_the_papers() -> None:
    many = 10  # both want more than the pool holds
    entitled = showcase.drf_entitlement(
        {"A": (many * A_TASK[0], many * A_TASK[1]), "B": (many * B_TASK[0], many * B_TASK[1])},
        PAPER)
    assert entitled == pytest.approx({"A": 2 / 3, "B": 2 / 3})
    held = {"A": showcase.dominant_share(3 * A_TASK[0], 3 * A_TASK[1], PAPER),
            "B": showcase.dominant_share(2 * B_TASK[0], 2 * B_TASK[1], PAPER)}
    assert held == pytest.approx({"A": 2 / 3, "B": 2 / 3})
    assert showcase.share_error(held, entitled) == pytest.approx(0.0)
    # With less demand than its share, a user gets its demand, the other the rest it can use.
    entitled = showcase.drf_entitlement({"A": (1, 4), "B": (30, 10)}, PAPER)
    assert entitled == pytest.approx({"A": 4 / 18, "B": 8 / 9})


def test_weighted_drf_gives_a_double_weight_twice_the_dominant_share() -> None:
    # A of weight 2: A's dominant share (memory) 2s, B's (cpus) s. Memory binds first:
    # 2s + s/6 = 1 (cpus: s/1 + s = 2s <= 1), so s = 6/13: A 12/13, B 6/13.
    many = 10
    entitled = showcase.drf_entitlement(
        {"A": (many * A_TASK[0], many * A_TASK[1]), "B": (many * B_TASK[0], many * B_TASK[1])},
        PAPER, {"A": 2})
    assert entitled == pytest.approx({"A": 12 / 13, "B": 6 / 13})


def test_bounds_on_one_machine_and_on_three_small_ones() -> None:
    present = {"A": [A_TASK] * 5, "B": [B_TASK] * 5}
    entitled = {"A": 2 / 3, "B": 2 / 3}
    # One machine of 9 cpus and 18 GB: A 3 tasks and B 2 reach the entitlement exactly.
    assert showcase.assignment_bound(present, entitled, [(1, 9, 18)], PAPER) == pytest.approx(0)
    # Three machines of 3 cpus and 6 GB: a machine holds one A task (the 2 cpus and 2 GB
    # left take no B task) or one B task; the best is A 1, B 2: |2/9 - 2/3| + 0 = 4/9.
    small = [(3, 3, 6)]
    assert showcase.assignment_bound(present, entitled, small, PAPER) == pytest.approx(4 / 9)
    # The linear relaxation splits tasks across machines: it proves nothing here.
    assert showcase.assignment_bound(present, entitled, small, PAPER,
                                     whole=False) == pytest.approx(0)
    assert showcase.granularity_bound(present, entitled, PAPER) == pytest.approx(0)


def test_a_job_no_machine_holds_counts_in_the_packing_bound_only() -> None:
    # Two machines of 4 cpus and 8 GiB; M's jobs ask for 12 GiB: they fit the pool's 16 GiB
    # in total (so the granularity bound is the distance to 0 or 12/16) but no machine.
    present, entitled = {"M": [(1, 12)] * 2}, {"M": 0.5}
    assert showcase.granularity_bound(present, entitled, (8, 16)) == pytest.approx(0.25)
    assert showcase.assignment_bound(present, entitled, [(2, 4, 8)], (8, 16)) == pytest.approx(0.5)


def test_drf_utilization_is_what_the_papers_allocation_uses() -> None:
    # A 3 tasks <1, 4> and B 2 tasks <3, 1>: 9 of 9 cpus, 14 of 18 GB.
    demand = {"A": (10 * A_TASK[0], 10 * A_TASK[1]), "B": (10 * B_TASK[0], 10 * B_TASK[1])}
    entitled = showcase.drf_entitlement(demand, PAPER)
    assert showcase.drf_utilization(demand, entitled, PAPER) == pytest.approx((1, 14 / 18))


def test_stranded_counts_what_no_waiting_job_fits() -> None:
    gib = showcase.GIB
    # Machine 1 (6 cpus, 12 GiB) holds 5 cpus and 4 GiB: 1 cpu and 8 GiB free, which an
    # 8 GiB job fits and a 12 GiB one does not. Every other machine is full.
    full = {index: capacity for index, capacity in enumerate(showcase.MACHINE_CAPACITIES)}
    used = {**full, 0: (5, 4 * gib)}
    assert showcase.stranded(used, [(1, 8 * gib)]) == (0.0, 0.0)
    assert showcase.stranded(used, [(1, 12 * gib), (2, 1 * gib)]) == pytest.approx(
        (1 / showcase.CAPACITY_CPUS, 8 / showcase.CAPACITY_GIB))
    assert showcase.machine_of("slot3@vm") == 2


def test_json_stdout_keeps_only_the_json(capfd) -> None:
    """What C code (the MILP solver) writes to file descriptor 1 while `--json` runs goes to
    stderr: stdout holds the one JSON object (issue 48's side note)."""
    import os

    with showcase.output_to_stderr():
        os.write(1, b"Running HiGHS\n")
        print("a Python line")
    print("{}")
    out, err = capfd.readouterr()
    assert out == "{}\n"
    assert err == "Running HiGHS\na Python line\n"


def daemon_directory_with_one_landed_allocation(directory: Path) -> Path:
    """A daemon's directory as a showcase run leaves it: its store (one allocation, accepted)
    and its log."""
    import sqlite3

    directory.mkdir()
    with sqlite3.connect(directory / "state.db") as db:
        db.execute("create table actions (key, kind, job, machine, state, error)")
        db.execute("create table action_log (key, state, time)")
        db.execute("insert into actions values ('a', 'allocate', '1.0', 'slot1@vm', "
                   "'landed', null)")
        db.execute("insert into action_log values ('a', 'confirmed', 10.0)")
    (directory / "daemon.log").write_text("cycle 1 ok\n")
    return directory


@pytest.mark.parametrize("save", [False, True])
def test_the_daemons_store_and_log_are_kept_beside_the_record_when_saving(tmp_path, save):
    from tests.harness.pool_record import Run

    record = showcase.showcase.Record(
        "gridfair", "drf-fair", "", 1, [Run("1.0", "C", "slot1@vm", 10.0, None, False)], {}, {},
        {}, 0.0, 0.0, 0.0, 20.0, 0.0, [], [])
    directory = daemon_directory_with_one_landed_allocation(tmp_path / "daemon")
    saved = tmp_path / "records"
    showcase.keep_landing(record, directory, str(saved) if save else None)
    assert record.landing["landed"] == 1
    assert not directory.exists()
    kept = sorted(path.name for path in saved.iterdir()) if save else []
    assert kept == (["gridfair-drf-fair-seed1-daemon.log", "gridfair-drf-fair-seed1-state.db"]
                    if save else [])


def test_a_vacate_in_the_arrivals_own_second_counts() -> None:
    """The event log's times are whole seconds: the six vacates drf-fair made for A in the
    second A arrived (2026-11-29, `showcase3-landing2`) read 0.47 s before the arrival, and
    the figures counted none of them."""
    record = showcase.showcase.Record.load(
        Path(__file__).resolve().parents[1] / "docs" / "results" / "records"
        / "showcase3-landing2" / "gridfair-drf-fair-seed1-run1.json")
    assert sum(1 for run in record.runs if run.evicted and run.end < record.arrival) == 6
    figures = showcase.figures(record)
    assert figures["vacates"] == 6 and figures["lost_cpu_seconds"] == 406.0
