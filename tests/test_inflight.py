"""Allocations in flight hold their slots until they start (gridfair.daemon.inflight): the
rules on hand-made snapshots, then the daemon on the files backend, whose dumps are edited to
show a job started, or left as they are until the landing timeout passes."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import sqlite3
from pathlib import Path

import htcondor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridfair.ad_views import Job, JobStatus, Machine, Snapshot
from gridfair.core.negotiator import Hold
from gridfair.core.pool import Node, Task
from gridfair.core.stages import Preemption
from gridfair.daemon.backends.files import FilesBackend
from gridfair.daemon.config import validate
from gridfair.daemon.cycle import CycleRunner
from gridfair.daemon.inflight import Flight, on_slot, pending, record, settle
from gridfair.daemon.metrics import PrometheusMetrics
from gridfair.daemon.safety import SafetyLimits, VacateGuard
from gridfair.daemon.store import Store

ROOT = Path(__file__).resolve().parent.parent
POOL = ROOT / "tests" / "data" / "daemon" / "pool"
T0 = 1_000_000.0
TIMEOUT = 4.0


def slot(name: str, job: str | None = None, user: str | None = None) -> Machine:
    return Machine(name, "User1", 100.0, state="Claimed" if job else "Unclaimed",
                   activity="Busy" if job else "Idle", running_job=job, running_user=user)


def job(job_id: str, user: str, *, on: str | None = None, start: float | None = None) -> Job:
    return Job(job_id, user, JobStatus.RUNNING if on else JobStatus.IDLE, T0 - 100,
               start_time=start, machine=on)


def flight(job_id: str = "9.0", machine: str = "slot1@h", at: float = T0) -> Flight:
    return Flight(f"allocate:{job_id}@{machine}:0", job_id, machine, at)


def settled(machines, jobs, flights, *, at=T0 + 1, vacated=None):
    return settle(Snapshot(at, tuple(machines), tuple(jobs)), flights, vacated or {}, TIMEOUT)


def test_a_freed_slot_is_held_for_its_job_and_the_victim_shown_leaving():
    """The snapshot right after vacate 5.0 + allocate 9.0 on slot1: the slot still runs the
    victim (the pool is slower than the next cycle). The view shows 9.0 running there since
    the allocation and 5.0 idle; nothing is journaled yet."""
    result = settled([slot("slot1@h", "5.0", "User2"), slot("slot2@h")],
                     [job("5.0", "User2", on="slot1@h", start=T0 - 50), job("9.0", "User1")],
                     [flight()], vacated={("5.0", "slot1@h"): T0})
    assert list(result.held) == ["9.0"] and not result.landed and not result.missed
    view_slots = {m.name: m for m in result.view.machines}
    assert (view_slots["slot1@h"].running_job, view_slots["slot1@h"].running_user) == (
        "9.0", "User1")
    assert view_slots["slot2@h"].is_free
    view_jobs = {j.id: j for j in result.view.jobs}
    assert (view_jobs["9.0"].status, view_jobs["9.0"].machine, view_jobs["9.0"].start_time) == (
        JobStatus.RUNNING, "slot1@h", T0)
    assert view_jobs["5.0"].status is JobStatus.IDLE and view_jobs["5.0"].machine is None


@pytest.mark.parametrize(("machines", "jobs", "at", "why"), [
    ([slot("slot1@h")], [job("9.0", "User1")], T0 + TIMEOUT + 1,
     "not landed: not started within 4 s (waited 5 s)"),
    ([slot("slot1@h", "7.0", "User3")], [job("9.0", "User1"), job("7.0", "User3", on="slot1@h")],
     T0 + 1, "not landed: slot1@h runs 7.0 (User3)"),
    # The victim matched straight back after its vacate: a new run, holding the slot.
    ([slot("slot1@h", "5.0", "User2")],
     [job("9.0", "User1"), job("5.0", "User2", on="slot1@h", start=T0 + 1)], T0 + 2,
     "not landed: slot1@h runs 5.0 (User2)"),
    ([slot("slot1@h"), slot("slot2@h", "9.0", "User1")],
     [job("9.0", "User1", on="slot2@h")], T0 + 1, "not landed: 9.0 started on slot2@h"),
    ([slot("slot1@h")], [], T0 + TIMEOUT + 1, "not landed: job 9.0 not seen in the pool for 5 s"),
    ([slot("slot2@h")], [job("9.0", "User1")], T0 + 1, "not landed: slot slot1@h is gone"),
])
def test_a_flight_that_cannot_land_releases_its_slot_with_the_reason(machines, jobs, at, why):
    result = settled(machines, jobs, [flight()], at=at, vacated={("5.0", "slot1@h"): T0})
    assert result.missed == [(flight(), why)] and not result.held
    assert result.view.machines == tuple(machines)  # nothing held: the snapshot as read


def test_a_job_no_ad_lists_holds_its_slot_until_the_timeout():
    """Read from autoclusters, a job that has just started is on no ad (not idle, and its
    slot's ad still shows the victim): seen live, the daemon gave the slot back to the victim
    when absence counted as leaving the queue. It holds, shown running for its user."""
    result = settled([slot("slot1@h", "5.0", "User2")],
                     [job("5.0", "User2", on="slot1@h", start=T0 - 50)],
                     [Flight("allocate:9.0@slot1@h:0", "9.0", "slot1@h", T0, "User1")],
                     vacated={("5.0", "slot1@h"): T0})
    assert list(result.held) == ["9.0"] and not result.missed
    (view_slot,) = result.view.machines
    assert (view_slot.running_job, view_slot.running_user) == ("9.0", "User1")
    view_jobs = {j.id: j for j in result.view.jobs}
    assert (view_jobs["9.0"].status, view_jobs["9.0"].user, view_jobs["9.0"].machine) == (
        JobStatus.RUNNING, "User1", "slot1@h")
    assert view_jobs["5.0"].status is JobStatus.IDLE


def test_a_job_running_on_its_slot_or_a_dynamic_slot_of_it_has_landed():
    result = settled([slot("slot1@h", "9.0", "User1"), slot("slot2_1@h", "8.0", "User1")],
                     [job("9.0", "User1", on="slot1@h"), job("8.0", "User1", on="slot2_1@h")],
                     [flight(), flight("8.0", "slot2@h")])
    assert result.landed == [flight(), flight("8.0", "slot2@h")]
    assert on_slot("slot2_1@h", "slot2@h") and not on_slot("slot2_1@g", "slot2@h")
    assert not on_slot("slot22@h", "slot2@h")


def test_a_job_that_ran_on_its_slot_and_left_the_queue_has_landed_and_frees_the_slot():
    """A short job starts and ends between two cycles: the next snapshot has neither the job
    nor a job on its slot. The pool's record of ended jobs says it ran there since it was
    steered: landed at once (not "not seen" after the timeout), and the slot is free in the
    view, not held for a job that is gone. One said to have run on another slot has not
    landed; one whose last run there began before the steering tells nothing new."""
    flights = [flight(), flight("9.1", "slot2@h"), flight("9.2", "slot3@h")]
    ended = {"9.0": ("slot1@h", T0 + 0.4), "9.1": ("slot4@h", T0 + 1),
             "9.2": ("slot3@h", T0 - 30)}
    machines = [slot(f"slot{number}@h") for number in (1, 2, 3, 4)]
    result = settle(Snapshot(T0 + 60, tuple(machines), ()), flights, {}, TIMEOUT * 100,
                    ended=ended)
    assert result.ended == [(flight(), "slot1@h", T0 + 0.4)] and not result.landed
    assert result.missed == [(flight("9.1", "slot2@h"), "not landed: 9.1 ran on slot4@h")]
    assert list(result.held) == ["9.2"]
    assert [m.name for m in result.view.machines if m.is_free] == [
        "slot1@h", "slot2@h", "slot4@h"]


def test_a_requeued_job_whose_run_count_passed_the_steered_one_has_landed_at_once():
    """A job steered at run 2 that started and went back to idle between two cycles
    (`on_exit_remove = false`) shows run 3: landed at once, its slot free in the view, not
    held until the landing timeout. One still at run 2 has not started: it holds its slot."""
    steered = dataclasses.replace(flight(), run_count=2)
    waiting = dataclasses.replace(flight("9.1", "slot2@h"), run_count=2)
    requeued = dataclasses.replace(job("9.0", "User1"), run_count=3)
    idle = dataclasses.replace(job("9.1", "User1"), run_count=2)
    result = settled([slot("slot1@h"), slot("slot2@h")], [requeued, idle],
                     [steered, waiting])
    assert result.requeued == [(steered, 3)] and not result.landed and not result.missed
    assert list(result.held) == ["9.1"]
    assert [m.name for m in result.view.machines if m.is_free] == ["slot1@h"]


def test_a_given_up_flight_whose_job_ran_there_and_ended_lands_late():
    result = settle(Snapshot(T0 + 300, (slot("slot1@h"),), ()), [], {}, TIMEOUT,
                    late=[flight()], ended={"9.0": ("slot1@h", T0 + 2)})
    assert result.ended == [(flight(), "slot1@h", T0 + 2)]


def test_a_snapshot_older_than_the_allocation_says_nothing_about_it():
    result = settled([slot("slot1@h", "7.0", "User3")],
                     [job("9.0", "User1"), job("7.0", "User3", on="slot1@h")],
                     [flight(at=T0 + 10)], at=T0 + 1)
    assert list(result.held) == ["9.0"] and not result.missed


def test_two_flights_for_one_static_slot_keep_the_first():
    first, second = flight("9.0"), flight("9.1", at=T0 + 0.5)
    result = settled([slot("slot1@h")], [job("9.0", "User1"), job("9.1", "User1")],
                     [first, second])
    assert list(result.held) == ["9.0"]
    assert result.missed == [(second, "not landed: another allocation in flight holds the "
                                      "job or the slot")]


def test_the_guard_spares_a_job_in_flight():
    limits = SafetyLimits(max_vacates_per_cycle=5, min_runtime=0, preempt_cooldown=0,
                          max_snapshot_age=60, landing_timeout=TIMEOUT)
    guard = VacateGuard(limits, T0, {}, in_flight={"9.0"})
    node = Node("slot1@h", "User1", 100.0, 1, 256)
    held, other = Task("9.0", "User1", T0), Task("5.0", "User2", T0)
    held.start_time = other.start_time = T0
    receiver = Task("1.0", "User4", T0)
    assert guard(Preemption(held, receiver, node, "", "", {}), T0) == Hold(
        "in_flight: 9.0 was allocated to slot1@h and has not started yet", (held,))
    assert guard(Preemption(other, receiver, node, "", "", {}), T0) is None


# ------------------------------------------------------------ the daemon on the files backend
def start_job_in_dump(queue: Path, job_id: str, machine: str, start: float) -> None:
    """Rewrite the job's ad in a condor_q -long dump as running on `machine`."""
    cluster, proc = job_id.split(".")
    ads = queue.read_text().split("\n\n")
    for number, ad in enumerate(ads):
        lines = ad.splitlines()
        if f"ClusterId = {cluster}" in lines and f"ProcId = {proc}" in lines:
            ads[number] = "\n".join(
                ["JobStatus = 2" if line.startswith("JobStatus =") else line for line in lines]
                + [f'RemoteHost = "{machine}"', f"JobCurrentStartDate = {start:.0f}"])
            break
    else:
        raise AssertionError(f"no ad of {job_id} in {queue}")
    queue.write_text("\n\n".join(ads))


def touch(directory: Path, when: float) -> None:
    for dump in directory.iterdir():
        os.utime(dump, (when, when))


def journal(db_path: Path) -> dict[str, tuple]:
    """action key -> (job, slot, state, attempts, error) of every allocation."""
    with sqlite3.connect(db_path) as db:
        return {row[0]: row[1:] for row in db.execute(
            "select key, job, machine, state, attempts, error from actions "
            "where kind = 'allocate'")}


def static_files_pool(tmp_path):
    """The real pool's dumps on the files backend, static slots only (a partitionable slot
    is settled but not held: its own test above), landing timeout 60 s; (pool, config)."""
    pool = tmp_path / "pool"
    shutil.copytree(POOL, pool, copy_function=shutil.copy)
    (pool / "partitionable.status").unlink()
    config = validate({"daemon": {"store": "state.db"},
                       "backend": {"kind": "files",
                                   "files": {"directory": "pool", "actions": "a.jsonl"}},
                       "safety": {"max_snapshot_age": 1e9, "landing_timeout": 60.0,
                                  "min_runtime": 0}}, base=tmp_path)
    return pool, config


def test_the_daemon_holds_lands_and_releases_on_the_files_backend(tmp_path):
    pool, config = static_files_pool(tmp_path)
    store = Store(tmp_path / "state.db")
    runner = CycleRunner(config, FilesBackend(pool, tmp_path / "a.jsonl"), store)
    first = runner.run()
    after_first = journal(tmp_path / "state.db")
    assert first.outcome == "ok" and after_first
    assert {row[2] for row in after_first.values()} == {"confirmed"}
    # Cycle 2 on unchanged dumps: every allocation still holds its slot, and no decision of
    # the cycle gives one of those slots to another job.
    runner.run()
    assert journal(tmp_path / "state.db") == after_first
    with sqlite3.connect(tmp_path / "state.db") as db:
        second = db.execute("select job, machine from decisions where cycle = 2 and "
                            "kind = 'allocate'").fetchall()
    held = {row[1] for row in after_first.values()}
    assert not {machine for job, machine in second if (job, machine) not in {
        row[:2] for row in after_first.values()}} & held
    # One job starts on its slot; the dumps are rewritten later than the landing timeout.
    landed_key = sorted(after_first)[0]
    landed_job, landed_slot = after_first[landed_key][:2]
    with sqlite3.connect(tmp_path / "state.db") as db:
        [(confirmed_at,)] = db.execute("select updated_at from actions where key = ?",
                                       [landed_key]).fetchall()
    later = confirmed_at + 61
    start_job_in_dump(pool / "jobs.queue", landed_job, landed_slot, later - 31)
    touch(pool, later)
    runner.run()
    third = journal(tmp_path / "state.db")
    assert third[landed_key][2] == "landed"
    with sqlite3.connect(tmp_path / "state.db") as db:
        [(note,)] = db.execute("select note from action_log where key = ? and state = 'landed'",
                               [landed_key]).fetchall()
    # Start times are whole seconds: 30 s after, give or take the rounding.
    assert re.fullmatch(f"running on {landed_slot}, started (30|31) s after the pool "
                        "accepted it", note), note
    for key in set(after_first) - {landed_key}:
        _, _, state, attempts, error = third[key]
        # Not started within the timeout: failed and retryable, so if decided again on the
        # same dumps it is carried out again at once (a second attempt).
        assert error.startswith("not landed: not started within 60 s (waited 61 s)"), error
        assert (state, attempts) in {("failed", 1), ("confirmed", 2)}


def test_an_allocation_given_up_while_its_job_was_on_no_ad_lands_late(tmp_path):
    """Under load a job that has left the idle rows may be on no slot ad for longer than the
    landing timeout (found live: 6 s): the allocation is given up ("not seen"). When the job
    is then seen running on its slot, the allocation is journaled landed, late, instead of
    staying "not landed" while the job runs where gridfair sent it; also when the daemon that
    gave it up was killed and another one sees it (found live: killed just after)."""
    pool, config = static_files_pool(tmp_path)
    runner = CycleRunner(config, FilesBackend(pool, tmp_path / "a.jsonl"),
                         Store(tmp_path / "state.db"))
    runner.run()
    key = sorted(journal(tmp_path / "state.db"))[0]
    job_id, slot_name = journal(tmp_path / "state.db")[key][:2]
    with sqlite3.connect(tmp_path / "state.db") as db:
        [(confirmed_at,)] = db.execute("select updated_at from actions where key = ?",
                                       [key]).fetchall()
    queue = pool / "jobs.queue"
    dump = queue.read_text()
    cluster, proc = job_id.split(".")
    # Started: out of the idle jobs, and on no slot's ad yet, past the landing timeout.
    queue.write_text("\n\n".join(ad for ad in dump.split("\n\n") if not (
        f"ClusterId = {cluster}" in ad.splitlines() and f"ProcId = {proc}" in ad.splitlines())))
    touch(pool, confirmed_at + 61)
    runner.run()
    _, _, state, _, error = journal(tmp_path / "state.db")[key]
    assert (state, error.split(";")[0]) == (
        "failed", f"not landed: job {job_id} not seen in the pool for 61 s")
    # The next snapshot, read by a daemon started again after an outage, shows it running on
    # its slot.
    queue.write_text(dump)
    start_job_in_dump(queue, job_id, slot_name, confirmed_at + 30)
    touch(pool, confirmed_at + 600)
    runner.store.close()
    metrics = PrometheusMetrics("127.0.0.1", 0)
    try:
        CycleRunner(config, FilesBackend(pool, tmp_path / "a.jsonl"),
                    Store(tmp_path / "state.db"), metrics=metrics).run()
        late = metrics.registry.get_sample_value("gridfair_allocations_settled_total",
                                                 {"outcome": "landed_late"})
    finally:
        metrics.close()
    assert late == 1.0
    assert journal(tmp_path / "state.db")[key][2] == "landed"
    with sqlite3.connect(tmp_path / "state.db") as db:
        [(note,)] = db.execute("select note from action_log where key = ? and state = 'landed'",
                               [key]).fetchall()
    assert re.fullmatch(f"running on {slot_name}: landed late, [0-9]+ s after it was given up",
                        note), note


def test_a_machine_leaving_releases_what_was_held_for_it(tmp_path):
    """DRF with fair preemption gives bbockelm the two free static slots and four CPUs of the
    partitionable machine ingwe2, where bt runs 3.0-3.3. Then ingwe2's ad is gone from the
    snapshot (the machine left), with 15.2, which had started there, on no ad any more: every
    allocation to it is released at once ("slot ... is gone", not held until the landing
    timeout), bt is no longer charged for the jobs it ran there, and no decision names it.
    The slots named are the `fastest` placement's choices."""
    pool = tmp_path / "pool"
    shutil.copytree(POOL, pool, copy_function=shutil.copy)
    config = validate({"daemon": {"store": "state.db"},
                       "policy": {"name": "drf-fair", "placement": "fastest"},
                       "backend": {"kind": "files",
                                   "files": {"directory": "pool", "actions": "a.jsonl"}},
                       "safety": {"max_snapshot_age": 1e9, "landing_timeout": 60.0,
                                  "min_runtime": 0}}, base=tmp_path)
    runner = CycleRunner(config, FilesBackend(pool, tmp_path / "a.jsonl"),
                         Store(tmp_path / "state.db"))
    runner.run()
    gone = "slot1@ingwe2.cs.wisc.edu"
    to_gone = {key: row[0] for key, row in journal(tmp_path / "state.db").items()
               if row[1] == gone}
    assert sorted(to_gone.values()) == ["15.2", "15.3", "15.4", "15.5"]
    with sqlite3.connect(tmp_path / "state.db") as db:
        [(confirmed_at,)] = db.execute("select max(updated_at) from actions").fetchall()
    (pool / "partitionable.status").unlink()
    queue = pool / "jobs.queue"
    queue.write_text("\n\n".join(ad for ad in queue.read_text().split("\n\n")
                                  if "ProcId = 2" not in ad.splitlines()))
    touch(pool, confirmed_at + 1)
    runner.run()
    after = journal(tmp_path / "state.db")
    assert {after[key][2:] for key in to_gone} == {
        ("failed", 1, f"not landed: slot {gone} is gone")}
    with sqlite3.connect(tmp_path / "state.db") as db:
        usage = {user: (running, flying) for user, running, flying in db.execute(
            "select user, running, in_flight from usage where cycle = 2")}
        named = db.execute("select count(*) from decisions where cycle = 2 and machine = ?",
                           [gone]).fetchall()
    # bt: 2.0 and 2.1 on the static slots; bbockelm: the two static slots held for it, in
    # flight (idle as HTCondor counts them, not running).
    assert usage == {"bt@cs.wisc.edu": (2, 0), "bbockelm@users.opensciencegrid.org": (0, 2)}
    assert named == [(0,)]


def test_a_landed_job_keeps_its_slot_while_the_slot_ad_lags():
    """The schedd says 9.0 runs on slot1 (landed), the collector's slot ad still says
    Unclaimed: the view shows the slot taken, so no cycle gives it away meanwhile."""
    result = settled([slot("slot1@h"), slot("slot2@h")],
                     [job("9.0", "User1", on="slot1@h", start=T0 + 1)], [flight()], at=T0 + 2)
    assert result.landed == [flight()] and not result.held
    view_slots = {m.name: m for m in result.view.machines}
    assert view_slots["slot1@h"].running_job == "9.0" and view_slots["slot2@h"].is_free
    assert result.view.jobs[0].start_time == T0 + 1


def test_a_job_running_where_no_ad_says_yet_keeps_holding():
    """The schedd calls the job running before its RemoteHost (and the slot ad) say where:
    no evidence either way, so the slot stays held until the timeout."""
    running_nowhere = Job("9.0", "User1", JobStatus.RUNNING, T0 - 100)
    assert list(settled([slot("slot1@h")], [running_nowhere], [flight()]).held) == ["9.0"]
    late = settled([slot("slot1@h")], [running_nowhere], [flight()], at=T0 + TIMEOUT + 1)
    assert late.missed == [(flight(), "not landed: not started within 4 s (waited 5 s)")]


def test_a_flight_judged_without_room_lands_late_when_its_job_is_seen_there(tmp_path):
    """Found live (Showcase 2): a flight to a partitionable slot was journaled "not landed:
    no room" on a snapshot where the claimed dynamic slots did not yet name their jobs, while
    its job ran there from 1.8 s after the acceptance to its end. The verdict is watched like
    a timeout: the next snapshot showing the job on a dynamic slot of that machine journals
    the allocation landed, late."""
    store = Store(tmp_path / "state.db")
    key = "allocate:9.0@slot1@h:0"
    with store.transaction("plan") as db:
        store.plan_actions(db, [{"key": key, "kind": "allocate", "job": "9.0", "user": "u",
                                 "machine": "slot1@h", "reason": "test"}], 1, T0 - 1)
    store.set_action_state(key, "confirmed", 1, T0)
    store.set_action_state(key, "failed", 2, T0 + 2,
                           "not landed: slot1@h has no room for 3 CPUs and 1024 MiB "
                           "(left: 0 CPUs, 0 MiB)", retryable=True)
    machines = (Machine("slot1@h", None, 400.0, 4.0, 4096.0, slot_type="Partitionable"),
                Machine("slot1_1@h", None, 300.0, 3.0, 1024.0, state="Claimed",
                        activity="Busy", running_job="9.0", running_user="u",
                        slot_type="Dynamic"))
    jobs = (job("9.0", "u", on="slot1_1@h", start=T0 + 2),)
    settlement = pending(store, Snapshot(T0 + 4, machines, jobs), TIMEOUT, 3)
    assert [(flight.job, where) for flight, where in settlement.landed_late] == [
        ("9.0", "slot1_1@h")]
    record(store, settlement, 3, T0 + 4, withdraw=lambda job_id: None)
    assert store.action(key)["state"] == "landed"
    store.close()


# ----------------------------------------------- another user's claim kept idle on the machine
def slot4(idle_claim_user: str = "G1@gridfair.test") -> tuple[Machine, ...]:
    """O2's 4-cpu machine as Showcase 2's journal shows it 14 s after the shift (main e5a154e,
    run 1): O2's 3.4 runs in slot4_2; slot4_1 is a claim kept idle, naming no job (the claim
    of G1's 1.2, vacated for O2's 3.8 by a `condor_now` handover that never started)."""
    return (Machine("slot4@vm", "O2", 6000.0, 4.0, 8192.0, slot_type="Partitionable"),
            Machine("slot4_2@vm", "O2", 3000.0, 2.0, 2048.0, state="Claimed",
                    activity="Busy", running_job="3.4", running_user="O2",
                    slot_type="Dynamic"),
            Machine("slot4_1@vm", "O2", 3000.0, 2.0, 4096.0, state="Claimed",
                    activity="Idle", running_job=None, running_user=idle_claim_user,
                    slot_type="Dynamic"))


def o2_jobs() -> tuple[Job, ...]:
    return (Job("3.4", "O2", JobStatus.RUNNING, T0 - 500, request_cpus=2.0, machine="slot4_2@vm",
                start_time=T0 - 100),
            Job("3.12", "O2", JobStatus.IDLE, T0 - 400, request_cpus=2.0, request_memory=2048.0))


def test_another_users_idle_claim_is_not_taken_for_a_flights_starting_slot():
    """Seen live (Showcase 2, main e5a154e): G1's claim, left idle on O2's machine, was
    taken as the starting slot of seven flights in a row, of O2, O4 and G2, each held until
    the landing timeout (12 s) while none could start. Only a claim of the flight's own user
    (or one naming no user) may be its job starting: beside G1's, O2's flight has no room."""
    flights = [Flight("allocate:3.12@slot4@vm:0", "3.12", "slot4@vm", T0, "O2", 2.0, 2048.0,
                      0.0, 0)]
    result = settle(Snapshot(T0 + 2, slot4(), o2_jobs()), flights, {}, 12.0)
    assert not result.held
    [(_, why)] = result.missed
    assert why.startswith("not landed: slot4@vm has no room for 2 CPUs")
    # O2's own claim, not naming its job yet, is its job starting: held.
    own = settle(Snapshot(T0 + 2, slot4("O2"), o2_jobs()), flights, {}, 12.0)
    assert list(own.held) == ["3.12"] and not own.missed
    # So is the claim of the victim a handover vacated for it, in the moment before
    # condor_now coalesces it for the flight (journaled at the flight's own time).
    victims = (*o2_jobs(), Job("1.2", "G1@gridfair.test", JobStatus.IDLE, T0 - 600,
                               request_cpus=2.0))
    handed = settle(Snapshot(T0 + 2, slot4(), victims), flights,
                    {("1.2", "slot4@vm"): T0}, 12.0)
    assert list(handed.held) == ["3.12"] and not handed.missed


def one_files_cycle(tmp_path: Path, backend: type[FilesBackend]) -> Store:
    """One cycle of a daemon on `backend` (a files backend reading its own snapshot), acting
    at once; its store, open."""
    raw = {"daemon": {"interval": 0.05, "store": "state.db", "query_timeout": 5.0},
           "backend": {"kind": "files", "files": {"directory": "pool",
                                                   "actions": "actions.jsonl"}},
           "safety": {"max_snapshot_age": 3600.0, "min_runtime": 0,
                      "preempt_cooldown": 0}}
    shutil.copytree(POOL, tmp_path / "pool", copy_function=shutil.copy)
    store = Store(tmp_path / "state.db")
    CycleRunner(validate(raw, base=tmp_path),
                backend(tmp_path / "pool", tmp_path / "actions.jsonl"), store).run()
    return store


def test_a_preemption_of_a_claim_with_no_job_is_not_carried_out_halfway(tmp_path):
    """reclaim gives O2 its machine back by preempting G1's idle claim (a stand-in: no job
    behind it). Nothing can vacate it, so the allocation paired with it must wait: carried
    out alone, it went to a machine with no room, cycle after cycle (Showcase 2)."""

    class Slot4(FilesBackend):
        def read_snapshot(self) -> Snapshot:
            self._last = Snapshot(self.now(), slot4(), o2_jobs())
            return self._last

    store = one_files_cycle(tmp_path, Slot4)
    decided = [(row["kind"], row["job"]) for row in store.db.query(
        "select kind, job from decisions order by seq")]
    assert decided == [("vacate", "claim@slot4_1@vm"), ("allocate", "3.12")]
    assert list(store.db.query("select * from actions")) == []
    assert not (tmp_path / "actions.jsonl").exists()
    store.close()


# ------------------------------------------- a handover's victim is no handover's receiver
def test_a_job_handed_over_as_a_victim_is_steered_not_handed_a_slot_in_the_same_cycle(
        tmp_path):
    """Seen live (Showcase 2): in one cycle the policy vacated O3's 4.11 for a handover on
    one machine and gave it O3's own machine by another; HTCondor's schedd crashed on the
    second condor_now (signal 11 in `send_vacate`). The second is carried out as a vacate of
    its victim and a steering of 4.11 instead, at the run count its schedd has for it now;
    the next cycle hands over again."""
    from gridfair.ad_views import PARTITIONABLE
    from gridfair.daemon.backends.htcondor import HTCondorBackend
    from gridfair.daemon.backends.htcondor.state import schedd_name
    from tests.test_backends import FakeCollector, FakeSchedd, _queues

    calls = tmp_path / "condor_now.log"
    program = tmp_path / "condor_now"
    program.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    program.chmod(0o755)
    FakeSchedd.queues = _queues()
    FakeSchedd.acted, FakeSchedd.edits = [], []
    backend = HTCondorBackend(FakeCollector(), schedd_factory=FakeSchedd, lease_knob="",
                              condor_now=str(program))
    snapshot = backend.read_snapshot()
    def schedd_of(job: Job) -> str:
        return schedd_name(backend.state.schedd_of[job.id])

    # Four jobs of one schedd (condor_now acts on one), the second victim running (the
    # fake schedd vacates only a running job).
    by_schedd: dict[str, list[Job]] = {}
    for each in snapshot.jobs:
        by_schedd.setdefault(schedd_of(each), []).append(each)
    jobs = next(jobs for jobs in by_schedd.values() if len(jobs) >= 4
                and any(job.status is JobStatus.RUNNING for job in jobs))
    second_victim = next(job for job in jobs if job.status is JobStatus.RUNNING)
    receiver, mover, first_victim = [job for job in jobs if job is not second_victim][:3]
    machine_a = Machine("slot1@a", "O2", 4000.0, 4.0, slot_type=PARTITIONABLE)
    machine_b = Machine("slot1@b", "O3", 4000.0, 4.0, slot_type=PARTITIONABLE)
    backend.handover([mover, first_victim], receiver, machine_a)
    # The mover ran: its schedd counts its run (a running job's count is not read).
    [mover_ad] = [ad for queue in FakeSchedd.queues.values() for ad in queue
                  if f"{ad['ClusterId']}.{ad['ProcId']}" == mover.id]
    mover_ad["JobRunCount"] = mover.run_count + 1
    refused = backend.handover([second_victim], mover, machine_b)
    assert refused is not None and "handed over as a victim in this cycle" in refused
    assert calls.read_text().split("\n")[0].split()[-3:] == [receiver.id, mover.id,
                                                              first_victim.id]
    assert len(calls.read_text().splitlines()) == 1  # no condor_now for the mover
    assert [ids for action, ids in FakeSchedd.acted
            if action == htcondor2.JobAction.Vacate] == [[second_victim.id]]
    assert ([mover.id], "GridfairSlot", '"slot1@b"') in FakeSchedd.edits
    # Steered at the run it starts as, or the pool's gate would take none of its runs.
    assert ([mover.id], "GridfairSteerRunCount", str(mover.run_count + 1)) in FakeSchedd.edits
    backend.actions_done()  # the next cycle: a handover to it again
    backend.handover([second_victim], mover, machine_b)
    assert len(calls.read_text().splitlines()) == 2


@pytest.mark.parametrize("refused", [None, "4.11 was handed over as a victim in this cycle"])
def test_a_handover_carried_out_as_a_steering_is_journaled_as_one(tmp_path, refused):
    """The journal said "handed over" of a handover the backend carried out as a vacate and a
    steering (its receiver a victim of this cycle's other handover): it says "steered
    (handover refused: ...)" of the allocation and "vacated (...)" of its victim."""
    import threading

    from gridfair.daemon.actuator import Actuator
    from gridfair.daemon.backends import PoolBackend
    from gridfair.daemon.faults import FaultPoints
    from gridfair.daemon.journal import PlannedAction
    from gridfair.daemon.metrics import NullMetrics

    class Handing(PoolBackend):
        name = "handing"
        leases = False

        def read_snapshot(self) -> Snapshot:
            raise NotImplementedError

        def vacate(self, job_ids):
            raise NotImplementedError

        def allocate(self, job, machine):
            raise NotImplementedError

        def can_hand_over(self, machine: Machine) -> bool:
            return True

        def handover(self, victims, job, machine) -> str | None:
            return refused

    store = Store(tmp_path / "state.db")
    machine = Machine("slot6@vm", "O3", 4000.0, 4.0)
    victim = Job("3.4", "G1", JobStatus.RUNNING, 1.0, machine="slot6@vm")
    mover = Job("4.11", "O3", JobStatus.IDLE, 1.0)
    planned = [PlannedAction("vacate:3.4", "vacate", victim, machine),
               PlannedAction("allocate:4.11", "allocate", mover, machine)]
    with store.transaction("plan") as db:
        store.plan_actions(db, [{"key": a.key, "kind": a.kind, "job": a.job.id,
                                 "user": a.job.user, "machine": machine.name,
                                 "reason": "test"} for a in planned], 1, 0.0)
    actuator = Actuator(Handing(), store, NullMetrics(), FaultPoints(None, store.path),
                        threading.Event(), lease=0.0, interval=2.0)
    assert actuator.carry_out(1, 1, planned) == (2, 0, 0)
    notes = {row["key"]: row["note"] for row in store.db.query(
        "select key, note from action_log where state = 'confirmed'")}
    if refused is None:
        assert notes == {"vacate:3.4": "handed over", "allocate:4.11": "handed over"}
    else:
        assert notes == {"vacate:3.4": f"vacated (handover refused: {refused})",
                         "allocate:4.11": f"steered (handover refused: {refused})"}
    store.close()


def test_a_cycle_journals_each_orphaned_claim_the_backend_released(tmp_path):
    """The backend releases the claims a restarted schedd left idle (orphan_claims) in each
    cycle that acts; the cycle's events carry each release's line, with its figures."""
    line = ("slot4_1@vm: idle claim of G1@gridfair.test released: claimed at 1795929969, idle "
            "with no job for 86 s (bound 30 s), ...")

    class Releasing(FilesBackend):
        def read_snapshot(self) -> Snapshot:
            return Snapshot(self.now(), slot4(), o2_jobs())

        def release_orphaned_claims(self) -> list[str]:
            return [line]

    store = one_files_cycle(tmp_path, Releasing)
    [events] = [json.loads(row["events"]) for row in store.db.query("select events from cycles")]
    assert line in events["notes"]
    store.close()


# --------------------------------------------------------------- what a kept settle may skip
# Issue 49: a steady cycle settles every flight (32,368 at 50,000 slots) though only those
# whose job or slot changed, or whose timeout passed, can change state. A kept in-flight
# table may settle those alone only while this holds: on random change sequences, every
# flight outside that set is held, as it was.
FLIGHTS = 6
CHANGES = st.sampled_from(["lands", "starts elsewhere", "leaves the queue", "is held",
                           "slot taken by another", "slot gone", "victim leaves",
                           "victim back", "nothing"])


def _pool(flights: int) -> tuple[dict[str, Machine], dict[str, Job], list[Flight], dict]:
    """Slot i runs victim i.90, vacated for flight i.0 (confirmed at T0 + i/10)."""
    machines = {f"slot{i}@h": slot(f"slot{i}@h", f"{i}.90", "User2") for i in range(flights)}
    jobs = {**{f"{i}.0": job(f"{i}.0", "User1") for i in range(flights)},
            **{f"{i}.90": job(f"{i}.90", "User2", on=f"slot{i}@h", start=T0 - 50)
               for i in range(flights)}}
    steered = [flight(f"{i}.0", f"slot{i}@h", at=T0 + i / 10) for i in range(flights)]
    vacated = {(f"{i}.90", f"slot{i}@h"): T0 + i / 10 for i in range(flights)}
    return machines, jobs, steered, vacated


def _change(what: str, i: int, now: float, machines: dict[str, Machine],
            jobs: dict[str, Job]) -> None:
    name, own, victim = f"slot{i}@h", f"{i}.0", f"{i}.90"
    if what == "lands" and name in machines:
        machines[name] = slot(name, own, "User1")
        jobs[own] = job(own, "User1", on=name, start=now)
    elif what == "starts elsewhere":
        jobs[own] = job(own, "User1", on="elsewhere@h", start=now)
        machines["elsewhere@h"] = slot("elsewhere@h", own, "User1")
    elif what == "leaves the queue":
        jobs.pop(own, None)
    elif what == "is held" and own in jobs:
        jobs[own] = dataclasses.replace(jobs[own], status=JobStatus.HELD)
    elif what == "slot taken by another" and name in machines:
        machines[name] = slot(name, f"{i}.91", "User3")
        jobs[f"{i}.91"] = job(f"{i}.91", "User3", on=name, start=now)
    elif what == "slot gone":
        machines.pop(name, None)
    elif what == "victim leaves" and name in machines and machines[name].running_job == victim:
        machines[name] = slot(name)
        jobs[victim] = job(victim, "User2")
    elif what == "victim back" and name in machines:  # matched straight back: a new run
        machines[name] = slot(name, victim, "User2")
        jobs[victim] = job(victim, "User2", on=name, start=now)


def _must_settle(flights: list[Flight], before: Snapshot, after: Snapshot,
                 timeout: float) -> set[str]:
    """The flights (by job) a kept settle must look at: their job, their slot or the job
    on their slot (a victim matched straight back is a new run of it, the slot's ad the
    same) changed between the snapshots, or their timeout (or their acceptance) fell
    between the two."""
    def changed(old: dict, new: dict, key: str | None) -> bool:
        return key is not None and old.get(key) != new.get(key)

    def occupant(snapshot: Snapshot, name: str) -> str | None:
        machine = snapshot.machines_by_name.get(name)
        return machine.running_job if machine is not None else None

    return {flight.job for flight in flights
            if changed(before.jobs_by_id, after.jobs_by_id, flight.job)
            or changed(before.machines_by_name, after.machines_by_name, flight.machine)
            or changed(before.jobs_by_id, after.jobs_by_id, occupant(after, flight.machine))
            or before.time <= flight.confirmed + timeout < after.time  # waited > timeout
            or before.time < flight.confirmed <= after.time}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.lists(st.tuples(CHANGES, st.integers(0, FLIGHTS - 1)),
                                   max_size=3),
                          st.sampled_from([0.5, 1.0, 2.0, 3.5])), min_size=1, max_size=8))
def test_a_flight_whose_job_and_slot_did_not_change_stays_held(cycles):
    """Each cycle settles the flights the last left in flight (the journal's confirmed
    rows); those whose job and slot are as before and whose timeout did not pass in between
    are held again, so a kept table needs to settle only the rest."""
    machines, jobs, flights, vacated = _pool(FLIGHTS)
    now = T0 + 1
    before = Snapshot(now, tuple(machines.values()), tuple(jobs.values()))
    flights = list(settle(before, flights, vacated, TIMEOUT).held.values())
    for changes, step in cycles:
        now += step
        for what, i in changes:
            _change(what, i, now, machines, jobs)
        after = Snapshot(now, tuple(machines.values()), tuple(jobs.values()))
        result = settle(after, flights, vacated, TIMEOUT)
        looked_at = _must_settle(flights, before, after, TIMEOUT)
        assert {flight.job for flight in flights} - looked_at <= result.held.keys()
        flights, before = list(result.held.values()), after
