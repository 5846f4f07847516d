"""Issue 44 with 43, live: an ordinary account attacks a steering ahead, over time.

gridfair's lease is held and the shipped pool configuration keeps claims. The attacker's job
runs on the one slot and her next job is steered ahead to that busy slot (as the daemon's
`AheadSteerings` writes it); then, while the claim is kept, she holds and releases the job
steered ahead, edits it (its request beyond the slot, Requirements reading TARGET or time,
the protected steering and run count), submits a burst of jobs of higher JobPrio, removes or
vacates her running job early, or removes the job steered ahead and submits it again. The
invariant each time: the only job that starts on the kept claim is the one live-steered
there for that run, and a claim with no such job is released (the slot Unclaimed, measured
from the running job's end)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gridfair.classads.submitters import SubmitterMap
from gridfair.classads.to_pool import pool_from_snapshot
from gridfair.daemon.backends.htcondor import HTCondorBackend
from gridfair.daemon.steer_ahead import AheadSteerings
from gridfair.policies.registry import build_stages
from tests.live.conftest import POOL_CONFIG, own_pool, run_daemon, write_daemon_config
from tests.live.harness.personal_pool import UID_DOMAIN, PersonalPool, SlotSpec
from tests.live.test_security_live import ATTACKER, first_job

MFLOPS = 1000.0
RUNS = 5  # seconds the attacker's running job lasts when left alone (2 s ended it before
#          the attack was played, under load)
PROTECTED = ("GridfairSlot", "GridfairSlotSize", "GridfairSteerRunCount", "GridfairSteerUntil",
             "JobRunCount")


@pytest.fixture(scope="module")
def pool() -> Iterator[PersonalPool]:
    with own_pool([SlotSpec("Absent", MFLOPS)],
                  extra_config=POOL_CONFIG.read_text().splitlines()) as pool:
        yield pool


def submit(pool: PersonalPool, seconds: int, *commands: str) -> str:
    done = pool.submit_as(ATTACKER, ["executable = /bin/sleep", f"arguments = {seconds}",
                                     *commands])
    assert done.returncode == 0, done.stderr
    return first_job(done)


def starts(pool: PersonalPool, job_ids: list[str]) -> dict[str, int]:
    """How many times each job started, from the queue and the schedd's history."""
    constraint = " || ".join(f"(ClusterId == {job.split('.')[0]})" for job in job_ids)
    counted = {job: 0 for job in job_ids}
    ads = [*pool.schedd().query(constraint, ["ClusterId", "ProcId", "NumJobStarts"]),
           *pool.schedd().history(constraint, ["ClusterId", "ProcId", "NumJobStarts"])]
    for ad in ads:
        job = f"{ad['ClusterId']}.{ad['ProcId']}"
        counted[job] = max(counted.get(job, 0), int(ad.get("NumJobStarts", 0)))
    return counted


def slot_state(pool: PersonalPool) -> str:
    [[state]] = pool.status("State")
    return state


class Scene:
    """The attacker's job `current` running on the slot, `ahead` steered ahead to it."""

    def __init__(self, pool: PersonalPool, runs: int = RUNS) -> None:
        pool.clear_queue()
        self.pool = pool
        self.live = HTCondorBackend.connect(pool.collector_host,
                                            submitters=SubmitterMap(UID_DOMAIN))
        self.live.hold_starts(time.time() + 300)
        self.current = submit(pool, runs)
        snapshot = self.live.read_snapshot()
        [self.slot] = snapshot.machines
        self.live.allocate(snapshot.jobs_by_id[self.current], self.slot)
        self.live.actions_done()
        pool.wait_until(lambda: self.current in pool.running(), 30)
        self.ahead = submit(pool, 600)
        self.others: list[str] = []
        snapshot = self.live.read_snapshot()
        assert self.live.steer_ahead([(snapshot.jobs_by_id[self.ahead], self.slot)]) == [None]

    def __enter__(self) -> Scene:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.live.release_starts()
        self.pool.clear_queue()

    def claim_started(self, attack: str) -> str | None:
        """`outcome`'s job, its figure printed."""
        started, after = self.outcome()
        print(f"{attack}: {started or 'claim released'} {after:.1f} s after the job's end")
        return started

    def qedit(self, job: str, attribute: str, value: str) -> int:
        return self.pool.run_tool(["condor_qedit", job, attribute, value], account=ATTACKER,
                                  check=False).returncode

    def outcome(self) -> tuple[str | None, float]:
        """Once the running job is gone: the job the claim started (None: the claim was
        released), and how long after the running job's end."""
        pool = self.pool
        pool.wait_until(lambda: self.current not in pool.running()
                        and (pool.running() or slot_state(pool) == "Unclaimed"), 40)
        seen = time.time()
        cluster = f"ClusterId == {self.current.split('.')[0]}"
        ends = ["CompletionDate", "EnteredCurrentStatus"]
        [ended] = [*pool.schedd().history(cluster, ends), *pool.schedd().query(cluster, ends)]
        end = ended.get("CompletionDate") or ended["EnteredCurrentStatus"]
        # A start on the released slot takes a negotiation; a start's count, a moment.
        time.sleep(1 if pool.running() else pool.interval + 1)
        started = {job for job, count in starts(pool, [self.ahead, *self.others]).items()
                   if count} | (set(pool.running()) - {self.current})
        assert len(started) <= 1, started
        assert starts(pool, [self.current])[self.current] == 1
        return (started.pop() if started else None), seen - end


ATTACKS: dict[str, Callable[[Scene], str | None]] = {}


def attack(expected: str) -> Callable[[Callable[[Scene], None]], Callable[[Scene], None]]:
    """Register an attack; `expected`: "ahead" (the job steered ahead starts on the claim, as
    gridfair decided) or "released" (nothing starts: the claim ends)."""
    def register(play: Callable[[Scene], None]) -> Callable[[Scene], None]:
        ATTACKS[play.__name__] = lambda scene: (play(scene), expected)[1]
        return play
    return register


@attack("ahead")
def hold_release_edit_the_steering_and_burst(scene: Scene) -> None:
    """Each leaves the steering as gridfair wrote it (one scene: the file's time)."""
    scene.pool.run_tool(["condor_hold", scene.ahead], account=ATTACKER)
    scene.pool.run_tool(["condor_release", scene.ahead], account=ATTACKER)
    values = {"GridfairSlot": '"slot9@vm"', "GridfairSlotSize": "{64, 1000000, 8}",
              "GridfairSteerRunCount": "0", "GridfairSteerUntil": "9999999999",
              "JobRunCount": "0"}
    refused = {name: scene.qedit(job, name, values[name]) != 0
               for name in PROTECTED for job in (scene.ahead, scene.current)}
    assert all(refused.values()), refused
    assert scene.qedit(scene.ahead, "JobPrio", "0") == 0
    # Her running job's request, edited beyond the slot, is not what gridfair charges her:
    # a static slot's claim counts as the whole slot, whatever the job asks.
    for name, value in (("RequestCpus", "64"), ("RequestMemory", "100000000")):
        assert scene.qedit(scene.current, name, value) == 0
    snapshot = scene.live.read_snapshot()
    task = pool_from_snapshot(snapshot, build_stages("reclaim")).pool.tasks[scene.current]
    assert (task.cpus, task.memory) == (scene.slot.cpus, scene.slot.memory)
    done = scene.pool.submit_as(ATTACKER, ["executable = /bin/sleep", "arguments = 600",
                                           "priority = 20"], count=3)
    assert done.returncode == 0, done.stderr
    cluster = first_job(done).split(".")[0]
    scene.others += [f"{cluster}.{proc}" for proc in range(3)]


@attack("ahead")
def remove_the_running_job_early(scene: Scene) -> None:
    scene.pool.run_tool(["condor_rm", scene.current], account=ATTACKER)


@attack("ahead")
def vacate_the_running_job(scene: Scene) -> None:
    scene.pool.run_tool(["condor_vacate_job", scene.current], account=ATTACKER)
    # The vacated job's own steering was spent by its start: it never starts again
    # (`Scene.outcome` checks it started once).


@attack("released")
def remove_and_resubmit(scene: Scene) -> None:
    scene.pool.run_tool(["condor_rm", scene.ahead], account=ATTACKER)
    scene.others.append(submit(scene.pool, 600))


@attack("released")
def request_beyond_the_slot(scene: Scene) -> None:
    assert scene.qedit(scene.ahead, "RequestMemory", "100000000") == 0


@attack("released")
def requirements_read_target(scene: Scene) -> None:
    assert scene.qedit(scene.ahead, "Requirements", f'TARGET.Name =!= "{scene.slot.name}"') == 0


@attack("released")
def requirements_change_with_time(scene: Scene) -> None:
    # True when edited, false once the running job ends.
    assert scene.qedit(scene.ahead, "Requirements", f"time() < {int(time.time()) + 1}") == 0
    if scene.current not in scene.pool.running():  # its claim took the job while it matched
        pytest.skip("the attacker's running job ended before its Requirements turned false "
                    "(a loaded machine): the scene did not happen")


@pytest.mark.parametrize("name", list(ATTACKS))
def test_only_the_job_steered_ahead_starts_on_a_kept_claim(pool: PersonalPool,
                                                           name: str) -> None:
    with Scene(pool) as scene:
        expected = ATTACKS[name](scene)
        started = scene.claim_started(name)
    assert started == (scene.ahead if expected == "ahead" else None), (name, started)


def steering(pool: PersonalPool, job: str) -> str:
    cluster, proc = job.split(".")
    [[slot]] = pool.jobs("GridfairSlot", constraint=f"ClusterId == {cluster} && ProcId == {proc}")
    return slot


def test_a_job_steered_ahead_then_held_is_withdrawn_and_released_takes_no_claim(
        pool: PersonalPool) -> None:
    """The attacker holds the job steered ahead before a cycle: the snapshot (idle and
    running jobs) no longer shows it, and the policy no longer wants it there. The cycle
    withdraws it all the same; released after, it does not start on the kept claim, which
    is released. (Before, the cycle forgot a job it did not see: released within the
    steering's life, it took the claim whatever the policy decided.)"""
    with Scene(pool, runs=10) as scene:  # released while its claim is still kept
        ahead = AheadSteerings(120.0, {scene.ahead: (scene.slot.name, time.time() + 120)})
        pool.run_tool(["condor_hold", scene.ahead], account=ATTACKER)
        pool.wait_until(lambda: pool.jobs("JobStatus", constraint="JobStatus == 5"), 20)
        snapshot = scene.live.read_snapshot()
        assert scene.ahead not in snapshot.jobs_by_id
        ahead.withdraw(scene.live, ahead.stale([], set(), snapshot))
        assert steering(pool, scene.ahead) == "undefined"
        pool.run_tool(["condor_release", scene.ahead], account=ATTACKER)
        started = scene.claim_started("held and released")
    assert started is None


def test_a_restarted_daemon_s_first_cycle_withdraws_what_it_no_longer_wants(
        pool: PersonalPool, daemon_python: Path, daemon_dir: Path) -> None:
    """A daemon before this one steered the attacker's next job ahead and another of hers,
    held since, then stopped; she has edited the first so that it no longer matches the
    slot. The daemon started again (its account, `--once`, a store of its own: nothing in
    flight) finds both steerings on the jobs at its first cycle and, steering neither,
    withdraws them: the held job, released, does not start on the kept claim either, which
    is released. (Before, both were forgotten until they expired.)"""
    with Scene(pool, runs=15) as scene:  # the claim still kept once the daemon is done
        held = submit(pool, 600)
        snapshot = scene.live.read_snapshot()
        assert scene.live.steer_ahead([(snapshot.jobs_by_id[held], scene.slot)]) == [None]
        pool.run_tool(["condor_hold", held], account=ATTACKER)
        assert scene.qedit(scene.ahead, "Requirements",
                           f'TARGET.Name =!= "{scene.slot.name}"') == 0
        write_daemon_config(daemon_dir, pool, policy={"name": "drf-fair"})
        done = run_daemon(daemon_python, pool, daemon_dir, "--once")
        assert done.returncode == 0, done.stderr
        assert [steering(pool, job) for job in (scene.ahead, held)] == ["undefined"] * 2
        assert scene.current in pool.running()
        scene.others.append(held)
        pool.run_tool(["condor_release", held], account=ATTACKER)
        started = scene.claim_started("restarted")
    assert started is None
