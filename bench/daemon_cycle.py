"""What a daemon cycle costs, ingest included: reading the dumps, reconciling, negotiating,
journaling, writing the store.

A synthetic pool (gridfair.classads.synthetic: varied power and Requirements, owners named as
users) is written as `condor_status -long` / `condor_q -long` dumps and the `files` backend
daemon runs on it: a first cycle that sees every job for the first time, then steady cycles
before each of which `--churn` of the jobs change state (idle jobs held, held jobs released:
the job dump is rewritten, the slot dump is not), as between two cycles of a busy pool.

`--baseline` runs the same cycles again with a backend that remembers nothing between reads
(every dump read and every ad parsed each cycle: the daemon before dumps were remembered), in
the same run, on the same files and store history, so the two columns differ in that alone.

    .venv/bin/python bench/daemon_cycle.py --slots 10000 --jobs 100000 --baseline [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import tempfile
from pathlib import Path

import classad2

from gridfair.classads.reader import AdFormat
from gridfair.classads.synthetic import job_ads, machine_ads, write_ads
from gridfair.daemon.backends.files import FilesBackend
from gridfair.daemon.config import validate
from gridfair.daemon.cycle import CycleRunner
from gridfair.daemon.store import Store
from gridfair.model import JobStatus


def churn(jobs: list[classad2.ClassAd], fraction: float, rng: random.Random) -> int:
    """Hold `fraction` of the idle jobs and release as many held ones; returns how many
    changed. Running jobs are left alone so the slot dump stays as it is."""
    idle = [ad for ad in jobs if ad["JobStatus"] == JobStatus.IDLE]
    held = [ad for ad in jobs if ad["JobStatus"] == JobStatus.HELD]
    count = max(1, int(len(jobs) * fraction))
    for ad in rng.sample(held, min(len(held), count // 2)):
        ad["JobStatus"] = int(JobStatus.IDLE)
    changed = min(len(held), count // 2)
    for ad in rng.sample(idle, count - changed):
        ad["JobStatus"] = int(JobStatus.HELD)
    return count


def run_side(directory: Path, store_name: str, machines, jobs, cycles: int, fraction: float,
             remember: bool) -> dict[str, float]:
    """One side: a first cycle, then `cycles` steady ones with churn before each."""
    pool = directory / "pool"
    write_ads(pool / "pool.status", machines, AdFormat.OLD)
    write_ads(pool / "pool.queue", jobs, AdFormat.OLD)
    raw = {"daemon": {"store": store_name, "query_timeout": 3600.0},
           "backend": {"kind": "files", "files": {"directory": "pool", "actions": "a.jsonl"}},
           "safety": {"max_snapshot_age": 1e9, "min_runtime": 0.0}}
    config = validate(raw, base=directory)

    def backend() -> FilesBackend:
        return FilesBackend(pool, directory / "a.jsonl")

    runner = CycleRunner(config, backend(), Store(directory / store_name))
    first = runner.run()
    rng = random.Random(7)
    steady = []
    for _ in range(cycles):
        churn(jobs, fraction, rng)
        write_ads(pool / "pool.queue", jobs, AdFormat.OLD)
        if not remember:
            runner.backend = backend()  # nothing carried over from the last read
        steady.append(runner.run().duration)
    return {"first_cycle_seconds": round(first.duration, 3),
            "steady_cycle_seconds": round(min(steady), 3),
            "steady_cycle_seconds_median": round(sorted(steady)[len(steady) // 2], 3),
            "decisions_first_cycle": first.counts.get("decisions", 0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--cycles", type=int, default=3, help="steady cycles (default 3)")
    parser.add_argument("--churn", type=float, default=0.01,
                        help="fraction of jobs changing state before each steady cycle")
    parser.add_argument("--baseline", action="store_true",
                        help="also run the backend that re-reads everything, side by side")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.slots < 1 or args.jobs < args.slots or not 0 < args.churn < 1:
        parser.error("need 1 <= --slots <= --jobs and 0 < --churn < 1")
    result: dict[str, object] = {"slots": args.slots, "jobs": args.jobs,
                                 "churn": args.churn, "load_average": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        (directory / "pool").mkdir()
        machines = machine_ads(args.slots, args.users)
        running = args.slots * 9 // 10
        sides = [("remembered", True)] + ([("baseline", False)] if args.baseline else [])
        for label, remember in sides:
            jobs = job_ads(args.jobs, args.users, machines, running=running)
            result[label] = run_side(directory, f"{label}.db", machines, jobs, args.cycles,
                                     args.churn, remember)
    # ru_maxrss is in KiB on Linux; the peak of the whole run (both sides).
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    result.update({key: value for key, value in result["remembered"].items()
                   if key in ("first_cycle_seconds", "steady_cycle_seconds")})
    if args.json:
        print(json.dumps(result, sort_keys=True))
        return
    print(f"pool: {args.slots} slots, {args.jobs} jobs, {args.users} users; "
          f"{args.churn:.0%} of jobs change state before each of {args.cycles} steady cycles "
          f"(load average {result['load_average']:.2f})")
    for label, _ in sides:
        side = result[label]
        print(f"{label:>10}: first cycle {side['first_cycle_seconds']:.2f} s, steady cycle "
              f"{side['steady_cycle_seconds']:.2f} s best, "
              f"{side['steady_cycle_seconds_median']:.2f} s median (ingest included)")
    print(f"peak RSS {result['peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
