"""The gridfair daemon SIGKILLed mid-cycle on a live pool, then restarted: no vacate issued
twice, none lost, every journaled vacate is an eviction in the pool, and the restart confirms
each one it issued before the kill (HTCondor restarts an evicted job within seconds, often on
the same slot: the job's newer start is the evidence)."""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path

from tests.live.conftest import POOL_CONFIG, QUICK_SAFETY, own_pool, run_daemon, write_daemon_config
from tests.live.harness.personal_pool import JobSpec, PersonalPool, SlotSpec

LONG = 132250 * 600


def test_sigkill_after_a_vacate_then_restart(clean_queue: PersonalPool, daemon_python: Path,
                                             daemon_dir: Path) -> None:
    pool = clean_queue
    ids = pool.submit([JobSpec("User2", LONG)] * 4)  # User2 holds every slot, User1's too
    pool.wait_until(lambda: set(pool.running()) == set(ids), 30)
    pool.submit([JobSpec("User1", LONG)] * 2)
    write_daemon_config(daemon_dir, pool,
                        daemon={"interval": 1},
                        safety={**QUICK_SAFETY, "preempt_cooldown": 3600})
    crashed = run_daemon(daemon_python, pool, daemon_dir, "--once", fault="crash:after_vacate")
    assert crashed.returncode == -signal.SIGKILL
    with sqlite3.connect(daemon_dir / "state.db") as db:
        before = {row[0] for row in db.execute("select key from actions")}
    restarted = run_daemon(daemon_python, pool, daemon_dir, "--cycles", "1")
    assert restarted.returncode == 0, restarted.stderr
    with sqlite3.connect(daemon_dir / "state.db") as db:
        actions = list(db.execute("select key, kind, job, state, error from actions"))
    assert before <= {key for key, *_ in actions}  # none lost
    assert actions, restarted.stderr
    assert {state for *_, state, _ in actions} <= {"confirmed", "failed", "abandoned"}
    vacated = [job for _, kind, job, *_ in actions if kind == "vacate"]
    assert vacated and len(vacated) == len(set(vacated)), actions  # none issued twice
    assert all(state == "confirmed" for _, kind, _, state, _ in actions if kind == "vacate")
    # In the pool: each of them evicted exactly once (started twice at most), none other.
    clusters = " || ".join(f"ClusterId == {job.split('.')[0]}" for job in vacated)
    seen = pool.jobs("ClusterId", "NumJobStarts",
                     constraint=f"({clusters}) && LastVacateTime =!= undefined")
    assert len(seen) == len(vacated) and all(int(starts) <= 2 for _, starts in seen)
    others = pool.jobs("ClusterId", constraint=f"!({clusters}) && LastVacateTime =!= undefined")
    assert others == []


def test_allocations_land_on_their_slots_and_are_journaled(
        clean_queue: PersonalPool, daemon_python: Path, daemon_dir: Path) -> None:
    """User2 holds every slot, User1 arrives: the daemon vacates for User1 and steers its jobs
    to the freed slots; the next cycles see them running there and journal each allocation
    `landed`."""
    pool = clean_queue
    fillers = pool.submit([JobSpec("User2", LONG)] * 4)
    pool.wait_until(lambda: set(pool.running()) == set(fillers), 30)
    arrivals = pool.submit([JobSpec("User1", LONG)] * 2)
    write_daemon_config(daemon_dir, pool, daemon={"interval": 2}, safety=QUICK_SAFETY)
    done = run_daemon(daemon_python, pool, daemon_dir, "--cycles", "6")
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(daemon_dir / "state.db") as db:
        actions = list(db.execute("select kind, job, machine, state, error from actions"))
    allocations = {job: (machine, state) for kind, job, machine, state, _ in actions
                   if kind == "allocate"}
    assert set(allocations) == set(arrivals), actions
    assert {state for _, state in allocations.values()} == {"landed"}, actions
    running = pool.running_on_nodes()
    assert {job: running.get(job) for job in arrivals} == {
        job: machine for job, (machine, _) in allocations.items()}
    vacated = [job for kind, job, _, state, _ in actions if kind == "vacate"]
    assert len(vacated) == 2 and all(state == "confirmed" for kind, *_, state, _ in actions
                                     if kind == "vacate")


def test_a_schedd_refusing_the_edit_is_a_named_journaled_failure(daemon_python: Path,
                                                                  daemon_dir: Path) -> None:
    """A schedd that refuses to change the steering attribute (an administrator listed it in
    IMMUTABLE_JOB_ATTRS, and the job carries it): the daemon's allocation fails with the
    schedd's refusal, journaled and retryable, and the job is left as it was. (The attribute is
    one the slots' START does not read, so the job still matches.)"""
    pool = own_pool([SlotSpec("User1", 100.0)],
                    extra_config=[*POOL_CONFIG.read_text().splitlines(),
                                  "IMMUTABLE_JOB_ATTRS = $(IMMUTABLE_JOB_ATTRS) GridfairPin",
                                  "NEGOTIATOR_JOB_CONSTRAINT = False"])
    with pool:
        # NEGOTIATOR_JOB_CONSTRAINT = False: HTCondor matches nothing by itself here.
        [job] = pool.submit([JobSpec("User1", 100.0 * 600)], extra=['+GridfairPin = "none"'])
        write_daemon_config(daemon_dir, pool, htcondor={"steer_attribute": "GridfairPin"})
        done = run_daemon(daemon_python, pool, daemon_dir, "--once")
        assert done.returncode == 0, done.stderr
        with sqlite3.connect(daemon_dir / "state.db") as db:
            actions = list(db.execute("select kind, job, state, retryable, error from actions"))
        pinned = pool.jobs("GridfairPin", constraint=f"ClusterId == {job.split('.')[0]}")
    [(kind, job_id, state, retryable, error)] = actions
    assert (kind, job_id, state, retryable) == ("allocate", job, "failed", 1)
    assert error.startswith(f"schedd refused the edit of {job}: "), error
    assert pinned == [["none"]]


def test_an_allocation_that_never_starts_is_released_as_not_landed(daemon_python: Path,
                                                                    daemon_dir: Path) -> None:
    """A pool whose negotiator matches nothing (NEGOTIATOR_JOB_CONSTRAINT = False): the
    daemon's allocation holds its slot for `landing_timeout`, is then journaled "not landed",
    and its steering is withdrawn (GridfairSlot undefined again), so HTCondor could start the
    job anywhere."""
    pool = own_pool([SlotSpec("User1", 100.0)],
                    extra_config=[*POOL_CONFIG.read_text().splitlines(),
                                  "NEGOTIATOR_JOB_CONSTRAINT = False"])
    with pool:
        [job] = pool.submit([JobSpec("User1", 100.0 * 600)])
        write_daemon_config(daemon_dir, pool,
                            daemon={"interval": 1},
                            safety={"landing_timeout": 3, "max_retries": 0})
        done = run_daemon(daemon_python, pool, daemon_dir, "--cycles", "7")
        assert done.returncode == 0, done.stderr
        with sqlite3.connect(daemon_dir / "state.db") as db:
            actions = list(db.execute("select kind, job, state, error from actions"))
            log = [state for (state,) in db.execute("select state from action_log")]
        steered = pool.jobs("ClusterId", constraint=f"ClusterId == {job.split('.')[0]} && "
                            "GridfairSlot =!= undefined")
    [(kind, job_id, state, error)] = actions
    assert (kind, job_id, state) == ("allocate", job, "failed")
    assert error.startswith("not landed: not started within 3 s"), error
    assert log == ["planned", "issued", "confirmed", "failed"]
    assert steered == []
