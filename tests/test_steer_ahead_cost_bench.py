"""bench/steer_ahead_cost.py on a small pool: one JSON object, the phases timed and steered."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "steer_ahead_cost.py"


def test_the_bench_prints_one_json_object_with_both_phases_and_the_steps():
    done = subprocess.run([sys.executable, str(BENCH), "--slots", "100", "--jobs", "1000",
                           "--repeat", "1", "--steps", "--json"],
                          capture_output=True, text=True, timeout=120, check=True)
    result = json.loads(done.stdout)  # nothing else on stdout
    assert result["busy_slots"] == 90 and result["policy"] == "reclaim"
    assert result["first_decide_s"] > 0 and result["steady_steer_ahead_s"] > 0
    assert 0 < result["steered_ahead"] <= result["busy_slots"]
    assert set(result["steady_steps_s"]) == {"finish", "fits_free", "start"}
