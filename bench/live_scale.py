"""A production-size pool: gridfair's daemon cycle beside HTCondor's own negotiator (issue 34).

`--source live` starts a personal pool with no startd: its collector holds `--slots` machine
ads sent with `condor_advertise -multiple -fake-private-ad UPDATE_STARTD_AD` (startds that do
not exist, at an address that refuses connections: a claim fails at once and the job matches
again next cycle), static and partitionable (a third, 8-32 cpus), with owners, MFlops, cpus,
memory, disk, GPUs on one in ten and the attributes a real startd publishes that a job's
default Requirements read; `ClassAdLifetime` keeps them for a day. Its schedd holds `--jobs`
idle jobs of `--users` submitters in about `--shapes` request shapes (cpus, memory, disk,
GPUs: as many autoclusters), submitted in two `condor_submit ... queue ... from` a user. The
job limits (`MAX_JOBS_PER_OWNER`, `MAX_JOBS_SUBMITTED`, `MAX_JOBS_PER_SUBMISSION`) are raised.

Then, in the same run:
- HTCondor: the negotiator's own ad after a cycle (`LastNegotiationCycleDuration0`, its
  phases and matches), first with `SCHEDD_ENABLE_PER_USER_MATCH_LIMITS = False` (every slot
  matched), then with the schedd's default per-user match limit (`capped`); each cycle is
  asked of the negotiator with its RESCHEDULE command, as the daemon asks it (not with
  `condor_reschedule`, which goes to the schedd: HTCondor 25.14 drops it there, so runs
  before 2026-11-28 measured the periodic cycle, `NEGOTIATOR_INTERVAL` after the last); the
  first that started after the change is taken;
- gridfair: the daemon (`CycleRunner`, htcondor backend, `--dry-run` by default: decisions
  journaled, nothing steered) in a process of its own, so that its peak RSS is its own: a
  first cycle, then `--cycles` steady ones, before each of which `--churn` of the jobs (1 %) change
  (half removed, as many submitted). Each cycle is split into collector read, schedd read,
  the rest of the read (views, charging), decide (the policy), journal and act, wall and CPU
  seconds of the thread doing it. Then 1,000 idle jobs are steered as a cycle steers them
  (`allocate_all` in the cycle's batches, then one reschedule), timed, with the schedd's CPU
  seconds meanwhile, raw and net of its background CPU over an idle window just before: the
  allocations the last cycle decided, 1,000 jobs each to a slot of its own, and 1,000 others
  one at a time (two edits a job, as before: the baseline in the same run);
- the collector's and schedd's `RecentDaemonCoreDutyCycle`, the load average.

`--source files` writes the same slot and job ads as `condor_status -long` / `condor_q -long`
dumps and runs the daemon on them with the files backend (no HTCondor: reads, decide, journal
and peak RSS alone); steady cycles churn the dump in the same way (in a process of its own).

`--negotiator-max-time S` raises the negotiator's time limits to S seconds: by default its
per-schedd limit (120 s) ends the "uncapped" cycle long before it has matched every slot.

`--demand jobs` runs the live daemon with `backend.htcondor.demand = "jobs"` (every job ad
read; its schedd read is `_query_jobs`).

Each cycle's peak RSS is given by phase (`peak_rss_mb`: the read, the pool laid out, reconcile,
decide, journal, act and the rest, each the peak while it ran: Linux's VmHWM, reset between
phases), and the run's as `peak_rss_mb`.

    .venv/bin/python bench/live_scale.py --slots 1000 --jobs 10000 --json
    .venv/bin/python bench/live_scale.py --slots 1000 --jobs 10000 --demand jobs --json
    .venv/bin/python bench/live_scale.py --source files --slots 10000 --jobs 100000 --json

With no size given it runs 1,000 / 10,000 / 50,000 slots with 10,000 / 100,000 jobs live and
50,000 slots with 1,000,000 jobs from files (hours on a small machine). Needs root and
HTCondor (as `PersonalPool`) for `live`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.live.harness: the live harness, in a clone only
SIZES = ((1_000, 10_000, "live"), (10_000, 100_000, "live"), (50_000, 100_000, "live"),
         (50_000, 1_000_000, "files"))
UID_DOMAIN = "gridfair.test"
#: A machine ad's address: a port nothing listens on, so a claim is refused at once.
FAKE_ADDRESS = "<127.0.0.1:1>"
ARCH, OPSYS = "X86_64", "LINUX"
#: Raised job limits, and the fake ads' needs (a filesystem domain the jobs share).
POOL_CONFIG = [
    "MAX_JOBS_PER_OWNER = 10000000", "MAX_JOBS_SUBMITTED = 10000000",
    "MAX_JOBS_PER_SUBMISSION = 10000000", "MAX_JOBS_RUNNING = 10000000",
    f"FILESYSTEM_DOMAIN = {UID_DOMAIN}",
    "DAEMON_LIST = MASTER, COLLECTOR, NEGOTIATOR, SCHEDD",
    "NEGOTIATOR_INTERVAL = 60", "NEGOTIATOR_CYCLE_DELAY = 20", "NEGOTIATOR_MIN_INTERVAL = 5",
    "SCHEDD_INTERVAL = 60", "NEGOTIATOR_UPDATE_INTERVAL = 60",
    # gridfair's steering rank (configs/htcondor-pool.config), as a pool it steers has. It
    # also makes the schedd form autoclusters: with no expression of the negotiator's reading
    # a job attribute (these slots' Requirements read none), the schedd is given no
    # significant attribute and forms none ("autocluster -1" for every request; measured).
    "NEGOTIATOR_PRE_JOB_RANK = 1e15 * (TARGET.GridfairSlot =?= MY.Name)",
]
UNCAPPED = "SCHEDD_ENABLE_PER_USER_MATCH_LIMITS = False"
NEGOTIATOR_PHASES = ("LastNegotiationCycleDuration0", "LastNegotiationCyclePhase1Duration0",
                     "LastNegotiationCyclePhase2Duration0", "LastNegotiationCyclePhase3Duration0",
                     "LastNegotiationCyclePhase4Duration0", "LastNegotiationCycleMatches0",
                     "LastNegotiationCycleRejections0", "LastNegotiationCycleCandidateSlots0")
STEER = 1000
#: The schedd's idle window before the steering (its background CPU a second), and the wait
#: after it for its workers to be reaped (counted in both).
STEER_IDLE_S, STEER_SETTLE_S = 10.0, 1.0


# ------------------------------------------------------------------ the pool's ads
def slot_ads(slots: int, users: int, seed: int = 1) -> list[str]:
    """`slots` machine ads (old syntax, one string each): two in three static one-cpu slots,
    the rest partitionable machines of 8-32 cpus; one in ten with GPUs."""
    rng = random.Random(seed)
    ads = []
    for number in range(slots):
        partitionable = number % 3 == 2
        cpus = rng.choice((8, 16, 32)) if partitionable else 1
        memory = cpus * rng.choice((2048, 4096, 8192))
        gpus = rng.choice((1, 2, 4)) if number % 10 == 9 else 0
        machine = f"m{number:06d}.scale.test"
        name = f"slot1@{machine}"
        mflops = cpus * rng.choice((1500, 2500, 4000))
        lines = [
            'MyType = "Machine"', 'TargetType = "Job"', f'Name = "{name}"',
            f'Machine = "{machine}"', f'MyAddress = "{FAKE_ADDRESS}"',
            f'StartdIpAddr = "{FAKE_ADDRESS}"', f'Arch = "{ARCH}"', f'OpSys = "{OPSYS}"',
            'OpSysAndVer = "Ubuntu22"', f'UidDomain = "{UID_DOMAIN}"',
            f'FileSystemDomain = "{UID_DOMAIN}"', "HasFileTransfer = true",
            f"Cpus = {cpus}", f"TotalCpus = {cpus}", f"TotalSlotCpus = {cpus}",
            f"Memory = {memory}", f"TotalMemory = {memory}", f"TotalSlotMemory = {memory}",
            f"Disk = {cpus * 50_000_000}", f"TotalDisk = {cpus * 50_000_000}",
            f"GPUs = {gpus}", f"TotalGPUs = {gpus}", f"TotalSlotGPUs = {gpus}",
            'State = "Unclaimed"', 'Activity = "Idle"', "START = true",
            "Requirements = START", "Rank = 0", "SlotID = 1", "SlotTypeID = 1",
            'SlotType = "Partitionable"' if partitionable else 'SlotType = "Static"',
            f"PartitionableSlot = {'true' if partitionable else 'false'}",
            f'GridOwner = "User{number % users + 1}"', f"MFlops = {mflops / cpus:g}"
            if partitionable else f"MFlops = {mflops:g}",
            f"KFlops = {mflops * 1000 // cpus}", f"Mips = {mflops // cpus}",
            "ClassAdLifetime = 86400", f"DaemonStartTime = {int(time.time()) - 3600}",
            f"MyCurrentTime = {int(time.time())}", "IsWakeAble = false",
            'CondorVersion = "$CondorVersion: 25.0.0 2025-01-01 BuildID: bench $"',
        ]
        ads.append("\n".join(lines) + "\n")
    return ads


def job_shapes(shapes: int) -> list[tuple[int, int, int, int]]:
    """`shapes` distinct (cpus, memory MB, disk KB, gpus) requests, one in eight with a GPU."""
    found = []
    for number in range(shapes):
        cpus = (1, 1, 1, 2, 4, 8)[number % 6]
        memory = 512 * (1 + number // 6 % 16)
        disk = 100_000 * (1 + number // 96)
        gpus = 1 if number % 8 == 7 else 0
        found.append((cpus, memory, disk, gpus))
    return found


def job_plan(jobs: int, users: int, shapes: int, seed: int = 2) -> dict[str, list[tuple]]:
    """user -> its jobs' shapes, in submit order: jobs spread over the users evenly, each of a
    shape drawn at random."""
    rng = random.Random(seed)
    every = job_shapes(shapes)
    plan: dict[str, list[tuple]] = {f"User{user + 1}": [] for user in range(users)}
    for number in range(jobs):
        plan[f"User{number % users + 1}"].append(rng.choice(every))
    return plan


# ------------------------------------------------------------------ live: HTCondor's side
def submit_plan(pool, plan: dict[str, list[tuple]]) -> float:
    """Submit every user's jobs, those with and without GPUs in one condor_submit each;
    the seconds it took."""
    started = time.perf_counter()
    for user, shapes in plan.items():
        for with_gpus in (False, True):
            items = [f"  {c}, {m}, {d}" for c, m, d, g in shapes if bool(g) == with_gpus]
            if not items:
                continue
            commands = ["executable = /bin/sleep", "arguments = 600",
                        "request_cpus = $(cpus)", "request_memory = $(memory)",
                        "request_disk = $(disk)", *(["request_gpus = 1"] if with_gpus else [])]
            done = pool.submit_as(user, commands, count=len(items) * 4,
                                  queue=["queue cpus, memory, disk from (", *items, ")"])
            if done.returncode != 0:
                raise RuntimeError(f"condor_submit as {user}: {done.stderr.strip()}")
    return time.perf_counter() - started


def advertise(pool, ads: list[str], directory: Path) -> float:
    """Send the machine ads to the collector in batches; the seconds it took."""
    started = time.perf_counter()
    batch = 5000
    for start in range(0, len(ads), batch):
        path = directory / f"slots{start}.ads"
        path.write_text("\n".join(ads[start:start + batch]))
        path.chmod(0o644)
        pool.run_tool(["condor_advertise", "-multiple", "-fake-private-ad",
                       "UPDATE_STARTD_AD", str(path)], timeout=300)
    return time.perf_counter() - started


def negotiator_ad(pool) -> dict:
    import htcondor2

    ads = htcondor2.Collector(pool.collector_host).query(htcondor2.AdType.Negotiator)
    return {key: ads[0].get(key) for key in ("LastNegotiationCycleEnd0", *NEGOTIATOR_PHASES)
            } if ads else {}


def ask_for_cycle(pool) -> None:
    """The negotiator's RESCHEDULE, sent to it as the daemon sends it (the bench runs as
    root, an ADMINISTRATOR of its personal pool)."""
    import htcondor2

    from gridfair.daemon.backends.htcondor.steering import RESCHEDULE

    for ad in htcondor2.Collector(pool.collector_host).query(htcondor2.AdType.Negotiator):
        htcondor2.send_command(ad, RESCHEDULE)


def negotiation_cycle(pool, timeout: float) -> dict:
    """The first negotiation cycle that starts after now (so after a change to the pool's
    configuration), asked of the negotiator (`ask_for_cycle`): the negotiator ad's figures,
    with `StartedAfter` (seconds from the ask to its start: a few when the ask is taken, up
    to `NEGOTIATOR_INTERVAL` when it is dropped), or why not. A cycle already running ends
    first, and the next is asked for (its start, its end less its duration, tells them
    apart: at 50,000 slots a cycle takes minutes)."""
    since = math.floor(time.time()) + 1
    time.sleep(since - time.time())  # a cycle starting this second started after the call
    last = negotiator_ad(pool).get("LastNegotiationCycleEnd0")
    deadline = time.monotonic() + timeout
    ask_for_cycle(pool)
    while True:
        if time.monotonic() > deadline:
            return {"error": f"no negotiation cycle started and ended within {timeout:g} s"}
        time.sleep(2)
        ad = negotiator_ad(pool)
        if ad.get("LastNegotiationCycleEnd0") in (None, last):
            continue
        started = ad["LastNegotiationCycleEnd0"] - ad.get("LastNegotiationCycleDuration0", 0)
        if started >= since:
            return {**ad, "StartedAfter": started - since}
        last = ad["LastNegotiationCycleEnd0"]
        ask_for_cycle(pool)


def set_match_cap(pool, capped: bool) -> None:
    """The schedd's per-user match limit on (HTCondor's default) or off, by reconfig."""
    lines = pool.config_file.read_text().splitlines()
    lines = [line for line in lines if line != UNCAPPED] + ([] if capped else [UNCAPPED])
    pool.config_file.write_text("\n".join(lines) + "\n")
    pool.run_tool(["condor_reconfig", "-schedd"], check=False)
    time.sleep(2)


def duty_cycles(pool) -> dict:
    import htcondor2

    collector = htcondor2.Collector(pool.collector_host)
    found = {}
    for kind, label in ((htcondor2.AdType.Collector, "collector"),
                        (htcondor2.AdType.Schedd, "schedd"),
                        (htcondor2.AdType.Negotiator, "negotiator")):
        ads = collector.query(kind, projection=["RecentDaemonCoreDutyCycle"])
        if ads:
            found[label] = round(float(ads[0].get("RecentDaemonCoreDutyCycle", 0.0)), 3)
    return found


def process_pid(config_file: Path, program: str) -> int | None:
    wanted = f"CONDOR_CONFIG={config_file}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if program.encode() in (entry / "cmdline").read_bytes() and \
                    wanted in (entry / "environ").read_bytes().split(b"\0"):
                return int(entry.name)
        except OSError:
            continue
    return None


def idle_read_costs(pool, schedd_pid: int | None, jobs: int) -> dict:
    """What each way of reading a schedd's idle jobs costs, wall and CPU seconds of this
    process and of the schedd, once 1 % of the idle jobs are removed: every row
    (`ROW_ATTRIBUTES`, a full read), the id list a steady read makes (`kept_idle.LISTED`),
    and the ids of the jobs that left the queue since, from the history (`since`: the other
    way of finding removed jobs)."""
    import htcondor2

    from gridfair.daemon.backends.htcondor.kept_idle import LISTED
    from gridfair.daemon.backends.htcondor.reading import ROW_ATTRIBUTES

    schedd = pool.schedd()
    removed = schedd.query("JobStatus == 1", ["ClusterId", "ProcId"], limit=max(jobs // 100, 1))
    before = int(time.time()) - 1
    schedd.act(htcondor2.JobAction.Remove,
               [f"{ad['ClusterId']}.{ad['ProcId']}" for ad in removed])
    time.sleep(2)  # the removed jobs written to the history
    reads = {"rows": lambda: schedd.query("JobStatus == 1", list(ROW_ATTRIBUTES)),
             "id_list": lambda: schedd.query("JobStatus == 1", list(LISTED)),
             "history_since": lambda: list(schedd.history(
                 "true", ["ClusterId", "ProcId"], since=f"EnteredCurrentStatus < {before}"))}
    costs = {}
    for name, read in reads.items():
        wall, cpu, schedd_cpu = time.perf_counter(), cpu_seconds(), cpu_of(schedd_pid)
        answered = len(read())
        costs[name] = {"wall_s": round(time.perf_counter() - wall, 3),
                       "cpu_s": round(cpu_seconds() - cpu, 3),
                       "schedd_cpu_s": round(cpu_of(schedd_pid) - schedd_cpu, 3),
                       "ads": answered}
    return costs


def cpu_of(pid: int | None) -> float:
    """CPU seconds of a process and of its reaped children (the schedd's query workers)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return sum(map(int, fields[11:15])) / os.sysconf("SC_CLK_TCK")


# ------------------------------------------------------------------ files: the same ads
def job_ad(cluster: int, proc: int, user: str, shape: tuple, qdate: int) -> str:
    cpus, memory, disk, gpus = shape
    requirements = (f'(TARGET.Arch == "{ARCH}") && (TARGET.OpSys == "{OPSYS}") && '
                    "(TARGET.Disk >= RequestDisk) && (TARGET.Memory >= RequestMemory) && "
                    "(TARGET.Cpus >= RequestCpus)" +
                    (" && (TARGET.GPUs >= RequestGPUs)" if gpus else ""))
    return (f'MyType = "Job"\nClusterId = {cluster}\nProcId = {proc}\nOwner = "{user}"\n'
            f'User = "{user}@{UID_DOMAIN}"\nJobStatus = 1\nQDate = {qdate}\nJobUniverse = 5\n'
            f"RequestCpus = {cpus}\nRequestMemory = {memory}\nRequestDisk = {disk}\n"
            + (f"RequestGPUs = {gpus}\n" if gpus else "") +
            f"Requirements = {requirements}\n\n")


def write_files(directory: Path, slots: list[str], plan: dict[str, list[tuple]]) -> list[str]:
    """pool.status and pool.queue in `directory`; the queue's ads, in order."""
    (directory / "pool.status").write_text("\n".join(slots))
    queue = []
    for cluster, (user, shapes) in enumerate(plan.items(), start=1):
        queue += [job_ad(cluster, proc, user, shape, 1_700_000_000 + proc)
                  for proc, shape in enumerate(shapes)]
    (directory / "pool.queue").write_text("".join(queue))
    return queue


# ------------------------------------------------------------------ gridfair's side
def run_daemon(spec: dict) -> dict:
    """The daemon's cycles as `spec` says, in this process: timings by phase, peak RSS."""
    import gridfair.daemon.cycle as cycle_module
    from gridfair.core.negotiator import Negotiator
    from gridfair.daemon.actuator import Actuator
    from gridfair.daemon.config import validate
    from gridfair.daemon.cycle import CycleRunner
    from gridfair.daemon.journal import CycleJournal
    from gridfair.daemon.service import make_backend
    from gridfair.daemon.store import Store

    directory = Path(spec["directory"])
    live = spec["source"] == "live"
    backend_section = ({"htcondor": {"collector": spec["collector"], "uid_domain": UID_DOMAIN,
                                     "demand": spec.get("demand", "autocluster")}}
                       if live else {"files": {"directory": "pool", "actions": "a.jsonl"}})
    config = validate({"daemon": {"store": "state.db", "query_timeout": 3600.0,
                                  "incremental": spec.get("incremental", True)},
                       "backend": {"kind": "htcondor" if live else "files",
                                   **backend_section},
                       "safety": {"max_snapshot_age": 1e12, "min_runtime": 0.0}},
                      base=directory)
    backend = make_backend(config)
    spent: dict[str, list[float]] = {}
    lock = threading.Lock()

    peaks: dict[str, float] = {}  # phase -> its peak RSS (MB), the phases not nested

    def timed(owner, name, label, when=None, peak=False):
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            if when is not None and not when(kwargs):
                return original(*args, **kwargs)
            if peak:
                high_water.reset()
            wall, cpu = time.perf_counter(), time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                with lock:
                    row = spent.setdefault(label, [0.0, 0.0])
                    row[0] += time.perf_counter() - wall
                    row[1] += time.thread_time() - cpu
                    if peak:
                        peaks[label] = max(peaks.get(label, 0.0), high_water.mb())
                        high_water.reset()
        setattr(owner, name, wrapper)

    if live:
        from gridfair.daemon.backends.htcondor.reading import PoolReader

        timed(PoolReader, "_query_slots", "collector_read")
        timed(PoolReader, "_query_demand" if spec.get("demand", "autocluster") ==
              "autocluster" else "_query_jobs", "schedd_read")
    else:
        import gridfair.daemon.backends.files as files_module

        timed(files_module, "read_dumps", "collector_read", lambda kw: not kw.get("jobs"))
        timed(files_module, "read_dumps", "schedd_read", lambda kw: kw.get("jobs"))
    high_water = HighWater()
    timed(type(backend), "read_snapshot", "read", peak=True)
    timed(CycleRunner, "_load", "pool", peak=True)
    timed(Negotiator, "cycle", "decide", peak=True)
    timed(CycleJournal, "record_plan", "journal", peak=True)
    timed(Actuator, "carry_out", "act", peak=True)
    timed(cycle_module, "reconcile", "reconcile", peak=True)
    store = Store(directory / "state.db")
    runner = CycleRunner(config, backend, store, dry_run=spec["dry_run"])
    # What the reads logged of why they read whole (the first few), for the record.
    read_whole: list[str] = []
    reading_log = logging.getLogger("gridfair.daemon")
    reading_log.setLevel(logging.INFO)
    reading_log.addHandler(ListHandler(read_whole))
    cycles = []
    for number in range(spec["cycles"] + 1):
        if number:
            churn(spec, number)
        spent.clear()
        peaks.clear()
        high_water.reset()
        wall, cpu = time.perf_counter(), cpu_seconds()
        report = runner.run()
        peaks["other"] = high_water.mb()  # the cycle outside the phases above
        high_water.reset()
        row = {"wall_s": round(time.perf_counter() - wall, 3),
               "cpu_s": round(cpu_seconds() - cpu, 3), "outcome": report.outcome,
               "error": report.error, **{key: report.counts.get(key, 0) for key in
                                         ("machines", "jobs", "decisions", "skipped")}}
        read = spent.pop("read", [0.0, 0.0])
        inner = [spent.get(key, [0.0, 0.0]) for key in ("collector_read", "schedd_read")]
        spent["read_rest"] = [read[0] - inner[0][0] - inner[1][0],
                              read[1] - inner[0][1] - inner[1][1]]
        row["phases"] = {key: {"wall_s": round(w, 3), "cpu_s": round(c, 3)}
                         for key, (w, c) in sorted(spent.items())}
        row["peak_rss_mb"] = {key: round(mb, 1) for key, mb in sorted(peaks.items())}
        cycles.append(row)
    # What was decided, without times: two runs on the same pool decide the same or not,
    # cycle by cycle (the carried pool's and a rebuild's: `--check-rebuild`).
    digest = hashlib.sha256()
    by_cycle: dict[int, hashlib._Hash] = {}
    for row in store.db.query("select cycle, seq, kind, job, user, machine from decisions "
                              "order by cycle, seq"):
        line = json.dumps(list(row.values())).encode()
        digest.update(line)
        by_cycle.setdefault(row["cycle"], hashlib.sha256()).update(line)
    for number, row in enumerate(cycles, start=1):
        row["decisions_digest"] = by_cycle[number].hexdigest()[:16] if number in by_cycle \
            else None
    result = {"cycles": cycles, "decisions_digest": digest.hexdigest()[:16],
              "peak_rss_mb": round(high_water.highest, 1)}
    if live:  # why schedds' idle rows and autoclusters were read whole, and how often
        result["whole_reads"] = dict(backend.reader.whole_reads)
        result["whole_reads_logged"] = [line[:2000] for line in read_whole
                                        if "autocluster" in line][:6]
    if live and spec["steer"]:
        result.update(steer(backend, spec, store))
    return result


class ListHandler(logging.Handler):
    """Log records' messages appended to a list."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.INFO)
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


class HighWater:
    """This process's peak RSS since the last `reset` (Linux: VmHWM, reset by writing 5 to
    /proc/self/clear_refs), so that a phase's peak is its own; `highest` is the peak of the
    whole run (each peak is read before a reset)."""

    STATUS, CLEAR = Path("/proc/self/status"), Path("/proc/self/clear_refs")

    def __init__(self) -> None:
        self.highest = 0.0

    def mb(self) -> float:
        line = next(line for line in self.STATUS.read_text().splitlines()
                    if line.startswith("VmHWM:"))
        peak = int(line.split()[1]) / 1024
        self.highest = max(self.highest, peak)
        return peak

    def reset(self) -> None:
        self.mb()
        self.CLEAR.write_text("5")


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def churn(spec: dict, number: int) -> None:
    """`churn` of the jobs change before a steady cycle: half removed, as many submitted."""
    count = churned(spec)
    if spec["source"] == "files":
        # In a process of its own: rewriting the dump holds it whole, which is the bench's
        # memory, not the daemon's (it doubled the daemon's peak at 1,000,000 jobs).
        subprocess.run([sys.executable, __file__, "--churn-spec",
                        json.dumps({**spec, "number": number})], check=True)
        return
    environment = {**os.environ, "CONDOR_CONFIG": spec["condor_config"]}
    environment = {**os.environ, "CONDOR_CONFIG": spec["condor_config"]}
    tools = Path(spec["install"]) / "bin"
    rows = subprocess.run([str(tools / "condor_q"), "-allusers", "-constraint", "JobStatus == 1",
                           "-af", "ClusterId", "ProcId"], env=environment, capture_output=True,
                          text=True, check=True).stdout.split("\n")
    rng = random.Random(number)
    chosen = rng.sample([row.replace(" ", ".") for row in rows if row.strip()], count)
    subprocess.run([str(tools / "condor_rm"), *chosen], env=environment, capture_output=True,
                   check=False)
    submit = Path(spec["jobs_folder"]) / f"churn{number}.sub"
    submit.write_text("universe = vanilla\nshould_transfer_files = NO\nexecutable = /bin/sleep\n"
                      f"arguments = 600\nrequest_memory = 512\nqueue {count}\n")
    submit.chmod(0o644)
    subprocess.run(["setpriv", "--reuid=User1", "--regid=User1", "--init-groups",
                    str(tools / "condor_submit"), "-terse", str(submit)], env=environment,
                   capture_output=True, check=False, cwd=spec["jobs_folder"])
    time.sleep(2)  # the schedd's autoclusters catch up


def churned(spec: dict) -> int:
    """How many jobs a churn removes (and submits)."""
    return max(2, round(spec["jobs"] * spec.get("churn", 0.01))) // 2


def churn_dump(spec: dict) -> None:
    """`churn` of the files source: the job dump with `count` ads removed and as many added."""
    number = spec["number"]
    count = churned(spec)
    path = Path(spec["directory"]) / "pool" / "pool.queue"
    ads = path.read_text().split("\n\n")[:-1]
    removed = set(random.Random(number).sample(range(len(ads)), count))
    kept = [ad for index, ad in enumerate(ads) if index not in removed]
    fresh = [job_ad(10_000 + number, proc, f"User{proc % 4 + 1}", (1, 512, 100_000, 0),
                    1_800_000_000 + proc).rstrip("\n") for proc in range(count)]
    path.write_text("\n\n".join(kept + fresh) + "\n\n")


def steer(backend, spec: dict, store) -> dict:
    """Steer `STEER` idle jobs as a cycle does (`allocate_all` in the cycle's batches: one
    edit for the jobs given one value, then `actions_done`: one reschedule), timed, with the
    schedd's CPU meanwhile, three ways on three sets of jobs in the same run: `decided`, the
    allocations the daemon's last cycle decided (a partitionable slot takes several jobs);
    `steer_`, each job to a slot of its own (the most edits); and, the baseline, each job to a
    slot of its own one at a time as every allocation was before (its size, then its slot:
    two edits a job, and one reschedule). The schedd's CPU is given raw and net of its
    background work (its timers, the negotiator's requests: at 100,000 jobs a large part),
    measured just before each over an idle window of `STEER_IDLE_S`, with the number of
    edits."""
    from gridfair.daemon.actuator import ALLOCATION_BATCH

    snapshot = backend.read_snapshot()
    jobs, machines = snapshot.jobs_by_id, snapshot.machines_by_name
    decided: dict[str, tuple] = {}
    for row in store.db.query("select job, machine from decisions where kind = 'allocate' "
                              "and cycle = (select max(cycle) from decisions) order by seq"):
        if row["job"] in jobs and row["machine"] in machines and len(decided) < STEER:
            decided[row["job"]] = (jobs[row["job"]], machines[row["machine"]])
    others = [job for job in snapshot.jobs if job.id not in decided][:2 * STEER]
    slots = list(snapshot.machines)
    own_slot = [(job, slots[index % len(slots)]) for index, job in enumerate(others)]
    schedd = spec.get("schedd_pid")
    edits = EditCount(backend)
    result = {}
    for prefix, allocations, carry_out in (
            ("steer_one_at_a_time_", own_slot[STEER:], one_at_a_time),
            ("steer_", own_slot[:STEER], in_batches(ALLOCATION_BATCH)),
            ("steer_decided_", list(decided.values()), in_batches(ALLOCATION_BATCH))):
        figures = steered(backend, schedd, allocations, carry_out)
        result.update({prefix + key: value for key, value in
                       {**figures, "edits": edits.take()}.items()})
    return result


class EditCount:
    """Counts the `Schedd.edit` calls (each a connection and a transaction of the schedd) the
    backend makes, through its schedd factory."""

    def __init__(self, backend) -> None:
        self.count = 0
        make = backend.schedd_factory

        def counting(location):
            schedd = make(location)
            edit = schedd.edit

            def counted(*args, **kwargs):
                self.count += 1
                return edit(*args, **kwargs)

            schedd.edit = counted
            return schedd

        backend.schedd_factory = counting

    def take(self) -> int:
        count, self.count = self.count, 0
        return count


def in_batches(size: int):
    """Carry out allocations as the cycle does: those to one slot side by side
    (`steering_order`), `allocate_all` of each batch of `size`; the failures."""
    def carry_out(backend, allocations: list) -> int:
        failed = 0
        allocations = sorted(allocations, key=lambda allocation: allocation[1].name)
        for start in range(0, len(allocations), size):
            problems = backend.allocate_all(allocations[start:start + size])
            failed += sum(problem is not None for problem in problems)
        return failed
    return carry_out


def one_at_a_time(backend, allocations: list) -> int:
    """Carry out allocations as the backend did before batches: the size, then the slot
    name, an edit each, one job after another (the backend's `steering.steer`); the failures."""
    failed = 0
    for job, machine in allocations:
        location = backend.state.schedd_of[job.id]
        try:
            backend.steering.steer(backend.schedd_factory(location), job, machine)
        except Exception:  # noqa: BLE001 - counted: the figure says how many failed
            failed += 1
        backend.state.negotiation_wanted = True
    return failed


def steered(backend, schedd: int | None, allocations: list, carry_out) -> dict:
    """Carry out the allocations, then the reschedule: wall seconds, the failures, the
    schedd's CPU seconds, raw and net of its idle rate just before, and whether a negotiation
    cycle ended meanwhile (its requests to the schedd are in both windows)."""
    negotiated = last_negotiation(backend)
    idle = cpu_of(schedd)
    time.sleep(STEER_IDLE_S)
    theirs, wall = cpu_of(schedd), time.perf_counter()
    background = (theirs - idle) / STEER_IDLE_S
    failed = carry_out(backend, allocations)
    backend.actions_done()
    wall = time.perf_counter() - wall
    time.sleep(STEER_SETTLE_S)  # the schedd's workers reaped
    raw = cpu_of(schedd) - theirs
    baseline = background * (wall + STEER_SETTLE_S)
    return {"jobs": len(allocations), "s": round(wall, 3), "failed": failed,
            "schedd_cpu_s": round(raw, 3), "schedd_idle_cpu_s": round(baseline, 3),
            "schedd_net_cpu_s": round(raw - baseline, 3),
            "negotiation_ended": last_negotiation(backend) != negotiated}


def last_negotiation(backend) -> object:
    """When the pool's negotiator last ended a cycle (its ad's LastNegotiationCycleEnd0)."""
    import htcondor2

    ads = backend.collector.query(htcondor2.AdType.Negotiator,
                                  projection=["LastNegotiationCycleEnd0"])
    return ads[0].get("LastNegotiationCycleEnd0") if ads else None


def daemon_side(spec: dict) -> dict:
    """`run_daemon` in a process of its own (its peak RSS its own)."""
    done = subprocess.run([sys.executable, __file__, "--daemon-spec", json.dumps(spec)],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, **({"CONDOR_CONFIG": spec["condor_config"]}
                                                if spec.get("condor_config") else {})})
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip()
                else f"exit {done.returncode}"}
    return json.loads(done.stdout)


# ------------------------------------------------------------------ one size
def summary(gridfair: dict) -> dict:
    cycles = gridfair.get("cycles") or []
    steady = sorted(c["wall_s"] for c in cycles[1:])
    return {"first_cycle_s": cycles[0]["wall_s"] if cycles else None,
            "steady_cycle_s": steady[len(steady) // 2] if steady else None,
            "peak_rss_mb": gridfair.get("peak_rss_mb"),
            "steer_1000_s": gridfair.get("steer_s")}


def run_size(slots: int, jobs: int, source: str, args: argparse.Namespace) -> dict:
    ads = slot_ads(slots, args.users)
    plan = job_plan(jobs, args.users, args.shapes)
    load_before = os.getloadavg()
    spec = {"source": source, "jobs": jobs, "cycles": args.cycles, "dry_run": not args.act,
            "steer": not args.no_steer, "demand": args.demand, "churn": args.churn}
    if source == "files":
        sides = {"gridfair": {**spec}}
        if args.check_rebuild:
            sides["rebuild"] = {**spec, "incremental": False}
        found = {}
        for side, side_spec in sides.items():  # each on the same dumps, churned alike
            with tempfile.TemporaryDirectory(prefix="gridfair-scale-") as scratch:
                (Path(scratch) / "pool").mkdir()
                write_files(Path(scratch) / "pool", ads, plan)
                found[side] = daemon_side({**side_spec, "directory": scratch})
        gridfair = found["gridfair"]
        result = {"slots": slots, "jobs": jobs, "source": source,
                  "gridfair": summary(gridfair), "htcondor": None,
                  "detail": {**found, "load_before": load_before,
                             "load_after": os.getloadavg()}}
        if args.check_rebuild:
            result["gridfair"]["same_decisions_as_rebuild"] = [
                carried.get("decisions_digest") == rebuilt.get("decisions_digest")
                for carried, rebuilt in zip(gridfair.get("cycles", []),
                                            found["rebuild"].get("cycles", []), strict=True)]
        return result
    import htcondor2

    from tests.live.harness.personal_pool import PersonalPool

    limits = ([f"NEGOTIATOR_MAX_TIME_PER_{scope} = {args.negotiator_max_time:g}"
               for scope in ("SCHEDD", "SUBMITTER", "PIESPIN", "CYCLE")]
              if args.negotiator_max_time else [])
    with PersonalPool([], interval=60, extra_config=[*POOL_CONFIG, *limits],
                      daemon_account=None) as pool, \
            tempfile.TemporaryDirectory(prefix="gridfair-scale-", dir="/var/tmp") as scratch:
        detail: dict = {"advertise_s": round(advertise(pool, ads, pool.jobs_folder), 1),
                        "submit_s": round(submit_plan(pool, plan), 1)}
        pool.wait_until(lambda: len(pool.status("Name")) >= slots, 120, 2)
        detail["negotiator_uncapped"] = detail["negotiator_capped"] = {}
        if not args.no_htcondor:
            set_match_cap(pool, capped=False)
            detail["negotiator_uncapped"] = negotiation_cycle(pool, args.negotiation_timeout)
        # The schedd groups its jobs into autoclusters when a negotiation first asks.
        detail["autoclusters"] = len(pool.schedd().query(
            "true", ["AutoClusterId"], opts=htcondor2.QueryOpt.AutoCluster))
        if not args.no_htcondor:
            set_match_cap(pool, capped=True)
            detail["negotiator_capped"] = negotiation_cycle(pool, args.negotiation_timeout)
        Path(scratch).chmod(0o755)
        schedd = process_pid(pool.config_file, "condor_schedd")
        gridfair = daemon_side({**spec, "directory": scratch, "collector": pool.collector_host,
                                "condor_config": str(pool.config_file),
                                "install": str(pool.install), "schedd_pid": schedd,
                                "jobs_folder": str(pool.jobs_folder)})
        detail.update(gridfair=gridfair, duty_cycle=duty_cycles(pool), load_before=load_before,
                      load_after=os.getloadavg())
        detail["idle_reads"] = idle_read_costs(pool, schedd, jobs)
    return {"slots": slots, "jobs": jobs, "source": source, "gridfair": summary(gridfair),
            "htcondor": {"negotiation_cycle_s": detail["negotiator_uncapped"].get(
                "LastNegotiationCycleDuration0"),
                "capped_cycle_s": detail["negotiator_capped"].get(
                    "LastNegotiationCycleDuration0")},
            "detail": detail}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int)
    parser.add_argument("--jobs", type=int)
    parser.add_argument("--source", choices=("live", "files"), default="live")
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--shapes", type=int, default=300)
    parser.add_argument("--cycles", type=int, default=3, help="steady cycles (default 3)")
    parser.add_argument("--churn", type=float, default=0.01,
                        help="share of the jobs changed before each steady cycle, half "
                             "removed and as many submitted (default 0.01)")
    parser.add_argument("--act", action="store_true",
                        help="let the daemon steer (default: --dry-run, decisions journaled)")
    parser.add_argument("--demand", choices=("autocluster", "jobs"), default="autocluster",
                        help="the live daemon's backend.htcondor.demand (default autocluster)")
    parser.add_argument("--no-steer", action="store_true", help="skip the 1,000-job steering")
    parser.add_argument("--no-htcondor", action="store_true",
                        help="live: skip HTCondor's own negotiation cycles (gridfair alone)")
    parser.add_argument("--negotiation-timeout", type=float, default=600.0)
    parser.add_argument("--negotiator-max-time", type=float,
                        help="raise the negotiator's time limits (NEGOTIATOR_MAX_TIME_PER_"
                             "SCHEDD, _SUBMITTER, _PIESPIN, _CYCLE: by default 120, 60, 120 "
                             "and 1200 s, which end the uncapped cycle early) to these seconds")
    parser.add_argument("--check-rebuild", action="store_true",
                        help="files: run the daemon again with daemon.incremental = false "
                             "on the same dumps and churn, and compare each cycle's digest "
                             "of decisions (same_decisions_as_rebuild)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--detail", action="store_true",
                        help="with --json: each size's phases and the negotiator's ads too")
    parser.add_argument("--daemon-spec", help=argparse.SUPPRESS)
    parser.add_argument("--churn-spec", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.churn_spec:
        churn_dump(json.loads(args.churn_spec))
        return
    if args.daemon_spec:
        print(json.dumps(run_daemon(json.loads(args.daemon_spec))))
        return
    if (args.slots is None) != (args.jobs is None):
        parser.error("give --slots and --jobs together, or neither (every size)")
    sizes = [(args.slots, args.jobs, args.source)] if args.slots else list(SIZES)
    results = []
    for slots, jobs, source in sizes:
        result = run_size(slots, jobs, source, args)
        result["load_average"] = [round(value, 2) for value in os.getloadavg()]
        if not (args.json and args.detail):
            detail = result.pop("detail")
            if not args.json:
                print(json.dumps(detail, indent=1))
        results.append(result)
        if not args.json:
            print(json.dumps(result))
    if args.json:
        print(json.dumps({"sizes": results}))


if __name__ == "__main__":
    main()
