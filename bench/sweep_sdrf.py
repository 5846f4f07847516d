"""Benchmark: the SDRF paper's delta x load sweep on Dask, with 2 workers and with 1.

The 42 SDRF runs of `sim_grids/sweeps/sdrf_vs_wdrf.toml` (delta = 1 - 10^-k, k = 1..7, times
capacity ratio r = 0.5 .. 1.0 on the Google derived task list; the weighted-DRF baselines are
left out unless --with-baselines), each worker count on a fresh `LocalCluster` (its start-up
included), every outcome stored in a results DB as in `gridfair sweep`. Prints the wall time per
worker count, the speed-up of the most workers over the fewest, the machine's load average
(other work on the machine slows everything down), and checks that every worker count stored
the same results.

    .venv/bin/python bench/sweep_sdrf.py [--workers 2,1] [--with-baselines]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from gridfair.experiments.runner import dask_client, run_on_dask
from gridfair.experiments.spec import load_sweep
from gridfair.experiments.store import ResultsStore

SPEC = Path(__file__).resolve().parent.parent / "sim_grids" / "sweeps" / "sdrf_vs_wdrf.toml"


def timed_sweep(runs, workers: int, db: Path) -> tuple[float, list]:
    positions = {run.key: index for index, run in enumerate(runs)}
    started = time.perf_counter()
    with ResultsStore(db) as store, dask_client(workers=workers) as client:
        run_on_dask(client, runs, lambda spec, outcome: store.record(
            positions[spec.key], spec, outcome))
        elapsed = time.perf_counter() - started
        results = [(spec.params, outcome.ok, outcome.users, outcome.summary, outcome.error)
                   for spec, outcome in store.results()]
    return elapsed, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="2,1", help="worker counts to time, in order")
    parser.add_argument("--with-baselines", action="store_true",
                        help="also run the 6 weighted-DRF baselines (48 runs)")
    args = parser.parse_args()
    runs = [run for run in load_sweep(SPEC).runs
            if args.with_baselines or run.get("policy") == "sdrf"]
    counts = [int(count) for count in args.workers.split(",")]
    print(f"{len(runs)} runs from {SPEC.name}; {os.cpu_count()} cores")
    timings: dict[int, float] = {}
    reference = None
    with tempfile.TemporaryDirectory() as scratch:
        for workers in counts:
            before = os.getloadavg()[0]
            elapsed, results = timed_sweep(runs, workers, Path(scratch) / f"w{workers}.db")
            failed = sum(1 for result in results if not result[1])
            timings[workers] = elapsed
            print(f"workers={workers}: {elapsed:7.1f} s  ({len(runs) / elapsed:.2f} runs/s, "
                  f"{failed} failed; load average {before:.1f} before, "
                  f"{os.getloadavg()[0]:.1f} after)")
            if reference is None:
                reference = results
            elif results != reference:
                raise SystemExit(f"workers={workers} stored different results")
    if len(counts) > 1:
        most, fewest = max(counts), min(counts)
        print(f"speed-up of {most} workers over {fewest}: "
              f"{timings[fewest] / timings[most]:.2f}x; same results: yes")


if __name__ == "__main__":
    main()
