"""The DMFA-SRQ paper's allocation experiment as sweep runs: user demands read from a
task_events shard, and the dynamic allocation against static weighted DRF."""

from __future__ import annotations

import gzip

import pytest

from gridfair.errors import InputError
from gridfair.experiments.allocation import allocate, user_demands
from gridfair.experiments.runs import RunSpec, execute
from tests.conftest import shared_file

SHARD = "google/task_events/part-00000-of-00500.csv.gz"


def shard_row(time: int, event: int, user: str, cpu: str, memory: str, missing: str = "") -> str:
    return f"{time},{missing},1,0,,{event},{user},0,0,{cpu},{memory},0,0"


def test_demands_are_mean_submitted_requests_normalised(tmp_path):
    path = tmp_path / "part-00000-of-00500.csv.gz"
    rows = [shard_row(1, 0, "a", "0.2", "0.1"), shard_row(2, 0, "a", "0.4", "0.1"),
            shard_row(3, 1, "a", "0.9", "0.9"),  # SCHEDULE: not a request
            shard_row(4, 0, "b", "0.1", "0.4"),
            shard_row(5, 0, "b", "0.9", "0.0"),  # zero memory: left out
            shard_row(6, 0, "c", "0.5", "0.5", missing="1"),  # missing info: left out
            "7,,2,0"]  # short row
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write("\n".join(rows) + "\n")
    assert user_demands(str(path)) == {"a": (1.0, pytest.approx(1 / 3)), "b": (0.25, 1.0)}


def test_dmfa_never_beats_the_static_optimum_and_both_fill_the_pool():
    path = str(shared_file(SHARD))
    for users in (20, 100):
        for seed in (1, 2):
            dynamic = allocate("dmfa-srq", path, users, seed)
            static = allocate("wdrf", path, users, seed)
            # Static weighted DRF gives everyone M w_i: its min and sum are both M (Eq. 5).
            assert static["min_dominant_share"] == pytest.approx(static["sum_dominant_shares"])
            assert dynamic["min_dominant_share"] <= static["min_dominant_share"] + 1e-9
            # Sharing incentive: every user gets at least its share.
            assert dynamic["min_dominant_share"] >= 1 - 1e-9
            for result in (dynamic, static):
                assert max(result["utilization_cpu"], result["utilization_memory"]) \
                    == pytest.approx(1.0)
            assert dynamic == allocate("dmfa-srq", path, users, seed)


def test_allocation_runs_through_a_run_spec():
    path = str(shared_file(SHARD))
    spec = RunSpec.make({"experiment": "allocation", "workload": path, "policy": "dmfa-srq",
                         "users": 20, "seed": 3})
    outcome = execute(spec)
    assert outcome.ok, outcome.error
    assert outcome.summary == allocate("dmfa-srq", path, 20, 3)
    too_many = execute(RunSpec.make({**spec.params, "users": 100_000}))
    assert not too_many.ok and "users between 1 and" in too_many.error
    with pytest.raises(InputError):
        allocate("hosep", path, 20, 3)
