"""Landing backoff (issue 43, attack 2): a job whose allocations do not land stops being a
reason to hold slots or preempt, and so does a user whose jobs keep not landing."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridfair.ad_views import Job, JobStatus, Snapshot
from gridfair.daemon.backoff import (
    CAP,
    USER_STREAK,
    landing_backoff,
    newly_backed,
    without_backed_off,
)
from gridfair.daemon.store import FAILED, LANDED, Store

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
