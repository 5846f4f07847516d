"""gridfair run by condor_master from DAEMON_LIST, configured by knobs alone (no TOML file), as
configs/htcondor-gridfair-daemon.config installs it: its ad in the collector each cycle, its
lease held; `condor_off -daemon GRIDFAIR` stops it, hands the lease back and withdraws its ad;
`condor_on -daemon GRIDFAIR` starts it again; killed, the master restarts it; a knob changed
and `condor_reconfig`, its next cycles use it. Its account may advertise its own ad, and no
slot. Killed, its ad reads stale once its lifetime passes, and leaves at the collector's next
housekeeping."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.live.conftest import POOL_CONFIG, REPOSITORY, SLOTS, own_pool, write_daemon_config
from tests.live.harness.ha_pair import NAMES, HaPair
from tests.live.harness.personal_pool import (
    DAEMON_ACCOUNT,
    PersonalPool,
    as_account,
    daemon_command,
)

SNIPPET = REPOSITORY / "configs" / "htcondor-gridfair-daemon.config"


def gridfair_ads(pool: PersonalPool) -> list[dict[str, Any]]:
    """The daemon's ads in the collector, as `condor_status -any` shows them."""
    out = pool.run_tool(["condor_status", "-any", "-constraint",
                         'MyType == "GridfairNegotiator"', "-json"], check=False).stdout
    return json.loads(out) if out.strip() else []


def lease(pool: PersonalPool) -> int:
    out = pool.run_tool(["condor_config_val", "-negotiator", "GRIDFAIR_LEASE_UNTIL"]).stdout
    return int(out.strip())


def master_control(pool: PersonalPool, command: str) -> None:
    pool.run_tool([command, "-daemon", "GRIDFAIR"])


def test_the_master_runs_gridfair_from_knobs(daemon_python: Path, daemon_dir: Path) -> None:
    pool = own_pool(SLOTS[:2], extra_config=[
        *POOL_CONFIG.read_text().splitlines(), *SNIPPET.read_text().splitlines(),
        # Where this test installed gridfair and keeps its journal; a short interval.
        f"GRIDFAIR = {daemon_python.parent / 'gridfair'}",
        f"GRIDFAIR_STORE = {daemon_dir / 'state.db'}",
        f"GRIDFAIR_LOG_FILE = {daemon_dir / 'GridfairLog'}",
        "GRIDFAIR_INTERVAL = 1", "GRIDFAIR_METRICS_ENABLED = False",
    ])
    with pool:
        try:
            # The master starts it with the pool's other daemons, before the slots are in
            # the collector: it waits for them, and its first cycle is a good one.
            [ad] = pool.wait_until(lambda: [ad for ad in gridfair_ads(pool)
                                            if ad["LastCycleOutcome"] == "ok"], 60)
            with sqlite3.connect(f"file:{daemon_dir / 'state.db'}?mode=ro", uri=True) as db:
                first = db.execute("select outcome from cycles order by id limit 1").fetchone()
            assert first == ("ok",)
            assert ad["Name"].startswith("gridfair@")
            assert ad["GridfairPolicy"] == "order:hosep preempt:reclaim"
            assert ad["LastCycleSlots"] == 2
            assert ad["GridfairShares"] == "User1 0/264500"
            assert ad["LeaseUntil"] > time.time()
            assert lease(pool) >= ad["LeaseUntil"]  # this cycle's, or a later one's
            # A later cycle renews the ad.
            pool.wait_until(lambda: [new for new in gridfair_ads(pool)
                                     if new["LastCycle"] > ad["LastCycle"]], 20)

            # The two commands that go to the daemon itself find no address (it has no
            # command port): docs/condor-daemon.md gives their equivalents.
            for command in ("condor_restart", "condor_reconfig"):
                refused = pool.run_tool([command, "-daemon", "GRIDFAIR"], check=False)
                assert "Can't find address" in refused.stderr + refused.stdout, refused
            master_control(pool, "condor_off")
            pool.wait_until(lambda: not gridfair_ads(pool), 30)
            assert lease(pool) == 0  # handed back: HTCondor starts jobs on its own
            log = (daemon_dir / "GridfairLog").read_text()
            assert "SIGTERM received" in log and "lease released" in log

            master_control(pool, "condor_on")
            [again] = pool.wait_until(lambda: gridfair_ads(pool), 60)
            assert again["DaemonStartTime"] > ad["DaemonStartTime"]
            assert again["LastCycle"] > ad["LastCycle"]  # the same journal, carried on

            # Killed: the master starts it again.
            [pid] = subprocess.run(["pgrep", "-u", DAEMON_ACCOUNT, "-f",
                                    f"{daemon_python.parent / 'gridfair'} daemon --knobs"],
                                   capture_output=True, text=True, check=False).stdout.split()
            os.kill(int(pid), signal.SIGKILL)
            pool.wait_until(lambda: [new for new in gridfair_ads(pool)
                                     if new["DaemonStartTime"] > again["DaemonStartTime"]], 60)

            # A knob changed, then `condor_reconfig`: the daemon's next cycles use it.
            with pool.config_file.open("a") as config:
                config.write("GRIDFAIR_POLICY_NAME = drf\n")
            pool.run_tool(["condor_reconfig"])
            pool.wait_until(lambda: [new for new in gridfair_ads(pool)
                                     if new["GridfairPolicy"] == "order:drf"
                                     and new["LastCycleOutcome"] == "ok"], 60)
        except BaseException:
            print((pool.directory / "local" / "log" / "MasterLog").read_text()[-4000:])
            print((daemon_dir / "GridfairLog").read_text()[-4000:]
                  if (daemon_dir / "GridfairLog").exists() else "no GridfairLog")
            raise
        # The collector takes generic ads from the daemon's account, and no slot ad.
        fake = as_account(DAEMON_ACCOUNT, [
            str(daemon_python), "-c",
            "import classad2, htcondor2, sys\n"
            "slot = classad2.ClassAd({'MyType': 'Machine', 'Name': 'fake@nowhere', "
            "'Machine': 'nowhere', 'MyAddress': '<127.0.0.1:1>', 'StartdIpAddr': "
            "'<127.0.0.1:1>'})\n"
            f"htcondor2.Collector('{pool.collector_host}').advertise([slot], "
            "'UPDATE_STARTD_AD')\n"])
        subprocess.run(fake, env=pool.daemon_environment(), capture_output=True, check=False,
                       timeout=30)
        time.sleep(2)
        assert pool.status("Name", constraint='Name == "fake@nowhere"') == []


def test_the_standby_takes_over_when_the_active_central_manager_dies(
        daemon_python: Path, daemon_dir: Path) -> None:
    """Two masters sharing gridfair's HA lock and journal (ha_pair.py): one runs the daemon;
    when its master and daemon are killed, the other's master takes the lock over and starts
    its daemon, which carries on with the same journal, within HA_LOCK_HOLD_TIME +
    HA_POLL_PERIOD and a cycle."""
    pool = own_pool(SLOTS[:2], extra_config=POOL_CONFIG.read_text().splitlines())
    with pool, HaPair(pool, daemon_python.parent / "gridfair", daemon_dir, poll=2, hold=10,
                      knobs=("GRIDFAIR_INTERVAL = 1",)) as pair:
        active = pool.wait_until(pair.active, 60)
        [ad] = pool.wait_until(lambda: [ad for ad in gridfair_ads(pool)
                                        if ad["LastCycleOutcome"] == "ok"], 60)
        time.sleep(3)
        assert [pair.daemon_pid(name) is not None for name in NAMES].count(True) == 1
        killed = time.time()
        pair.kill(active)
        [standby] = [name for name in NAMES if name != active]
        [after] = pool.wait_until(lambda: [new for new in gridfair_ads(pool)
                                           if new["DaemonStartTime"] >= int(killed)
                                           and new["LastCycleOutcome"] == "ok"], 60)
        assert pair.active() == standby
        assert after["LastCycle"] > ad["LastCycle"]  # the same journal, carried on
        assert after["LastCycleEnd"] - killed < 10 + 2 + 10


def alive(pool: PersonalPool) -> list[str]:
    """`GridfairAlive` of each of the daemon's ads, as the collector's clients evaluate it."""
    out = pool.run_tool(["condor_status", "-any", "-constraint",
                         'MyType == "GridfairNegotiator"', "-af", "GridfairAlive"],
                        check=False).stdout
    return out.split()


def test_a_killed_daemon_s_ad_reads_stale_then_leaves(daemon_python: Path, daemon_dir: Path,
                                                     record_property: Any) -> None:
    """SIGKILLed (nothing withdrawn): its ad reads `GridfairAlive = false` within its lifetime
    (three intervals) of the last renewal, and is gone at the collector's next housekeeping
    (every CLASSAD_LIFETIME: 10 s here, 900 s by default)."""
    housekeeping = 10
    pool = own_pool(SLOTS[:2], extra_config=[*POOL_CONFIG.read_text().splitlines(),
                                              f"COLLECTOR.CLASSAD_LIFETIME = {housekeeping}"])
    interval = 2
    write_daemon_config(daemon_dir, pool, daemon={"interval": interval})
    with pool:
        daemon = subprocess.Popen(daemon_command(daemon_python), cwd=daemon_dir,
                                  env=pool.daemon_environment(), stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            pool.wait_until(lambda: alive(pool) == ["true"], 60)
        finally:
            daemon.send_signal(signal.SIGKILL)
            daemon.wait()
        killed = time.monotonic()
        pool.wait_until(lambda: alive(pool) != ["true"], 30, 0.2)
        stale = time.monotonic() - killed
        pool.wait_until(lambda: not alive(pool), 60, 0.2)
        gone = time.monotonic() - killed
    record_property("stale_after_s", round(stale, 1))
    record_property("gone_after_s", round(gone, 1))
    lifetime = 3 * interval
    assert stale <= lifetime + 1, stale
    assert gone <= lifetime + housekeeping + 1, gone
