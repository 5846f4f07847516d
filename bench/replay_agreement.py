"""How closely a replay reproduces what the pool did: a recorded live history replayed under
HTCondor's priority with the pool's own settings, each job's simulated first start against
its recorded one.

The history is a directory written by `bench/live_history.py` (default: the recording in
tests/data/condor_history): its history file, its slots and `pool.json` (the pool's
settings). The replay is `gridfair simulate --policy condor --interval NEGOTIATOR_INTERVAL
--claim-worklife CLAIM_WORKLIFE` (1200 s, HTCondor's default, when the recording left it
alone) on the recorded slots; and, to show what claim reuse is worth, the same without it.
For every job that ran, as replayed and as recorded (time 0 at the first QDate):

- the share whose simulated first start is within one negotiation interval of the recorded
  one (and within 2 intervals, 10 s, 60 s), and the share that ran on the same slot;
- the first disagreement in time: the earliest recorded start the replay does not reproduce,
  with the pool's event log's last events on that slot before it (the history keeps only a
  job's last slot; the log has every run and eviction), and how many of the other
  disagreements start after it (what follows a divergence on a busy pool diverges too).

    .venv/bin/python bench/replay_agreement.py [--history DIR] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gridfair.classads.history import HistoryJob, read_history  # noqa: E402
from gridfair.sim.engine_options import EngineOptions  # noqa: E402
from gridfair.sim.records import RunRecorder  # noqa: E402
from gridfair.sim.scenario import build_scenario, simulation_of  # noqa: E402
from tests.harness.pool_record import read_runs  # noqa: E402

DEFAULT = ROOT / "tests" / "data" / "condor_history"
#: HTCondor's CLAIM_WORKLIFE when a pool leaves it alone.
DEFAULT_CLAIM_WORKLIFE = 1200.0


def history_file(directory: Path, scratch: Path) -> Path:
    plain, packed = directory / "history", directory / "history.gz"
    if plain.exists():
        return plain
    target = scratch / "history"
    target.write_bytes(gzip.decompress(packed.read_bytes()))
    return target


def replay(history: Path, slots: Path, interval: float,
           claim_worklife: float | None) -> dict[str, tuple[float, str, str | None]]:
    """Job id -> (simulated first start, the slot of its first run, the job that ran on that
    slot just before it, None for the first)."""
    scenario = build_scenario(None, str(history), options={"machines": str(slots)})
    recorder = RunRecorder(snapshots=False)
    simulation = simulation_of(scenario, policy="condor", recorder=recorder,
                               engine=EngineOptions(interval=interval,
                                                    claim_worklife=claim_worklife))
    result = simulation.run()
    names = [node.name for node in result.nodes]
    first_run: dict[str, tuple[str, str | None]] = {}
    last_on: dict[str, str] = {}
    for run in sorted(recorder.runs, key=lambda run: (run.start, run.task)):
        slot = names[run.node]
        first_run.setdefault(run.task, (slot, last_on.get(slot)))
        last_on[slot] = run.task
    return {task.id: (task.first_start, *first_run[task.id]) for task in result.tasks}


def recorded_placement(recorded: dict[str, HistoryJob]) -> dict[str, str | None]:
    """Job id -> the job that ran on its slot just before it, as recorded (jobs run once)."""
    before: dict[str, str | None] = {}
    last_on: dict[str, str] = {}
    for job in sorted(recorded.values(), key=lambda job: (job.last_start, job.id)):
        if job.starts == 1:
            before[job.id] = last_on.get(job.slot)
        last_on[job.slot] = job.id
    return before


def slot_runs(directory: Path, scratch: Path) -> list[tuple[float, str, str, str]]:
    """(time, slot, job, "execute" or "evicted") from the recording's event log, in order;
    empty without one. The history keeps only a job's last slot; the log has every run."""
    log = directory / "EventLog"
    if not log.exists() and (directory / "EventLog.gz").exists():
        log = scratch / "EventLog"
        log.write_bytes(gzip.decompress((directory / "EventLog.gz").read_bytes()))
    if not log.exists():
        return []
    runs = read_runs(log, defaultdict(str), math.inf)
    events = [(run.start, run.slot, run.job, "execute") for run in runs]
    events += [(run.end, run.slot, run.job, "evicted") for run in runs if run.evicted]
    return sorted(events)


def agreement(recorded: dict[str, HistoryJob], simulated: dict[str, tuple[float, str]],
              start: float, interval: float,
              log: list[tuple[float, str, str, str]]) -> dict:
    jobs = sorted(simulated, key=lambda job: (recorded[job].first_start, job))
    gaps = {job: simulated[job][0] - (recorded[job].first_start - start) for job in jobs}
    within = {f"within_{label}": round(sum(abs(gap) <= tolerance for gap in gaps.values())
                                       / len(jobs), 3)
              for label, tolerance in (("one_interval", interval),
                                       ("two_intervals", 2 * interval), ("10s", 10.0),
                                       ("60s", 60.0))}
    # The slot of the job's first run as recorded is its last slot when it ran once.
    once = [job for job in jobs if recorded[job].starts == 1]
    same_slot = sum(simulated[job][1] == recorded[job].slot for job in once) / len(once)
    off = [job for job in jobs if abs(gaps[job]) > interval]
    # A disagreeing job placed as recorded (same slot, after the same job) is late or early
    # only by the time its slot's earlier runs took to hand over, added up; one placed
    # otherwise was scheduled otherwise.
    before = recorded_placement(recorded)
    drifted = [job for job in off if job in before
               and simulated[job][1:] == (recorded[job].slot, before[job])]
    report = {"jobs": len(jobs), **within, "same_slot_of_jobs_run_once": round(same_slot, 3),
              "disagreeing": len(off), "disagreeing_placed_as_recorded": len(drifted),
              "their_mean_offset_s": round(sum(abs(gaps[job]) for job in drifted)
                                           / len(drifted), 1) if drifted else 0.0,
              "placed_as_recorded": round(sum(
                  job in before and simulated[job][1:] == (recorded[job].slot, before[job])
                  for job in jobs) / len(once), 3)}
    if off:
        first = off[0]
        job = recorded[first]
        report["first_disagreement"] = {
            "job": first, "user": job.user, "recorded_start": job.first_start - start,
            "simulated_start": simulated[first][0], "recorded_slot": job.slot,
            "simulated_slot": simulated[first][1], "simulated_after": simulated[first][2],
            "before_it_on_that_slot": [
                {"time": when - start, "job": other, "event": kind}
                for when, slot, other, kind in log
                if slot == job.slot and when < job.first_start][-3:],
            "disagreeing_after_it": sum(recorded[other].first_start > job.first_start
                                        for other in off)}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--history", type=Path, default=DEFAULT,
                        help="a directory written by bench/live_history.py")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    settings = json.loads((args.history / "pool.json").read_text())
    interval = float(settings["negotiator_interval"])
    worklife = settings.get("claim_worklife")
    worklife = DEFAULT_CLAIM_WORKLIFE if worklife is None else float(worklife)
    scratch = Path(tempfile.mkdtemp(prefix="gridfair-agreement-"))
    try:
        history = history_file(args.history, scratch)
        recorded = {job.id: job for job in read_history([history])
                    if isinstance(job, HistoryJob) and job.first_start is not None}
        start = min(job.qdate for job in read_history([history])
                    if isinstance(job, HistoryJob))
        report = {"history": str(args.history), "negotiator_interval": interval,
                  "claim_worklife": worklife, "load_average": os.getloadavg()[0]}
        log = slot_runs(args.history, scratch)
        for name, claims in (("with_claim_reuse", worklife), ("without_claim_reuse", None)):
            simulated = replay(history, args.history / "slots.long", interval, claims)
            report[name] = agreement(recorded, simulated, start, interval, log)
    finally:
        shutil.rmtree(scratch)
    if args.json:
        print(json.dumps(report, sort_keys=True))
        return
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
