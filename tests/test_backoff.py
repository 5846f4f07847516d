"""Landing backoff (issue 43, attack 2): a job whose allocations do not land stops being a
reason to hold slots or preempt, and so does a user whose jobs keep not landing."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridfair.ad_views import DYNAMIC, PARTITIONABLE, Job, JobStatus, Machine, Snapshot
from gridfair.classads.to_pool import pool_from_snapshot
from gridfair.core.stages import ALLOCATE
from gridfair.daemon.backoff import (
    CAP,
    SET_ASIDE,
    USER_STREAK,
    landing_backoff,
    newly_backed,
    without_backed_off,
)
from gridfair.daemon.store import FAILED, LANDED, Store
from gridfair.policies.registry import build_stages

BASE = 120.0  # landing_timeout
NOW = 1_000_000.0
NOT_STARTED = "not landed: not started within 120 s (waited 121 s)"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "state.db")


def journal(store: Store, job: str, user: str, state: str, at: float,
            error: str | None = NOT_STARTED) -> None:
    store.db["actions"].insert({"key": f"allocate:{job}:{at}:{state}", "kind": "allocate",
                                "job": job, "user": user, "machine": "slot1@h", "state": state,
                                "updated_at": at, "error": error if state == FAILED else None})


def idle(job: str, user: str, qdate: float = 0.0) -> Job:
    return Job(job, user, JobStatus.IDLE, qdate)


def test_a_job_that_does_not_land_is_backed_off_longer_each_time(store: Store) -> None:
    journal(store, "1.0", "mallory", FAILED, NOW - 10)
    assert landing_backoff(store, NOW, BASE).jobs["1.0"].until == NOW - 10 + BASE
    journal(store, "1.0", "mallory", FAILED, NOW - 5)
    journal(store, "1.0", "mallory", FAILED, NOW - 1)
    backed = landing_backoff(store, NOW, BASE).jobs["1.0"]
    assert (backed.failures, backed.until) == (3, NOW - 1 + 4 * BASE)
    for at in range(20):
        journal(store, "1.0", "mallory", FAILED, NOW - 1 + (at + 1) / 100)
    assert landing_backoff(store, NOW, BASE).jobs["1.0"].until <= NOW + CAP


def test_a_failure_that_is_not_the_jobs_doing_does_not_count(store: Store) -> None:
    journal(store, "1.0", "alice", FAILED, NOW - 1, "not landed: slot slot1@h is gone")
    assert not landing_backoff(store, NOW, BASE)


def test_many_jobs_failing_once_back_their_user_off_then_one_job_probes(store: Store) -> None:
    """Each of mallory's jobs failed once: the jobs' own backoffs are short, the user's
    grows with the count; past it, one job at a time is steered until one lands."""
    for index in range(6):
        journal(store, f"{index}.0", "mallory", FAILED, NOW - 1000 + index)
    journal(store, "9.0", "alice", FAILED, NOW - 1000)
    backoff = landing_backoff(store, NOW, BASE)
    assert set(backoff.users) == {"mallory"}  # alice: one failure, no streak
    assert backoff.users["mallory"].until == NOW - 995 + min(CAP, BASE * 2 ** (6 - USER_STREAK))
    jobs = (idle("7.0", "mallory", 5.0), idle("8.0", "mallory", 3.0), idle("9.0", "alice"),
            idle("10.0", "alice"))
    view = without_backed_off(Snapshot(NOW, (), jobs), backoff)
    assert [job.id for job in view.jobs] == ["9.0", "10.0"]  # 9.0's own backoff is over
    assert {skip.name for skip in view.skipped} == {"7.0", "8.0"}
    later = landing_backoff(store, NOW + CAP, BASE)
    assert "mallory" not in later.users and "mallory" in later.probing
    probe = without_backed_off(Snapshot(NOW + CAP, (), jobs), later)
    assert [job.id for job in probe.jobs] == ["8.0", "9.0", "10.0"]  # mallory's first only
    journal(store, "8.0", "mallory", LANDED, NOW + CAP + 1, None)
    assert "mallory" not in landing_backoff(store, NOW + CAP + 2, BASE).probing


def test_each_backoff_is_noted_once(store: Store) -> None:
    journal(store, "1.0", "mallory", FAILED, NOW - 1)
    known: set[str] = set()
    first = list(newly_backed(landing_backoff(store, NOW, BASE), known))
    assert len(first) == 1 and "job 1.0" in first[0]
    assert list(newly_backed(landing_backoff(store, NOW, BASE), known)) == []


def test_a_user_with_thousands_of_jobs_that_did_not_land_is_backed_off_for_the_cap(
        store: Store) -> None:
    """A cycle's 30,000 allocations that all timed out (a pool of files, where nothing
    starts) back their user off for the cap, not an overflow that fails every cycle."""
    store.db["actions"].insert_all(
        {"key": f"allocate:{index}.0:{NOW - 1}:{FAILED}", "kind": "allocate",
         "job": f"{index}.0", "user": "mallory", "machine": "slot1@h", "state": FAILED,
         "updated_at": NOW - 1, "error": NOT_STARTED} for index in range(1100))
    assert landing_backoff(store, NOW, BASE).users["mallory"].until == NOW - 1 + CAP


# ---------------------------------------------------------------------- machines set aside
def failed_on(store: Store, machine: str, job: str, user: str, at: float,
              error: str = NOT_STARTED, state: str = FAILED) -> None:
    store.db["actions"].insert({"key": f"allocate:{job}@{machine}:{at}", "kind": "allocate",
                                "job": job, "user": user, "machine": machine, "state": state,
                                "updated_at": at, "error": error if state == FAILED else None})


def pool_pair() -> tuple[Machine, ...]:
    """Two 4-cpu partitionable slots, the first running bob's 2-cpu job."""
    return (Machine("slot1@h", "owner", 400.0, 4.0, 8192.0, slot_type=PARTITIONABLE),
            Machine("slot1_1@h", "owner", 200.0, 2.0, 1024.0, state="Claimed",
                    activity="Busy", running_job="1.0", running_user="bob",
                    slot_type=DYNAMIC),
            Machine("slot2@h", "owner", 400.0, 4.0, 8192.0, slot_type=PARTITIONABLE))


def allocated_to(snapshot: Snapshot) -> dict[str, str]:
    """Job -> the slot the negotiator allocates it, on `snapshot`."""
    loaded = pool_from_snapshot(snapshot, build_stages("hosep"))
    return {decision.task.id: decision.node.name
            for decision in loaded.negotiator.cycle(snapshot.time)
            if decision.kind == ALLOCATE}


def test_a_machine_where_starts_keep_failing_is_set_aside_longer_each_time(
        store: Store) -> None:
    """Seen live (Showcase 2): seven allocations in a row of three users to one machine timed
    out, and each cycle chose it again. From MACHINE_STREAK failures of two users on, no job
    is steered there for a time that doubles with each failure; a landing there ends it."""
    failed_on(store, "slot1@h", "3.8", "O2", NOW - 30)
    failed_on(store, "slot1@h", "6.6", "O4", NOW - 20,
              "not landed: slot1@h has no room for 2 CPUs and 512 MiB (left: 0 CPUs, 0 MiB)")
    assert not landing_backoff(store, NOW, BASE).machines  # two failures: no streak yet
    failed_on(store, "slot1@h", "2.0", "G2", NOW - 10)
    aside = landing_backoff(store, NOW, BASE).machines["slot1@h"]
    assert (aside.failures, aside.users, aside.until) == (3, 3, NOW - 10 + BASE)
    failed_on(store, "slot1@h", "3.12", "O2", NOW - 5)
    assert landing_backoff(store, NOW, BASE).machines["slot1@h"].until == NOW - 5 + 2 * BASE
    assert not landing_backoff(store, NOW - 5 + 2 * BASE, BASE).machines  # over
    failed_on(store, "slot2@h", "3.20", "O2", NOW - 4, state=LANDED)  # elsewhere: no matter
    assert "slot1@h" in landing_backoff(store, NOW, BASE).machines
    failed_on(store, "slot1@h", "3.24", "O2", NOW - 3, state=LANDED)
    assert not landing_backoff(store, NOW, BASE).machines


def test_a_machine_set_aside_takes_no_new_job_and_keeps_what_runs_there(store: Store) -> None:
    snapshot = Snapshot(NOW, pool_pair(), (Job("1.0", "bob", JobStatus.RUNNING, 0.0,
                                               request_cpus=2.0, machine="slot1_1@h",
                                               start_time=NOW - 50),
                                           idle("2.0", "alice", 1.0)))
    assert allocated_to(snapshot) == {"2.0": "slot1@h"}  # the first machine with room
    for at, (job, user) in enumerate((("3.0", "carol"), ("4.0", "dave"), ("5.0", "carol"))):
        failed_on(store, "slot1@h", job, user, NOW - 10 + at)
    backoff = landing_backoff(store, NOW, BASE)
    view = without_backed_off(snapshot, backoff)
    assert view.machines_by_name["slot1@h"].state == SET_ASIDE
    assert view.machines_by_name["slot1_1@h"] == snapshot.machines_by_name["slot1_1@h"]
    assert view.jobs == snapshot.jobs
    assert allocated_to(view) == {"2.0": "slot2@h"}
    [note] = [note for note in newly_backed(backoff, set()) if "slot1@h" in note]
    assert "3 allocation(s) in a row" in note and "of 2 users" in note


def test_one_users_jobs_that_refuse_a_machine_do_not_set_it_aside_against_its_owner(
        store: Store) -> None:
    """mallory's jobs read the time (or TARGET) and refuse to start on the owner's machine
    once steered there: each times out as if the machine had failed. However many, they are
    one user's: the machine stays open to its owner and everyone else."""
    for index in range(12):
        failed_on(store, "slot1@h", f"{index}.0", "mallory", NOW - 100 + index)
    assert not landing_backoff(store, NOW, BASE).machines
    running = Job("1.0", "bob", JobStatus.RUNNING, 0.0, request_cpus=2.0, machine="slot1_1@h",
                  start_time=NOW - 50)
    view = without_backed_off(Snapshot(NOW, pool_pair(), (running, idle("20.0", "owner"))),
                              landing_backoff(store, NOW, BASE))
    assert allocated_to(view) == {"20.0": "slot1@h"}


def test_a_machine_stays_set_aside_across_a_restart(tmp_path: Path) -> None:
    """The streak is read from the journal, as the job and user backoffs are."""
    store = Store(tmp_path / "state.db")
    for at, user in enumerate(("O2", "O4", "G2")):
        failed_on(store, "slot1@h", f"{at}.0", user, NOW - 10 + at)
    store.close()
    again = Store(tmp_path / "state.db")
    assert set(landing_backoff(again, NOW, BASE).machines) == {"slot1@h"}
    again.close()
