"""Throughput on a live pool: how fast a freed slot starts its next job, gridfair and HTCondor.

The pool (issue 44's): a `PersonalPool` of 8 static slots of 1,000 MFlops whose owner
(`Absent`) submits nothing (so nothing is preempted for an owner); `PREEMPTION_REQUIREMENTS =
False` on every side (HTCondor never preempts by priority either). Three users with equal
shares, each a Unix account of its own, submit `--jobs-per-user` sleep jobs of `--job-seconds`
together (one cluster each, one after the other, within a second; `--submit-gap S` waits S
seconds between two users' submissions, as users a moment apart, or a loaded machine's slow
`condor_submit`s). Sides, each on a fresh pool:

- htcondor-claims: HTCondor alone, claims kept (its default `CLAIM_WORKLIFE`, 1200 s);
- htcondor-no-claims: HTCondor alone, `CLAIM_WORKLIFE = 0` (every start negotiated);
- gridfair: configs/htcondor-pool.config as shipped, and the daemon as its systemd unit runs
  it (its own account, a wheel-built venv) with configs/htcondor.toml as shipped (its
  interval, policy and safety values) but for its store, log, collector and metrics port;
  `--daemon-interval` overrides the interval (the issue's run C: 2 s).

The pool's negotiator (`--negotiator`): `2` is the benches' (NEGOTIATOR_INTERVAL 2 s, MIN
interval and cycle delay 1 s), `60` HTCondor's defaults (NEGOTIATOR_INTERVAL 60 s,
NEGOTIATOR_MIN_INTERVAL 5 s, NEGOTIATOR_CYCLE_DELAY 20 s). The other daemons update every 2 s.

Figures per run, from the job event log every job writes (the schedd's shadows write it,
whole seconds), not from gridfair's word:
- `makespan_s`: first submission to last completion (null when `--time-limit` stopped the run);
- `busy_fraction`: slot-seconds running jobs over 8 x the span (the makespan, or the limit);
- `starts_per_minute`; `mean_wait_s`: submission to first start, over the jobs that started;
- `freed_slot_gap_s`: mean seconds from a job's end to the next start on its slot;
- `max_completion_spread`: the largest difference in completed jobs between the (equal)
  users at any moment;
- `landed_fraction` (gridfair only): allocations the pool accepted whose job next started on
  the chosen slot, from the daemon's journal against the event log; `journal`: its verdicts.

    .venv/bin/python bench/live_throughput.py [--sides htcondor-claims,htcondor-no-claims,gridfair]
        [--job-seconds 10 60] [--negotiator 2 60] [--runs 2] [--jobs-per-user 80]
        [--daemon-interval S] [--time-limit S] [--submit-gap S] [--daemon-log DIR] [--json]

`--daemon-log DIR` keeps each gridfair run's daemon log (its cycles, at the shipped `info`
level) as DIR/daemon-<job seconds>s-n<negotiator>-run<run>.log, the bench's submissions (UTC
to the millisecond, user, jobs) in lines of their own first, and its store (the journal of
every allocation) beside it as .db.

Needs root and HTCondor (GRIDFAIR_HTCONDOR, condor_master on PATH, or ../shared/htcondor).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.live.harness: the live harness, in a clone only

SLOTS = 8
MFLOPS = 1000.0
USERS = ("Tput1", "Tput2", "Tput3")
#: The slots' owner (gridfair reads an owner on every slot): it never submits.
ABSENT_OWNER = "Absent"
SIDES = ("htcondor-claims", "htcondor-no-claims", "gridfair")
#: Every side: HTCondor never preempts on its own (nobody owns a slot, shares are equal).
COMMON_CONFIG = ["PREEMPTION_REQUIREMENTS = False"]
NEGOTIATOR_CONFIG = {
    2: ["NEGOTIATOR_INTERVAL = 2"],  # the harness's MIN_INTERVAL and CYCLE_DELAY (1 s) stay
    60: ["NEGOTIATOR_INTERVAL = 60", "NEGOTIATOR_MIN_INTERVAL = 5",
         "NEGOTIATOR_CYCLE_DELAY = 20"],  # HTCondor's defaults
}
#: A run's own limit when none is given: the workload's ideal makespan, ten times over.
LIMIT_FACTOR = 10


def side_config(side: str) -> list[str]:
    """The pool configuration of one side, beyond the harness's."""
    if side == "htcondor-claims":
        return []
    if side == "htcondor-no-claims":
        return ["CLAIM_WORKLIFE = 0"]
    return (ROOT / "configs" / "htcondor-pool.config").read_text().splitlines()


def shipped_daemon_config(collector: str, interval: float | None) -> str:
    """configs/htcondor.toml as shipped, but for where its files go, which pool it reads, its
    metrics (off: runs would share a port) and, if given, its interval."""
    text = (ROOT / "configs" / "htcondor.toml").read_text()
    overrides = {"store": '"state.db"', "log_file": '"daemon.log"',
                 "collector": f'"{collector}"', "enabled": "false"}
    if interval is not None:
        overrides["interval"] = f"{interval:g}"
    for key, value in overrides.items():
        text, found = re.subn(rf"^{key} = [^#\n]*", f"{key} = {value}  ", text, count=1,
                              flags=re.M)
        if not found:
            raise RuntimeError(f"configs/htcondor.toml has no line '{key} = ...'")
    return text


def run_once(side: str, job_seconds: float, negotiator: int, number: int,
             options: argparse.Namespace, python: Path | None) -> dict[str, object]:
    """One run on a fresh pool; its figures."""
    from tests.harness.pool_record import landing, read_lifetimes, read_runs
    from tests.live.harness.personal_pool import (
        JobSpec,
        PersonalPool,
        SlotSpec,
        daemon_command,
        daemon_directory,
    )

    slots = [SlotSpec(ABSENT_OWNER, MFLOPS)] * SLOTS
    total = len(USERS) * options.jobs_per_user
    limit = options.time_limit or LIMIT_FACTOR * total * job_seconds / SLOTS
    directory = daemon_directory() if side == "gridfair" else None
    load_before = os.getloadavg()
    try:
        # HTCondor's negotiator settings first: a side's own configuration may change them.
        with PersonalPool(slots, interval=2, extra_config=[
                *NEGOTIATOR_CONFIG[negotiator], *COMMON_CONFIG, *side_config(side)]) as pool:
            event_log = pool.shared_file("events.log")
            daemon = None
            if directory is not None:
                (directory / "gridfair.toml").write_text(
                    shipped_daemon_config(pool.collector_host, options.daemon_interval))
                daemon = subprocess.Popen(daemon_command(python), cwd=directory,
                                          env=pool.daemon_environment(),
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                pool.wait_until(pool.lease_held, 120)  # its first cycle is done
            users: dict[str, str] = {}
            submissions = []
            try:
                for index, user in enumerate(USERS):
                    if index and options.submit_gap:
                        time.sleep(options.submit_gap)
                    ids = pool.submit_cluster(
                        [JobSpec(user, job_seconds * MFLOPS)] * options.jobs_per_user,
                        extra=[f"log = {event_log}"])
                    submissions.append(f"{utc_now()} bench: {user} submitted {len(ids)} "
                                       f"jobs ({ids[0]}-{ids[-1]})")
                    users.update(dict.fromkeys(ids, user))
                started = time.time()
                while time.time() < started + limit:
                    lifetimes = read_lifetimes(event_log)
                    if sum(life.completed for life in lifetimes.values()) >= total:
                        break
                    time.sleep(1.0)
                until = time.time()
            finally:
                if daemon is not None:
                    daemon.send_signal(signal.SIGTERM)
                    daemon.wait(timeout=60)
            runs = read_runs(event_log, users, until)
            lifetimes = read_lifetimes(event_log)
        figures = throughput_figures(runs, lifetimes, users, until)
        if directory is not None:
            landed = landing(directory / "state.db", runs, limit)
            figures["landed_fraction"] = (round(landed.landed / landed.decided, 3)
                                          if landed.decided else None)
            figures["journal"] = dict(landed.journal)
            if options.daemon_log is not None:
                keep_daemon_log(directory, options.daemon_log
                                / f"daemon-{job_seconds:g}s-n{negotiator}-run{number}",
                                submissions)
    finally:
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)
    return {"side": side, "job_seconds": job_seconds, "negotiator_interval": negotiator,
            "run": number, **figures,
            "loadavg": [round(value, 2) for value in (*load_before, *os.getloadavg())]}


def utc_now() -> str:
    """The wall clock in UTC to the millisecond, as the daemon's log writes it to the second."""
    now = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now % 1 * 1000):03d}Z"


def keep_daemon_log(directory: Path, kept: Path, submissions: Sequence[str]) -> None:
    """The daemon's log in `directory` copied to `kept`.log after the bench's own lines (its
    submissions: the daemon's lines say when its cycles ran), its store to `kept`.db."""
    kept.parent.mkdir(parents=True, exist_ok=True)
    log = directory / "daemon.log"
    text = log.read_text() if log.exists() else "(the daemon wrote no log)\n"
    (kept.parent / f"{kept.name}.log").write_text(
        "".join(line + "\n" for line in submissions) + text)
    if (directory / "state.db").exists():
        shutil.copyfile(directory / "state.db", kept.parent / f"{kept.name}.db")


def throughput_figures(runs: Sequence, lifetimes: Mapping, users: Mapping[str, str],
                       until: float) -> dict[str, object]:
    """The run's figures from its event log's runs and lifetimes (module docstring)."""
    first_submit = min(life.submitted for life in lifetimes.values())
    ends = [life.ended for life in lifetimes.values() if life.completed]
    finished = len(ends) == len(users)
    span = (max(ends) if finished else until) - first_submit
    first_start: dict[str, float] = {}
    for run in sorted(runs, key=lambda run: run.start):
        first_start.setdefault(run.job, run.start)
    waits = [start - lifetimes[job].submitted for job, start in first_start.items()]
    return {
        "makespan_s": round(span, 1) if finished else None,
        "busy_fraction": round(sum((run.end or until) - run.start for run in runs)
                               / (SLOTS * span), 3),
        "starts_per_minute": round(len(runs) / span * 60, 1),
        "mean_wait_s": round(statistics.mean(waits), 1) if waits else None,
        "freed_slot_gap_s": freed_slot_gap(runs),
        "landed_fraction": None,
        "max_completion_spread": completion_spread(lifetimes, users),
        "completed": len(ends),
    }


def freed_slot_gap(runs: Sequence) -> float | None:
    """Mean seconds from a run's end to the next start on its slot (the jobs are all queued
    from the start, so a freed slot always has a next job until the last ones start)."""
    of_slot: dict[str, list] = {}
    for run in runs:
        of_slot.setdefault(run.slot, []).append(run)
    gaps = []
    for slot_runs in of_slot.values():
        slot_runs.sort(key=lambda run: run.start)
        gaps += [after.start - before.end
                 for before, after in zip(slot_runs, slot_runs[1:], strict=False)
                 if before.end is not None]
    return round(statistics.mean(gaps), 2) if gaps else None


def completion_spread(lifetimes: Mapping, users: Mapping[str, str]) -> int:
    """The largest difference in completed jobs between users at any moment (completions in
    the same second counted together: the event log's resolution)."""
    done = dict.fromkeys(set(users.values()), 0)
    at: dict[float, list[str]] = {}
    for job, life in lifetimes.items():
        if life.completed:
            at.setdefault(life.ended, []).append(users[job])
    spread = 0
    for moment in sorted(at):
        for user in at[moment]:
            done[user] += 1
        spread = max(spread, max(done.values()) - min(done.values()))
    return spread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", default=",".join(SIDES),
                        help=f"comma-separated: {', '.join(SIDES)}")
    parser.add_argument("--job-seconds", type=float, nargs="+", default=[10.0, 60.0])
    parser.add_argument("--negotiator", type=int, nargs="+", default=[2, 60],
                        choices=sorted(NEGOTIATOR_CONFIG),
                        help="the pool's negotiator: 2 (the benches') or 60 (HTCondor's "
                        "defaults: 60 s interval, 5 s min interval, 20 s cycle delay)")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--jobs-per-user", type=int, default=80)
    parser.add_argument("--daemon-interval", type=float, default=None,
                        help="the daemon's interval (default: configs/htcondor.toml's)")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="stop a run after this many seconds from submission (default: "
                        f"{LIMIT_FACTOR}x the workload's ideal makespan)")
    parser.add_argument("--submit-gap", type=float, default=0.0, metavar="S",
                        help="seconds between two users' submissions (default 0)")
    parser.add_argument("--daemon-log", type=Path, default=None, metavar="DIR",
                        help="keep each gridfair run's daemon log in DIR")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    sides = options.sides.split(",")
    if unknown := [side for side in sides if side not in SIDES]:
        parser.error(f"--sides: unknown {', '.join(unknown)} (known: {', '.join(SIDES)})")
    install = Path(tempfile.mkdtemp(prefix="gridfair-install-", dir="/var/tmp"))
    results = []
    try:
        python = None
        if "gridfair" in sides:
            from tests.live.harness.personal_pool import install_daemon

            python = install_daemon(ROOT, install)
        for job_seconds in options.job_seconds:
            for negotiator in options.negotiator:
                for number in range(1, options.runs + 1):
                    for side in sides:
                        results.append(run_once(side, job_seconds, negotiator, number,
                                                options, python))
                        print(f"done: {json.dumps(results[-1])}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(install, ignore_errors=True)
    if options.json:
        print(json.dumps({"runs": results}, indent=1))
        return
    print(f"{'side':<20} {'job s':>5} {'neg s':>5} {'run':>3} {'makespan':>8} {'busy':>5} "
          f"{'starts/min':>10} {'wait s':>6} {'gap s':>5} {'spread':>6} {'landed':>6}")
    for row in results:
        print(f"{row['side']:<20} {row['job_seconds']:>5g} {row['negotiator_interval']:>5} "
              f"{row['run']:>3} {_shown(row['makespan_s']):>8} {row['busy_fraction']:>5} "
              f"{row['starts_per_minute']:>10} {_shown(row['mean_wait_s']):>6} "
              f"{_shown(row['freed_slot_gap_s']):>5} {row['max_completion_spread']:>6} "
              f"{_shown(row['landed_fraction']):>6}")


def _shown(value: object) -> str:
    return "-" if value is None else str(value)


if __name__ == "__main__":
    main()
