"""Schedds that hang (stopped with SIGSTOP: the collector still lists them, their sockets
accept and never answer) against the daemon's read of a real pool with three schedds."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from gridfair.classads.submitters import SubmitterMap
from gridfair.daemon.backends.htcondor import HTCondorBackend
from gridfair.daemon.cycle import read_with_timeout
from tests.live.conftest import SLOTS, own_pool
from tests.live.harness.personal_pool import CONDOR_ACCOUNT, UID_DOMAIN, JobSpec

#: The daemon's default `query_timeout`: the whole snapshot read must end within it.
QUERY_TIMEOUT = 30.0
HUNG = ("hung1", "hung2")


def extra_schedds(local: Path) -> list[str]:
    """Configuration for a schedd per name of `HUNG` beside the pool's own, each with a
    spool of its own under `local`."""
    lines = ["DAEMON_LIST = MASTER, COLLECTOR, NEGOTIATOR, SCHEDD, STARTD, "
             + ", ".join(f"SCHEDD_{name.upper()}" for name in HUNG)]
    for name in HUNG:
        daemon = f"SCHEDD_{name.upper()}"
        spool = local / "spool" / name
        # `<local name>.<knob>`: HTCondor 25 reads these for a daemon run with -local-name
        # (condor_config_val -local-name NAME -subsystem SCHEDD says so).
        lines += [f"{daemon} = $(SCHEDD)", f"{daemon}_ARGS = -local-name {name}",
                  f"{name}.SCHEDD_NAME = {name}", f"{name}.SPOOL = {spool}",
                  f"{name}.SCHEDD_LOG = $(LOG)/SchedLog.{name}",
                  f"{name}.SCHEDD_ADDRESS_FILE = {spool}/.schedd_address",
                  f"{name}.SCHEDD_DAEMON_AD_FILE = {spool}/.schedd_classad"]
    return lines


def schedd_pids(config_file: Path) -> dict[str, int]:
    """The pool's extra schedds' processes by local name (`-local-name`)."""
    marker = f"CONDOR_CONFIG={config_file}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            arguments = (entry / "cmdline").read_bytes().split(b"\0")
            environment = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker in environment and b"-local-name" in arguments:
            found[arguments[arguments.index(b"-local-name") + 1].decode()] = int(entry.name)
    return found


def test_two_hung_schedds_are_skipped_and_the_read_ends_within_the_query_timeout() -> None:
    pool = own_pool(SLOTS[:1], extra_config=[])
    local = pool.directory / "local"
    for name in HUNG:
        (local / "spool" / name).mkdir()
    subprocess.run(["chown", "-R", ":".join(CONDOR_ACCOUNT), str(local / "spool")],
                   check=True)
    with pool.config_file.open("a") as config:
        config.write("\n".join(extra_schedds(local)) + "\n")
    with pool:
        pool.wait_until(lambda: len(pool.run_tool(
            ["condor_status", "-schedd", "-af", "Name"]).stdout.split()) == 3, 60, 1)
        ids = pool.submit([JobSpec("User1", 10**9)], count=3, extra=["hold = True"])
        stopped = [pid for name, pid in schedd_pids(pool.config_file).items() if name in HUNG]
        assert len(stopped) == 2
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        try:
            backend = HTCondorBackend.connect(pool.collector_host,
                                              submitters=SubmitterMap(UID_DOMAIN),
                                              job_constraint="JobStatus <= 5")
            started = time.monotonic()
            snapshot = read_with_timeout(backend, QUERY_TIMEOUT)
            took = time.monotonic() - started
        finally:
            for pid in stopped:
                os.kill(pid, signal.SIGCONT)
    silent = {skip.name: skip.reason for skip in snapshot.skipped if skip.index == 0}
    assert sorted(name.partition("@")[0] for name in silent) == list(HUNG)
    assert all(reason.startswith(("no answer within", "query failed"))
               for reason in silent.values())
    cluster = ids[0].partition(".")[0]
    assert sorted(job.id for job in snapshot.jobs) == [f"{cluster}.{n}" for n in range(3)]
    # Asked in turn, each hung schedd cost the bindings' 20 s: 40 s, the cycle lost.
    assert took < QUERY_TIMEOUT, took
    print(f"read with two hung schedds: {took:.1f} s; skipped: {silent}")
