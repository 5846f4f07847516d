"""The daemon's ad (gridfair/daemon/advert.py): what a cycle puts in it, bounded in size."""

from __future__ import annotations

import socket
import time

import classad2

from gridfair.daemon.advert import (
    SHARES_SHOWN,
    ad_name,
    daemon_ad,
    host_name,
    shares_summary,
)
from gridfair.daemon.cycle import CycleReport


def test_the_shares_summary_names_at_most_twenty_users() -> None:
    shares = tuple((f"User{n}", 1000.0 * n, 500.0) for n in range(1, 1001))
    summary = shares_summary(shares)
    assert summary.startswith("User1 500/1000, User2 500/2000, ")
    assert summary.endswith(f"User{SHARES_SHOWN} 500/{1000 * SHARES_SHOWN}, and 980 more")
    assert len(summary) < 600


def test_a_cycle_s_ad_and_a_failed_cycle_s_ad() -> None:
    ok = CycleReport(7, "ok", 0.25, {"machines": 4, "decisions": 3, "confirmed": 2,
                                      "skipped": 1}, lease_until=1000.2,
                     shares=(("User1", 264500.0, 132250.0),))
    ad = daemon_ad("gridfair@cm", ok, policy="order:hosep preempt:hosep", backend="htcondor",
                   interval=60, started=5.0, dry_run=False)
    assert {key: ad[key] for key in ("MyType", "Name", "LastCycle", "LastCycleOutcome",
                                     "LastCycleSlots", "LastCycleDecisions",
                                     "LastCycleActionsConfirmed", "LastCycleSkippedAds",
                                     "LeaseUntil", "GridfairShares", "ClassAdLifetime")} == {
        "MyType": "GridfairNegotiator", "Name": "gridfair@cm", "LastCycle": 7,
        "LastCycleOutcome": "ok", "LastCycleSlots": 4, "LastCycleDecisions": 3,
        "LastCycleActionsConfirmed": 2, "LastCycleSkippedAds": 1, "LeaseUntil": 1001,
        "GridfairShares": "User1 132250/264500", "ClassAdLifetime": 180}
    failed = daemon_ad("gridfair@cm", CycleReport(8, "failed", 0.1, error="x" * 2000),
                       policy="p", backend="htcondor", interval=60, started=5.0, dry_run=False)
    assert len(failed["LastCycleError"]) == 500
    assert failed["LeaseUntil"] == 0 and "GridfairShares" not in failed


def test_a_dry_run_is_named_apart_from_the_daemon_that_acts() -> None:
    assert ad_name().startswith("gridfair@")
    assert ad_name(dry_run=True).startswith("gridfair-dry-run@")


def test_the_ad_says_it_is_stale_once_its_lifetime_passed_unrenewed() -> None:
    """`GridfairAlive` is evaluated by whoever reads the ad: a dead daemon's ad, listed until
    the collector's housekeeping, reads false once its lifetime has passed."""
    ad = daemon_ad("gridfair@cm", CycleReport(7, "ok", 0.25), policy="p", backend="htcondor",
                   interval=60, started=5.0, dry_run=False)
    listed = classad2.ClassAd(ad)
    listed["LastHeardFrom"] = int(time.time()) - 100
    assert listed.eval("GridfairAlive") is True
    listed["LastHeardFrom"] = int(time.time()) - 181
    assert listed.eval("GridfairAlive") is False


def test_a_host_resolving_to_localhost_is_named_by_its_own_name(monkeypatch) -> None:
    monkeypatch.setattr(socket, "getfqdn", lambda: "localhost")
    monkeypatch.setattr(socket, "gethostname", lambda: "cm1")
    assert host_name() == "cm1" and ad_name() == "gridfair@cm1"
    monkeypatch.setattr(socket, "getfqdn", lambda: "cm1.example.org")
    assert host_name() == "cm1.example.org"
