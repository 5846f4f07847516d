"""A year of a large pool in one run: the daemon's store, memory, metric series and log stay
bounded (issue 36).

The daemon (`gridfair.daemon.service.Daemon`, its `tick()` as the scheduler calls it, with
Prometheus metrics on and a log file) runs on the `files` backend over a synthetic pool of
`--users` active users, at accelerated time: its clock moves `--step` simulated seconds a
cycle (600: 50,000 cycles are 347 days), so every retention window (`[retention]`, at its
defaults) is crossed many times. Between two cycles the pool does what the daemon decided
(allocated jobs start, vacated ones go back to the queue) and churns:
- users: each cycle, `--user-churn` users (on average) leave, their jobs with them, and as
  many new users arrive, taking over their slots;
- jobs: each running job finishes with probability `--finish` a cycle, and new jobs are
  submitted by random users to keep about `--jobs-per-slot` jobs a slot.

Measured after the first `--start` cycles ("start") and at the end: the store's size and its
growth per 1,000 cycles (over the `--start` cycles before each point), the process's RSS, the
time of the admin commands against the store (`gridfair shares`, `gridfair history --user`
for a user active throughout, `gridfair actions --since 1d`; in a process of their own,
through click, the interpreter's start not counted), the number of per-user metric series, the
active users, the log's size, and the time of the pruning after each cycle (median and
longest over the same cycles). The store scaled to a year at one cycle a minute is worked out
from its tables' sizes per row (docs/daemon.md has the arithmetic).

    .venv/bin/python bench/long_run.py --cycles 50000 --json
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gridfair.daemon.backends.files import FilesBackend  # noqa: E402
from gridfair.daemon.config import validate  # noqa: E402
from gridfair.daemon.retention import DAY, Pruner, Retention  # noqa: E402
from gridfair.daemon.service import Daemon, setup_logging  # noqa: E402

START_TIME = 1_700_000_000.0
IDLE, RUNNING = 1, 2


class Clock:
    """The daemon's time, moved on by the bench."""

    def __init__(self, start: float) -> None:
        self.time = start

    def __call__(self) -> float:
        return self.time


class ClockedFiles(FilesBackend):
    """The files backend on the bench's clock."""

    def __init__(self, directory: Path, actions: Path, clock: Clock) -> None:
        super().__init__(directory, actions)
        self.clock = clock

    def now(self) -> float:
        return self.clock()


class ChurningPool:
    """Slots owned by the active users, jobs coming and going, users leaving and arriving."""

    def __init__(self, slots: int, users: int, jobs_per_slot: float, seed: int) -> None:
        self.rng = random.Random(seed)
        self.slots = slots
        self.users = [f"user{n}" for n in range(users)]
        self.seen = users
        self.target_jobs = int(slots * jobs_per_slot)
        self.jobs: dict[str, list] = {}  # id -> [user, status, slot, started, qdate]
        self.occupant: list[str | None] = [None] * slots
        self.clusters = 0

    def owner(self, slot: int) -> str:
        return self.users[slot * len(self.users) // self.slots]

    def submit(self, now: float) -> None:
        while len(self.jobs) < self.target_jobs:
            self.clusters += 1
            self.jobs[f"{self.clusters}.0"] = [self.rng.choice(self.users), IDLE, -1, 0.0, now]

    def churn(self, now: float, finish: float, user_churn: float) -> None:
        rng = self.rng
        for job_id, job in list(self.jobs.items()):
            if job[1] == RUNNING and rng.random() < finish:
                self._drop(job_id)
        leaving = int(user_churn) + (rng.random() < user_churn % 1)
        for _ in range(leaving):
            index = rng.randrange(1, len(self.users))  # user0 stays: `history` is timed on it
            gone = self.users[index]
            for job_id in [j for j, job in self.jobs.items() if job[0] == gone]:
                self._drop(job_id)
            self.users[index] = f"user{self.seen}"
            self.seen += 1
        self.submit(now)

    def active(self) -> int:
        """Users the pool holds: owning a slot or with a job in the queue."""
        return len({self.owner(slot) for slot in range(self.slots)}
                   | {job[0] for job in self.jobs.values()})

    def _drop(self, job_id: str) -> None:
        job = self.jobs.pop(job_id)
        if job[1] == RUNNING:
            self.occupant[job[2]] = None

    def follow(self, actions: Path, seen: int, now: float) -> int:
        """Carry out the daemon's actions logged after byte `seen`; returns the bytes seen.
        Read from there on, not from the top: the log only grows, and reading it whole each
        cycle made the bench's own cost (and memory) grow with the run."""
        if not actions.exists():
            return seen
        with actions.open("rb") as log:
            log.seek(seen)
            fresh = log.read()
        fresh = fresh[:fresh.rfind(b"\n") + 1]  # whole lines only
        for line in fresh.splitlines():
            action = json.loads(line)
            job = self.jobs.get(action["job"])
            if job is None:
                continue
            if action["action"] == "vacate" and job[1] == RUNNING:
                self.occupant[job[2]] = None
                job[1], job[2] = IDLE, -1
            elif action["action"] == "allocate" and job[1] == IDLE:
                slot = int(action["machine"].partition("@node")[2].partition(".")[0])
                if self.occupant[slot] is None:
                    job[1], job[2], job[3] = RUNNING, slot, now
                    self.occupant[slot] = action["job"]
        return seen + len(fresh)

    def write(self, directory: Path, stamp: float) -> None:
        with open(directory / "pool.status", "w", encoding="utf-8") as out:
            for slot in range(self.slots):
                out.write(f'MyType = "Machine"\nName = "slot1@node{slot:05d}.grid"\n'
                          f'GridOwner = "{self.owner(slot)}@grid"\nMFlops = {1000 + slot % 4 * 500}'
                          f'\nCpus = 1\nMemory = 4096\nRequirements = true\n')
                job_id = self.occupant[slot]
                if job_id is not None:
                    user = self.jobs[job_id][0]
                    out.write(f'State = "Claimed"\nActivity = "Busy"\nJobId = "{job_id}"\n'
                              f'RemoteUser = "{user}@grid"\nRemoteOwner = "{user}@grid"\n\n')
                else:
                    out.write('State = "Unclaimed"\nActivity = "Idle"\n\n')
        with open(directory / "pool.queue", "w", encoding="utf-8") as out:
            for job_id, (user, status, slot, started, qdate) in self.jobs.items():
                cluster = job_id.partition(".")[0]
                out.write(f'MyType = "Job"\nClusterId = {cluster}\nProcId = 0\nOwner = "{user}"'
                          f'\nUser = "{user}@grid"\nJobStatus = {status}'
                          f'\nQDate = {qdate:.0f}\nRequestCpus = 1\nRequestMemory = 1024\n'
                          f"Requirements = true\n")
                if status == RUNNING:
                    out.write(f'RemoteHost = "slot1@node{slot:05d}.grid"\n'
                              f"JobCurrentStartDate = {started:.0f}\n")
                out.write("\n")
        for name in ("pool.status", "pool.queue"):
            os.utime(directory / name, (stamp, stamp))


def rss_mb() -> float:
    """The process's resident set now (not its peak)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def store_bytes(path: Path) -> int:
    """The store on disk: the file and its write-ahead log."""
    return sum(p.stat().st_size for p in (path, path.with_name(path.name + "-wal"))
               if p.exists())


def admin_seconds(store: Path, user: str) -> dict[str, float]:
    """Wall seconds of each admin command against the store, best of three, timed in a
    process of its own (as an administrator runs them: the daemon's RSS is not theirs)
    around the command alone (the interpreter's start is not counted)."""
    done = subprocess.run([sys.executable, __file__, "--admin", str(store), user],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"the admin commands failed:\n{done.stderr}")
    return json.loads(done.stdout)


def time_admin(store: Path, user: str) -> dict[str, float]:
    """`admin_seconds`, in the child process."""
    from click.testing import CliRunner

    from gridfair.cli import cli

    runner = CliRunner()
    commands = {"shares": ["shares", "--db", str(store)],
                "history": ["history", "--db", str(store), "--user", user],
                "actions": ["actions", "--db", str(store), "--since", "1d"]}
    seconds = {}
    for name, args in commands.items():
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            result = runner.invoke(cli, args)
            best = min(best, time.perf_counter() - started)
            if result.exit_code != 0:
                sys.exit(f"gridfair {' '.join(args)} failed: {result.output}")
        seconds[name] = round(best, 4)
    return seconds


def series(daemon: Daemon) -> int:
    """Per-user metric series the daemon serves."""
    return sum(len(metric.samples) for metric in daemon.metrics.registry.collect()
               if metric.name.startswith("gridfair_user_"))


def table_bytes(store: Path) -> dict[str, tuple[int, int]]:
    """Table (with its indexes) -> (bytes, rows)."""
    import sqlite3

    with sqlite3.connect(store) as db:
        sizes: dict[str, int] = {}
        for _index, table, size in db.execute(
                "select d.name, coalesce(m.tbl_name, d.name), sum(d.pgsize) from dbstat d "
                "left join sqlite_master m on m.name = d.name group by d.name"):
            sizes[table] = sizes.get(table, 0) + size
        return {table: (size, db.execute(f"select count(*) from [{table}]").fetchone()[0])
                for table, size in sizes.items() if not table.startswith("sqlite_")}


def year_estimate(tables: dict[str, tuple[int, int]], step: float, users: int,
                  cycles: int) -> dict[str, float]:
    """MB of each table after a year at one cycle a minute (1,440 a day) with `users` users
    and the default retention: its bytes per row now times the rows it would hold then.
    Tables pruned after a window hold as many rows a cycle as here (as many pool events a
    cycle: an over-estimate, as a minute brings fewer than `--step`) for 1,440 cycles a
    day of the window; usage and cycle rows follow from the downsampling; the rest (jobs,
    users, policy state) is what the pool holds, as here."""
    r = Retention()
    a_day = 1440
    samples = 24 * (r.usage_hourly - r.usage_full) / DAY + (365 * DAY - r.usage_hourly) / DAY
    windows = {"decisions": r.decisions, "actions": r.decisions, "action_log": r.decisions,
               "job_events": r.job_events}
    estimate = {}
    for table, (size, rows) in tables.items():
        per_row = size / rows if rows else 0.0
        if table == "usage":
            held = users * (a_day * r.usage_full / DAY + samples)
        elif table == "cycles":
            longest = max(r.decisions, r.job_events, r.cycle_details, r.shadow)
            held = a_day * longest / DAY + samples
        elif table in windows:
            per_cycle = rows / min(cycles, windows[table] / step)
            held = per_cycle * a_day * windows[table] / DAY
        else:
            held = rows
        estimate[table] = round(per_row * held / 1e6, 1)
    return estimate


def timed(pruner: Pruner) -> list[float]:
    """The wall seconds of each of `pruner`'s steps from now on, appended to the list."""
    spent: list[float] = []
    step = pruner.step

    def timed_step(*args, **kwargs) -> int:
        started = time.perf_counter()
        try:
            return step(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - started)

    pruner.step = timed_step
    return spent


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(args: argparse.Namespace) -> dict[str, object]:
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
        directory = Path(scratch)
        (directory / "pool").mkdir()
        clock = Clock(START_TIME)
        pool = ChurningPool(args.slots, args.users, args.jobs_per_slot, args.seed)
        pool.submit(clock())
        pool.write(directory / "pool", clock())
        config = validate({
            "daemon": {"store": "state.db", "log_file": "daemon.log", "interval": 60.0},
            "backend": {"kind": "files", "files": {"directory": "pool", "actions": "a.jsonl",
                                                   "owner_attribute": "GridOwner"}},
            "safety": {"max_snapshot_age": 3600.0, "min_runtime": 0.0},
            # Per-user gauges on, so the bench sees them follow the active users.
            "metrics": {"enabled": True, "port": free_port(), "user_labels": True},
        }, base=directory)
        setup_logging(config)
        logging.getLogger("gridfair").handlers[:1] = []  # the file alone, not stderr
        store = directory / "state.db"
        backend = ClockedFiles(directory / "pool", directory / "a.jsonl", clock)
        daemon = Daemon(config, backend=backend)
        prunes = timed(daemon.runner.pruner)
        seen = 0
        marks: dict[str, dict[str, object]] = {}
        sizes: dict[int, int] = {}
        started = time.perf_counter()
        for number in range(1, args.cycles + 1):
            report = daemon.tick()
            if report is None or report.outcome == "failed":
                sys.exit(f"cycle {number} failed: {report and report.error}")
            clock.time += args.step
            seen = pool.follow(directory / "a.jsonl", seen, clock())
            pool.churn(clock(), args.finish, args.user_churn)
            pool.write(directory / "pool", clock())
            if number % args.start == 0 or number == args.cycles:
                sizes[number] = store_bytes(store)
            if number == args.start or number == args.cycles:
                back = number - args.start
                growth = (sizes[number] - sizes.get(back, 0)) / 1e6 * 1000 / args.start
                marks["start" if number == args.start else "end"] = {
                    "cycles": number, "store_mb": round(store_bytes(store) / 1e6, 2),
                    "store_mb_per_1000_cycles": round(growth, 3),
                    "rss_mb": round(rss_mb(), 1),
                    "admin_seconds": admin_seconds(store, pool.users[0]),
                    "metric_series": series(daemon),
                    "active_users": pool.active(),
                    "log_mb": round((directory / "daemon.log").stat().st_size / 1e6, 2),
                    # Of the pruning after each of the last `--start` cycles.
                    "prune_seconds_median": round(sorted(prunes)[len(prunes) // 2], 4),
                    "prune_seconds_max": round(max(prunes), 4),
                    "elapsed_seconds": round(time.perf_counter() - started, 1),
                }
                prunes.clear()
                if args.progress:
                    print(json.dumps(marks), file=sys.stderr, flush=True)
            elif args.progress and number % 1000 == 0:
                print(f"cycle {number}: store {sizes[number] / 1e6:.1f} MB, "
                      f"rss {rss_mb():.0f} MB, {time.perf_counter() - started:.0f} s",
                      file=sys.stderr, flush=True)
        tables = table_bytes(store)
        daemon.close()
    estimate = year_estimate(tables, args.step, args.users, args.cycles)
    return {"marks": marks, "users_seen": pool.seen, "active_users_end": pool.active(),
            "tables_mb_rows": {t: [round(s / 1e6, 2), n] for t, (s, n) in tables.items()},
            "year_at_one_cycle_a_minute_mb": estimate,
            "year_at_one_cycle_a_minute_gb": round(sum(estimate.values()) / 1e3, 2),
            "load_average_before": load_before, "load_average_after": os.getloadavg()[0]}


def main() -> None:
    if sys.argv[1:2] == ["--admin"]:  # the child process of `admin_seconds`
        print(json.dumps(time_admin(Path(sys.argv[2]), sys.argv[3])))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=50_000)
    parser.add_argument("--start", type=int, default=1000,
                        help="cycles of the first measure; growth is per this many cycles")
    parser.add_argument("--users", type=int, default=1000, help="active users at any time")
    parser.add_argument("--slots", type=int, default=500)
    parser.add_argument("--jobs-per-slot", type=float, default=1.5)
    parser.add_argument("--finish", type=float, default=0.05,
                        help="chance a running job finishes in a cycle")
    parser.add_argument("--user-churn", type=float, default=0.1,
                        help="users leaving (and as many arriving) a cycle, on average")
    parser.add_argument("--step", type=float, default=600.0,
                        help="simulated seconds a cycle")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir()
                        else None, help="where the store and the dumps go (default /dev/shm: "
                        "the daemon's work is measured, not this machine's fsync)")
    parser.add_argument("--progress", action="store_true", help="progress on stderr")
    parser.add_argument("--json", action="store_true",
                        help="print the issue's figures as one JSON object")
    args = parser.parse_args()
    if args.cycles < 2 * args.start or args.start < 1:
        parser.error("need --cycles >= 2 x --start >= 2")
    result = run(args)
    start, end = result["marks"]["start"], result["marks"]["end"]
    if args.json:
        print(json.dumps({
            "cycles": args.cycles, "users_seen": result["users_seen"],
            "store_mb_end": end["store_mb"],
            "store_mb_per_1000_cycles_start": start["store_mb_per_1000_cycles"],
            "store_mb_per_1000_cycles_end": end["store_mb_per_1000_cycles"],
            "rss_mb_start": start["rss_mb"], "rss_mb_end": end["rss_mb"],
            "admin_seconds_start": round(sum(start["admin_seconds"].values()), 4),
            "admin_seconds_end": round(sum(end["admin_seconds"].values()), 4),
            "metric_series_end": end["metric_series"],
            "active_users_end": result["active_users_end"],
            # Beyond the keys: the year the store scales to, and the load.
            "store_gb_year_at_one_cycle_a_minute": result["year_at_one_cycle_a_minute_gb"],
            "load_average_before": result["load_average_before"],
            "load_average_after": result["load_average_after"],
        }))
        return
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
