"""bench/hgq_cost.py and bench/live_tree_ties.py on small pools: each prints one JSON object, a
run per U (and order) on each side, and decides as its baseline, which is this very checkout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def run_bench(name: str, *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(ROOT / "bench" / name), "--users", "8,40",
                           *args, "--baseline", str(ROOT), "--json"],
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)  # nothing else on stdout


def test_hgq_cost_prints_one_json_object_and_decides_as_its_baseline() -> None:
    result = run_bench("hgq_cost.py", "--slots", "12", "--cycles", "2", "--churn", "3")
    assert [run["users"] for run in result["code"]["runs"]] == [8, 40]
    assert all(run["decisions"] == 6 for side in ("code", "flat", "baseline")
               for run in result[side]["runs"])
    assert result["same_decisions"] is True
    assert result["code"]["exponent"] is not None


def test_live_tree_ties_prints_one_json_object_and_decides_as_its_baseline() -> None:
    result = run_bench("live_tree_ties.py", "--slots", "6", "--cycles", "3", "--churn", "2")
    for side in ("code", "baseline"):
        for order in ("condor", "sdrf"):
            runs = result[side]["orders"][order]["runs"]
            assert [run["users"] for run in runs] == [8, 40]
            assert all(run["decisions"] == 6 and run["swap_events"] >= 0 for run in runs)
    assert result["same_decisions"] is True
