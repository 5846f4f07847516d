"""What a daemon cycle costs on top of the negotiation: reading the dumps, reconciling,
journaling, writing the store.

A synthetic pool (gridfair.classads.synthetic: varied power and Requirements, owners named as
users) is written as `condor_status -long` / `condor_q -long` dumps; the `files` backend
daemon then runs two cycles: the first sees every job for the first time (every row of the
jobs table is written), the second sees nothing new (the steady state of a real pool between
two cycles is close to it).

    .venv/bin/python bench/daemon_cycle.py [SLOTS [JOBS [USERS]]]   (default 2000 20000 200)
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from gridfair.classads.reader import AdFormat
from gridfair.classads.synthetic import job_ads, machine_ads, write_ads
from gridfair.daemon.backends.files import FilesBackend
from gridfair.daemon.config import validate
from gridfair.daemon.cycle import CycleRunner
from gridfair.daemon.store import Store


def main(slots: int, jobs: int, users: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        pool = directory / "pool"
        pool.mkdir()
        machines = machine_ads(slots, users)
        write_ads(pool / "pool.queue", job_ads(jobs, users, machines, running=slots * 9 // 10),
                  AdFormat.OLD)
        write_ads(pool / "pool.status", machines, AdFormat.OLD)
        raw = {"daemon": {"store": "state.db", "query_timeout": 600.0},
               "backend": {"kind": "files",
                           "files": {"directory": "pool", "actions": "actions.jsonl"}},
               "safety": {"max_snapshot_age": 3600.0, "min_runtime": 0.0}}
        config = validate(raw, base=directory)
        backend = FilesBackend(pool, directory / "actions.jsonl")
        started = time.perf_counter()
        snapshot = backend.read_snapshot()
        read = time.perf_counter() - started
        print(f"pool: {len(snapshot.machines)} slots, {len(snapshot.jobs)} jobs, "
              f"{users} users; reading the dumps: {read:.2f} s "
              f"({(slots + jobs) / read:,.0f} ads/s)")
        runner = CycleRunner(config, backend, Store(directory / "state.db"))
        for label in ("first cycle (all jobs new)", "second cycle (nothing new)"):
            report = runner.run()
            counts = report.counts
            print(f"{label}: {report.duration:.2f} s including the read; "
                  f"{counts.get('decisions', 0)} decisions, {counts.get('confirmed', 0)} "
                  f"actions confirmed, outcome {report.outcome}")
        size = (directory / "state.db").stat().st_size
        print(f"store after two cycles: {size / 1e6:.1f} MB")


if __name__ == "__main__":
    arguments = [int(value) for value in sys.argv[1:4]]
    main(*(arguments + [2000, 20000, 200][len(arguments):]))
