"""Throughput under gridfair on a live pool (issue 44): a steering starts a negotiation at once
on a pool at HTCondor's default negotiator interval; a job that starts and ends between two
cycles has landed and frees its slot."""

from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path

from gridfair.classads.submitters import SubmitterMap
from gridfair.daemon.backends.htcondor import HTCondorBackend
from tests.live.conftest import POOL_CONFIG, own_pool, run_daemon
from tests.live.harness.personal_pool import UID_DOMAIN, JobSpec, PersonalPool, SlotSpec

#: HTCondor's default negotiator intervals (the harness's cycle delay, 1 s, stays).
DEFAULT_NEGOTIATOR = ["NEGOTIATOR_INTERVAL = 60", "NEGOTIATOR_MIN_INTERVAL = 5"]
MFLOPS = 1000.0


def negotiated_since(pool: PersonalPool, moment: float) -> bool:
    """The negotiator's ad says a cycle ended at `moment` or later."""
    import htcondor2

    ads = htcondor2.Collector(pool.collector_host).query(
        htcondor2.AdType.Negotiator, projection=["LastNegotiationCycleEnd0"])
    return any(ad.get("LastNegotiationCycleEnd0", 0) >= moment for ad in ads)


def test_a_steering_starts_a_negotiation_at_once() -> None:
    """At NEGOTIATOR_INTERVAL = 60, with gridfair's lease held (only steered jobs match): a job
    submitted is negotiated for at once (the schedd asks after a submit) and matches nothing;
    steered then, it starts within seconds of `actions_done`, not at the next periodic cycle
    about a minute later: the reschedule reaches the negotiator."""
    with own_pool([SlotSpec("User1", MFLOPS)], extra_config=[
            *POOL_CONFIG.read_text().splitlines(), *DEFAULT_NEGOTIATOR]) as pool:
        live = HTCondorBackend.connect(pool.collector_host,
                                       submitters=SubmitterMap(UID_DOMAIN))
        live.read_snapshot()
        live.hold_starts(time.time() + 600)
        submitted = int(time.time())
        [job_id] = pool.submit([JobSpec("User2", MFLOPS * 600)])
        pool.wait_until(lambda: negotiated_since(pool, submitted), 30)
        snapshot = live.read_snapshot()
        [job] = snapshot.jobs
        live.allocate(job, snapshot.machines[0])
        steered = time.monotonic()
        live.actions_done()
        pool.wait_until(lambda: job_id in pool.running(), 40)
        assert time.monotonic() - steered < 20


def test_a_short_job_between_two_cycles_lands_and_frees_its_slot(daemon_python: Path,
                                                                  daemon_dir: Path) -> None:
    """A 2 s job steered by one cycle starts and ends before the next (the shipped interval
    is 60 s; here the daemon runs one cycle, then another once the job is gone): the next
    cycle journals its allocation landed from the schedd's history (not in flight until the
    landing timeout, then "not landed"), and the slot it ran on is free for the next job
    at once."""
    with own_pool([SlotSpec("User1", MFLOPS)],
                  extra_config=POOL_CONFIG.read_text().splitlines()) as pool:
        # gridfair's lease from the start: HTCondor starts no job gridfair did not steer.
        HTCondorBackend.connect(pool.collector_host).hold_starts(time.time() + 600)
        [short] = pool.submit([JobSpec("User2", MFLOPS * 2)])
        (daemon_dir / "gridfair.toml").write_text(f"""
[daemon]
store = "state.db"
[backend]
kind = "htcondor"
[backend.htcondor]
collector = "{pool.collector_host}"
""")
        assert run_daemon(daemon_python, pool, daemon_dir, "--once").returncode == 0
        # Gone from the queue and from its slot's ad, as it is by a cycle a minute later.
        pool.wait_until(lambda: not pool.jobs("ClusterId") and not pool.running(), 30)
        [following] = pool.submit([JobSpec("User2", MFLOPS * 600)])
        done = run_daemon(daemon_python, pool, daemon_dir, "--once")
        assert done.returncode == 0, done.stderr
        with sqlite3.connect(daemon_dir / "state.db") as db:
            allocations = {job: (state, machine) for job, state, machine in db.execute(
                "select job, state, machine from actions where kind = 'allocate'")}
            [(note,)] = db.execute("select l.note from action_log l join actions a on "
                                   "a.key = l.key where a.job = ? and l.state = 'landed'",
                                   [short]).fetchall()
        [[slot]] = pool.status("Name")
    assert allocations == {short: ("landed", slot), following: ("confirmed", slot)}
    assert re.fullmatch(r"ran on slot1@\S+, started \d+ s after the pool accepted it, and "
                        r"left the queue", note), note
