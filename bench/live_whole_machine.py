"""Whole-machine jobs behind fragments on a live partitionable pool (issue 48): gridfair's kept
machine (`gridfair/core/reservation.py`) against HTCondor alone, with and without
`condor_defrag`'s policy.

The pool: 4 machines, each one partitionable slot of 4 cpus and 4 GiB (1,000 MFlops a cpu).
User S keeps every cpu busy with a backlog of 1-cpu jobs of 20-60 s (drawn from the seed; the
backlog outlasts the run), so at any moment every machine holds a few of them. From `--first`
s after the pool is full, user W submits a whole-machine job (4 cpus, 1 GiB, 60 s) every
`--every` s; the run ends `--duration` s after the pool is full. Figures over that window:
each whole-machine job's wait (submission to first start; one never started counts its wait
to the end), their mean and worst, the cpus in use (time mean of allocated / capacity), jobs
completed, vacates and the cpu-seconds they lost, and the load average.

The sides and their configurations, each on a fresh pool with the same jobs:
- gridfair `shape`: the daemon as its unit runs it, order `drf`, no preemption, its default
  placement `shape` (with the kept machine), every 2 s, on configs/htcondor-pool.config;
- htcondor `defaults`: HTCondor alone, its defaults (fair share, the default pre-job rank,
  claims reused);
- htcondor `defrag`: the same with `condor_defrag`'s policy. This build of HTCondor has no
  condor_defrag, and its startd drains as a whole (`DRAIN_JOBS`), while the pool's machines are
  partitionable slots of one startd; so `Defrag` below runs defrag's loop (`src/defrag/defrag.cpp`
  in HTCondor's source) and drains one machine as the graceful schedule does with the
  shipped `MAXJOBRETIREMENTTIME = 0`: no new job starts there (`START`, set at run time), its
  jobs are vacated at once, and it accepts jobs again once whole (`DEFRAG_CANCEL_REQUIREMENTS`,
  resume on completion). Its knobs, `DEFRAG_*` below, are the shipped ones scaled to jobs of a
  minute (the interval 30 s, not 600) and opened (the shipped
  `DEFRAG_DRAINING_MACHINES_PER_HOUR = 0` drains nothing).

    .venv/bin/python bench/live_whole_machine.py [--seeds 1] [--sides gridfair,htcondor]
        [--gridfair shape] [--htcondor defaults,defrag] [--json] [--save DIR]
        [--replay FILE...]

Needs root and HTCondor (GRIDFAIR_HTCONDOR, condor_master on PATH, or ../shared/htcondor).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))  # its sibling benches
sys.path.insert(0, str(BENCH.parent))

import live_pool_showcase as showcase  # noqa: E402
from live_drf_showcase import (  # noqa: E402
    keep_landing,
    output_to_stderr,
    parse_with_records,
    recorded_runs,
)

MACHINES, CPUS, MEMORY_MB, PER_CPU = 4, 4, 4096, 1000.0
SMALL_SECONDS = (20.0, 60.0)
SMALL_JOBS = 200
WHOLE_SECONDS = 60.0
WHOLE_MEMORY_MB = 1024
INTERVAL = showcase.INTERVAL
#: side -> its configurations (bench/live_pool_showcase.py's `run_all` checks the names).
CONFIGURATIONS = {"gridfair": {"shape": "the daemon, order drf, its default placement"},
                  "htcondor": {"defaults": "HTCondor alone", "defrag": "with condor_defrag's"}}

#: condor_defrag's knobs as this run sets them (the shipped default in the comment).
DEFRAG_INTERVAL = 30.0  # 600
DEFRAG_DRAINING_MACHINES_PER_HOUR = 120.0  # 0: one machine a poll here
DEFRAG_MAX_CONCURRENT_DRAINING = 1  # -1 (no limit)
DEFRAG_MAX_WHOLE_MACHINES = 1  # -1 (no limit)
#: A slot drained by `Defrag` takes no new job (the startd's START while draining, with
#: `DEFRAG_DRAINING_START_EXPR = FALSE`, its default): GRIDFAIR_DRAINING lists their SlotIDs.
DRAINING_POOL = [
    "GRIDFAIR_DRAINING = 0",
    'START = True && !stringListMember(string(MY.SlotID), "$(GRIDFAIR_DRAINING)")',
    "STARTD.ENABLE_RUNTIME_CONFIG = True",
    "STARTD.SETTABLE_ATTRS_CONFIG = GRIDFAIR_DRAINING",
]


class Defrag(threading.Thread):
    """condor_defrag's poll, every DEFRAG_INTERVAL s: unless as many machines drain as
    DEFRAG_MAX_CONCURRENT_DRAINING or are whole as DEFRAG_MAX_WHOLE_MACHINES, drain the one of
    least expected badput (DEFRAG_RANK's default, -ExpectedMachineGracefulDrainingBadput: here
    the cpu-seconds its jobs have run, all lost when they are vacated), ties shuffled."""

    def __init__(self, pool, seed: int) -> None:
        super().__init__(daemon=True)
        self.pool = pool
        self.rng = random.Random(seed)
        self.stopping = threading.Event()
        self.draining: set[str] = set()  # SlotIDs
        self.drains: list[tuple[float, str]] = []  # (when, SlotID)

    def run(self) -> None:
        next_poll = time.monotonic() + DEFRAG_INTERVAL
        while not self.stopping.wait(INTERVAL):
            slots = self.slots()
            self.resume(slots)
            if time.monotonic() >= next_poll:
                next_poll += DEFRAG_INTERVAL
                self.poll(slots)

    def slots(self) -> dict[str, tuple[int, int]]:
        """SlotID -> (free cpus, cpus) of each machine's partitionable slot."""
        return {row[0]: (int(row[1]), int(row[2])) for row in self.pool.status(
            "SlotID", "Cpus", "TotalSlotCpus", constraint="PartitionableSlot =?= true")}

    def resume(self, slots: dict[str, tuple[int, int]]) -> None:
        """A drained machine takes jobs again once whole, as the startd resumes on
        completion (looked at every negotiation interval, not every poll)."""
        whole = {slot for slot, (free, total) in slots.items() if free == total}
        if self.draining & whole:
            self.draining -= whole
            self.set_draining()

    def poll(self, slots: dict[str, tuple[int, int]]) -> None:
        whole = {slot for slot, (free, total) in slots.items() if free == total}
        if len(self.draining) >= DEFRAG_MAX_CONCURRENT_DRAINING \
                or len(whole) >= DEFRAG_MAX_WHOLE_MACHINES:
            return
        now = time.time()
        badput: dict[str, float] = {}
        for row in self.pool.status("SlotID", "Cpus", "JobStart",
                                    constraint="DynamicSlot =?= true && JobStart =!= undefined"):
            if len(row) == 3:
                badput[row[0]] = badput.get(row[0], 0.0) + int(row[1]) * (now - float(row[2]))
        candidates = [slot for slot in slots if slot not in whole | self.draining]
        self.rng.shuffle(candidates)
        candidates.sort(key=lambda slot: badput.get(slot, 0.0))
        per_poll = int(DEFRAG_DRAINING_MACHINES_PER_HOUR * DEFRAG_INTERVAL / 3600)
        for slot in candidates[:per_poll]:
            self.draining.add(slot)
            self.set_draining()
            victims = [job for job, node in self.pool.running_on_nodes().items()
                       if node.startswith(f"slot{slot}@")]
            if victims:
                self.pool.run_tool(["condor_vacate_job", *victims], check=False)
            self.drains.append((now, slot))

    def set_draining(self) -> None:
        listed = ",".join(sorted(self.draining)) or "0"
        self.pool.run_tool(["condor_config_val", "-startd", "-rset",
                            f"GRIDFAIR_DRAINING = {listed}"])
        self.pool.run_tool(["condor_reconfig", "-startd"])


def scenario_jobs(seed: int) -> list:
    """S's backlog of 1-cpu jobs, drawn from `seed`."""
    from tests.live.harness.personal_pool import JobSpec

    rng = random.Random(seed)
    return [JobSpec("S", rng.uniform(*SMALL_SECONDS) * PER_CPU, 1, 256)
            for _ in range(SMALL_JOBS)]


def daemon_config(directory: Path, collector: str) -> None:
    """The gridfair side's gridfair.toml: DRF's order, no preemption, the default placement."""
    (directory / "gridfair.toml").write_text(f"""
[daemon]
store = "state.db"
interval = {INTERVAL}
log_file = "daemon.log"
[safety]
min_runtime = 0
preempt_cooldown = 0
max_snapshot_age = 60
landing_timeout = {6 * INTERVAL}
[backend]
kind = "htcondor"
[backend.htcondor]
collector = "{collector}"
[policy]
name = "reclaim"
order = "drf"
preempt = "none"
""")


def run_side(side: str, config: str, seed: int, options: argparse.Namespace,
             python: Path | None) -> showcase.Record:
    """One side on a fresh pool: S fills it, W's whole-machine jobs come; its record."""
    from gridfair.ad_views import whole_slot
    from tests.harness.pool_record import read_lifetimes, read_runs
    from tests.live.harness.personal_pool import (
        JobSpec,
        PersonalPool,
        SlotSpec,
        daemon_command,
        daemon_directory,
    )

    slots = [SlotSpec("pool", CPUS * PER_CPU, CPUS, MEMORY_MB) for _ in range(MACHINES)]
    if side == "gridfair":
        pool_config = (showcase.ROOT / "configs" / "htcondor-pool.config").read_text() \
            .splitlines()
        described = ("the gridfair daemon as its account, order drf, preempt none, placement "
                     f"shape (default), every {INTERVAL:g} s; configs/htcondor-pool.config")
    else:
        pool_config = DRAINING_POOL if config == "defrag" else []
        described = "HTCondor alone, its defaults" + (
            f"; condor_defrag's policy: DEFRAG_INTERVAL = {DEFRAG_INTERVAL:g}, "
            f"DEFRAG_DRAINING_MACHINES_PER_HOUR = {DEFRAG_DRAINING_MACHINES_PER_HOUR:g}, "
            f"DEFRAG_MAX_CONCURRENT_DRAINING = {DEFRAG_MAX_CONCURRENT_DRAINING}, "
            f"DEFRAG_MAX_WHOLE_MACHINES = {DEFRAG_MAX_WHOLE_MACHINES}, graceful, "
            "MAXJOBRETIREMENTTIME = 0" if config == "defrag" else "")
    directory = daemon_directory() if side == "gridfair" else None
    small = scenario_jobs(seed)
    load_before = os.getloadavg()
    defrag = None
    with PersonalPool(slots, layout="partitionable", interval=int(INTERVAL),
                      extra_config=pool_config) as pool:
        event_log = pool.shared_file("events.log")
        jobs: dict[str, showcase.Submitted] = {}

        def submit(specs: list) -> None:
            ids = pool.submit_cluster(specs, extra=[f"log = {event_log}"])
            jobs.update({job: showcase.Submitted(spec.user, spec.cpus, spec.memory)
                         for job, spec in zip(ids, specs, strict=True)})

        daemon = None
        if directory is not None:
            daemon_config(directory, pool.collector_host)
            daemon = subprocess.Popen(daemon_command(python), cwd=directory,
                                      env=pool.daemon_environment(),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            showcase.wait_for_lease(pool)
        try:
            started = time.time()
            submit(small)
            fill_seconds = showcase.wait_until_full(pool, 60.0)
            full = time.time()
            if config == "defrag":
                defrag = Defrag(pool, seed)
                defrag.start()
            at = full + options.first
            while at < full + options.duration - WHOLE_SECONDS / 2:
                time.sleep(max(0.0, at - time.time()))
                submit([JobSpec("W", WHOLE_SECONDS * PER_CPU, CPUS, WHOLE_MEMORY_MB)])
                at += options.every
            time.sleep(max(0.0, full + options.duration - time.time()))
            until = time.time()
        finally:
            if defrag is not None:
                defrag.stopping.set()
                defrag.join(timeout=60)
            if daemon is not None:
                daemon.send_signal(signal.SIGTERM)
                daemon.wait(timeout=60)
        users = {job: submitted.user for job, submitted in jobs.items()}
        runs = [dataclasses.replace(run, slot=whole_slot(run.slot))
                for run in read_runs(event_log, users, until)]
        lifetimes = read_lifetimes(event_log)
    if defrag is not None:
        described += f"; drained {len(defrag.drains)} machines"
    record = showcase.Record(side, config, described, seed, runs, lifetimes, jobs, {}, started,
                             full, full, until, round(fill_seconds, 1),
                             [round(value, 2) for value in load_before],
                             [round(value, 2) for value in os.getloadavg()])
    if directory is not None:
        keep_landing(record, directory)
    return record


def figures(record: showcase.Record) -> dict[str, object]:
    """The run's figures (module docstring), over the window from the pool full to the end."""
    since, until = record.arrival, record.until
    first_start: dict[str, float] = {}
    for run in record.runs:
        first_start[run.job] = min(run.start, first_start.get(run.job, run.start))
    waits = [min(first_start.get(job, until), until) - record.lifetimes[job].submitted
             for job, submitted in record.jobs.items()
             if submitted.user == "W" and job in record.lifetimes]
    busy = 0.0
    for run in record.runs:
        start, end = max(run.start, since), min(run.end or until, until)
        if end > start:
            busy += (end - start) * record.jobs[run.job].cpus
    evicted = [run for run in record.runs if run.evicted and run.end and since <= run.end]
    completed = {user: sum(1 for job, life in record.lifetimes.items()
                           if life.completed and life.ended and since <= life.ended <= until
                           and record.jobs[job].user == user) for user in ("S", "W")}
    result: dict[str, object] = {
        "side": record.side, "config": record.config, "seed": record.seed,
        "whole_jobs": len(waits),
        "whole_started": sum(1 for job, submitted in record.jobs.items()
                             if submitted.user == "W" and job in first_start),
        "whole_mean_wait_s": round(sum(waits) / len(waits), 1) if waits else None,
        "whole_worst_wait_s": round(max(waits), 1) if waits else None,
        "whole_waits_s": [round(wait, 1) for wait in waits],
        "cpus_used": round(busy / (MACHINES * CPUS * (until - since)), 3),
        "completed": completed,
        "vacates": len(evicted),
        "lost_cpu_seconds": round(sum((run.end - run.start) * record.jobs[run.job].cpus
                                      for run in evicted), 1),
        "described": record.described,
        "loadavg_before": record.load_before, "loadavg_after": record.load_after,
    }
    if record.landing is not None:
        decided = record.landing["decided"]
        result["landed_fraction"] = round(record.landing["landed"] / decided, 3) \
            if decided else None
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--sides", default="gridfair,htcondor")
    parser.add_argument("--gridfair", default="shape", help="shape")
    parser.add_argument("--htcondor", default="defaults,defrag",
                        help="comma-separated (defaults, defrag)")
    parser.add_argument("--first", type=float, default=20.0,
                        help="seconds from the pool full to W's first job")
    parser.add_argument("--every", type=float, default=60.0,
                        help="seconds between W's jobs")
    parser.add_argument("--duration", type=float, default=300.0,
                        help="seconds from the pool full to the end")
    options = parse_with_records(parser)
    with output_to_stderr() if options.json else contextlib.nullcontext():
        runs = [figures(record) for record in recorded_runs(parser, options, run_side,
                                                              CONFIGURATIONS)]
    if options.json:
        print(json.dumps({"runs": runs}, indent=1))
        return
    print(f"{'side config':<18} {'seed':>4} {'W mean s':>8} {'W worst s':>9} {'started':>7} "
          f"{'cpus':>5} {'S done':>6} {'vacates':>7}  load (1 min)")
    for run in runs:
        print(f"{run['side'] + ' ' + run['config']:<18} {run['seed']:>4} "
              f"{run['whole_mean_wait_s']:>8} {run['whole_worst_wait_s']:>9} "
              f"{run['whole_started']:>3}/{run['whole_jobs']:<3} "
              f"{run['cpus_used']:>5.3f} {run['completed']['S']:>6} {run['vacates']:>7}  "
              f"{run['loadavg_before'][0]:.1f}-{run['loadavg_after'][0]:.1f}")


if __name__ == "__main__":
    main()
