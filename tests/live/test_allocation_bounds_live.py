"""The size gridfair allocates is the size a steered job gets, and only gridfair's literal
steering starts a job: attacked live, as the ordinary account `mallory`, on a partitionable
pool of two 4-cpu machines with the shipped configuration (configs/htcondor-pool.config) and
gridfair's lease held.

A request HTCondor evaluates against the slot it cuts (`ifThenElse(TARGET.Cpus =!= undefined,
TARGET.Cpus, 1)`: 1 alone, every CPU left there) is not steered; a request grown after
gridfair read it (an edit) is refused the claim by the dynamic slot, which compares its own
size with the allocation gridfair wrote beside the steering. And a generated attack: job ads
whose steering and requests are random expressions over a small grammar, some edited after
gridfair steered them; no job starts unsteered, none with more than gridfair allocated."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gridfair.ad_views import Job, whole_slot
from gridfair.classads.submitters import SubmitterMap
from gridfair.daemon.backends.htcondor import HTCondorBackend
from tests.live.conftest import POOL_CONFIG, own_pool
from tests.live.harness.personal_pool import UID_DOMAIN, JobSpec, PersonalPool, SlotSpec

ATTACKER = "mallory"
MACHINES = ("slot1@vm", "slot2@vm")
CPUS, MEMORY = 4, 1024  # each machine's
ROUNDING = 128  # HTCondor rounds a memory request up to this (MODIFY_REQUEST_EXPR_REQUESTMEMORY)


@pytest.fixture(scope="module")
def pool() -> Iterator[PersonalPool]:
    machines = [SlotSpec("User1", 4000, CPUS, MEMORY), SlotSpec("User2", 4000, CPUS, MEMORY)]
    with own_pool(machines, layout="partitionable",
                  extra_config=POOL_CONFIG.read_text().splitlines()) as started:
        yield started


@pytest.fixture
def held(pool: PersonalPool) -> Iterator[HTCondorBackend]:
    """gridfair's backend holding the lease on an empty queue (held jobs read too)."""
    pool.clear_queue()
    live = HTCondorBackend.connect(pool.collector_host, submitters=SubmitterMap(UID_DOMAIN),
                                   job_constraint="JobStatus <= 5")
    live.hold_starts(time.time() + 600)
    try:
        yield live
    finally:
        live.release_starts()
        pool.clear_queue()


def submit(pool: PersonalPool, *commands: str) -> tuple[str | None, str]:
    """mallory's one-job submit: (its id or None if refused, what condor_submit said)."""
    done = pool.submit_as(ATTACKER, ["executable = /bin/sleep", "arguments = 600", *commands])
    said = done.stdout + done.stderr
    return (re.split(r"\s|-", done.stdout.strip())[0] if done.returncode == 0 else None), said


def edit(pool: PersonalPool, job: str, attribute: str, value: str) -> None:
    edited = pool.run_tool(["condor_qedit", job, attribute, value], account=ATTACKER,
                           check=False)
    assert edited.returncode == 0, edited.stderr


def slots_running(pool: PersonalPool) -> dict[str, tuple[str, float, float]]:
    """job id -> (dynamic slot, its Cpus, its Memory), from the slots' own ads."""
    rows = pool.status("JobId", "Name", "Cpus", "Memory", constraint="JobId =!= undefined")
    return {job: (slot, float(cpus), float(memory)) for job, slot, cpus, memory in rows}


def test_a_request_that_reads_the_slot_is_not_steered(pool: PersonalPool, held,
                                                      gridfair_cli) -> None:
    """gridfair reads such a request as 1 cpu, HTCondor would cut all 4: the job is skipped
    with the reason, in both demand modes (`shares` lists it), and does not start."""
    job, said = submit(pool, "request_cpus = ifThenElse(TARGET.Cpus =!= undefined, "
                             "TARGET.Cpus, 1)", "request_memory = 128")
    assert job, said
    for demand in ("autocluster", "jobs"):
        snapshot = HTCondorBackend.connect(pool.collector_host, demand=demand,
                                           submitters=SubmitterMap(UID_DOMAIN)).read_snapshot()
        assert job not in snapshot.jobs_by_id
        [reason] = [skip.reason for skip in snapshot.skipped if skip.name == job]
        assert reason.startswith("not steered: RequestCpus reads the slot or the clock"), reason
    shown = gridfair_cli("shares", "--pool", pool.collector_host, "--uid-domain", UID_DOMAIN)
    assert f"{job}: not steered: RequestCpus reads the slot or the clock" in shown.output
    time.sleep(3 * pool.interval + 2)
    assert job not in pool.running()


@pytest.mark.parametrize("grown", [("RequestCpus", "4"), ("RequestMemory", "1024"),
                                   ("RequestCpus", "ifThenElse(TARGET.Cpus > 1, 3, 1)")])
def test_a_request_grown_after_gridfair_read_it_is_refused_the_claim(
        pool: PersonalPool, held: HTCondorBackend, grown: tuple[str, str]) -> None:
    """mallory's job asks for 1 cpu and 128 MB; gridfair steers it with that; mallory then
    grows the request (its own attribute, which it may edit) before HTCondor matches it. The
    dynamic slot HTCondor cuts is larger than the allocation, so it refuses the claim: the
    job does not start, and the owner's job gridfair steers to the same machine does."""
    job, said = submit(pool, "request_cpus = 1", "request_memory = 128", "hold = True")
    assert job, said
    snapshot = held.read_snapshot()
    held.allocate(snapshot.jobs_by_id[job], snapshot.machines_by_name["slot1@vm"])
    edit(pool, job, *grown)
    pool.run_tool(["condor_release", job], account=ATTACKER)
    time.sleep(4 * pool.interval + 2)
    assert job not in slots_running(pool)
    held.withdraw(job)  # as the daemon does once the allocation has not landed
    [owners] = pool.submit_cluster([JobSpec("User1", 4000 * 600, 1, 128)])
    snapshot = held.read_snapshot()
    held.allocate(snapshot.jobs_by_id[owners], snapshot.machines_by_name["slot1@vm"])
    started = pool.wait_until(lambda: slots_running(pool).get(owners), 30)
    assert whole_slot(started[0]) == "slot1@vm" and started[1:] == (1.0, 128.0)


# ----------------------------------------------------------- the generated attack
#: Conditions and values of the grammar: literals, time(), TARGET.*, MY.* (an attribute the
#: job's owner edits after gridfair steered it), ifThenElse.
CONDITIONS = st.sampled_from([
    "time() < 2000000000", "time() > 2000000000", "TARGET.Cpus =!= undefined",
    'TARGET.SlotType == "Partitionable"', "MY.Knob > 1", "TARGET.Memory > 256",
])


def numbers(literals: list[int], slot_attribute: str) -> st.SearchStrategy[str]:
    leaves = st.one_of(st.sampled_from([str(n) for n in literals]),
                       st.just(f"TARGET.{slot_attribute}"), st.just("MY.Knob"),
                       st.just(f"{literals[0]} + (time() % 2)"))
    return st.recursive(leaves, lambda inner: st.builds(
        "ifThenElse({}, {}, {})".format, CONDITIONS, inner, inner), max_leaves=3)


SLOT_NAMES = st.recursive(
    st.sampled_from(['"slot1@vm"', "TARGET.Name", "MY.Helper", 'strcat("slot2", "@vm")',
                     "undefined"]),
    lambda inner: st.builds("ifThenElse({}, {}, undefined)".format, CONDITIONS, inner),
    max_leaves=2)


@dataclass(frozen=True)
class Attack:
    steering: str | None  # the GridfairSlot it submits, if any
    requests: tuple[str, str]  # request_cpus, request_memory
    knob: int  # MY.Knob at submit
    regrow: tuple[str, str] | None  # an edit after gridfair steered it


LITERAL_REQUESTS = st.tuples(st.sampled_from(["1", "2"]), st.sampled_from(["128", "200"]))
ATTACKS = st.builds(
    Attack,
    steering=st.one_of(st.none(), st.none(), SLOT_NAMES),
    # Plain numbers more often than not, so that most jobs are steered and then attacked.
    requests=st.one_of(LITERAL_REQUESTS, LITERAL_REQUESTS,
                       st.tuples(numbers([1, 2], "Cpus"), numbers([128, 200], "Memory"))),
    knob=st.sampled_from([1, 3]),
    regrow=st.one_of(st.none(), st.sampled_from([
        ("RequestCpus", "3"), ("RequestMemory", "900"), ("RequestCpus", "TARGET.Cpus"),
        ("RequestMemory", "ifThenElse(time() % 2 == 0, TARGET.Memory, 900)")]),
        st.sampled_from([("Knob", "4"), ("Knob", "1000"), ("Helper", '"slot2@vm"')])),
)


def test_generated_attacks_never_start_unsteered_or_larger_than_allocated(
        pool: PersonalPool, held: HTCondorBackend) -> None:
    """Three generated rounds (seeded: the same every run) of 6-8 jobs each: a job that
    names a steering is refused at submit; gridfair steers each job it reads (first fit, as
    allocated); the owner's edits then race the negotiator; for a while every running job's
    own slot ad is checked. The rounds must have started steered jobs and grown some after
    steering, or they proved nothing."""
    seen = {"started": set(), "grown after steering": set()}

    @settings(max_examples=3, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(attacks=st.lists(ATTACKS, min_size=6, max_size=8))
    def round_of(attacks: list[Attack]) -> None:
        pool.clear_queue()
        submitted: dict[str, Attack] = {}
        for attack in attacks:
            steering = [f"+GridfairSlot = {attack.steering}"] if attack.steering else []
            cpus, memory = attack.requests
            job, said = submit(pool, f"request_cpus = {cpus}", f"request_memory = {memory}",
                               f"+Knob = {attack.knob}", '+Helper = "slot1@vm"', *steering)
            if attack.steering:  # whatever its expression: gridfair's alone
                assert job is None and "GridfairSlot is set by gridfair only" in said, said
            elif job is not None:
                submitted[job] = attack
        allocated = steer_first_fit(held, submitted)
        for job_id, attack in submitted.items():  # the owner's edits, racing the negotiator
            if attack.regrow:
                edit(pool, job_id, *attack.regrow)
                if job_id in allocated and attack.regrow[0].startswith("Request"):
                    seen["grown after steering"].add(job_id)
        deadline = time.monotonic() + 6 * pool.interval + 4
        while time.monotonic() < deadline:
            for job_id, (slot, cpus, memory) in slots_running(pool).items():
                assert job_id in allocated, f"{job_id} started unsteered: {submitted[job_id]}"
                machine, job = allocated[job_id]
                assert whole_slot(slot) == machine, (job_id, slot, machine)
                assert cpus <= math.ceil(job.request_cpus), (job_id, cpus, submitted[job_id])
                assert memory <= math.ceil(job.request_memory / ROUNDING) * ROUNDING, (
                    job_id, memory, submitted[job_id])
                seen["started"].add(job_id)
            time.sleep(0.5)

    round_of()
    assert seen["started"] and seen["grown after steering"], seen


def steer_first_fit(live: HTCondorBackend,
                    submitted: dict[str, Attack]) -> dict[str, tuple[str, Job]]:
    """gridfair's part: each job it reads (a job whose request varies is skipped) steered to
    the first machine where it fits beside those allocated before; job id -> (machine, the
    job as read)."""
    snapshot = live.read_snapshot()
    left = {name: [float(CPUS), float(MEMORY)] for name in MACHINES}
    allocated: dict[str, tuple[str, Job]] = {}
    for job_id in submitted:
        job = snapshot.jobs_by_id.get(job_id)
        if job is None:
            continue
        for name, room in left.items():
            if job.request_cpus <= room[0] and job.request_memory <= room[1]:
                room[0] -= job.request_cpus
                room[1] -= job.request_memory
                live.allocate(job, snapshot.machines_by_name[name])
                allocated[job_id] = (name, job)
                break
    return allocated
