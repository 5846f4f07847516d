"""A personal HTCondor pool for live tests and benchmarks: one machine, loopback only.

`PersonalPool` writes a configuration in a directory of its own (collector, negotiator, schedd
and startd under one condor_master, a free loopback port, short negotiation and update
intervals), with slots whose ads carry the owner and power attributes given per slot, either
as static slots or as one partitionable slot per machine (dynamic slots per job, HTCondor's
modern default). It starts the master, waits until every slot is seen by the collector, and
always stops it: `stop()` is called by the context manager, at interpreter exit and on
SIGTERM/SIGINT, and kills what `condor_off` leaves behind.

HTCondor is found through `GRIDFAIR_HTCONDOR` (an install tree with `sbin/condor_master`),
else `condor_master` on PATH, else `../shared/htcondor` beside the repository (as in CI).

The pool is set up as a production pool is, so that what is tested of its security holds
there: it needs root. The master runs as root with `nobody` as HTCondor's own account
(`CONDOR_IDS`), every connection is authenticated (`FS`, the local file-system method: a
client proves its Unix account; no `CLAIMTOBE`), administration is HTCondor's own account's
alone, and jobs are submitted by real Unix accounts, one per submitter (`JobSpec.user` is the
account's name; `ensure_account` creates it, no home, no login shell), so each job's `Owner`
and `User` are the identity the schedd authenticated. Jobs also name the accounting group
`owners.<account>`, as a site's jobs often do (HTCondor's own accounting uses it; gridfair
trusts it only when told to). Root's tools and bindings act as HTCondor's own account, a queue
super user.
"""

from __future__ import annotations

import atexit
import contextlib
import grp
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.live.harness.accounts import (
    as_account,
    ensure_account,
    require_reach,
    runnable_install,
)

#: HTCondor's own account (`CONDOR_IDS`): its daemons' files, and who root acts as.
CONDOR_ACCOUNT = ("nobody", "nogroup")
#: The account gridfair's daemon runs as (configs/htcondor-pool.config, GRIDFAIR_ACCOUNT).
DAEMON_ACCOUNT = "gridfair"
UID_DOMAIN = "gridfair.test"
ACCOUNTING_PREFIX = "owners"


class HTCondorMissing(RuntimeError):
    """No HTCondor install was found, or it cannot be run as a production pool here (not
    root): the message says which."""


def find_htcondor(repo_root: Path | None = None) -> Path:
    """The install tree (holding sbin/condor_master): GRIDFAIR_HTCONDOR, else the PATH, else
    ../shared/htcondor beside the repository. HTCondorMissing says where it looked."""
    tried = []
    configured = os.environ.get("GRIDFAIR_HTCONDOR")
    if configured:
        if (Path(configured) / "sbin" / "condor_master").is_file():
            return Path(configured)
        tried.append(f"GRIDFAIR_HTCONDOR={configured} (no sbin/condor_master)")
    on_path = shutil.which("condor_master")
    if on_path:
        return Path(on_path).resolve().parent.parent
    tried.append("condor_master on PATH")
    root = repo_root or Path(__file__).resolve().parents[3]
    shared = root.parent / "shared" / "htcondor"
    if (shared / "sbin" / "condor_master").is_file():
        return shared
    tried.append(str(shared))
    raise HTCondorMissing("HTCondor not found: tried " + "; ".join(tried))


#: Where pools' own directories are made: not under /tmp, which a daemon run as its systemd
#: unit runs it (PrivateTmp) and a starter (MOUNT_UNDER_SCRATCH) each see a private copy of.
POOLS_PARENT = Path("/var/tmp")
#: Seconds between looks for jobs the pool held, while waiting.
HELD_LOOK_EVERY = 3.0
#: In a pool's own directory: the process that runs it (pid and start time).
OWNER_FILE = "owner"


def _process_identity(pid: int) -> str | None:
    """`pid` and its start time (which tells a live process from a later one given its pid),
    or None if no such process runs."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return f"{pid} {stat.rpartition(')')[2].split()[19]}"  # field 22, starttime


def _processes_of(directory: Path, config_file: Path) -> list[int]:
    """Processes of one pool: started with its configuration (every HTCondor daemon it ran)
    or working in its directory (jobs)."""
    marker = f"CONDOR_CONFIG={config_file}".encode()
    inside = f"{directory}/"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environment = (entry / "environ").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:  # gone meanwhile, or a kernel thread
            continue
        if marker in environment or f"{cwd}/".startswith(inside):
            found.append(int(entry.name))
    return found


def _kill(pids: Sequence[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def sweep_abandoned_pools() -> None:
    """Stop and remove the pools whose process died without stopping them: their daemons
    and jobs would otherwise run on, holding ports and CPU (a pool of a live run still going,
    another pytest's or a benchmark's, is left alone)."""
    for owner in POOLS_PARENT.glob(f"gridfair-pool-*/{OWNER_FILE}"):
        with contextlib.suppress(OSError, ValueError):
            recorded = owner.read_text().strip()
            if recorded and _process_identity(int(recorded.split()[0])) == recorded:
                continue
            _kill(_processes_of(owner.parent, owner.parent / "condor_config"))
            shutil.rmtree(owner.parent, ignore_errors=True)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True, slots=True)
class SlotSpec:
    """One slot (static layout) or one machine's partitionable slot; `mflops` is the power of
    all its CPUs."""

    owner: str
    mflops: float
    cpus: int = 1
    memory: int = 256


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A sleep job of `work` MFlop-seconds: it runs work / MFlops / scale seconds wherever it
    lands (the job reads its slot's MFlops at run time, as `$$(MFlops)`)."""

    user: str
    work: float
    cpus: int = 1
    memory: int = 64


def _slot_config(layout: str, slots: Sequence[SlotSpec], owner_attr: str,
                 power_attr: str) -> list[str]:
    # One slot type per slot, so each carries its own owner and power; HTCondor allows 10
    # slot types unless told otherwise.
    lines = [f"STARTD_ATTRS = $(STARTD_ATTRS) {owner_attr} {power_attr}",
             f"MAX_SLOT_TYPES = {max(10, len(slots))}"]
    if layout not in ("static", "partitionable"):
        raise ValueError(f"layout must be 'static' or 'partitionable', not {layout!r}")
    lines += [f"NUM_CPUS = {sum(slot.cpus for slot in slots)}",
              f"MEMORY = {sum(slot.memory for slot in slots)}"]
    for number, slot in enumerate(slots, start=1):
        lines.append(f"SLOT_TYPE_{number} = cpus={slot.cpus}, mem={slot.memory}")
        # A static slot publishes its whole power; a partitionable one (and the dynamic slots
        # cut from it, which inherit it) the power of one CPU (`gridfair.classads.views`).
        power = slot.mflops
        if layout == "partitionable":  # one partitionable slot a machine, dynamic slots a job
            lines.append(f"SLOT_TYPE_{number}_PARTITIONABLE = True")
            power = slot.mflops / slot.cpus
        lines += [f"NUM_SLOTS_TYPE_{number} = 1",
                  f'SLOT{number}_{owner_attr} = "{slot.owner}"',
                  f"SLOT{number}_{power_attr} = {power:g}"]
    return lines


class PersonalPool:
    """A running personal pool; use as a context manager (or call start() and stop())."""

    def __init__(
        self,
        slots: Sequence[SlotSpec],
        *,
        layout: str = "static",
        interval: int = 2,
        extra_config: Sequence[str] = (),
        owner_attr: str = "GridOwner",
        power_attr: str = "MFlops",
        install: Path | None = None,
        directory: Path | None = None,
        daemon_account: str | None = DAEMON_ACCOUNT,
    ) -> None:
        if os.geteuid() != 0:
            raise HTCondorMissing("a personal pool runs as a production pool does, with jobs "
                                  "from real Unix accounts (useradd, setpriv): it needs root")
        # Run from where HTCondor's own account reaches it (a copy, if the install lies
        # under a directory closed to it).
        self.install = runnable_install(install or find_htcondor(), CONDOR_ACCOUNT[0])
        self.slots = tuple(slots)
        self.layout = layout
        self.interval = interval
        self.owner_attr = owner_attr
        self.power_attr = power_attr
        self.daemon_account = daemon_account
        self._own_directory = directory is None
        # Not under /tmp: a daemon with a private /tmp (its systemd unit's) reads the config.
        self.directory = Path(directory or tempfile.mkdtemp(prefix="gridfair-pool-",
                                                            dir=POOLS_PARENT))
        self.port = free_port()
        self.collector_host = f"127.0.0.1:{self.port}"
        self.config_file = self.directory / "condor_config"
        self.jobs_folder = self.directory / "local" / "jobs"
        self._master: subprocess.Popen[bytes] | None = None
        self._previous_handlers: dict[int, Any] = {}
        self._write_config(extra_config)

    # ---------------------------------------------------------------- configuration
    def _write_config(self, extra_config: Sequence[str]) -> None:
        local = self.directory / "local"
        for name in ("log", "spool", "execute", "lock", "run", "jobs", "fs-auth"):
            (local / name).mkdir(parents=True, exist_ok=True)
        condor = "@".join((CONDOR_ACCOUNT[0], UID_DOMAIN))
        lines = [
            f"RELEASE_DIR = {self.install}",
            f"LOCAL_DIR = {local}",
            "LOG = $(LOCAL_DIR)/log", "SPOOL = $(LOCAL_DIR)/spool",
            "EXECUTE = $(LOCAL_DIR)/execute", "LOCK = $(LOCAL_DIR)/lock",
            "RUN = $(LOCAL_DIR)/run",
            "DAEMON_LIST = MASTER, COLLECTOR, NEGOTIATOR, SCHEDD, STARTD",
            "CONDOR_HOST = 127.0.0.1", "NETWORK_INTERFACE = 127.0.0.1",
            f"COLLECTOR_HOST = {self.collector_host}",
            "USE_SHARED_PORT = False",
            f"UID_DOMAIN = {UID_DOMAIN}", "TRUST_UID_DOMAIN = True",
            "STARTD_DETECT_GPUS =", "RUNBENCHMARKS = False",
            "START = True", "SUSPEND = False", "PREEMPT = False", "KILL = False",
            "WANT_SUSPEND = False", "WANT_VACATE = False",
            f"NEGOTIATOR_INTERVAL = {self.interval}", "NEGOTIATOR_CYCLE_DELAY = 1",
            f"NEGOTIATOR_UPDATE_INTERVAL = {self.interval}",
            "NEGOTIATOR_MIN_INTERVAL = 1",
            f"SCHEDD_INTERVAL = {self.interval}", f"UPDATE_INTERVAL = {self.interval}",
            "STARTER_UPDATE_INTERVAL = 2", "SHADOW_QUEUE_UPDATE_INTERVAL = 2",
            "MASTER_UPDATE_INTERVAL = 5", "SCHEDD_MIN_INTERVAL = 0",
            # Every connection authenticated, by the account that makes it (FS on one
            # machine); root's tools act as HTCondor's own account.
            f"CONDOR_IDS = {pwd.getpwnam(CONDOR_ACCOUNT[0]).pw_uid}."
            f"{grp.getgrnam(CONDOR_ACCOUNT[1]).gr_gid}",
            "SEC_DEFAULT_AUTHENTICATION = REQUIRED",
            "SEC_DEFAULT_AUTHENTICATION_METHODS = FS",
            "SEC_CLIENT_AUTHENTICATION_METHODS = FS",
            # Anyone authenticated reads and submits; only HTCondor's own account administers
            # or runs daemons.
            "ALLOW_READ = *", "ALLOW_WRITE = *",
            f"ALLOW_ADMINISTRATOR = {condor}", "ALLOW_OWNER = $(ALLOW_ADMINISTRATOR)",
            f"ALLOW_CONFIG = {condor}", f"ALLOW_DAEMON = {condor}",
            # The tests hold gridfair's lease from root's tools too (htcondor-pool.config).
            f"GRIDFAIR_LEASE_OPERATORS = {condor}",
            f"ALLOW_NEGOTIATOR = {condor}",
            "QUEUE_SUPER_USERS = root, nobody",
            # FS authentication's rendezvous, outside /tmp (configs/htcondor-pool.config).
            f"GRIDFAIR_FS_DIR = {local / 'fs-auth'}",
            *_slot_config(self.layout, self.slots, self.owner_attr, self.power_attr),
            *extra_config,
        ]
        self.config_file.write_text("\n".join(lines) + "\n")
        # Jobs run as their submitters, in the jobs folder: every account reaches it.
        subprocess.run(["chown", "-R", ":".join(CONDOR_ACCOUNT), str(local)], check=True)
        for folder in (self.directory, local):
            folder.chmod(0o755)
        (local / "jobs").chmod(0o1777)
        os.chown(local / "fs-auth", 0, 0)
        (local / "fs-auth").chmod(0o1777)

    def daemon_environment(self, fault: str | None = None) -> dict[str, str]:
        """The daemon's environment on this pool's central manager: HTCondor's configuration
        (so its UID_DOMAIN and client security are the pool's), and an optional fault point
        (`gridfair.daemon.faults`)."""
        environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                       "CONDOR_CONFIG": str(self.config_file)}
        if fault:
            environment["GRIDFAIR_FAULT"] = fault
        return environment

    @property
    def environment(self) -> dict[str, str]:
        """The environment in which tools and bindings talk to this pool."""
        return {**os.environ, "CONDOR_CONFIG": str(self.config_file)}

    def tool(self, name: str) -> str:
        """The path of one of the install's programs, e.g. "condor_now"."""
        for folder in ("bin", "sbin"):
            path = self.install / folder / name
            if path.is_file():
                return str(path)
        raise HTCondorMissing(f"{name} not found in {self.install}")

    # ---------------------------------------------------------------- lifetime
    def start(self, timeout: float = 60.0) -> PersonalPool:
        sweep_abandoned_pools()
        require_reach(CONDOR_ACCOUNT[0], self.directory / "local" / "log")
        if self._own_directory:
            # Whose pool this is: a later run removes it if this process dies unannounced
            # (SIGKILL, a lost terminal), daemons and jobs included.
            (self.directory / OWNER_FILE).write_text(_process_identity(os.getpid()) or "")
        self._master = subprocess.Popen(
            [self.tool("condor_master"), "-f"],
            env=self.environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        atexit.register(self.stop)
        for number in (signal.SIGTERM, signal.SIGINT):
            self._previous_handlers[number] = signal.signal(number, self._on_signal)
        try:
            self.wait_for_slots(timeout)
            if self.daemon_account:
                # The administrator's install step for gridfair's account (htcondor-pool.config).
                ensure_account(self.daemon_account)
                self.add_queue_user(f"{self.daemon_account}@{UID_DOMAIN}")
        except BaseException:
            self.stop()
            raise
        return self

    def _on_signal(self, number: int, frame: Any) -> None:
        self.stop()
        previous = self._previous_handlers.get(number)
        if callable(previous):
            previous(number, frame)
        else:
            raise KeyboardInterrupt

    def wait_for_slots(self, timeout: float = 60.0) -> None:
        """Until the collector lists every slot (and the schedd), or TimeoutError."""
        expected = len(self.slots)
        deadline = time.monotonic() + timeout
        seen = -1
        while time.monotonic() < deadline:
            if self._master is not None and self._master.poll() is not None:
                raise RuntimeError(f"condor_master exited ({self._master.returncode}); "
                                   f"see {self.directory / 'local' / 'log'}")
            seen = len(self.status("Name"))
            schedds = self._run(["condor_status", "-schedd", "-af", "Name"], check=False)
            if seen >= expected and schedds.strip():
                return
            time.sleep(0.5)
        raise TimeoutError(f"personal pool: {seen} of {expected} slots after {timeout:g} s")

    def stop(self) -> None:
        """Stop every daemon of the pool; idempotent."""
        master, self._master = self._master, None
        for number, handler in self._previous_handlers.items():
            signal.signal(number, handler)
        self._previous_handlers.clear()
        if master is None:
            return
        atexit.unregister(self.stop)
        self._run(["condor_off", "-master"], check=False, timeout=20)
        with contextlib.suppress(subprocess.TimeoutExpired):
            master.wait(timeout=20)
        # Whatever is left in the master's session (its daemons, shadows, starters, jobs).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(master.pid, signal.SIGKILL)
        master.wait()
        # Daemons that left the master's process group (a schedd's shadows, a starter's job).
        _kill(_processes_of(self.directory, self.config_file))
        if self._own_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> PersonalPool:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- tools
    def run_tool(self, command: Sequence[str], *, account: str | None = None,
                 check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
        """One of the install's tools against this pool, as root (acting as HTCondor's own
        account) or as `account`; a RuntimeError with its message if it fails and `check`."""
        full = [self.tool(command[0]), *command[1:]]
        if account is not None:
            full = as_account(account, full)
        # In the pool's jobs folder, which every account reaches: condor_submit makes its
        # working directory the job's (Iwd), and a checkout under /tmp is not reachable from
        # a starter with a /tmp of its own (MOUNT_UNDER_SCRATCH); the job is held then.
        result = subprocess.run(full, env=self.environment, capture_output=True, text=True,
                                timeout=timeout, check=False, cwd=self.jobs_folder)
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)}: exit {result.returncode}: "
                               f"{result.stderr.strip() or result.stdout.strip()}")
        return result

    def _run(self, command: list[str], *, check: bool = True, timeout: float = 30) -> str:
        return self.run_tool(command, check=check, timeout=timeout).stdout

    def status(self, *attributes: str, constraint: str = "true") -> list[list[str]]:
        """condor_status -af over the slots: one row of values per slot."""
        out = self._run(["condor_status", "-constraint", constraint, "-af", *attributes],
                        check=False)
        return [line.split() for line in out.splitlines() if line.strip()]

    def jobs(self, *attributes: str, constraint: str = "true") -> list[list[str]]:
        out = self._run(["condor_q", "-allusers", "-constraint", constraint,
                         "-af", *attributes])
        return [line.split() for line in out.splitlines() if line.strip()]

    def submit(self, jobs: Sequence[JobSpec], *, scale: float = 1.0,
               extra: Sequence[str] = (), count: int = 1) -> list[str]:
        """Submit sleep jobs, each by its user's own account, one cluster per job, of `count`
        identical procs each; the clusters' first job ids, in order."""
        ids = []
        for job in jobs:
            done = self.submit_as(job.user, [*self._job_commands(
                job.user, f"{job.work / scale:g}", job.cpus, job.memory), *extra], count=count)
            ids.append(_submitted(done, job.user)[0])
        return ids

    def submit_cluster(self, jobs: Sequence[JobSpec], *, extra: Sequence[str] = ()
                       ) -> list[str]:
        """Submit sleep jobs of one user as one cluster, one proc per job in order, in a
        single condor_submit (`queue ... from`: a burst of many jobs without a submit each);
        their ids."""
        users = {job.user for job in jobs}
        if len(users) != 1:
            raise ValueError(f"one cluster is one user's: got {sorted(users) or 'no job'}")
        items = [f"  {job.work:g}, {job.cpus}, {job.memory}" for job in jobs]
        done = self.submit_as(jobs[0].user, [
            *self._job_commands(jobs[0].user, "$(work)", "$(cpus)", "$(memory)"), *extra],
            queue=["queue work, cpus, memory from (", *items, ")"])
        first, last = _submitted(done, jobs[0].user)
        cluster, _, proc = first.partition(".")
        return [f"{cluster}.{number}"
                for number in range(int(proc), int(last.partition(".")[2]) + 1)]

    def _job_commands(self, user: str, work: str, cpus: int | str,
                      memory: int | str) -> list[str]:
        """A sleep job's submit commands (values, or the macros of a `queue ... from`)."""
        return [
            "executable = /bin/sleep",
            # The slot's power is substituted when the job is matched: the run takes
            # work / MFlops / scale seconds on whichever slot it lands.
            f"arguments = $$([ ceiling({work} / TARGET.{self.power_attr}) ])",
            f"request_cpus = {cpus}",
            f"request_memory = {memory}",
            f"accounting_group = {ACCOUNTING_PREFIX}",
            f"accounting_group_user = {user}",
            f"+GridfairWork = {work}",
        ]

    def submit_as(self, account: str, commands: Sequence[str], count: int = 1, *,
                  queue: Sequence[str] = ()) -> subprocess.CompletedProcess:
        """`condor_submit -terse` of a vanilla job with these submit commands, run by the Unix
        account `account` (created if missing): the outcome, refused or not, as it is. The
        submit file ends in `queue COUNT`, or in the lines `queue` gives."""
        ensure_account(account)
        submit_file = self.jobs_folder / f"job{time.monotonic_ns()}.sub"
        submit_file.write_text("\n".join(["universe = vanilla", "should_transfer_files = NO",
                                          *commands, *(queue or [f"queue {count}"])]) + "\n")
        submit_file.chmod(0o644)
        return self.run_tool(["condor_submit", "-terse", str(submit_file)], account=account,
                             check=False, timeout=30 + count / 100)

    def lease_held(self) -> bool:
        """Whether the negotiator holds a lease of gridfair's that has not run out."""
        done = self.run_tool(["condor_config_val", "-negotiator", "GRIDFAIR_LEASE_UNTIL"],
                             check=False)
        return done.returncode == 0 and float(done.stdout.strip() or 0) > time.time()

    def shared_file(self, name: str) -> Path:
        """An empty file in the jobs folder that every account may write (a job event log
        that jobs of several submitters share)."""
        path = self.jobs_folder / name
        path.touch()
        path.chmod(0o666)
        return path

    def add_queue_user(self, user: str) -> None:
        """Give `user` (`name@UID_DOMAIN`) a user record at the schedd, as `condor_qusers -add`
        does: HTCondor 25 refuses a queue super user's edits of other users' jobs until the
        schedd has a record of it, which it makes only when a user first submits."""
        self.schedd().addUserRec(user)

    def switch(self, subsystem: str, on: bool) -> None:
        """Stop (`condor_off`) or start (`condor_on`) one daemon of the pool, e.g. "collector",
        through the master's own address (the collector may be the one that is off)."""
        master = (self.directory / "local" / "log" / ".master_address").read_text().split()[0]
        self._run(["condor_on" if on else "condor_off", "-addr", master,
                   "-subsystem", subsystem])

    def schedd(self) -> Any:
        """This pool's schedd through the bindings (located by this pool's collector)."""
        import htcondor2

        collector = htcondor2.Collector(self.collector_host)
        return htcondor2.Schedd(collector.locate(htcondor2.DaemonType.Schedd))

    def clear_queue(self, timeout: float = 30.0) -> None:
        """Remove every job and wait until the queue is empty and no slot ad still shows a
        job (slot ads catch up an update interval later)."""
        self._run(["condor_rm", "-all"], check=False)
        self.wait_until(lambda: not self.jobs("ClusterId") and not self.running(), timeout)

    def running(self) -> dict[str, str]:
        """job id -> the slot it runs on, from the slots' ads."""
        rows = self.status("JobId", "Name", constraint="JobId =!= undefined")
        return {row[0]: row[1] for row in rows if len(row) == 2}

    def running_on_nodes(self) -> dict[str, str]:
        """job id -> the node it runs on: its static slot, or the partitionable slot its
        dynamic slot is cut from (the slot gridfair steers to)."""
        from gridfair.ad_views import whole_slot

        return {job: whole_slot(slot) for job, slot in self.running().items()}

    def wait_until(self, predicate: Any, timeout: float, every: float = 0.5) -> Any:
        """Poll `predicate()` until it returns something true; that value, or TimeoutError.
        A job the pool itself held (it cannot run: a missing directory, a failed start) ends
        the wait at once with HTCondor's reason, rather than at the timeout without one."""
        deadline = time.monotonic() + timeout
        next_look = time.monotonic() + HELD_LOOK_EVERY
        while True:
            value = predicate()
            if value:
                return value
            now = time.monotonic()
            if now >= next_look or now >= deadline:
                next_look = now + HELD_LOOK_EVERY
                if held := self.held_by_pool():
                    raise RuntimeError("jobs held by the pool: " + "; ".join(held))
            if now >= deadline:
                raise TimeoutError(f"not reached within {timeout:g} s")
            time.sleep(every)

    def held_by_pool(self) -> list[str]:
        """'id: HoldReason' of each job held by HTCondor rather than at the test's request
        (held at submit, HoldReasonCode 15, or by condor_hold, 1); none while the schedd is
        off."""
        out = self.run_tool(
            ["condor_q", "-allusers", "-constraint",
             "JobStatus == 5 && HoldReasonCode =!= 1 && HoldReasonCode =!= 15",
             "-format", "%d.", "ClusterId", "-format", "%d: ", "ProcId",
             "-format", "%s\n", "HoldReason"], check=False).stdout
        return [line for line in out.splitlines() if line.strip()]


def _submitted(done: subprocess.CompletedProcess, user: str) -> tuple[str, str]:
    """The first and last job ids of a `condor_submit -terse` ("12.0 - 12.3"), or a
    RuntimeError with its message."""
    if done.returncode != 0:
        raise RuntimeError(f"condor_submit as {user}: exit {done.returncode}: "
                           f"{done.stderr.strip() or done.stdout.strip()}")
    first, _, last = done.stdout.strip().partition(" - ")
    return (first if "." in first else f"{first}.0"), (last or first)


def as_service(account: str, command: Sequence[str]) -> list[str]:
    """`command` run as configs/gridfair-daemon.service runs the daemon, as far as that goes
    without systemd: as `account`, with no new privileges (NoNewPrivileges), files private
    to it (UMask=0077), and a /tmp of its own in a mount namespace of its own (PrivateTmp)."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs -o mode=1777 private-tmp /tmp && umask 077 && exec "$@"', "sh",
            "setpriv", f"--reuid={account}", f"--regid={pwd.getpwnam(account).pw_gid}",
            "--init-groups", "--no-new-privs", *command]


def daemon_command(python: Path, *args: str) -> list[str]:
    """`python -m gridfair.daemon --config gridfair.toml ARGS` run as its systemd unit runs
    it (`as_service`), by gridfair's account; `python` is `install_daemon`'s."""
    return as_service(DAEMON_ACCOUNT, [str(python), "-m", "gridfair.daemon", "--config",
                                       "gridfair.toml", *args])


def daemon_directory() -> Path:
    """A new directory for the daemon's config, store and log, its account's alone, as
    systemd's StateDirectory makes it (under /var/tmp: the daemon's /tmp is its own)."""
    directory = Path(tempfile.mkdtemp(prefix="gridfair-state-", dir="/var/tmp"))
    shutil.chown(directory, DAEMON_ACCOUNT, DAEMON_ACCOUNT)
    directory.chmod(0o700)
    return directory


def install_daemon(source_tree: Path, directory: Path,
                   account: str = DAEMON_ACCOUNT) -> Path:
    """gridfair as an administrator installs it for its daemon: a wheel built from
    `source_tree`, installed in a new venv in `directory` that every account can read, made
    with a Python interpreter `account` may run (not one under root's home). Returns the venv's
    python. HTCondorMissing when no such interpreter is found."""
    ensure_account(account)
    interpreter = next((candidate for candidate in _interpreters()
                        if _may_run(account, candidate)), None)
    if interpreter is None:
        raise HTCondorMissing(f"no Python >= 3.11 with venv that the account {account} may "
                              f"run (tried {', '.join(_interpreters())})")
    wheels = directory / "wheel"
    # Built from a copy: the build writes into the tree it builds (build/, *.egg-info), and
    # the checkout may be read-only.
    source = directory / "source"
    shutil.copytree(source_tree, source, ignore=shutil.ignore_patterns(
        ".*", "build", "dist", "*.egg-info", "__pycache__", "tests", "bench", "docs"))
    # Not compiled (setup.py): the daemon's live tests need no compiled simulator, and the
    # compile would add half a minute of CPU to every live session.
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--wheel-dir", str(wheels), str(source)], check=True,
                   capture_output=True, env={**os.environ, "GRIDFAIR_COMPILE": "0"})
    shutil.rmtree(source)
    venv = directory / "venv"
    subprocess.run([interpreter, "-m", "venv", str(venv)], check=True, capture_output=True)
    # Not from the source tree: pip would take its gridfair.egg-info for an installed gridfair.
    subprocess.run([str(venv / "bin" / "pip"), "install", "--quiet",
                    *map(str, wheels.glob("gridfair-*.whl"))], check=True, capture_output=True,
                   cwd=directory)
    subprocess.run(["chmod", "-R", "a+rX", str(directory)], check=True)
    return venv / "bin" / "python"


def _may_run(account: str, interpreter: str) -> bool:
    """Whether `account` may run `interpreter`, a Python >= 3.11 with venv. `test -x` first:
    here, setpriv ran an interpreter under a directory the account cannot search (root's
    home) that condor_master, starting the daemon as the same account, could not exec."""
    return all(subprocess.run(as_account(account, command), capture_output=True,
                              check=False).returncode == 0
               for command in (["test", "-x", interpreter],
                               [interpreter, "-c", "import sys, venv; "
                                "sys.exit(sys.version_info < (3, 11))"]))


def _interpreters() -> list[str]:
    found = [sys._base_executable, shutil.which("python3.11"), shutil.which("python3"),
             "/usr/bin/python3", "/usr/local/bin/python3"]
    return list(dict.fromkeys(str(Path(path).resolve()) for path in found
                              if path and Path(path).is_file()))


def slots_of_grid(grid_name: str | Path) -> list[SlotSpec]:
    """The machines of a grid model (an embedded grid's name or a TOML file) as slots, in
    file order."""
    from gridfair.sim.grid_loader import load_grid

    grid = load_grid(grid_name)
    return [SlotSpec(machine.owner or "", machine.mflops) for machine in grid.machines]


def pool_processes() -> Iterator[str]:
    """Command lines of running condor_ processes (to check nothing is left behind)."""
    result = subprocess.run(["pgrep", "-a", "condor_"], capture_output=True, text=True,
                            check=False)
    yield from (line for line in result.stdout.splitlines() if line.strip())
