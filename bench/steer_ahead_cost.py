"""What steering ahead costs a cycle at scale: `steer_ahead.next_jobs` against the decide phase.

The pool of the other cycle benches (`tests.harness.synthetic`: 10,000 one-CPU slots of 1,000
owners, 100,000 jobs of 1,000 users with five Requirements, `--busy` of the slots running a
job) is written as `condor_status -long` / `condor_q -long` files and read into a snapshot as
the files backend reads it; then, as a daemon cycle does on a pool that steers ahead
(`gridfair.daemon.cycle`, the shipped policy of `configs/htcondor.toml`, `reclaim`), on the
pool the daemon carries between cycles (`KeptPool`, `daemon.incremental = true` as shipped),
a first cycle and `--repeat` steady ones on the same snapshot, each in two phases:

1. decide: the negotiator's cycle (`Negotiator.cycle`);
2. steer ahead: `next_jobs` on the pool the cycle left, every busy slot freed and refilled
   in the order its job started.

Figures: each phase's wall seconds (`first_*`: the first cycle, whose matcher meets every
slot's ad for the first time; `steady_*`: the median of the others), their ratios (steer
ahead / decide), the busy slots looked at and the next jobs steered. `--steps` also times
the pool's steps within the steering ahead (a busy slot freed, the next job's fit, ClassAd
match included, and its start: `steady_steps_s`, medians), which slows it a little: its
ratios are not the ones to quote. The machine may be
shared: the load average is printed (before and after), and each ratio is of phases timed in
the same process, one after the other.

    .venv/bin/python bench/steer_ahead_cost.py [--slots 10000] [--jobs 100000] [--busy 0.9]
        [--repeat 3] [--steps] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.harness: test tools

from gridfair.ad_views import JobStatus, Snapshot  # noqa: E402
from gridfair.classads.kept_pool import KeptPool  # noqa: E402
from gridfair.classads.reader import AdFormat  # noqa: E402
from gridfair.classads.views import read_snapshot  # noqa: E402
from gridfair.core.pool import Pool  # noqa: E402
from gridfair.daemon.config import load_config  # noqa: E402
from gridfair.daemon.cycle import stages_from_config  # noqa: E402
from gridfair.daemon.steer_ahead import next_jobs  # noqa: E402
from tests.harness.synthetic import job_ads, machine_ads, write_ads  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
OWNERS = USERS = 1_000
#: The pool's steps in `next_jobs`, timed with `--steps`.
STEPS = ("finish", "fits_free", "start")


class StepTimes:
    """Seconds spent in each of `STEPS` while `timing` is set (the pool's methods wrapped)."""

    def __init__(self) -> None:
        self.spent = dict.fromkeys(STEPS, 0.0)
        self.timing = False
        for name in STEPS:
            setattr(Pool, name, self._timed(name, getattr(Pool, name)))

    def _timed(self, name: str, method: Callable) -> Callable:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not self.timing:
                return method(*args, **kwargs)
            start = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.spent[name] += time.perf_counter() - start
        return timed


def one_cycle(kept: KeptPool, snapshot: Snapshot, policy: Mapping[str, Any],
              steps: StepTimes | None) -> tuple[float, float, int, dict[str, float]]:
    """Seconds of the decide phase and of steering ahead on the kept pool laid out for the
    snapshot; the next jobs found; the steps' seconds (with `steps`)."""
    stages = stages_from_config(policy)
    loaded = kept.update(snapshot, stages)
    start = time.perf_counter()
    loaded.negotiator.cycle(snapshot.time)
    decided = time.perf_counter()
    if steps is not None:
        steps.spent, steps.timing = dict.fromkeys(STEPS, 0.0), True
    ahead = next_jobs(loaded.pool, stages.order, snapshot, set(), snapshot.time)
    done = time.perf_counter()
    if steps is not None:
        steps.timing = False
    loaded.pool.close()
    return decided - start, done - decided, len(ahead), steps.spent if steps else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--busy", type=float, default=0.9,
                        help="the fraction of the slots running a job")
    parser.add_argument("--repeat", type=int, default=3, help="steady cycles after the first")
    parser.add_argument("--steps", action="store_true",
                        help="also time the pool's steps within the steering ahead")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    load_before = os.getloadavg()
    machines = machine_ads(options.slots, OWNERS)
    jobs = job_ads(options.jobs, USERS, machines, int(options.slots * options.busy))
    with tempfile.TemporaryDirectory(prefix="gridfair-steer-ahead-") as directory:
        paths = (Path(directory) / "machines", Path(directory) / "jobs")
        write_ads(paths[0], machines, AdFormat.OLD)
        write_ads(paths[1], jobs, AdFormat.OLD)
        snapshot = read_snapshot(*paths, now=2e9)
    busy = sum(job.status == JobStatus.RUNNING for job in snapshot.jobs)
    policy = load_config(ROOT / "configs" / "htcondor.toml")["policy"]
    kept = KeptPool(served={})
    steps = StepTimes() if options.steps else None
    cycles = [one_cycle(kept, snapshot, policy, steps) for _ in range(options.repeat + 1)]
    first_decide, first_ahead, steered, _ = cycles[0]
    steady_decide = statistics.median(cycle[0] for cycle in cycles[1:])
    steady_ahead = statistics.median(cycle[1] for cycle in cycles[1:])
    result = {
        "slots": options.slots, "jobs": options.jobs, "busy_slots": busy,
        "policy": policy["name"], "repeat": options.repeat,
        "first_decide_s": round(first_decide, 3), "first_steer_ahead_s": round(first_ahead, 3),
        "first_ratio": round(first_ahead / first_decide, 3),
        "steady_decide_s": round(steady_decide, 3),
        "steady_steer_ahead_s": round(steady_ahead, 3),
        "steady_ratio": round(steady_ahead / steady_decide, 3),
        "steered_ahead": steered,
        **({"steady_steps_s": {name: round(statistics.median(cycle[3][name]
                                                             for cycle in cycles[1:]), 3)
                               for name in STEPS}} if steps else {}),
        "loadavg": [round(value, 2) for value in (*load_before, *os.getloadavg())],
    }
    if options.json:
        print(json.dumps(result))
        return
    for key, value in result.items():
        print(f"{key:<16} {value}")


if __name__ == "__main__":
    main()
