"""Every plot kind drawn from a small results DB by `gridfair plot`: a valid PNG (signature,
sensible dimensions), repeatable SVG, the figures behind the SDRF plots, and bad input."""

from __future__ import annotations

import struct

import pytest
from click.testing import CliRunner

import gridfair.cli.plot  # noqa: F401 - registers the command
from gridfair.cli import cli
from gridfair.experiments.plots import (
    completed_ratio_points,
    user_wait_reduction,
    wait_reduction_rows,
)
from gridfair.experiments.runner import run_in_process
from gridfair.experiments.runs import RunOutcome, RunSpec
from gridfair.experiments.store import ResultsStore
from gridfair.sim.grid_loader import embedded_grids

GRID = embedded_grids()["hosep-table1"].as_posix()
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def user(name: str, **metrics: float) -> dict:
    return {"user": name, **metrics}


def sdrf_outcome(spec: RunSpec, waits: list[float], completed: list[int]) -> RunOutcome:
    users = [user(f"u{index}", mean_wait=wait, submitted=10, completed=10,
                  completed_by_horizon=done)
             for index, (wait, done) in enumerate(zip(waits, completed, strict=True))]
    return RunOutcome(spec.key, True, users=users,
                      summary={"completed_by_horizon": sum(completed), "mean_wait": 0.0})


@pytest.fixture(scope="module")
def dbs(tmp_path_factory):
    """One small DB per paper, as its sweep would write it."""
    root = tmp_path_factory.mktemp("dbs")
    paths = {kind: root / f"{kind}.db" for kind in ("hosep", "sdrf", "justice", "allocation")}
    with ResultsStore(paths["hosep"]) as store:
        specs = [RunSpec.make({"grid": GRID, "workload": workload, "policy": policy,
                               "seed": seed, "checkpointing": checkpointing})
                 for workload in ("low", "high") for checkpointing in (False, True)
                 for policy in ("osep", "hosep") for seed in (1, 2)]
        run_in_process(specs, lambda spec, outcome: store.record(
            specs.index(spec), spec, outcome))
    with ResultsStore(paths["sdrf"]) as store:
        position = 0
        for ratio in (0.5, 0.75, 1.0):
            for policy, delta in (("wdrf", None), ("sdrf", 0.9), ("sdrf", 0.999999)):
                spec = RunSpec({"workload": "trace.csv.gz", "policy": policy,
                                "capacity_ratio": ratio,
                                **({"delta": delta} if delta else {})})
                gain = 0.0 if delta is None else (0.2 if delta > 0.99 else 0.05)
                waits = [wait * (1 - gain) / ratio for wait in (100.0, 300.0, 50.0)]
                completed = [5, 7, 9] if delta is None else [6, 7, 8]
                store.record(position, spec, sdrf_outcome(spec, waits, completed))
                position += 1
    with ResultsStore(paths["justice"]) as store:
        position = 0
        for trace in ("KTH-SP2.swf.gz", "CTC-SP2.swf.gz"):
            for deadlines in ("Fixed1x", "Jockey1x2x"):
                for index, policy in enumerate(("justice", "baseline-fs", "reactive-fs")):
                    spec = RunSpec({"workload": trace, "policy": policy,
                                    "deadlines": deadlines})
                    store.record(position, spec, RunOutcome(spec.key, True, summary={
                        "jain_index": 0.9 - 0.1 * index,
                        "deadlines_met_fraction": 0.8 - 0.2 * index}))
                    position += 1
    with ResultsStore(paths["allocation"]) as store:
        position = 0
        for users in (20, 100, 500):
            for policy in ("dmfa-srq", "wdrf"):
                for seed in (1, 2, 3):
                    spec = RunSpec({"experiment": "allocation", "workload": "shard.csv.gz",
                                    "policy": policy, "users": users, "seed": seed})
                    level = 1.0 + 0.01 * seed + (0.1 if policy == "wdrf" else 0.0)
                    store.record(position, spec, RunOutcome(spec.key, True, summary={
                        "min_dominant_share": level,
                        "sum_dominant_shares": level + 0.05, "utilization_cpu": 1.0,
                        "utilization_memory": 0.6 + 0.01 * seed}))
                    position += 1
    return paths


def plot(*args: str):
    return CliRunner().invoke(cli, ["plot", *args])


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("kind, db, extra", [
    ("satisfaction", "hosep", ()),
    ("wait-reduction", "sdrf", ()),
    ("completed-ratio", "sdrf", ("--delta", "0.999999", "--capacity-ratio", "0.5")),
    ("justice", "justice", ()),
    ("allocation", "allocation", ()),
])
def test_each_kind_is_a_valid_png_of_sensible_size(tmp_path, dbs, kind, db, extra):
    out = tmp_path / f"{kind}.png"
    result = plot(str(dbs[db]), "--kind", kind, "--out", str(out), *extra)
    assert result.exit_code == 0, result.output
    width, height = png_size(out)
    assert 400 <= width <= 3000 and 300 <= height <= 3000
    assert out.stat().st_size > 10_000  # something was drawn, not an empty canvas


def test_svg_on_request_and_repeatable(tmp_path, dbs):
    first, second = tmp_path / "a.svg", tmp_path / "b.svg"
    for out in (first, second):
        assert plot(str(dbs["sdrf"]), "-k", "wait-reduction", "-o", str(out)).exit_code == 0
    assert first.read_bytes().startswith(b"<?xml")
    assert first.read_bytes() == second.read_bytes()


def test_wait_reduction_compares_the_users_mean_waits():
    base = RunOutcome("b", True, users=[user("a", mean_wait=100.0), user("b", mean_wait=300.0),
                                        user("c", mean_wait=float("nan"))])
    run = RunOutcome("r", True, users=[user("a", mean_wait=50.0), user("b", mean_wait=250.0),
                                       user("c", mean_wait=10.0)])
    assert user_wait_reduction(run, base) == pytest.approx(25.0)


def test_wait_reduction_keeps_policy_variants_apart():
    def run(policy: str, wait: float, **options):
        spec = RunSpec({"workload": "t.csv", "policy": policy, "capacity_ratio": 0.5,
                        **options})
        return spec, RunOutcome(spec.key, True, users=[user("a", mean_wait=wait)])

    # Each SDRF run is paired with the weighted DRF run of its own allocation rule.
    results = [run("wdrf", 100.0), run("sdrf", 80.0, delta=0.9),
               run("wdrf", 50.0, allocation="backfill"),
               run("sdrf", 30.0, delta=0.9, allocation="backfill")]
    rows = wait_reduction_rows(results, "sdrf", "wdrf")
    assert [(row["variant"], row["reduction"].mean) for row in rows] == [
        ("", pytest.approx(20.0)), ("allocation=backfill", pytest.approx(40.0))]


def test_completed_ratio_uses_the_horizon_count(dbs):
    with ResultsStore(dbs["sdrf"]) as store:
        results = store.results()
    points = completed_ratio_points(results, "sdrf", "wdrf", delta=0.999999,
                                    capacity_ratio=0.75)
    assert [(p["user"], p["baseline"], p["policy"]) for p in points] == [
        ("u0", 0.5, 0.6), ("u1", 0.7, 0.7), ("u2", 0.9, 0.8)]


def test_bad_input_exits_2(tmp_path, dbs):
    missing = plot(str(tmp_path / "none.db"), "-k", "satisfaction", "-o", str(tmp_path / "x.png"))
    assert missing.exit_code == 2 and "no such results DB" in missing.output
    jpeg = plot(str(dbs["hosep"]), "-k", "satisfaction", "-o", str(tmp_path / "x.jpg"))
    assert jpeg.exit_code == 2 and ".png or .svg" in jpeg.output
    no_delta = plot(str(dbs["sdrf"]), "-k", "completed-ratio", "--delta", "0.5",
                    "-o", str(tmp_path / "x.png"))
    assert no_delta.exit_code == 2 and "no 'sdrf' run at delta=0.5" in no_delta.output
    wrong_db = plot(str(dbs["hosep"]), "-k", "wait-reduction", "-o", str(tmp_path / "x.png"))
    assert wrong_db.exit_code == 2 and "no run of 'sdrf'" in wrong_db.output
    no_allocation = plot(str(dbs["hosep"]), "-k", "allocation", "-o", str(tmp_path / "x.png"))
    assert no_allocation.exit_code == 2 and "no allocation experiment runs" in no_allocation.output
