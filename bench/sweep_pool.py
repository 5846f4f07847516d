"""Benchmark: a 500-run sweep on a personal HTCondor pool, against the same sweep in process.

`gridfair sweep --on htcondor` run by a researcher's Unix account on a personal pool of
--slots static slots (from ../shared/htcondor; needs root, as the live tests), jobs running
gridfair from a venv made from this tree's wheel (`--job-python`); then the same sweep file in
process, in this command, on the same machine. Prints each wall time (the pool's from the
command's start to its end: submission, every job, gathering), the pool's runs per second, the
machine's load average, and whether both DBs hold the same rows apart from `wall_seconds`.
The runs are short (a few milliseconds of simulation each): the figures are HTCondor's cost
per job, which a real sweep's minutes-long runs dwarf.

    .venv/bin/python bench/sweep_pool.py [--seeds 250] [--slots 8] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.live: the live harness and the live test's sweep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=250,
                        help="seeds per policy (2 policies, + 1 failing run)")
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--json", action="store_true",
                        help="one JSON object on stdout, nothing else")
    args = parser.parse_args()

    from click.testing import CliRunner

    import gridfair.cli.sweep  # noqa: F401 - registers the command
    from gridfair.cli import cli
    from tests.live.harness.personal_pool import PersonalPool, SlotSpec, install_daemon
    from tests.live.test_sweep_live import researcher_directory, researcher_sweep, rows

    install = Path(tempfile.mkdtemp(prefix="gridfair-install-", dir="/var/tmp"))
    try:
        python = install_daemon(ROOT, install)
        with PersonalPool([SlotSpec("User1", 100000)] * args.slots) as pool:
            directory = researcher_directory(pool, args.seeds)
            load_before = os.getloadavg()[0]
            started = time.perf_counter()
            sweep = researcher_sweep(pool, python, directory, "--job-python", str(python))
            _, err = sweep.communicate()
            pool_seconds = time.perf_counter() - started
            load_after = os.getloadavg()[0]
            if sweep.returncode not in (0, 1):
                raise SystemExit(f"sweep on the pool: exit {sweep.returncode}: {err}")
            # In process while the pool's directory (holding both DBs) is still there; the
            # pool is idle by now.
            local_db = directory / "local.db"
            started = time.perf_counter()
            CliRunner().invoke(cli, ["sweep", str(directory / "s.toml"), "--db",
                                     str(local_db), "-q", "--in-process"])
            local_seconds = time.perf_counter() - started
            pool_rows, local_rows = rows(directory / "s.db"), rows(local_db)
    finally:
        shutil.rmtree(install, ignore_errors=True)
    runs = 2 * args.seeds + 1
    figures = {
        "runs": runs, "slots": args.slots, "cores": os.cpu_count(),
        "pool_wall_seconds": round(pool_seconds, 1),
        "pool_runs_per_second": round(runs / pool_seconds, 2),
        "in_process_wall_seconds": round(local_seconds, 2),
        "load_average_before": load_before, "load_average_after": load_after,
        "same_rows_apart_from_wall_seconds": pool_rows == local_rows,
        "rows_compared": len(local_rows),
    }
    if args.json:
        print(json.dumps(figures, sort_keys=True))
        return
    print(f"{runs} runs on {args.slots} slots ({os.cpu_count()} cores), load average "
          f"{load_before:.1f} before, {load_after:.1f} after")
    print(f"  pool:       {pool_seconds:7.1f} s  ({runs / pool_seconds:.2f} runs/s)")
    print(f"  in process: {local_seconds:7.2f} s")
    print(f"  same rows apart from wall_seconds: {pool_rows == local_rows} "
          f"({len(local_rows)} rows)")


if __name__ == "__main__":
    main()
