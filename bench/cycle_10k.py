"""One negotiation cycle on a pool of 10,000 slots and 100,000 jobs, from ClassAd files.

Generates 10,000 one-CPU slots (1,000 owners, 1,000 to 4,000 MFlops, three architectures)
and 100,000 jobs of 1,000 users with five distinct Requirements, 8,000 of them running;
writes them as `condor_status -long` / `condor_q -long` files (and, with --all-formats, as
new syntax and JSON too); then times:

1. reading the files into machine and job views (ads per second);
2. building the core's pool from the views (nodes, 100,000 submissions, 8,000 starts);
3. one HOSEP cycle, Requirements evaluated with classad2 through autoclusters;
4. the same cycle on a fresh pool evaluating every (job, slot) pair the cycle looks at with
   classad2 directly, to show what the autoclusters save.

The target is step 3 (and 2 + 3) under 2 s from ads already read. Run:
    .venv/bin/python bench/cycle_10k.py [--all-formats] [--keep DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.harness: test tools

from gridfair.classads.matching import AutoclusterMatcher, symmetric_match  # noqa: E402
from gridfair.classads.reader import AdFormat  # noqa: E402
from gridfair.classads.to_pool import pool_from_snapshot  # noqa: E402
from gridfair.classads.views import read_snapshot  # noqa: E402
from gridfair.core.pool import Node, Task  # noqa: E402
from gridfair.policies.registry import build_stages  # noqa: E402
from tests.harness.synthetic import job_ads, machine_ads, write_ads  # noqa: E402

SLOTS, OWNERS = 10_000, 1_000
JOBS, USERS, RUNNING = 100_000, 1_000, 8_000


def timed(label: str, action):
    start = time.perf_counter()
    result = action()
    elapsed = time.perf_counter() - start
    print(f"{label:<52} {elapsed:8.3f} s")
    return result, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all-formats", action="store_true",
                        help="also time reading new-syntax and JSON files")
    parser.add_argument("--keep", type=Path, help="write the files here and keep them")
    args = parser.parse_args()
    directory = args.keep or Path(tempfile.mkdtemp(prefix="gridfair-bench-"))
    directory.mkdir(parents=True, exist_ok=True)

    machines, _ = timed(f"generate {SLOTS:,} slot ads", lambda: machine_ads(SLOTS, OWNERS))
    jobs, _ = timed(f"generate {JOBS:,} job ads ({RUNNING:,} running)",
                    lambda: job_ads(JOBS, USERS, machines, RUNNING))
    formats = list(AdFormat) if args.all_formats else [AdFormat.OLD]
    for ad_format in formats:
        paths = (directory / f"machines.{ad_format}", directory / f"jobs.{ad_format}")
        timed(f"write {ad_format} files", lambda paths=paths, ad_format=ad_format: (
            write_ads(paths[0], machines, ad_format), write_ads(paths[1], jobs, ad_format)))
        sizes = sum(path.stat().st_size for path in paths) / 1e6
        snapshot, seconds = timed(
            f"read {ad_format} ({sizes:.0f} MB) into views",
            lambda paths=paths: read_snapshot(*paths, now=2e9),
        )
        print(f"{'':<52} {(SLOTS + JOBS) / seconds:8.0f} ads/s")

    matcher = AutoclusterMatcher()
    loaded, build_seconds = timed(
        "build the pool from the views",
        lambda: pool_from_snapshot(snapshot, build_stages("hosep"), matcher=matcher),
    )
    decisions, cycle_seconds = timed("one HOSEP cycle (autoclustered matching)",
                                     lambda: loaded.negotiator.cycle(snapshot.time))
    kinds = {}
    for decision in decisions:
        kinds[decision.kind] = kinds.get(decision.kind, 0) + 1
    pool = loaded.pool
    print(f"{'build + cycle':<52} {build_seconds + cycle_seconds:8.3f} s (target < 2 s)")
    print(f"decisions: {kinds}; free slots left: {sum(1 for _ in pool.free_nodes())}")
    print(f"autoclusters: {matcher.autoclusters}; machine classes: {matcher.machine_classes}; "
          f"symmetric matches evaluated: {matcher.evaluations:,} "
          f"(of {SLOTS * JOBS:,} job-slot pairs)")

    direct = DirectMatcher()
    loaded = pool_from_snapshot(snapshot, build_stages("hosep"), matcher=direct)
    decisions_direct, _ = timed("the same cycle, every pair evaluated directly",
                                lambda: loaded.negotiator.cycle(snapshot.time))
    same = [(d.kind, d.task.id, d.node.name) for d in decisions_direct] == [
        (d.kind, d.task.id, d.node.name) for d in decisions]
    print(f"symmetric matches evaluated directly: {direct.evaluations:,}; "
          f"same decisions: {same}")
    print(f"files in {directory}")


class DirectMatcher:
    """classad2's symmetric match on every call, counted: no grouping, no cache."""

    def __init__(self) -> None:
        self.evaluations = 0

    def __call__(self, task: Task, node: Node) -> bool:
        self.evaluations += 1
        return symmetric_match(task.ad, node.ad)


if __name__ == "__main__":
    main()
