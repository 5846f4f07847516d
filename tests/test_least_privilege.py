"""Least privilege: the daemon's journal and log are its account's alone, and the shipped
systemd unit runs it as that account, hardened, in a form systemd accepts."""

from __future__ import annotations

import configparser
import logging
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gridfair.daemon.config import validate
from gridfair.daemon.service import Daemon, setup_logging

UNIT = Path(__file__).resolve().parents[1] / "configs" / "gridfair-daemon.service"


def test_the_journal_its_lock_and_the_log_are_private_to_the_daemon(tmp_path: Path) -> None:
    """Made under a permissive umask, and one file already there open to all: every file the
    daemon keeps ends 0600 (they name every user's jobs and the pool's decisions)."""
    (tmp_path / "daemon.log").write_text("")
    (tmp_path / "daemon.log").chmod(0o644)
    config = validate({"daemon": {"store": "state.db", "log_file": "daemon.log"},
                       "backend": {"kind": "sim"}}, base=tmp_path)
    logger = logging.getLogger("gridfair")
    setup_logging(config)
    daemon = Daemon(config, max_cycles=1)
    try:
        assert daemon.tick().outcome == "ok"
        names = ("state.db", "state.db-wal", "state.db-shm", "state.db.lock", "daemon.log")
        modes = {name: stat.S_IMODE((tmp_path / name).stat().st_mode) for name in names}
    finally:
        daemon.close()
        for handler in logger.handlers:
            handler.close()
        logger.handlers.clear()  # as the other tests found it
        logger.propagate = True
        logger.setLevel(logging.NOTSET)
    assert modes == dict.fromkeys(names, 0o600)


def unit() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # systemd's keys are case-sensitive
    parser.read_string(UNIT.read_text())
    return parser


def test_the_unit_runs_the_daemon_as_its_own_account_hardened() -> None:
    service = unit()["Service"]
    assert (service["User"], service["Group"]) == ("gridfair", "gridfair")
    assert service["ExecStart"].startswith("/opt/gridfair/venv/bin/gridfair daemon ")
    expected = {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes",
                "PrivateTmp": "yes", "StateDirectory": "gridfair", "StateDirectoryMode": "0700",
                "LogsDirectoryMode": "0700", "UMask": "0077", "CapabilityBoundingSet": ""}
    assert {key: service.get(key) for key in expected} == expected


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed here")
def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    """`systemd-analyze verify` on the unit as shipped, its ExecStart pointed at an installed
    gridfair (verify checks the program exists)."""
    installed = Path(sys.executable).with_name("gridfair")
    text = UNIT.read_text().replace("/opt/gridfair/venv/bin/gridfair", str(installed))
    copy = tmp_path / "gridfair-daemon.service"
    copy.write_text(text)
    done = subprocess.run(["systemd-analyze", "verify", str(copy)], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "gridfair-daemon.service" not in done.stderr, done.stderr  # no warning about it
