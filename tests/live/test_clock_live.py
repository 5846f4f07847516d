"""The lease and two clocks, live: the daemon reads the negotiator's clock against its own
(through the negotiator's ad and the collector's `time()`); with its clock a day off (moved by
`GRIDFAIR_CLOCK_OFFSET`, as a test cannot move the system clock) it claims no lease, says why
and hands back the one it held; with the clocks agreeing, the negotiator holds the lease it
set, in its own time."""

from __future__ import annotations

import re
import sqlite3
import time

import htcondor2
import pytest

from gridfair.daemon.clock import CLOCK_ENV
from gridfair.daemon.config import validate
from gridfair.daemon.service import Daemon
from tests.live.test_htcondor_backend import backend

LEASE = 20.0
DAY = 86400


def negotiator_lease(live) -> int:
    [negotiator] = live.collector.query(htcondor2.AdType.Negotiator)
    return int(htcondor2.RemoteParam(negotiator)["GRIDFAIR_LEASE_UNTIL"])


@pytest.mark.parametrize("offset", [-DAY, DAY])
def test_a_daemon_whose_clock_is_a_day_off_claims_no_lease(static_pool, tmp_path, monkeypatch,
                                                           offset):
    pool = static_pool
    live = backend(pool)
    assert abs(live.clock_skew(5.0)) <= 2  # one host: the same clock, read to the second
    config = validate({"daemon": {"store": "state.db", "interval": 10, "lease": LEASE},
                       "safety": {"max_snapshot_age": 3600},
                       "backend": {"kind": "htcondor",
                                   "htcondor": {"collector": pool.collector_host}}},
                      base=tmp_path)
    daemon = Daemon(config, backend=live)
    try:
        assert daemon.tick().outcome == "ok"
        held = negotiator_lease(live)
        assert abs(held - (time.time() + LEASE)) <= 3  # the negotiator's time, which is ours
        monkeypatch.setenv(CLOCK_ENV, str(offset))
        assert live.clock_skew(5.0) == pytest.approx(-offset, abs=3)
        daemon.skip_until = 0.0
        assert daemon.tick().outcome == "ok"  # the cycle goes on, unleased
        assert negotiator_lease(live) == 0  # handed back: HTCondor starts jobs on its own
        with sqlite3.connect(tmp_path / "state.db") as db:
            [(until, error)] = db.execute(
                "select lease_until, lease_error from cycles order by id desc limit 1")
        said = re.match(r"clock skew: the negotiator's clock is ([-+]\d+) s off this host's",
                        error)
        assert until is None and said and abs(int(said.group(1)) + offset) <= 3, error
    finally:
        live.release_starts()
        daemon.close()
