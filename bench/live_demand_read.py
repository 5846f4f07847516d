"""What reading demand costs on a live schedd: autocluster ads and narrow rows vs job ads.

Starts a personal pool (the HOSEP paper's Table 1 grid as 12 static slots, with
configs/htcondor-pool.config and GRIDFAIR_DECIDES_ALL_STARTS = True, so the negotiator starts
nothing and every job stays idle), submits `--jobs` idle jobs in `--users` x `--shapes`
clusters (a user's cluster s asks for 1 + s mod 4 cpus and 64 (s + 1) MB: `--shapes`
distinct requests a user; the owner is not significant to autoclusters, so they group into
about `--shapes` autoclusters), then reads the pool
through the htcondor backend `--reads` times in each demand mode, alternating:
- `autocluster` (the default): the schedd's autocluster query (one ad per group of identical
  jobs) and one narrow row per idle job (ids, status, queue date, autocluster id);
- `jobs`: every idle job's ad (the backend's projection), parsed into a job view each.
Per read it measures gridfair's CPU seconds (this process: the bindings' parsing included),
the schedd's CPU seconds (from /proc, its query workers included: the load an
admin sees; read a second after the read, idle otherwise) and the wall
time; medians are printed. The two modes must find the same demand: the same idle job ids,
each asking for the same cpus and memory (checked on every read).

    .venv/bin/python bench/live_demand_read.py [--jobs 20000] [--reads 5] [--json]

Needs HTCondor (GRIDFAIR_HTCONDOR, condor_master on PATH, or ../shared/htcondor) and runs
as root or as a user that may start a personal pool.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.live.harness: the live harness, in a clone only
MODES = ("autocluster", "jobs")
SETTLE = 1.0  # seconds after a read before the schedd's CPU is read again


def schedd_pid(config_file: Path) -> int:
    """The pid of the condor_schedd started with this pool's CONDOR_CONFIG."""
    wanted = f"CONDOR_CONFIG={config_file}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"condor_schedd" not in (entry / "cmdline").read_bytes():
                continue
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                return int(entry.name)
        except OSError:
            continue
    raise RuntimeError(f"no condor_schedd of {config_file} found")


def cpu_of(pid: int) -> float:
    """CPU seconds of a process and of its children it has reaped: the schedd answers a query
    in a forked worker (SCHEDD_QUERY_WORKERS) whose time joins the parent's when reaped."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return sum(map(int, fields[11:15])) / os.sysconf("SC_CLK_TCK")


def submit_idle(pool, jobs: int, users: int, shapes: int) -> int:
    """`jobs` sleep jobs in users x shapes clusters; how many were queued."""
    from tests.live.harness.personal_pool import JobSpec

    clusters = users * shapes
    for number in range(clusters):
        user, shape = divmod(number, shapes)
        count = jobs // clusters + (1 if number < jobs % clusters else 0)
        pool.submit([JobSpec(f"User{user + 1}", 600 * 1000, cpus=1 + shape % 4,
                             memory=64 * (1 + shape))], count=count)
    return jobs


def demand_of(snapshot) -> list[tuple[str, float, float]]:
    return sorted((job.id, job.request_cpus, job.request_memory) for job in snapshot.jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--shapes", type=int, default=5)
    parser.add_argument("--reads", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import htcondor2

    from gridfair.daemon.backends.htcondor import HTCondorBackend
    from tests.live.harness.personal_pool import PersonalPool, slots_of_grid

    extra = (ROOT / "configs" / "htcondor-pool.config").read_text().splitlines()
    extra.append("GRIDFAIR_DECIDES_ALL_STARTS = True")  # nothing starts: every job stays idle
    with PersonalPool(slots_of_grid("hosep-table1"), extra_config=extra) as pool:
        started = time.perf_counter()
        queued = submit_idle(pool, args.jobs, args.users, args.shapes)
        submit_seconds = time.perf_counter() - started
        schedd = schedd_pid(pool.config_file)
        backends = {mode: HTCondorBackend.connect(pool.collector_host, demand=mode)
                    for mode in MODES}
        pool.wait_until(lambda: len(backends["jobs"].read_snapshot().jobs) == queued, 120, 2)
        samples: dict[str, list[tuple[float, float, float]]] = {mode: [] for mode in MODES}
        same_demand = True
        for _ in range(args.reads):
            demands = {}
            for mode, backend in backends.items():
                own, theirs, wall = time.process_time(), cpu_of(schedd), time.perf_counter()
                snapshot = backend.read_snapshot()
                own, wall = time.process_time() - own, time.perf_counter() - wall
                time.sleep(SETTLE)  # the query workers reaped
                samples[mode].append((own, cpu_of(schedd) - theirs, wall))
                demands[mode] = demand_of(snapshot)
            same_demand &= demands["autocluster"] == demands["jobs"] and \
                len(demands["jobs"]) == queued
        autoclusters = len(pool.schedd().query("true", [], opts=htcondor2.QueryOpt.AutoCluster))
    figures = {
        "jobs": queued, "autoclusters": autoclusters, "reads": args.reads,
        "submit_seconds": round(submit_seconds, 1), "same_demand": same_demand,
        "load_average": os.getloadavg()[0],
        **{mode: {"gridfair_cpu_seconds": round(statistics.median(s[0] for s in rows), 3),
                  "schedd_cpu_seconds": round(statistics.median(s[1] for s in rows), 3),
                  "wall_seconds": round(statistics.median(s[2] for s in rows), 3)}
           for mode, rows in samples.items()},
    }
    if args.json:
        print(json.dumps(figures, sort_keys=True))
        return
    print(f"{queued:,} idle jobs in {autoclusters} autoclusters (submitted in "
          f"{submit_seconds:.0f} s); medians of {args.reads} reads, load "
          f"{figures['load_average']:.2f}")
    for mode in MODES:
        row = figures[mode]
        print(f"  {mode:12} gridfair CPU {row['gridfair_cpu_seconds']:7.3f} s   schedd CPU "
              f"{row['schedd_cpu_seconds']:7.3f} s   wall {row['wall_seconds']:7.3f} s")
    print(f"  same demand in both modes: {same_demand}")


if __name__ == "__main__":
    main()
