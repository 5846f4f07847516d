"""What a daemon cycle costs, ingest included: reading the dumps, reconciling, laying out the
pool, negotiating (HOSEP), journaling, writing the store.

A synthetic pool (varied power and Requirements, owners named as users, as
`tests.harness.synthetic` makes them; 90 % of the slots running a job) is written as
`condor_status -long` / `condor_q -long` dumps and the `files` backend daemon runs on it: a
first cycle that sees every job for the first time, then `--cycles` steady cycles. Before each
steady cycle the pool carries out the daemon's last actions (allocated jobs start on their
slots, vacated ones go back to the queue) and `--churn` of the jobs change state, as between
two cycles of a busy pool:
- a quarter of them are running jobs that finish (leave the queue); an idle job starts on each
  freed slot (its slot ad changes) and as many new jobs are submitted;
- the rest are idle jobs held and held jobs released.

Two sides run on the same dumps, each in its own process (so each has its own peak RSS):
- `kept`: the daemon as it is (`daemon.incremental = true`: the pool kept between cycles);
- `rebuild`: the same daemon with `daemon.incremental = false`, the pool rebuilt from each
  snapshot as before issue 13 (with the same dump reader, which re-parses only changed ads).
They differ in that alone; both journal their decisions, and the run checks that the two
journals are identical (`same_decisions`). The dump files are stamped with the same times on
both sides, so the snapshots are equal too.

Timings are wall seconds of `CycleRunner.run()` (dump writing is the pool's side and is not
counted) and CPU seconds (user + system, all threads) over the same span; the machine may be
shared, so the load average is printed too.

    .venv/bin/python bench/daemon_cycle.py --slots 10000 --jobs 100000 [--json]
    .venv/bin/python bench/daemon_cycle.py --slots 100000 --jobs 1000000 --sides kept --json

`--baseline DIR` runs each side again, right after, on the gridfair package of another
checkout (`git worktree add --detach /tmp/base main`), in a fresh process on the same dumps:
today's numbers and the change's from one command, under much the same load (the machine is
shared, and its speed moves between sessions by a third or more). `--code DIR` runs only that
checkout.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# `--code DIR` runs the benchmark on the gridfair package of another checkout (a baseline): it
# must be on the path before the first import.
CODE = Path(sys.argv[sys.argv.index("--code") + 1]) if "--code" in sys.argv[:-1] else ROOT
sys.path.insert(0, str(CODE))
sys.path.insert(1, str(ROOT))  # tests.harness: this clone's test tools

import gridfair.daemon.cycle as cycle_module  # noqa: E402
from gridfair.classads.kept_pool import KeptPool  # noqa: E402
from gridfair.core.negotiator import Negotiator  # noqa: E402
from gridfair.daemon.backends.files import FilesBackend  # noqa: E402
from gridfair.daemon.config import validate  # noqa: E402
from gridfair.daemon.cycle import CycleRunner  # noqa: E402
from gridfair.daemon.store import Store  # noqa: E402
from tests.harness.synthetic import (  # noqa: E402
    ARCHITECTURES,
    BASE_TIME,
    MEMORY_CHOICES,
    REQUIREMENTS,
    SLOT_START,
)

IDLE, RUNNING, HELD, GONE = 1, 2, 5, 0
SIDES = {"kept": True, "rebuild": False}


class SyntheticPool:
    """The pool's state in flat lists (a million jobs as ClassAd objects would weigh more
    than the daemon under test), rendered as old-syntax dumps on demand."""

    def __init__(self, slots: int, jobs: int, users: int, seed: int = 1) -> None:
        rng = random.Random(seed)
        self.rng = random.Random(seed + 1)
        self.users = users
        self.slot_text = []  # each slot's fixed attributes
        for index in range(slots):
            arch, opsys = rng.choice(ARCHITECTURES)
            self.slot_text.append(
                f'MyType = "Machine"\nName = "slot1@node{index:06d}.grid"\n'
                f'GridOwner = "user{index % users}@grid"\n'
                f"MFlops = {rng.choice((1000, 1500, 2000, 3000, 4000))}\nCpus = 1\n"
                f'Memory = {rng.choice(MEMORY_CHOICES)}\nArch = "{arch}"\nOpSys = "{opsys}"\n'
                f"HasDocker = {'true' if rng.random() < 0.5 else 'false'}\n"
                f"Requirements = {SLOT_START}\n")
        self.occupant = [-1] * slots  # job index running on the slot
        self.user, self.status, self.slot, self.started = [], [], [], []
        self.image, self.requirements = [], []
        self.running = min(slots * 9 // 10, jobs)
        for index in range(jobs):
            self._submit(rng)
            if index < self.running:
                self._start(index, index, BASE_TIME + jobs + index)

    def _submit(self, rng: random.Random) -> None:
        self.user.append(rng.randrange(self.users))
        self.status.append(IDLE)
        self.slot.append(-1)
        self.started.append(0)
        self.image.append(rng.choice((100_000, 1_000_000, 2_000_000)))
        self.requirements.append(rng.randrange(len(REQUIREMENTS)))

    def _start(self, job: int, slot: int, when: int) -> None:
        self.status[job], self.slot[job], self.started[job] = RUNNING, slot, when
        self.occupant[slot] = job

    def churn(self, fraction: float, cycle: int) -> int:
        """Change the state of `fraction` of the jobs (see the module's docstring)."""
        rng, status = self.rng, self.status
        count = max(4, int(len(status) * fraction))
        busy = [slot for slot, job in enumerate(self.occupant) if job >= 0]
        idle = [job for job, state in enumerate(status) if state == IDLE]
        held = [job for job, state in enumerate(status) if state == HELD]
        finishing = rng.sample(busy, min(len(busy), count // 4, len(idle)))
        starting = rng.sample(idle, len(finishing))
        for slot, job in zip(finishing, starting, strict=True):
            status[self.occupant[slot]] = GONE
            self._start(job, slot, BASE_TIME + 10_000_000 + cycle * 100)
        for _ in finishing:
            self._submit(rng)
        rest = count - 3 * len(finishing)
        idle = [job for job in idle if status[job] == IDLE]
        for job in rng.sample(held, min(len(held), rest // 2)):
            status[job] = IDLE
        for job in rng.sample(idle, min(len(idle), rest - min(len(held), rest // 2))):
            status[job] = HELD
        return count

    def follow(self, actions: Path, seen: int) -> int:
        """Carry out the daemon's actions logged after line `seen`, as the pool would: an
        allocation starts the job on the slot (if both are still as decided), a vacate puts
        the job back in the queue. Returns the lines now seen."""
        lines = actions.read_text().splitlines() if actions.exists() else []
        for line in lines[seen:]:
            action = json.loads(line)
            cluster, proc = (int(part) for part in action["job"].split("."))
            job = (cluster - 1) * 10 + proc
            if action["action"] == "vacate" and self.status[job] == RUNNING:
                self.occupant[self.slot[job]] = -1
                self.status[job], self.slot[job] = IDLE, -1
            elif action["action"] == "allocate" and self.status[job] == IDLE:
                slot = int(action["machine"].rpartition("node")[2].partition(".")[0])
                if self.occupant[slot] < 0:
                    self._start(job, slot, int(action["time"]))
        return len(lines)

    def write(self, directory: Path, stamp: float) -> None:
        with open(directory / "pool.status", "w", encoding="utf-8") as out:
            for slot, text in enumerate(self.slot_text):
                out.write(text)
                job = self.occupant[slot]
                if job >= 0 and self.status[job] == RUNNING:
                    user = f"user{self.user[job]}@grid"
                    out.write(f'State = "Claimed"\nActivity = "Busy"\nJobId = "{_job_id(job)}"\n'
                              f'RemoteUser = "{user}"\nRemoteOwner = "{user}"\n\n')
                else:
                    out.write('State = "Unclaimed"\nActivity = "Idle"\n\n')
        with open(directory / "pool.queue", "w", encoding="utf-8") as out:
            for job, state in enumerate(self.status):
                if state != GONE:
                    out.write(self._job_text(job, state))
        for name in ("pool.status", "pool.queue"):
            os.utime(directory / name, (stamp, stamp))

    def _job_text(self, job: int, state: int) -> str:
        user = self.user[job]
        text = (f'MyType = "Job"\nClusterId = {job // 10 + 1}\nProcId = {job % 10}\n'
                f'Owner = "user{user}"\nUser = "user{user}@grid"\nJobStatus = {state}\n'
                f"QDate = {BASE_TIME + job}\nRequestCpus = 1\nImageSize = {self.image[job]}\n"
                f"JobUniverse = 5\nRequestMemory = (ImageSize + 1023) / 1024\n"
                f"Requirements = {REQUIREMENTS[self.requirements[job]]}\n")
        if state == RUNNING:
            text += (f'RemoteHost = "slot1@node{self.slot[job]:06d}.grid"\n'
                     f"JobCurrentStartDate = {self.started[job]}\n")
        return text + "\n"


def _job_id(job: int) -> str:
    return f"{job // 10 + 1}.{job % 10}"


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


try:  # the journal and actuator split from CycleRunner: a `--code` baseline may predate them
    from gridfair.daemon.actuator import Actuator
    from gridfair.daemon.journal import CycleJournal

    RECORD_AND_CARRY_OUT = ((CycleJournal, "record_plan", "record_plan"),
                            (Actuator, "carry_out", "carry_out"))
except ImportError:
    RECORD_AND_CARRY_OUT = ((CycleRunner, "_record_plan", "record_plan"),
                            (CycleRunner, "_carry_out", "carry_out"))

#: (object, method, label): what `--phases` times, in CPU seconds per steady cycle.
PHASES = (
    (FilesBackend, "read_snapshot", "read"),
    (cycle_module, "reconcile", "reconcile"),
    (KeptPool, "update", "kept_pool_update"),
    (cycle_module, "pool_from_snapshot", "rebuild"),
    (Negotiator, "cycle", "negotiate"),
    *RECORD_AND_CARRY_OUT,
)


def time_phases(spent: dict[str, float]) -> None:
    """Wrap each phase so that its CPU seconds add up in `spent`."""
    for owner, name, label in PHASES:
        original = getattr(owner, name)

        def timed(*args, _original=original, _label=label, **kwargs):
            start = cpu_seconds()
            try:
                return _original(*args, **kwargs)
            finally:
                spent[_label] = spent.get(_label, 0.0) + cpu_seconds() - start

        setattr(owner, name, timed)


def run_side(args: argparse.Namespace) -> dict[str, object]:
    """One side, in this process: a first cycle, then `--cycles` steady ones."""
    incremental = SIDES[args.side]
    spent: dict[str, float] = {}
    if args.phases:
        time_phases(spent)
    pool = SyntheticPool(args.slots, args.jobs, args.users)
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        (directory / "pool").mkdir()
        stamp = float(BASE_TIME + 20_000_000)
        pool.write(directory / "pool", stamp)
        raw = {"daemon": {"store": "state.db", "query_timeout": 3600.0,
                          "incremental": incremental},
               "backend": {"kind": "files", "files": {"directory": "pool",
                                                      "actions": "a.jsonl"}},
               "safety": {"max_snapshot_age": 1e12, "min_runtime": 0.0},
               **({"policy": {"placement": args.placement}} if args.placement else {})}
        config = validate(raw, base=directory)
        store = Store(directory / "state.db")
        runner = CycleRunner(config, FilesBackend(directory / "pool", directory / "a.jsonl"),
                             store)
        cycles = []
        seen = 0
        for number in range(args.cycles + 1):
            if number:
                seen = pool.follow(directory / "a.jsonl", seen)
                pool.churn(args.churn, number)
                pool.write(directory / "pool", stamp + 60 * number)
            spent.clear()
            cpu, wall = cpu_seconds(), time.perf_counter()
            report = runner.run()
            cycles.append({"wall": time.perf_counter() - wall, "cpu": cpu_seconds() - cpu,
                           "decisions": report.counts.get("decisions", 0),
                           "outcome": report.outcome, "phases": dict(spent)})
        digest = hashlib.sha256()
        for row in store.db.query("select cycle, seq, kind, job, user, machine, reason, "
                                  "figures from decisions order by cycle, seq"):
            digest.update(json.dumps(list(row.values())).encode())
    steady = cycles[1:]
    middle = len(steady) // 2
    phases = {label: round(sorted(c["phases"].get(label, 0.0) for c in steady)[middle], 3)
              for label in {label for c in steady for label in c["phases"]}}
    return {
        **({"first_phase_cpu_seconds": {label: round(seconds, 3) for label, seconds
                                        in sorted(cycles[0]["phases"].items())},
            "steady_phase_cpu_seconds": phases} if args.phases else {}),
        "first_cycle_seconds": round(cycles[0]["wall"], 3),
        "first_cycle_cpu_seconds": round(cycles[0]["cpu"], 3),
        "steady_cycle_seconds": round(sorted(c["wall"] for c in steady)[middle], 3),
        "steady_cycle_seconds_best": round(min(c["wall"] for c in steady), 3),
        "steady_cycle_cpu_seconds": round(sorted(c["cpu"] for c in steady)[middle], 3),
        "decisions_per_cycle": [c["decisions"] for c in cycles],
        "outcomes": sorted({c["outcome"] for c in cycles}),
        "decisions_digest": digest.hexdigest()[:16],
        # ru_maxrss is in KiB on Linux: this process's peak, the pool's flat lists included.
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slots", type=int, default=2000)
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--cycles", type=int, default=3, help="steady cycles (default 3)")
    parser.add_argument("--churn", type=float, default=0.01,
                        help="fraction of jobs changing state before each steady cycle")
    parser.add_argument("--sides", default="kept,rebuild",
                        help="comma-separated: kept (the daemon now), rebuild (the pool "
                        "rebuilt every cycle); default both, side by side")
    parser.add_argument("--phases", action="store_true",
                        help="also time the phases of the first cycle and of a steady one "
                             "(CPU seconds; the steady cycles' median)")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    parser.add_argument("--code", type=Path, default=None,
                        help="run on the gridfair package of this checkout instead")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="run each side again on the gridfair package of this checkout")
    parser.add_argument("--placements", default="",
                        help="comma-separated placements (docs/placement.md): each side runs "
                        "again with each, labelled side+placement; the side's own run takes "
                        "the config's default")
    parser.add_argument("--placement", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    sides = [side for side in args.sides.split(",") if side]
    if args.slots < 1 or args.jobs < args.slots or not 0 < args.churn < 1 or args.cycles < 1:
        parser.error("need 1 <= --slots <= --jobs, 0 < --churn < 1 and --cycles >= 1")
    if not sides or any(side not in SIDES for side in sides):
        parser.error(f"--sides takes a comma-separated list of {', '.join(SIDES)}")
    for option, checkout in (("--code", args.code), ("--baseline", args.baseline)):
        if checkout is not None and not (checkout / "gridfair").is_dir():
            parser.error(f"{option} {checkout}: no gridfair package there")
    if args.side:
        print(json.dumps(run_side(args)))
        return
    result: dict[str, object] = {"slots": args.slots, "jobs": args.jobs, "users": args.users,
                                 "churn": args.churn, "cycles": args.cycles,
                                 "load_average_before": os.getloadavg()[0]}
    runs = [(side, side, CODE, None) for side in sides]
    if args.baseline is not None:
        runs += [(side, f"{side}@baseline", args.baseline, None) for side in sides]
        result["code"], result["baseline"] = str(CODE), str(args.baseline)
    runs += [(side, f"{side}+{placement}", CODE, placement) for side in sides
             for placement in args.placements.split(",") if placement]
    for side, label, checkout, placement in runs:
        command = [sys.executable, __file__, "--side", side, "--slots", str(args.slots),
                   "--jobs", str(args.jobs), "--users", str(args.users),
                   "--cycles", str(args.cycles), "--churn", str(args.churn),
                   "--code", str(checkout), *(["--phases"] if args.phases else []),
                   *(["--placement", placement] if placement else [])]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"the {label} side failed:\n{done.stderr}")
        result[label] = json.loads(done.stdout)
    labels = [label for _, label, _, _ in runs]
    result["load_average_after"] = os.getloadavg()[0]
    first = result[sides[0]]
    result.update({key: first[key] for key in ("first_cycle_seconds", "steady_cycle_seconds",
                                               "peak_rss_mb")})
    compared = [label for _, label, _, placement in runs if placement is None]
    if len(compared) > 1:  # another placement may decide otherwise
        result["same_decisions"] = len({result[s]["decisions_digest"] for s in compared}) == 1
    if args.json:
        print(json.dumps(result, sort_keys=True))
        return
    print(f"pool: {args.slots} slots, {args.jobs} jobs, {args.users} users; {args.churn:.0%} "
          f"of jobs change state before each of {args.cycles} steady cycles (load average "
          f"{result['load_average_before']:.2f} before, {result['load_average_after']:.2f} "
          "after)")
    for label in labels:
        s = result[label]
        print(f"{label:>8}: first cycle {s['first_cycle_seconds']:.2f} s "
              f"({s['first_cycle_cpu_seconds']:.2f} s CPU), steady cycle "
              f"{s['steady_cycle_seconds']:.2f} s median ({s['steady_cycle_cpu_seconds']:.2f} s "
              f"CPU, best {s['steady_cycle_seconds_best']:.2f} s), peak RSS "
              f"{s['peak_rss_mb']:.0f} MB, decisions {s['decisions_per_cycle']}")
        for cycle in ("first", "steady"):
            if f"{cycle}_phase_cpu_seconds" in s:
                print(" " * 10 + f"{cycle} cycle CPU by phase: " + ", ".join(
                    f"{phase} {seconds:.2f} s"
                    for phase, seconds in sorted(s[f"{cycle}_phase_cpu_seconds"].items())))
    if "same_decisions" in result:
        print("journals identical" if result["same_decisions"] else "JOURNALS DIFFER")


if __name__ == "__main__":
    main()
