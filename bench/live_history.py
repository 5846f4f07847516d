"""Record a real HTCondor job history: a personal pool scheduling mixed submitters alone.

A personal pool of the live tests' four static slots (User1: two of 132,250 MFlops; User2:
54,760 and 29,750) runs for `--minutes`. Every few seconds a submitter (User1, User2, or
`guest`, who owns no slot) submits a small cluster of sleep jobs of random work (seeded), so
the queue stays long enough for HTCondor's own user priorities to decide who goes next.
Along the way the script removes a running job, removes an idle one, holds and then removes
one, and vacates one (which then runs again), unless `--no-interventions`: the history then
holds every kind of record the history reader has rules for. HTCondor schedules alone (no
gridfair daemon); the pool's configuration is its own defaults plus the harness's
(`PersonalPool`: 2 s negotiation and update intervals) and `SYSTEM_JOB_MACHINE_ATTRS =
MFlops`, so each job ad records its slot's power at the match. `--claim-worklife 0` turns
claim reuse off (every start then goes through a negotiation cycle, as the simulator
negotiates).

Written to `--out`: `history` (the schedd's history file), `history.json`
(`condor_history -json`), `history.long` (`condor_history -long`), `slots.long` and
`slots.json` (`condor_status -long` / `-json` after the run), `EventLog` (the schedd's global
event log) and `pool.json` (the pool's settings, counts and times).

    .venv/bin/python bench/live_history.py [--out DIR] [--minutes 3] [--seed 1]
        [--claim-worklife N] [--mean-work 20] [--no-interventions]

Needs HTCondor (GRIDFAIR_HTCONDOR, condor_master on PATH, or ../shared/htcondor).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.live.harness: the live harness, in a clone only

from tests.live.harness.personal_pool import JobSpec, PersonalPool, SlotSpec  # noqa: E402

SLOTS = (SlotSpec("User1", 132250), SlotSpec("User1", 132250),
         SlotSpec("User2", 54760), SlotSpec("User2", 29750))
SUBMITTERS = ("User1", "User2", "guest")
#: Seconds between submissions, and procs per submission, drawn uniformly.
GAP = (2.0, 8.0)
PROCS = (1, 4)
#: How long the queue may take to drain, as a multiple of the submitting time.
DRAIN = 10
#: The reference slot the work is measured on: a job of `mean_work` seconds there.
REFERENCE = 132250.0


def record(out: Path, minutes: float, seed: int, mean_work: float,
           claim_worklife: int | None, interventions_on: bool = True) -> dict:
    rng = random.Random(seed)
    extra = ["SYSTEM_JOB_MACHINE_ATTRS = MFlops", "EVENT_LOG = $(LOG)/EventLog",
             "EVENT_LOG_MAX_SIZE = 0"]
    if claim_worklife is not None:
        extra.append(f"CLAIM_WORKLIFE = {claim_worklife}")
    pool = PersonalPool(SLOTS, extra_config=extra)
    interventions: dict[str, str] = {}
    started = time.time()
    submitted = 0
    with pool:
        deadline = time.monotonic() + minutes * 60
        step = 0
        while time.monotonic() < deadline:
            user = rng.choice(SUBMITTERS)
            procs = rng.randint(*PROCS)
            work = rng.uniform(0.25, 1.75) * mean_work * REFERENCE
            pool.submit([JobSpec(user, work)], count=procs)
            submitted += procs
            step += 1
            if interventions_on and step in (6, 9, 12, 15):
                interventions.update(_intervene(pool, step))
            time.sleep(rng.uniform(*GAP))
        # Let the queue drain: every job then has a complete record in the history. A queue
        # that does not drain in time leaves its jobs out of the history, said in pool.json.
        try:
            pool.wait_until(lambda: not pool.jobs("ClusterId"), DRAIN * 60 * minutes + 600,
                            every=5)
            drained = True
        except TimeoutError:
            drained = False
        local = pool.directory / "local"
        shutil.copy(local / "spool" / "history", out / "history")
        shutil.copy(local / "log" / "EventLog", out / "EventLog")
        (out / "history.json").write_text(pool._run(["condor_history", "-json"]))
        (out / "history.long").write_text(pool._run(["condor_history", "-long"]))
        (out / "slots.long").write_text(pool._run(["condor_status", "-long"]))
        (out / "slots.json").write_text(pool._run(["condor_status", "-json"]))
        version = pool._run(["condor_version"]).splitlines()[0]
    settings = {
        "htcondor": version, "slots": [dataclasses.asdict(slot) for slot in SLOTS],
        "negotiator_interval": pool.interval, "claim_worklife": claim_worklife,
        "minutes": minutes, "seed": seed, "mean_work_seconds_on_reference": mean_work,
        "submitted_jobs": submitted, "drained": drained, "interventions": interventions,
        "started": started, "finished": time.time(), "load_average": os.getloadavg(),
    }
    (out / "pool.json").write_text(json.dumps(settings, indent=2) + "\n")
    return settings


def _intervene(pool: PersonalPool, step: int) -> dict[str, str]:
    """One of: remove a running job, remove an idle one, hold then remove an idle one,
    vacate a running one (it runs again later)."""
    running = sorted(pool.running())
    idle = sorted(row[0] for row in pool.jobs("GlobalJobId", constraint="JobStatus == 1"))
    idle = [job.split("#")[1] for job in idle]
    if step == 6 and running:
        pool._run(["condor_rm", running[0]], check=False)
        return {running[0]: "removed while running"}
    if step == 9 and idle:
        pool._run(["condor_rm", idle[-1]], check=False)
        return {idle[-1]: "removed while idle"}
    if step == 12 and idle:
        pool._run(["condor_hold", idle[-1]], check=False)
        time.sleep(3)
        pool._run(["condor_rm", idle[-1]], check=False)
        return {idle[-1]: "held, then removed"}
    if step == 15 and running:
        pool._run(["condor_vacate_job", running[-1]], check=False)
        return {running[-1]: "vacated, ran again"}
    return {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="directory to write to (default: a new temporary one)")
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--mean-work", type=float, default=20.0,
                        help="mean job length in seconds on the fastest slot")
    parser.add_argument("--claim-worklife", type=int, default=None)
    parser.add_argument("--no-interventions", action="store_true",
                        help="remove, hold and vacate nothing: HTCondor alone, start to end")
    args = parser.parse_args()
    if args.out is None:
        args.out = Path(tempfile.mkdtemp(prefix="gridfair-history-"))
    args.out.mkdir(parents=True, exist_ok=True)
    settings = record(args.out, args.minutes, args.seed, args.mean_work, args.claim_worklife,
                      not args.no_interventions)
    print(json.dumps(settings, indent=2))


if __name__ == "__main__":
    main()
