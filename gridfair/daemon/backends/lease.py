"""gridfair's lease knob on a negotiator, kept across the negotiator's restart.

The lease (`GRIDFAIR_LEASE_UNTIL`, configs/htcondor-pool.config) is set as *persistent*
configuration (`condor_config_val -set`, HTCondor's `ENABLE_PERSISTENT_CONFIG`): the negotiator
writes it in its `PERSISTENT_CONFIG_DIR` and reads it again when it starts, so a restarted or
crashed negotiator keeps gridfair's lease and the pool is never open between its start and
gridfair's next cycle. Runtime configuration (what the bindings' `RemoteParam` sets) is
forgotten at a restart: seen live, 3 of gridfair's first 4 allocations after a
`condor_restart` were lost to matches HTCondor made on its own. The lease is a time, so one
kept by a dead daemon still runs out by itself.

The bindings have no persistent set; `condor_config_val` does (the install's, found through
HTCondor's configuration, `BIN`, else on PATH).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: Seconds `condor_config_val -set` may take.
SET_TIMEOUT = 30.0

log = logging.getLogger(__name__)
_warned: list[bool] = []  # whether `warn_not_kept` has warned, in this process


def config_tool(param: Mapping[str, str]) -> str | None:
    """The path of `condor_config_val`: in HTCondor's `BIN` (`param`, its configuration),
    else on PATH; None when there is none."""
    folder = param.get("BIN")
    if folder and (Path(folder) / "condor_config_val").is_file():
        return str(Path(folder) / "condor_config_val")
    return shutil.which("condor_config_val")


def persist(tool: str, negotiator: Mapping[str, Any], knob: str, value: str,
            environment: Mapping[str, str] | None = None) -> str | None:
    """Set `knob = value` in the persistent configuration of the negotiator whose ad is
    `negotiator` (at its `MyAddress`); None when done, else the tool's answer (why not)."""
    command = [tool, "-addr", str(negotiator.get("MyAddress", "")), "-set",
               f"{knob} = {value}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=SET_TIMEOUT,
                              check=False, env=dict(environment) if environment else None)
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    if done.returncode == 0:
        return None
    return " ".join((done.stderr.strip() or done.stdout.strip() or
                     f"exit {done.returncode}").split())


def warn_not_kept() -> None:
    """Once: no condor_config_val, so the lease is runtime configuration, forgotten when the
    negotiator restarts (the pool open until the next cycle)."""
    if not _warned:
        _warned.append(True)
        log.warning("no condor_config_val in HTCondor's BIN or on PATH: the lease is set as "
                    "runtime configuration, which a restarted negotiator forgets")


#: How HTCondor's tools and bindings say a daemon is not there (stopped, not yet started).
NOT_ANSWERING = ("can't connect", "failed to connect", "connection refused", "timed out")


def not_answering(answer: str) -> bool:
    """Whether `answer` (a refusal) says the negotiator is not there, rather than that it
    refused: at a pool's shutdown it simply stopped, and the account's rights are fine."""
    return any(phrase in answer.lower() for phrase in NOT_ANSWERING)
