"""bench/live_tree_ties.py on a small pool: one JSON object, a run per order and U on each
side, swap events counted, the same decisions on a baseline that is this very checkout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "live_tree_ties.py"


def test_the_bench_prints_one_json_object_and_decides_as_its_baseline() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--users", "8,40", "--slots", "6",
                           "--cycles", "3", "--churn", "2", "--baseline", str(ROOT), "--json"],
                          capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(done.stdout)  # nothing else on stdout
    for side in ("code", "baseline"):
        for order in ("condor", "sdrf"):
            runs = result[side]["orders"][order]["runs"]
            assert [run["users"] for run in runs] == [8, 40]
            assert all(run["decisions"] == 6 and run["swap_events"] >= 0 for run in runs)
    assert result["same_decisions"] is True
