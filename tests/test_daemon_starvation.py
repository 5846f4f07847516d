"""A local account cannot stop the daemon deciding through its metrics endpoint: ~1,000 idle
connections (from another process, on loopback) leave the daemon's descriptors bounded, its
cycle succeeds, and scrapes are served again once the idle ones time out. The daemon runs
with a descriptor limit a few hundred above what it has open, as it would under a unit's
`LimitNOFILE` of 1024 (the default), so that one descriptor per idle client would exhaust it."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
import urllib.request

from gridfair.daemon.config import validate
from gridfair.daemon.metrics import CONNECTION_TIMEOUT, MAX_CONNECTIONS
from gridfair.daemon.service import Daemon
from tests.test_daemon_metrics import config, free_port

IDLE = 1000
#: Opens IDLE connections to the port (for 15 s at most), says how many it got, then holds
#: them until stdin ends.
CLIENT = """
import socket, sys, time
port, count = int(sys.argv[1]), int(sys.argv[2])
held, deadline = [], time.monotonic() + 15
for _ in range(count):
    if time.monotonic() > deadline:
        break
    try:
        held.append(socket.create_connection(("127.0.0.1", port), timeout=0.2))
    except OSError:
        pass
print(len(held), flush=True)
sys.stdin.read()
"""


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_thousand_idle_connections_do_not_starve_a_cycle(tmp_path):
    port = free_port()
    daemon = Daemon(validate(config(tmp_path, enabled=True, port=port), base=tmp_path))
    before = open_descriptors()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (before + 300, hard))
    client = subprocess.Popen([sys.executable, "-c", CLIENT, str(port), str(IDLE)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert int(client.stdout.readline()) > MAX_CONNECTIONS  # connected: many accepted
        time.sleep(0.5)  # the server has seen them all
        assert open_descriptors() <= before + MAX_CONNECTIONS + 4
        report = daemon.tick()
        assert report is not None and report.outcome == "ok", report
        time.sleep(CONNECTION_TIMEOUT + 1)  # the idle connections served have timed out
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            assert b'gridfair_cycle_duration_seconds_count{outcome="ok"} 1.0' in reply.read()
    finally:
        client.kill()
        client.wait()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        daemon.close()


def test_a_cycle_that_fails_for_want_of_descriptors_says_it_is_this_host(tmp_path, caplog):
    daemon = Daemon(validate(config(tmp_path), base=tmp_path))
    daemon.tick()  # the store and its journal open
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowest_free = os.open(os.devnull, os.O_RDONLY)  # descriptors are numbered from the lowest
    os.close(lowest_free)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))  # no descriptor left
    try:
        with caplog.at_level("ERROR", logger="gridfair"):
            os.utime(tmp_path / "pool" / "jobs.queue")  # a new snapshot to read
            daemon.skip_until = 0.0
            report = daemon.tick()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        daemon.close()
    assert report is not None and report.outcome == "failed"
    assert "this host, not the pool: too many open files" in report.error
    assert any("failed for a reason of this host" in record.getMessage()
               for record in caplog.records)
