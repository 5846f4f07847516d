"""The showcase bench's pure helpers: shares rebuilt from runs, and the settling time."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "live_owner_share.py"
_spec = importlib.util.spec_from_file_location("live_owner_share", BENCH)
showcase = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = showcase  # dataclasses look their module up
_spec.loader.exec_module(showcase)
Run = showcase.Run

WEIGHT = {"slot1": 3.0, "slot2": 1.0}  # A owns slot1 (75 %), B slot2 (25 %)
PROVIDED = {"A": 0.75, "B": 0.25}


def test_shares_follow_runs_and_a_vacate_frees_the_slot() -> None:
    runs = [Run("1.0", "B", "slot1", 0, 10, True), Run("2.0", "B", "slot2", 0, None, False),
            Run("3.0", "A", "slot1", 12, None, False)]
    timeline = showcase.share_timeline(runs, WEIGHT, ["A", "B"])
    assert timeline == [(0, {"A": 0.0, "B": 1.0}), (10, {"A": 0.0, "B": 0.25}),
                        (12, {"A": 0.75, "B": 0.25})]


def test_settles_when_every_owner_reaches_its_share_and_stays() -> None:
    timeline = [(0, {"A": 0.0, "B": 1.0}), (10, {"A": 0.0, "B": 0.25}),
                (12, {"A": 0.75, "B": 0.25})]
    assert showcase.seconds_to_share(timeline, PROVIDED, ["A", "B"], since=5) == 7
    # B alone is within its share from the vacate on.
    assert showcase.seconds_to_share(timeline, PROVIDED, ["B"], since=5) == 5


def test_leaving_the_share_again_resets_and_never_settling_is_none() -> None:
    timeline = [(0, {"A": 0.75, "B": 0.25}), (4, {"A": 0.0, "B": 1.0}),
                (9, {"A": 0.75, "B": 0.25})]
    assert showcase.seconds_to_share(timeline, PROVIDED, ["A", "B"], since=1) == 8
    assert showcase.seconds_to_share(timeline[:2], PROVIDED, ["A", "B"], since=1) is None


def test_tolerance_is_ten_percent_of_the_provided_share() -> None:
    assert showcase.within({"A": 0.676, "B": 0.274}, PROVIDED, ["A", "B"])
    assert not showcase.within({"A": 0.674, "B": 0.25}, PROVIDED, ["A", "B"])
