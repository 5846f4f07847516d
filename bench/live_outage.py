"""A dead gridfair must not stop the pool: fail-open mechanisms measured on a live pool.

A personal pool of the HOSEP paper's Table 1 grid (12 static slots, owners User1-User4) with
configs/htcondor-pool.config; the four owners submit a job a second between them (seeded:
who, and 10-25 s of work on the slot it lands), more than the pool finishes, so jobs always
wait. gridfair's daemon runs as its own account the way its systemd unit runs it (from a
wheel-built venv; HOSEP order, no preemption, a cycle every 2 s, landing timeout 4 s = two
negotiation cycles), for `--up` seconds; it is then SIGKILLed, left dead for `--outage`
seconds, restarted, and stopped (SIGTERM) `--up` seconds later. Per mechanism:

- `lease` (shipped): only steered jobs start while gridfair's lease on the negotiator holds;
  the daemon renews it every cycle (two intervals long) and hands it back when it stops;
- `no-lease`: only steered jobs ever start (NEGOTIATOR_JOB_CONSTRAINT without the lease),
  the configuration before the lease;
- `shared`: GRIDFAIR_DECIDES_ALL_STARTS = False, HTCondor matches every idle job itself too.

Figures, from the schedd's job event log (not the daemon's word) and the daemon's journal:
`death_to_first_start_s` (the pool's first start of a job gridfair did not allocate, after
the SIGKILL; null if none in the outage), `starts_during_outage` (such starts),
`restart_to_landed_s` (restart until the first allocation planned after it starts on its
slot), `landed_fraction` (allocations the pool accepted whose job next started on the chosen
slot, over the whole run), and `starts_not_gridfairs_while_up` (starts while the daemon was
up that no allocation of its explains).

    .venv/bin/python bench/live_outage.py [--mechanisms lease,no-lease,shared] [--up 60]
        [--outage 60] [--seeds 1] [--json]

Needs root and HTCondor (GRIDFAIR_HTCONDOR, condor_master on PATH, or ../shared/htcondor).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.harness, tests.live.harness: test tools, in a clone only

from tests.harness.pool_record import landing, read_runs  # noqa: E402
from tests.live.harness.personal_pool import (  # noqa: E402
    JobSpec,
    PersonalPool,
    daemon_command,
    daemon_directory,
    install_daemon,
    slots_of_grid,
)

GRID = "hosep-table1"
MECHANISMS = {
    "lease": [],
    "no-lease": ["NEGOTIATOR_JOB_CONSTRAINT = GridfairSlot =!= undefined"],
    "shared": ["GRIDFAIR_DECIDES_ALL_STARTS = False"],
}
INTERVAL = 2.0
LANDING_TIMEOUT = 4.0


def daemon_config(directory: Path, pool: PersonalPool, mechanism: str) -> None:
    (directory / "gridfair.toml").write_text(f"""
[daemon]
store = "state.db"
interval = {INTERVAL}
[policy]
name = "hosep"
preempt = "none"
[safety]
landing_timeout = {LANDING_TIMEOUT}
max_snapshot_age = 3600
[backend]
kind = "htcondor"
[backend.htcondor]
collector = "{pool.collector_host}"
lease_knob = "{'' if mechanism == 'no-lease' else 'GRIDFAIR_LEASE_UNTIL'}"
""")


class Submitter(threading.Thread):
    """A job a second, of a seeded random owner and work, until stopped."""

    def __init__(self, pool: PersonalPool, owners: list[str], event_log: Path,
                 seed: int) -> None:
        super().__init__(daemon=True)
        self.pool, self.owners, self.event_log = pool, owners, event_log
        self.rng = random.Random(seed)
        self.users: dict[str, str] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            owner = self.rng.choice(self.owners)
            work = self.rng.uniform(10, 25) * 132250  # seconds on the fastest slot
            [job] = self.pool.submit([JobSpec(owner, work)], extra=[f"log = {self.event_log}"])
            self.users[job] = owner
            self.stopping.wait(1.0)


def start(python: Path, pool: PersonalPool, directory: Path) -> subprocess.Popen:
    return subprocess.Popen(daemon_command(python), cwd=directory,
                            env=pool.daemon_environment(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def run_mechanism(mechanism: str, seed: int, up: float, outage: float,
                  python: Path) -> dict[str, object]:
    slots = slots_of_grid(GRID)
    config = [*(ROOT / "configs" / "htcondor-pool.config").read_text().splitlines(),
              "PREEMPTION_REQUIREMENTS = False", *MECHANISMS[mechanism]]
    directory = daemon_directory()
    load_before = os.getloadavg()
    with PersonalPool(slots, extra_config=config) as pool:
        daemon_config(directory, pool, mechanism)
        event_log = pool.shared_file("events.log")
        submitter = Submitter(pool, sorted({slot.owner for slot in slots}), event_log, seed)
        daemon = start(python, pool, directory)
        time.sleep(2 * INTERVAL)  # its first cycles, before the jobs
        submitter.start()
        try:
            time.sleep(up)
            daemon.send_signal(signal.SIGKILL)
            daemon.wait()
            died = time.time()
            time.sleep(outage)
            restarted = time.time()
            daemon = start(python, pool, directory)
            time.sleep(up)
        finally:
            stopped = time.time()
            daemon.send_signal(signal.SIGTERM)
            daemon.wait(timeout=60)
            submitter.stopping.set()
            submitter.join()
        until = time.time()
        runs = read_runs(event_log, submitter.users, until)
    landed = landing(directory / "state.db", runs, LANDING_TIMEOUT)
    with sqlite3.connect(directory / "state.db") as db:
        accepted = list(db.execute(
            "select a.job, a.machine, l.time from action_log l join actions a on a.key = l.key "
            "where a.kind = 'allocate' and l.state = 'confirmed'"))
    shutil.rmtree(directory, ignore_errors=True)
    explained = {(job, machine) for job, machine, _ in accepted}
    # The pool's own starts in the outage (an allocation the daemon made before it died may
    # still land: that start is its decision). Event log times are whole seconds.
    outage_starts = sorted(run.start for run in runs if died - 1 < run.start <= restarted
                           and (run.job, run.slot) not in explained)
    after_restart = [min((run.start for run in runs if run.job == job and run.slot == machine
                          and run.start >= int(at)), default=None)
                     for job, machine, at in accepted if at >= restarted]
    # Up: before the kill, and from the restart's first cycles to the stop (whole seconds).
    while_up = [run for run in runs if run.start < died - 1
                or restarted + LANDING_TIMEOUT < run.start < stopped - 1]
    return {
        "mechanism": mechanism, "seed": seed, "up_seconds": up, "outage_seconds": outage,
        "death_to_first_start_s": (round(outage_starts[0] - died, 1) if outage_starts
                                   else None),
        "starts_during_outage": len(outage_starts),
        "restart_to_landed_s": (round(min(start for start in after_restart if start) - restarted,
                                      1) if any(after_restart) else None),
        "allocations": landed.decided,
        "landed_fraction": (round(landed.landed / landed.decided, 3) if landed.decided
                            else None),
        "starts_not_gridfairs_while_up": sum((run.job, run.slot) not in explained
                                             for run in while_up),
        "starts": len(runs),
        "load_average_before": load_before, "load_average_after": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mechanisms", default=",".join(MECHANISMS))
    parser.add_argument("--up", type=float, default=60.0,
                        help="seconds the daemon runs before its death and after its restart")
    parser.add_argument("--outage", type=float, default=60.0)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    install = Path(tempfile.mkdtemp(prefix="gridfair-install-", dir="/var/tmp"))
    try:
        python = install_daemon(ROOT, install)
        runs = [run_mechanism(mechanism, seed, options.up, options.outage, python)
                for seed in range(1, options.seeds + 1)
                for mechanism in options.mechanisms.split(",")]
    finally:
        shutil.rmtree(install, ignore_errors=True)
    if options.json:
        print(json.dumps({"runs": runs}, indent=2))
        return
    for run in runs:
        print(f"{run['mechanism']:9} seed {run['seed']}: first start "
              f"{run['death_to_first_start_s']} s after death, "
              f"{run['starts_during_outage']} starts in a "
              f"{run['outage_seconds']:g} s outage, decisions land {run['restart_to_landed_s']}"
              f" s after restart, landed {run['landed_fraction']} of {run['allocations']}, "
              f"{run['starts_not_gridfairs_while_up']} starts not gridfair's while up "
              f"(load {run['load_average_before'][0]:.1f}-{run['load_average_after'][0]:.1f})")


if __name__ == "__main__":
    main()
