"""The daemon's own ad in the pool: what `condor_status -any` shows of its health.

Each scheduled run, the daemon sends its backend an ad of its last cycle (the htcondor backend
advertises it to the collector as a generic ad, `UPDATE_AD_GENERIC`; the others have no pool
to show it in), and withdraws it when it stops. The ad lives `ClassAdLifetime` seconds (three
intervals) unless renewed, so the ad of a daemon that died leaves the collector by itself: at
the collector's next housekeeping after that (every `CLASSAD_LIFETIME`, 900 s by default), so
until then `GridfairAlive`, an expression the collector's clients evaluate when they read the
ad, says false once the lifetime has passed without a renewal.

    condor_status -any -constraint 'MyType == "GridfairNegotiator"' -long

Per-user shares are summarised in one string of at most `SHARES_SHOWN` users (the first in
HOSEP's serving order: the most below their share), so the ad stays small in a pool of
thousands of users; `GridfairUsers` says how many there are.
"""

from __future__ import annotations

import math
import socket
import time
from typing import Any

import classad2

from gridfair import __version__
from gridfair.daemon.cycle import CycleReport

MY_TYPE = "GridfairNegotiator"
#: Users named in `GridfairShares` at most.
SHARES_SHOWN = 20
#: Characters of a failed cycle's error kept in the ad.
ERROR_KEPT = 500
#: Intervals an ad outlives its last renewal.
LIFETIME_INTERVALS = 3


#: Whether the ad was renewed within its lifetime, as of the moment it is read (the collector
#: stamps `LastHeardFrom` on each update).
ALIVE = "time() <= LastHeardFrom + ClassAdLifetime"


def host_name() -> str:
    """This host's name: its fully qualified one, unless that resolves to a loopback name
    (a hosts file mapping the host to 127.0.1.1 `localhost`), then the kernel's: two central
    managers of an HA pair must not both be `localhost`."""
    qualified = socket.getfqdn()
    if qualified.partition(".")[0] in ("localhost", "localhost6", "ip6-localhost"):
        return socket.gethostname()
    return qualified


def ad_name(dry_run: bool = False) -> str:
    """The daemon's name in the pool: one per host, as HTCondor names its daemons; a dry run
    (a shadow daemon beside the real one) is named apart."""
    return f"gridfair{'-dry-run' if dry_run else ''}@{host_name()}"


def daemon_ad(name: str, report: CycleReport, *, policy: str, backend: str, interval: float,
              started: float, dry_run: bool, config_refused: str = "") -> dict[str, Any]:
    """The attributes of the daemon's ad after `report`'s cycle; `config_refused`: why the
    last configuration read again (SIGHUP) was refused, if it was."""
    counts = report.counts
    ad: dict[str, Any] = {
        "MyType": MY_TYPE,
        "Name": name,
        "GridfairVersion": __version__,
        "GridfairPolicy": policy,
        "GridfairBackend": backend,
        "GridfairDryRun": dry_run,
        "DaemonStartTime": int(started),
        "ClassAdLifetime": max(1, round(LIFETIME_INTERVALS * interval)),
        "GridfairAlive": classad2.ExprTree(ALIVE),
        "LastCycle": report.cycle,
        "LastCycleOutcome": report.outcome,
        "LastCycleEnd": int(time.time()),
        "LastCycleDuration": round(report.duration, 3),
        "LastCycleSlots": counts.get("machines", 0),
        "LastCycleJobs": counts.get("jobs", 0),
        "LastCycleDecisions": counts.get("decisions", 0),
        "LastCycleActionsConfirmed": counts.get("confirmed", 0),
        "LastCycleActionsFailed": counts.get("failed", 0),
        "LastCycleHeldBack": counts.get("held_back", 0),
        "LastCycleSkippedAds": counts.get("skipped", 0),
        # As the negotiator's knob holds it (`hold_starts`: whole seconds, rounded up).
        "LeaseUntil": math.ceil(report.lease_until or 0),
    }
    if report.error:
        ad["LastCycleError"] = report.error[:ERROR_KEPT]
    if config_refused:
        ad["GridfairConfigRefused"] = config_refused[:ERROR_KEPT]
    if report.outcome != "failed":
        ad["GridfairUsers"] = len(report.shares)
        ad["GridfairShares"] = shares_summary(report.shares)
    return ad


def shares_summary(shares: tuple[tuple[str, float, float], ...]) -> str:
    """"User1 264500/264500, User2 0/84510, ...": each user's allocated over provided MFlops
    (its entitlement under HOSEP), the first `SHARES_SHOWN` users, then how many more."""
    shown = [f"{user} {allocated:.0f}/{provided:.0f}"
             for user, provided, allocated in shares[:SHARES_SHOWN]]
    more = len(shares) - SHARES_SHOWN
    if more > 0:
        shown.append(f"and {more} more")
    return ", ".join(shown)
