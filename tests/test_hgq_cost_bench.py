"""bench/hgq_cost.py on a small pool: one JSON object, a run per U on each side, the same
decisions on a baseline that is this very checkout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "hgq_cost.py"


def test_the_bench_prints_one_json_object_and_decides_as_its_baseline() -> None:
    done = subprocess.run([sys.executable, str(BENCH), "--users", "8,40", "--slots", "12",
                           "--cycles", "2", "--churn", "3", "--baseline", str(ROOT), "--json"],
                          capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(done.stdout)  # nothing else on stdout
    assert [run["users"] for run in result["code"]["runs"]] == [8, 40]
    assert all(run["decisions"] == 6 for side in ("code", "flat", "baseline")
               for run in result[side]["runs"])
    assert result["same_decisions"] is True
    assert result["code"]["exponent"] is not None
