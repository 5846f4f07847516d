"""The daemon as a Unix service (issue 32): SIGHUP reopens the log file and reads the config
again (a bad one is refused, logged, and the daemon cycles on), `daemon --check` validates a
config and reads the pool once. Real signals to a real daemon process on the files backend."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gridfair.daemon.config import validate
from gridfair.daemon.service import Daemon
from gridfair.errors import ConfigError
from tests.test_daemon import _start, files_config, write_config


def wait_for(path: Path, text: str, after: int = 0, timeout: float = 20.0) -> int:
    """Waits until `text` is in `path` past offset `after`; returns the offset past it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = path.read_text() if path.exists() else ""
        found = content.find(text, after)
        if found >= 0:
            return found + len(text)
        time.sleep(0.05)
    raise AssertionError(f"{text!r} never appeared in {path}:\n{content[after:][-2000:]}")


@pytest.fixture
def running(tmp_path):
    """A daemon cycling every 0.1 s, logging to daemon.log; stopped (SIGTERM) at the end."""
    raw = files_config(tmp_path, daemon={"interval": 0.1, "log_file": "daemon.log"})
    config = write_config(tmp_path, raw)
    process = _start(config)
    log = tmp_path / "daemon.log"
    wait_for(log, "cycle 2 ")
    yield process, config, raw, log
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    process.communicate(timeout=20)


def test_sighup_reopens_a_rotated_log_and_the_daemon_cycles_on(running):
    process, _, _, log = running
    log.rename(log.with_suffix(".log.1"))  # what logrotate does before its postrotate HUP
    process.send_signal(signal.SIGHUP)
    offset = wait_for(log, "SIGHUP: configuration")
    assert "reloaded: policy order:hosep preempt:hosep" in log.read_text()
    wait_for(log, " ok: ", after=offset)  # a cycle after the reload, logged in the new file
    assert process.poll() is None
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0


def test_sighup_takes_a_new_policy_from_the_next_cycle(running, tmp_path):
    process, config, raw, log = running
    raw["policy"] = {"name": "osep"}
    write_config(tmp_path, raw)
    process.send_signal(signal.SIGHUP)
    wait_for(log, f"SIGHUP: configuration {config} reloaded: policy order:osep")
    assert "changed: policy.name: 'hosep' -> 'osep'\n" in log.read_text()
    wait_for(tmp_path / "daemon.log", " ok: ", after=log.read_text().index("policy order:osep"))


@pytest.mark.parametrize(("change", "reason"), [
    (lambda text: "[daemon\nthis is not TOML", "not valid TOML"),
    (lambda text: text + '[policy]\nname = "no-such-policy"\n', "no-such-policy"),
    (lambda text: text.replace('"state.db"', '"elsewhere.db"'),
     "daemon.store changed: only a restart applies it"),
])
def test_sighup_refuses_a_bad_config_logs_why_and_cycles_on(running, change, reason):
    process, config, _, log = running
    config.write_text(change(config.read_text()))
    process.send_signal(signal.SIGHUP)
    offset = wait_for(log, "SIGHUP: configuration refused")
    assert reason in log.read_text()[offset:].partition("\n")[0]
    wait_for(log, " ok: ", after=offset)  # still cycling, on the config it started with
    assert process.poll() is None
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=20) == 130


def test_check_reads_the_pool_once_and_writes_nothing(tmp_path):
    config = write_config(tmp_path, files_config(tmp_path, daemon={"log_file": "daemon.log"}))
    done = subprocess.run([sys.executable, "-m", "gridfair.daemon", "--config", str(config),
                           "--check"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1
    assert done.stdout.startswith(f"{config}: ok: backend files: ")
    assert "machine(s)" in done.stdout and "job(s) read" in done.stdout
    assert not (tmp_path / "state.db").exists() and not (tmp_path / "daemon.log").exists()
    assert not (tmp_path / "actions.jsonl").exists()


def test_check_of_an_unreadable_pool_is_one_line_and_exit_2(tmp_path):
    raw = files_config(tmp_path)
    raw["backend"]["files"]["directory"] = "no-such-directory"
    config = write_config(tmp_path, raw)
    done = subprocess.run([sys.executable, "-m", "gridfair.daemon", "--config", str(config),
                           "--check"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("gridfair: error: ") and done.stderr.count("\n") == 1
    assert "no-such-directory" in done.stderr


def test_a_refused_configuration_shows_in_the_daemon_s_ad_until_one_is_taken(tmp_path):
    """`condor_status` shows a SIGHUP's refused configuration (the ad), not only the log."""
    config = validate(files_config(tmp_path), base=tmp_path)
    answers = iter([ConfigError("HTCondor knob GRIDFAIR_INTERVAL: expected a number"), config])

    def reread():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    daemon = Daemon(config, reread=reread)
    try:
        daemon.reload(scheduler=None)
        daemon.tick()
        assert "GRIDFAIR_INTERVAL" in daemon.ad["GridfairConfigRefused"]
        daemon.reload(scheduler=None)
        daemon.tick()
        assert "GridfairConfigRefused" not in daemon.ad
    finally:
        daemon.close()
