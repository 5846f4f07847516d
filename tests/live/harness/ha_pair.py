"""Two central managers' gridfair, for the failover test and bench: HTCondor's own high
availability (`MASTER_HA_LIST`, `HA_LOCK_URL`) on one machine.

Beside a running `PersonalPool`, two more `condor_master`s (`a` and `b`), each with a local
directory of its own and the pool's configuration otherwise, run only `GRIDFAIR`, listed in
`MASTER_HA_LIST` with one lock directory (`HA_LOCK_URL = file:...`) and one journal
(`GRIDFAIR_STORE`): the master holding the lock runs the daemon, the other polls the lock
every `HA_POLL_PERIOD` seconds and takes it over once the holder has not renewed it for
`HA_LOCK_HOLD_TIME`. `kill(name)` is a central manager that dies: its master and its daemon
SIGKILLed, nothing handed back.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from pathlib import Path

from tests.live.harness.personal_pool import CONDOR_ACCOUNT, DAEMON_ACCOUNT, PersonalPool

NAMES = ("a", "b")
STARTED = re.compile(r'Started process "[^"]*gridfair", pid and pgroup = (\d+)')


class HaPair:
    """Masters `a` and `b` sharing gridfair's lock and journal; a context manager."""

    def __init__(self, pool: PersonalPool, program: Path, state: Path, *,
                 poll: int = 2, hold: int = 10, knobs: tuple[str, ...] = ()) -> None:
        self.pool = pool
        self.lock = pool.directory / "ha-lock"
        self.masters: dict[str, subprocess.Popen[bytes]] = {}
        self.lines = [
            "DAEMON_LIST = MASTER, GRIDFAIR", f"GRIDFAIR = {program}",
            "GRIDFAIR_ARGS = daemon --knobs", f"GRIDFAIR_USERID = {DAEMON_ACCOUNT}",
            "MASTER_HA_LIST = GRIDFAIR", f"HA_LOCK_URL = file:{self.lock}",
            f"HA_POLL_PERIOD = {poll}", f"HA_LOCK_HOLD_TIME = {hold}",
            # Not the pool master's children: their updates to the collector are their own.
            "SEC_USE_FAMILY_SESSION = False",
            f"GRIDFAIR_STORE = {state / 'state.db'}", *knobs,
        ]
        self.state = state

    def local(self, name: str) -> Path:
        return self.pool.directory / f"ha-{name}"

    def start(self, name: str) -> None:
        """Master `name` (its own directories; the pool's configuration, then the HA part)."""
        local = self.local(name)
        for folder in ("log", "spool", "lock", "run", "execute"):
            (local / folder).mkdir(parents=True, exist_ok=True)
        self.lock.mkdir(exist_ok=True)
        subprocess.run(["chown", "-R", ":".join(CONDOR_ACCOUNT), str(local), str(self.lock)],
                       check=True)
        config = local / "condor_config"
        config.write_text("\n".join([
            f"include : {self.pool.config_file}", f"LOCAL_DIR = {local}",
            "LOG = $(LOCAL_DIR)/log", "SPOOL = $(LOCAL_DIR)/spool", "LOCK = $(LOCAL_DIR)/lock",
            "RUN = $(LOCAL_DIR)/run", "EXECUTE = $(LOCAL_DIR)/execute",
            f"MASTER_NAME = ha-{name}", *self.lines,
            f"GRIDFAIR_LOG_FILE = {self.state / f'GridfairLog.{name}'}",
        ]) + "\n")
        self.masters[name] = subprocess.Popen(
            [self.pool.tool("condor_master"), "-f"],
            env={**os.environ, "CONDOR_CONFIG": str(config)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def daemon_pid(self, name: str) -> int | None:
        """The pid of the daemon master `name` last started, if it still runs."""
        log = self.local(name) / "log" / "MasterLog"
        found = STARTED.findall(log.read_text()) if log.exists() else []
        if not found:
            return None
        pid = int(found[-1])
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        return pid

    def active(self) -> str | None:
        """The master whose daemon runs (None: neither, yet)."""
        return next((name for name in self.masters if self.daemon_pid(name)), None)

    def kill(self, name: str) -> None:
        """Master `name` and its daemon SIGKILLed: its central manager died."""
        pid = self.daemon_pid(name)
        master = self.masters.pop(name)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(master.pid, signal.SIGKILL)
        master.wait()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)

    def __enter__(self) -> HaPair:
        for name in NAMES:
            self.start(name)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for name in list(self.masters):
            self.kill(name)
