"""What fetching job ads by id costs a live schedd: gridfair's constraints against `member`.

The htcondor backend fetches the whole ads of idle jobs that no autocluster answers for
(`fetch_constraints`: at 10,000 slots and 100,000 jobs, acting, the 25,000 jobs steered in the
cycle before, every steady cycle). A schedd has no query by job id: the ids go into the
constraint, which the schedd evaluates against every job of its queue. This bench starts a
personal pool (no startd, the negotiator idle), submits `--jobs` idle jobs of 4 users in 8
clusters (two `queue ... from` submits a user, as `bench/live_scale.py` does), picks a
`--share` of them at random (seeded) and fetches them, in the same run:
- `record` (gridfair's): a cluster's procs as a record looked up by the job's ProcId,
  `[p0 = true; ...][strcat("p", string(ProcId))] =?= true`, at most 50 clusters and 10,000
  jobs a query;
- `member` (the baseline, what the backend did before): a cluster's procs as one
  `member(ProcId, {...})` list, at most 50 clusters a query.
For each: wall seconds, the schedd's CPU seconds (from /proc), queries, ads returned, and
whether the ids returned are exactly those asked. With `--json`, one object.

    .venv/bin/python bench/live_fetch_by_id.py [--jobs 100000] [--share 0.25] [--json]

Needs root and HTCondor (as `PersonalPool`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.live.harness: the live harness, in a clone only
sys.path.insert(0, str(ROOT / "bench"))

#: The baseline's clusters a query (the backend's `FETCH_CLUSTERS`, before and now).
MEMBER_CLUSTERS = 50


def member_constraints(job_ids: Iterable[str]) -> Iterator[tuple[str, list[str]]]:
    """The baseline: a cluster's procs as one `member` list, 50 clusters a query."""
    procs: dict[str, list[str]] = {}
    for job_id in job_ids:
        cluster, _, proc = job_id.partition(".")
        procs.setdefault(cluster, []).append(proc)
    clusters = list(procs.items())
    for start in range(0, len(clusters), MEMBER_CLUSTERS):
        batch = clusters[start:start + MEMBER_CLUSTERS]
        yield (" || ".join(f"(ClusterId == {cluster} && member(ProcId, {{{', '.join(ids)}}}))"
                           for cluster, ids in batch),
               [f"{cluster}.{proc}" for cluster, ids in batch for proc in ids])


def fetch(schedd, schedd_pid: int | None, wanted: list[str],
          constraints: Callable[[Iterable[str]], Iterator[tuple[str, list[str]]]]) -> dict:
    from live_scale import cpu_of

    cpu, wall = cpu_of(schedd_pid), time.perf_counter()
    found: list[str] = []
    queries = 0
    for constraint, _ in constraints(wanted):
        queries += 1
        found += [f"{ad['ClusterId']}.{ad['ProcId']}"
                  for ad in schedd.query(constraint, ["ClusterId", "ProcId"])]
    return {"wall_s": round(time.perf_counter() - wall, 3),
            "schedd_cpu_s": round(cpu_of(schedd_pid) - cpu, 3), "queries": queries,
            "ads": len(found), "exact": sorted(found) == sorted(wanted)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--share", type=float, default=0.25, help="share of the jobs fetched")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if not 0 < args.share <= 1:
        parser.error("--share must be in (0, 1]")
    import htcondor2
    import live_scale

    from gridfair.daemon.backends.htcondor.demand import fetch_constraints
    from tests.live.harness.personal_pool import PersonalPool

    idle_negotiator = [line for line in live_scale.POOL_CONFIG
                       if not line.startswith("NEGOTIATOR_")] + ["NEGOTIATOR_INTERVAL = 3600"]
    load_before = os.getloadavg()
    with PersonalPool([], interval=600, extra_config=idle_negotiator,
                      daemon_account=None) as pool:
        live_scale.submit_plan(pool, live_scale.job_plan(args.jobs, 4, 300))
        os.environ["CONDOR_CONFIG"] = str(pool.config_file)
        htcondor2.reload_config()
        location = htcondor2.Collector(pool.collector_host).locate(htcondor2.DaemonType.Schedd)
        schedd = htcondor2.Schedd(location)
        schedd_pid = live_scale.process_pid(pool.config_file, "condor_schedd")
        every = [f"{ad['ClusterId']}.{ad['ProcId']}"
                 for ad in schedd.query("true", ["ClusterId", "ProcId"])]
        wanted = random.Random(1).sample(every, round(len(every) * args.share))
        result = {"jobs": len(every), "fetched": len(wanted),
                  "record": fetch(schedd, schedd_pid, wanted, fetch_constraints),
                  "member": fetch(schedd, schedd_pid, wanted, member_constraints),
                  "load_before": load_before, "load_after": os.getloadavg()}
    if args.json:
        print(json.dumps(result))
        return
    print(f"{result['fetched']:,} of {result['jobs']:,} idle jobs fetched by id "
          f"(load average {load_before[0]:.2f} before, {result['load_after'][0]:.2f} after)")
    for name in ("record", "member"):
        row = result[name]
        print(f"  {name:7s} wall {row['wall_s']:7.2f} s  schedd CPU {row['schedd_cpu_s']:7.2f} s"
              f"  {row['queries']} queries  {row['ads']:,} ads  exact: {row['exact']}")


if __name__ == "__main__":
    main()
