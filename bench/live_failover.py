"""A central manager lost: how long until the standby's gridfair decides, and what is lost.

Starts a personal pool (2 static slots: User1's and User2's, configs/htcondor-pool.config)
and two more condor_masters beside it sharing gridfair's HA lock and journal
(`tests.live.harness.ha_pair`: MASTER_HA_LIST = GRIDFAIR, HA_LOCK_URL = file:...,
`--poll` and `--hold` seconds), gridfair configured by knobs only. User2 fills both slots,
then User1 submits: the active gridfair vacates User2's job on User1's slot and steers User1's
job there. Right after it journals its first action, its master and daemon are SIGKILLed.
Measured from the kill:

- takeover_seconds: until the standby's first cycle that ends ok (its ad's LastCycleEnd);
- repeated_actions: journaled vacates of one job issued more than once;
- lost_actions: actions left planned or issued in the journal once the standby has run
  `--after` seconds (neither confirmed, failed, abandoned nor settled);
- htcondor_starts_between: jobs HTCondor started between the kill and the standby's first
  cycle that gridfair had not steered (the lease, `--lease` seconds, covers the takeover when
  it is longer than `--hold` + `--poll` + a cycle).

    .venv/bin/python bench/live_failover.py [--poll 2] [--hold 10] [--json]

Needs root and HTCondor (as the live tests); the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.live.harness: the live harness, in a clone only

from tests.live.harness.ha_pair import HaPair  # noqa: E402
from tests.live.harness.personal_pool import (  # noqa: E402
    JobSpec,
    PersonalPool,
    SlotSpec,
    daemon_directory,
    find_htcondor,
    install_daemon,
)

LONG = 132250 * 3600
SLOTS = (SlotSpec("User1", 132250), SlotSpec("User2", 54760))


def ads(pool: PersonalPool) -> list[dict]:
    out = pool.run_tool(["condor_status", "-any", "-constraint",
                         'MyType == "GridfairNegotiator"', "-json"], check=False).stdout
    return json.loads(out) if out.strip() else []


def journal(store: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        return db.execute(sql).fetchall()


def run(program: Path, options: argparse.Namespace) -> dict:
    state = daemon_directory()
    store = state / "state.db"
    pool = PersonalPool(SLOTS, install=find_htcondor(),
                        extra_config=(ROOT / "configs" / "htcondor-pool.config").read_text()
                        .splitlines())
    knobs = (f"GRIDFAIR_INTERVAL = {options.interval}", f"GRIDFAIR_LEASE = {options.lease}",
             "GRIDFAIR_SAFETY_MIN_RUNTIME = 0", "GRIDFAIR_SAFETY_PREEMPT_COOLDOWN = 0",
             "GRIDFAIR_SAFETY_MAX_SNAPSHOT_AGE = 3600")
    load_before = os.getloadavg()
    try:
        with pool:
            fillers = pool.submit([JobSpec("User2", LONG)] * 2)
            pool.wait_until(lambda: set(pool.running()) == set(fillers), 60)
            with HaPair(pool, program, state, poll=options.poll, hold=options.hold,
                        knobs=knobs) as pair:
                active = pool.wait_until(pair.active, 60)
                pool.wait_until(lambda: [ad for ad in ads(pool)
                                         if ad["LastCycleOutcome"] == "ok"], 60)
                pool.submit([JobSpec("User1", LONG)])
                pool.wait_until(lambda: store.exists() and journal(
                    store, "select count(*) from actions")[0][0], 60, every=0.1)
                killed = time.time()
                pair.kill(active)
                at_kill = journal(store, "select state from actions")
                [first] = pool.wait_until(lambda: [ad for ad in ads(pool)
                                                   if ad["DaemonStartTime"] >= int(killed)
                                                   and ad["LastCycleOutcome"] == "ok"], 120)
                taken = first["LastCycleEnd"]
                time.sleep(options.after)
                actions = journal(store, "select kind, job, state from actions")
                steered = {job for kind, job, _ in actions if kind == "allocate"}
                started = pool.jobs("ClusterId", "ProcId", "JobCurrentStartDate",
                                    constraint="JobCurrentStartDate =!= undefined")
    finally:
        shutil.rmtree(state, ignore_errors=True)
    vacates = [job for kind, job, state in actions if kind == "vacate"
               and state not in ("planned", "abandoned")]
    between = [f"{cluster}.{proc}" for cluster, proc, start in started
               if killed <= int(start) <= taken and f"{cluster}.{proc}" not in steered]
    return {
        "takeover_seconds": round(taken - killed, 1),
        "repeated_actions": len(vacates) - len(set(vacates)),
        "lost_actions": sum(state in ("planned", "issued") for _, _, state in actions),
        "htcondor_starts_between": len(between),
        "actions": len(actions),
        # The journal as the killed daemon left it: what the standby had to resolve.
        "states_at_kill": sorted(state for (state,) in at_kill),
        "poll": options.poll, "hold": options.hold, "interval": options.interval,
        "lease": options.lease,
        "load_average_before": load_before, "load_average_after": os.getloadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--poll", type=int, default=2, help="HA_POLL_PERIOD, seconds")
    parser.add_argument("--hold", type=int, default=10, help="HA_LOCK_HOLD_TIME, seconds")
    parser.add_argument("--interval", type=float, default=2.0, help="GRIDFAIR_INTERVAL")
    parser.add_argument("--lease", type=float, default=60.0, help="GRIDFAIR_LEASE")
    parser.add_argument("--after", type=float, default=15.0,
                        help="seconds the standby runs before the journal is read")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    install = Path(tempfile.mkdtemp(prefix="gridfair-install-", dir="/var/tmp"))
    try:
        program = install_daemon(ROOT, install).parent / "gridfair"
        figures = run(program, options)
    finally:
        shutil.rmtree(install, ignore_errors=True)
    if options.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"standby's first cycle {figures['takeover_seconds']} s after the kill "
          f"(HA_POLL_PERIOD {options.poll} s, HA_LOCK_HOLD_TIME {options.hold} s, interval "
          f"{options.interval:g} s); {figures['repeated_actions']} repeated, "
          f"{figures['lost_actions']} lost of {figures['actions']} actions; "
          f"{figures['htcondor_starts_between']} starts by HTCondor between "
          f"(load {figures['load_average_before'][0]:.1f}-"
          f"{figures['load_average_after'][0]:.1f})")


if __name__ == "__main__":
    main()
