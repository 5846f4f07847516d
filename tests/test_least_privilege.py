"""Least privilege: the daemon's journal and log are its account's alone, and the shipped
systemd unit runs it as that account, hardened, in a form systemd accepts."""

from __future__ import annotations

import configparser
import logging
import os
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


def test_the_log_rotates_by_size_into_private_files(tmp_path: Path) -> None:
    """`log_max_bytes`, as HTCondor's MAX_<SUBSYS>_LOG: past the size the file is renamed
    `.1` (the older `.2`, ... up to `log_backups`) and a new one opened, private like the
    first (under a permissive umask); nothing older is kept."""
    config = validate({"daemon": {"log_file": "daemon.log", "log_max_bytes": 400,
                                  "log_backups": 2}, "backend": {"kind": "sim"}}, base=tmp_path)
    logger = logging.getLogger("gridfair")
    previous_umask = os.umask(0o022)
    try:
        setup_logging(config)
        for number in range(40):
            logger.warning("line %02d of the cycle log", number)
    finally:
        os.umask(previous_umask)
        for handler in logger.handlers:
            handler.close()
        logger.handlers.clear()
        logger.propagate = True
        logger.setLevel(logging.NOTSET)
    files = sorted(path.name for path in tmp_path.iterdir())
    assert files == ["daemon.log", "daemon.log.1", "daemon.log.2"]
    for name in files:
        path = tmp_path / name
        assert path.stat().st_size <= 400
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, name
    # The newest lines in the file itself, the ones before in .1: nothing lost between them.
    newest = (tmp_path / "daemon.log").read_text().splitlines()
    before = (tmp_path / "daemon.log.1").read_text().splitlines()
    assert newest[-1].endswith("line 39 of the cycle log")
    last_before = int(before[-1].split()[-5])
    first_newest = int(newest[0].split()[-5])
    assert first_newest == last_before + 1
