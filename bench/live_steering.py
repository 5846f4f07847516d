"""Do gridfair's allocations land on a live HTCondor pool? Steering latency and landed fraction.

Starts a personal pool (the HOSEP paper's Table 1 grid as 12 static slots, with
configs/htcondor-pool.config), then for each round submits one held job per slot, steers each
to a slot chosen at random (a permutation, seeded) through the htcondor backend's `allocate`
(`Schedd.edit` of GridfairSlot + reschedule), releases them, and measures for every job the
seconds from the decision to running and whether it runs on the chosen slot. Then it vacates
every job through the backend and checks each vacate is seen in the pool (the job's
LastVacateTime set, and it is idle or running again).

    .venv/bin/python bench/live_steering.py [--rounds 3] [--seed 1] [--json]

Needs HTCondor (GRIDFAIR_HTCONDOR, condor_master on PATH, or ../shared/htcondor).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.live.harness: the live harness, in a clone only


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    import htcondor2

    from gridfair.daemon.backends.htcondor import HTCondorBackend
    from tests.live.harness.personal_pool import JobSpec, PersonalPool, slots_of_grid

    slots = slots_of_grid("hosep-table1")
    extra = (ROOT / "configs" / "htcondor-pool.config").read_text().splitlines()
    rng = random.Random(args.seed)
    latencies: list[float] = []
    landed = decided = vacates_seen = vacates_confirmed = 0
    with PersonalPool(slots, extra_config=extra) as pool:
        backend = HTCondorBackend.connect(pool.collector_host, job_constraint="JobStatus <= 5")
        for _ in range(args.rounds):
            pool.clear_queue()
            pool.wait_until(lambda: not pool.running(), 30)
            ids = pool.submit([JobSpec("User2", 132250 * 3600)] * len(slots),
                              extra=["hold = True"])
            snapshot = backend.read_snapshot()
            jobs = {job.id: job for job in snapshot.jobs}
            machines = list(snapshot.machines)
            rng.shuffle(machines)
            chosen = {}
            for job_id, machine in zip(ids, machines, strict=True):
                backend.allocate(jobs[job_id], machine)
                chosen[job_id] = machine.name
            decided_at = time.monotonic()
            pool.schedd().act(htcondor2.JobAction.Release, ids)
            started: dict[str, float] = {}
            where: dict[str, str] = {}
            deadline = decided_at + 60
            while len(started) < len(ids) and time.monotonic() < deadline:
                for job_id, slot in pool.running().items():
                    if job_id in chosen and job_id not in started:
                        started[job_id] = time.monotonic() - decided_at
                        where[job_id] = slot
                time.sleep(0.2)
            decided += len(ids)
            landed += sum(where.get(job_id) == slot for job_id, slot in chosen.items())
            latencies += started.values()
            backend.read_snapshot()
            results = backend.vacate(list(started))
            confirmed = [job_id for job_id, problem in results.items() if problem is None]
            vacates_confirmed += len(confirmed)
            constraint = " || ".join(f"(ClusterId == {j.split('.')[0]})" for j in confirmed)
            time.sleep(3)
            vacates_seen += len(pool.jobs("ClusterId", constraint=f"({constraint}) && "
                                          "LastVacateTime =!= undefined"))
    figures = {
        "decisions": decided,
        "landed_fraction": landed / decided if decided else 0.0,
        "latency_median_s": statistics.median(latencies) if latencies else None,
        "latency_max_s": max(latencies) if latencies else None,
        "vacates_confirmed": vacates_confirmed,
        "vacates_seen": vacates_seen,
        "loadavg": os.getloadavg(),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"allocations: {landed}/{decided} landed on the chosen slot "
          f"({figures['landed_fraction']:.1%})")
    if latencies:
        print(f"decision -> running: median {figures['latency_median_s']:.1f} s, "
              f"max {figures['latency_max_s']:.1f} s")
    print(f"vacates: {vacates_confirmed} confirmed by the schedd, {vacates_seen} seen in the pool")
    print(f"load average: {figures['loadavg']}")


if __name__ == "__main__":
    main()
