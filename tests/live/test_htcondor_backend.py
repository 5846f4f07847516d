"""The htcondor backend against a real personal pool: reading, vacating, steering."""

from __future__ import annotations

import re

import htcondor2
import pytest

from gridfair.ad_views import JobStatus
from gridfair.classads.matching import symmetric_match
from gridfair.classads.submitters import SubmitterMap
from gridfair.daemon.backends import ActionFailed, PoolUnavailable
from gridfair.daemon.backends.htcondor import HTCondorBackend
from gridfair.daemon.backends.htcondor.steering import RESCHEDULE
from tests.live.conftest import POOL_CONFIG, SLOTS, ghost_schedd, own_pool
from tests.live.harness.personal_pool import UID_DOMAIN, JobSpec, PersonalPool, SlotSpec

LONG = 132250 * 600  # ten minutes on the fastest slot: runs for the whole test


def backend(pool: PersonalPool, **options: object) -> HTCondorBackend:
    """The backend as the daemon makes it on the pool's central manager (the test process
    does not read the pool's configuration, so the UID domain is given)."""
    return HTCondorBackend.connect(pool.collector_host,
                                   **{"submitters": SubmitterMap(UID_DOMAIN), **options})


#: Held jobs too: tests hold jobs so HTCondor cannot match them before gridfair steers them.
ANY_JOB = {"job_constraint": "JobStatus <= 5"}


def nodes(snapshot) -> list:
    """The machines that are nodes (not dynamic slots, which are shares of one), by name."""
    return sorted((m for m in snapshot.machines if m.slot_type != "Dynamic"),
                  key=lambda m: m.name)


def test_snapshot_of_the_pool(clean_queue: PersonalPool) -> None:
    pool = clean_queue
    ids = pool.submit([JobSpec("User1", LONG), JobSpec("User2", LONG)])
    pool.wait_until(lambda: set(pool.running()) == set(ids), 30)
    snapshot = backend(pool).read_snapshot()
    assert [(m.owner, m.power) for m in nodes(snapshot)] == [
        ("User1", 132250), ("User1", 132250), ("User2", 54760), ("User2", 29750)]
    assert snapshot.skipped == ()
    jobs = {job.id: job for job in snapshot.jobs}
    # Each job charged to the account that submitted it, named as the slots' owner.
    assert {(jobs[i].user, jobs[i].identity) for i in ids} == {
        ("User1", "User1@gridfair.test"), ("User2", "User2@gridfair.test")}
    assert {charge.reason for charge in snapshot.charges} == {
        "authenticated user of the pool's UID_DOMAIN gridfair.test; accounting group owners "
        "not trusted"}
    assert all(jobs[i].status is JobStatus.RUNNING for i in ids)
    # Running jobs are read from their slots, which name their group as the job ads do.
    whole = {job.id: job for job in backend(pool, demand="jobs").read_snapshot().jobs}
    assert all(whole[i].group == "owners" and whole[i].user == jobs[i].user for i in ids)
    running_on = {m.running_job: m.name for m in snapshot.machines if m.running_job}
    assert running_on == pool.running()


def test_users_of_another_uid_domain_are_charged_as_they_are(clean_queue: PersonalPool) -> None:
    pool = clean_queue
    ids = pool.submit([JobSpec("User2", LONG)], extra=["hold = True"])
    live = backend(pool, submitters=SubmitterMap("another.domain"), **ANY_JOB)
    assert [job.user for job in live.read_snapshot().jobs if job.id == ids[0]] == [
        "User2@gridfair.test"]


def test_snapshot_of_partitionable_slots(partitionable_pool: PersonalPool) -> None:
    pool = partitionable_pool
    snapshot = backend(pool).read_snapshot()
    assert sorted(m.power for m in snapshot.machines) == [29750, 54760, 132250, 132250]
    assert all("_" not in m.name.partition("@")[0] for m in snapshot.machines)
    ids = pool.submit([JobSpec("User2", LONG)])
    pool.wait_until(lambda: ids[0] in pool.running(), 30)
    snapshot = backend(pool).read_snapshot()
    dynamic = [m for m in snapshot.machines if m.running_job == ids[0]]
    assert len(dynamic) == 1 and "_" in dynamic[0].name.partition("@")[0]  # slotN_M: dynamic
    assert dynamic[0].owner in ("User1", "User2") and dynamic[0].power > 0
    pool.clear_queue()


def test_a_vacate_lands_and_the_job_runs_again(clean_queue: PersonalPool) -> None:
    pool = clean_queue
    [job_id] = pool.submit([JobSpec("User1", LONG)])
    pool.wait_until(lambda: job_id in pool.running(), 30)
    live = backend(pool)
    live.read_snapshot()
    assert live.vacate([job_id]) == {job_id: None}
    # Evicted, back to idle (not removed), and started again: the job ad counts the starts
    # (slot ads lag by an update interval, and the claim may be reused at once).
    cluster = f"ClusterId == {job_id.split('.')[0]}"
    pool.wait_until(lambda: pool.jobs("ClusterId", constraint=f"{cluster} && JobStatus == 2 "
                                      "&& NumJobStarts >= 2 && LastVacateTime =!= undefined"),
                    30)


class CountingSchedd(htcondor2.Schedd):
    """The real schedd, counting the queries and edits asked of it."""

    queries = 0
    edits: list[tuple[str, int]] = []  # (attribute, jobs named)

    def edit(self, job_spec: list[str], attr: str, *args: object, **kwargs: object) -> int:
        type(self).edits.append((attr, len(job_spec)))
        return super().edit(job_spec, attr, *args, **kwargs)

    def query(self, *args: object, **kwargs: object) -> list:
        type(self).queries += 1
        return super().query(*args, **kwargs)


def test_allocations_land_on_the_chosen_slot(clean_queue: PersonalPool,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs held at submission, steered to a slot each (in reverse of HTCondor's own order),
    then released: each starts on the slot gridfair named. The negotiator is asked for a
    cycle once for all of them (its RESCHEDULE: the schedd ignores one sent to it)."""
    pool = clean_queue
    ids = pool.submit([JobSpec("User2", LONG)] * 4, extra=["hold = True"])
    sent = []
    send = htcondor2.send_command
    monkeypatch.setattr(htcondor2, "send_command", lambda ad, command, target=None: (
        sent.append((ad["MyType"], command)), send(ad, command, target)))
    live = backend(pool, **ANY_JOB)
    snapshot = live.read_snapshot()
    jobs = {job.id: job for job in snapshot.jobs}
    slots = nodes(snapshot)[::-1]
    chosen = {job_id: slot.name for job_id, slot in zip(ids, slots, strict=True)}
    for job_id, slot in zip(ids, slots, strict=True):
        live.allocate(jobs[job_id], slot)
    live.actions_done()
    assert sent == [("Negotiator", RESCHEDULE)]
    pool.schedd().act(htcondor2.JobAction.Release, ids)
    assert pool.wait_until(lambda: len(pool.running()) == 4 and pool.running_on_nodes(),
                           40) == chosen


def test_allocations_together_are_one_edit_a_value(clean_queue: PersonalPool) -> None:
    """A batch of allocations is steered with one edit (one connection and transaction of
    the schedd, which is what costs it) for all the jobs given the same value: the four
    jobs of one size take one edit of the size (on partitionable slots: a static slot's
    START does not read it), then one of the slot name each; each job holds the values
    after."""
    pool = clean_queue
    ids = pool.submit([JobSpec("User2", LONG)] * 4, extra=["hold = True"])
    CountingSchedd.edits = []
    live = backend(pool, schedd_factory=CountingSchedd, **ANY_JOB)
    snapshot = live.read_snapshot()
    jobs = {job.id: job for job in snapshot.jobs}
    slots = nodes(snapshot)
    allocations = [(jobs[job_id], slot) for job_id, slot in zip(ids, slots, strict=True)]
    assert live.allocate_all(allocations) == [None] * 4
    size = [1, 64, 0] if slots[0].slot_type == "Partitionable" else None
    # The run the steering is for (all four jobs at 0) and its expiry: one edit each.
    assert CountingSchedd.edits == [("GridfairSlotSize", 4)] * bool(size) + [
        ("GridfairSteerRunCount", 4), ("GridfairSteerUntil", 4)] + [("GridfairSlot", 1)] * 4
    assert steering(pool) == {job_id: (slot.name, size)
                              for job_id, slot in zip(ids, slots, strict=True)}


def steering(pool: PersonalPool) -> dict[str, tuple]:
    """Each steered job's slot name and allocated size, by job id."""
    return {f"{ad['ClusterId']}.{ad['ProcId']}": (ad["GridfairSlot"], ad.get("GridfairSlotSize"))
            for ad in pool.schedd().query("GridfairSlot =!= undefined", [
                "ClusterId", "ProcId", "GridfairSlot", "GridfairSlotSize"])}


def test_a_job_gone_from_a_batch_fails_alone(clean_queue: PersonalPool) -> None:
    """The schedd aborts an edit's whole transaction when one job it names is gone: the
    others of the batch are still steered (edited again one at a time), and the gone one is
    its allocation's failure, in the schedd's words."""
    pool = clean_queue
    ids = pool.submit([JobSpec("User2", LONG)] * 3, extra=["hold = True"])
    live = backend(pool, **ANY_JOB)
    snapshot = live.read_snapshot()
    jobs = {job.id: job for job in snapshot.jobs}
    pool.run_tool(["condor_rm", ids[1]])
    slot = nodes(snapshot)[0]
    problems = live.allocate_all([(jobs[job_id], slot) for job_id in ids])
    assert problems[0] is None and problems[2] is None
    assert problems[1] is not None and ids[1] in problems[1]
    assert "nonexistent job" in problems[1]
    size = [1, 64, 0] if slot.slot_type == "Partitionable" else None
    assert steering(pool) == {ids[0]: (slot.name, size), ids[2]: (slot.name, size)}


def test_a_job_gone_before_the_action_is_a_named_failure(clean_queue: PersonalPool) -> None:
    pool = clean_queue
    ids = pool.submit([JobSpec("User1", LONG), JobSpec("User2", LONG, cpus=1)],
                      extra=["hold = True"])
    live = backend(pool, **ANY_JOB)
    snapshot = live.read_snapshot()
    jobs = {job.id: job for job in snapshot.jobs}
    pool.clear_queue()
    assert live.vacate([ids[0]]) == {ids[0]: "job not found"}
    with pytest.raises(ActionFailed, match=ids[1]):
        live.allocate(jobs[ids[1]], snapshot.machines[0])


@pytest.mark.parametrize("daemon", ["collector", "schedd"])
def test_a_daemon_down_fails_the_read_and_it_recovers(clean_queue: PersonalPool,
                                                      daemon: str) -> None:
    """With the collector or the schedd stopped, a read fails (nothing to act on); with it
    back, reads succeed again."""
    pool = clean_queue
    ids = pool.submit([JobSpec("User1", LONG)])
    pool.wait_until(lambda: ids[0] in pool.running(), 30)
    live = backend(pool)
    assert [job.id for job in live.read_snapshot().jobs] == ids
    pool.switch(daemon, on=False)
    try:
        def fails() -> str | None:
            try:
                live.read_snapshot()
            except PoolUnavailable as error:
                return str(error)
            return None
        assert re.search("collector|schedd", pool.wait_until(fails, 20))
    finally:
        pool.switch(daemon, on=True)
    snapshot = pool.wait_until(lambda: _read_or_none(live), 40)
    assert len(nodes(snapshot)) == 4


def _read_or_none(live: HTCondorBackend):
    try:
        snapshot = live.read_snapshot()
    except PoolUnavailable:
        return None
    return snapshot if len(nodes(snapshot)) == 4 and snapshot.jobs else None


def test_condor_now_hands_two_dynamic_slots_over_at_once() -> None:
    """`handover(victims, job, slot)`: condor_now JOB VICTIM VICTIM vacates both victims and
    starts the 2-CPU job on their claims, coalesced. HTCondor 25 does so only for dynamic
    slots whose claims are kept (CLAIM_WORKLIFE not 0): a pool of its own, one partitionable
    machine of 2 CPUs, claims kept. The schedd's log has no "coalesce failed" (condor_now
    exits 0 even then)."""
    config = [*POOL_CONFIG.read_text().splitlines(), "CLAIM_WORKLIFE = 1200"]
    with own_pool([SlotSpec("User1", 264500, cpus=2, memory=512)], layout="partitionable",
                  extra_config=config) as pool:
        victims = pool.submit([JobSpec("User2", LONG)] * 2)
        pool.wait_until(lambda: set(pool.running()) == set(victims), 30)
        [job_id] = pool.submit([JobSpec("User1", LONG, cpus=2)])
        live = backend(pool, condor_now=pool.tool("condor_now"),
                       tool_environment=pool.environment)
        snapshot = live.read_snapshot()
        jobs = {job.id: job for job in snapshot.jobs}
        slot = snapshot.machines_by_name["slot1@vm"]
        assert live.can_hand_over(slot)
        live.handover([jobs[victim] for victim in victims], jobs[job_id], slot)
        assert pool.wait_until(lambda: pool.running_on_nodes().get(job_id), 20) == slot.name
        log = (pool.directory / "local" / "log" / "SchedLog").read_text()
        assert f"[now job {job_id}]" not in log, log[-2000:]
        evicted = " || ".join(f"ClusterId == {victim.split('.')[0]}" for victim in victims)
        assert len(pool.jobs("ClusterId", constraint=f"({evicted}) && LastVacateTime =!= "
                             "undefined")) == 2


def test_condor_now_is_offered_for_partitionable_slots_only(clean_queue: PersonalPool) -> None:
    """On a static slot condor_now cannot use the victim's claim ("coalesce failed: given slot
    is not dynamic"), so the backend does not offer it there: the daemon vacates and steers."""
    live = backend(clean_queue, condor_now=clean_queue.tool("condor_now"))
    offered = {live.can_hand_over(m) for m in live.read_snapshot().machines}
    assert offered == {clean_queue.layout == "partitionable"}


def test_condor_now_refusal_is_a_named_failure(clean_queue: PersonalPool) -> None:
    """condor_now of a job that is not idle (it runs): ActionFailed with condor_now's own
    message, and nothing is vacated."""
    pool = clean_queue
    ids = pool.submit([JobSpec("User2", LONG)] * 2)
    pool.wait_until(lambda: set(pool.running()) == set(ids), 30)
    live = backend(pool, condor_now=pool.tool("condor_now"),
                   tool_environment=pool.environment)
    snapshot = live.read_snapshot()
    jobs = {job.id: job for job in snapshot.jobs}
    slot = next(m for m in snapshot.machines if m.running_job == ids[0])
    with pytest.raises(ActionFailed, match=rf"condor_now {ids[1]} {ids[0]} on {slot.name}: "
                                           r"exit \d+: \S"):
        live.handover([jobs[ids[0]]], jobs[ids[1]], slot)
    assert pool.jobs("ClusterId", constraint="LastVacateTime =!= undefined") == []


def test_withdraw_lifts_the_steering(clean_queue: PersonalPool) -> None:
    pool = clean_queue
    [job_id] = pool.submit([JobSpec("User2", LONG)], extra=["hold = True"])
    live = backend(pool, **ANY_JOB)
    snapshot = live.read_snapshot()
    live.allocate(snapshot.jobs[0], snapshot.machines[0])
    steered = f"ClusterId == {job_id.split('.')[0]} && GridfairSlot =!= undefined"
    assert pool.jobs("ClusterId", constraint=steered)
    live.withdraw(job_id)
    assert pool.jobs("ClusterId", constraint=steered) == []


def test_idle_demand_read_from_autoclusters(clean_queue: PersonalPool) -> None:
    """Four running jobs fill the slots; five wait in two shapes. The autocluster read gives
    the idle jobs the whole job ads give, one shared ad per shape, and the running jobs from
    the slots (with the schedd known, so they can be vacated)."""
    pool = clean_queue
    running = pool.submit([JobSpec("User1", LONG)] * 4)
    pool.wait_until(lambda: set(pool.running()) == set(running), 40)
    waiting = pool.submit([JobSpec("User1", LONG)] * 3 + [JobSpec("User2", LONG, memory=128)] * 2)
    grouped = backend(pool).read_snapshot()
    whole = backend(pool, demand="jobs", job_constraint="JobStatus == 1").read_snapshot()

    def idle(snapshot):
        return {j.id: (j.user, j.qdate, j.request_cpus, j.request_memory)
                for j in snapshot.jobs if j.status is JobStatus.IDLE}

    assert set(idle(grouped)) == set(waiting) and idle(grouped) == idle(whole)
    shapes = {j.request_memory: id(j.ad) for j in grouped.jobs if j.status is JobStatus.IDLE}
    assert sorted(shapes) == [64, 128] and len(set(shapes.values())) == 2
    assert {j.id: j.machine for j in grouped.jobs if j.status is JobStatus.RUNNING} == \
        pool.running()
    live = backend(pool)
    live.read_snapshot()
    assert live.vacate([running[0]]) == {running[0]: None}
    pool.clear_queue()


def test_hundreds_of_jobs_without_an_autocluster_are_all_fetched(clean_queue: PersonalPool
                                                                 ) -> None:
    # Held jobs are in no autocluster: the backend fetches each one's ad. A constraint of one
    # `||` term a job got no answer from the schedd past a few hundred terms (and no error):
    # the jobs were silently missing from the snapshot.
    pool = clean_queue
    [first] = pool.submit([JobSpec("User2", LONG)], extra=["hold = True"], count=600)
    cluster = first.partition(".")[0]
    snapshot = backend(pool, **ANY_JOB).read_snapshot()
    held = [job for job in snapshot.jobs if job.id.partition(".")[0] == cluster]
    assert len(held) == 600 and all(job.status is JobStatus.HELD for job in held)
    assert snapshot.skipped == ()
    pool.clear_queue()


def test_what_fetched_job_ads_require_is_read_before_any_autocluster(
        clean_queue: PersonalPool) -> None:
    # A schedd may have no autocluster for a job (before a negotiation reaches it, or none
    # at all: seen on a pool of advertised machine ads, bench/live_scale.py): its ad is
    # fetched whole, and what its Requirements read must be learnt from that ad. It was
    # learnt from autocluster ads alone: a job reading its own attribute never matched (on a
    # 1,000-slot pool, 10,000 idle jobs reading MY.FileSystemDomain: no decision at all).
    pool = clean_queue
    pool.submit([JobSpec("User2", LONG)], count=3, extra=[
        "hold = True", "+GridfairNeed = 1", "requirements = TARGET.Cpus >= MY.GridfairNeed"])
    snapshot = backend(pool, **ANY_JOB).read_snapshot()
    slot = next(machine for machine in snapshot.machines if machine.slot_type != "Dynamic")
    held = [job for job in snapshot.jobs if job.status is JobStatus.HELD]
    assert len(held) == 3
    assert all(symmetric_match(job.ad, slot.ad) for job in held)
    pool.clear_queue()


def test_a_slot_ad_lacking_what_a_slot_needs_is_skipped_and_the_rest_read(
        static_pool: PersonalPool, tmp_path) -> None:
    """A collector may hold an ad that lacks what a slot needs (a broken startd, a
    hand-made ad): it is skipped with its reason, the other slots are read and the cycle
    goes on. (Two ads of one name cannot both be in one collector: the later replaces the
    earlier, seen on HTCondor 25; from two collectors' dumps the files backend skips the
    later, tests/test_classads_views.py.)"""
    pool = static_pool
    ads = tmp_path / "bad.ads"
    ads.write_text('MyType = "Machine"\nName = "slot1@broken.test"\n'
                   'MyAddress = "<127.0.0.1:1>"\nState = "Unclaimed"\nActivity = "Idle"\n')
    ads.chmod(0o644)
    pool.run_tool(["condor_advertise", "UPDATE_STARTD_AD", str(ads)])
    try:
        pool.wait_until(lambda: len(pool.status("Name")) == 5, 20)
        snapshot = backend(pool).read_snapshot()
        assert len(nodes(snapshot)) == 4
        [skipped] = snapshot.skipped
        assert skipped.name == "slot1@broken.test" and "missing" in skipped.reason
    finally:
        query = tmp_path / "invalidate.ads"
        query.write_text('MyType = "Query"\nTargetType = "Machine"\n'
                         'Requirements = Name == "slot1@broken.test"\n')
        query.chmod(0o644)
        pool.run_tool(["condor_advertise", "INVALIDATE_STARTD_ADS", str(query)])
        pool.wait_until(lambda: len(pool.status("Name")) == 4, 20)


def test_with_no_autocluster_the_job_ads_are_read_in_one_query() -> None:
    """A new pool's schedd has no autocluster (held jobs are in none, and a schedd keeps
    those of jobs gone): the backend reads the job ads in one query besides the autocluster
    query (and the one that reads the significant attributes, `kept_idle`), not idle rows and
    then each job's ad, and finds what the whole-ad read finds."""
    with own_pool(SLOTS[:1]) as pool:
        pool.submit([JobSpec("User1", LONG)], count=4, extra=["hold = True"])
        pool.submit([JobSpec("User2", LONG, memory=128)], count=3, extra=["hold = True"])
        live = backend(pool, schedd_factory=CountingSchedd, **ANY_JOB)
        live.read_snapshot()  # learns what matching reads: its own queries
        CountingSchedd.queries = 0
        grouped = live.read_snapshot()
        assert CountingSchedd.queries == 3
        whole = backend(pool, demand="jobs", **ANY_JOB).read_snapshot()

    def demand(snapshot):
        return [(j.id, j.user, j.request_cpus, j.request_memory) for j in snapshot.jobs]

    assert len(grouped.jobs) == 7 and demand(grouped) == demand(whole)


@pytest.mark.parametrize("with_version", [True, False])
def test_a_schedd_that_cannot_be_reached_is_skipped_and_the_rest_read(
        static_pool: PersonalPool, with_version: bool) -> None:
    """A schedd ad for a schedd that is not there (an address that refuses connections, or an
    ad lacking the `CondorVersion` the bindings need: `htcondor2.Schedd` raises KeyError, which
    was the reason given, "query failed: 'CondorVersion'"): skipped with its reason, the other
    schedd's jobs read."""
    pool = static_pool
    pool.clear_queue()
    [job] = pool.submit([JobSpec("User1", LONG)], extra=["hold = true"])
    try:
        with ghost_schedd(pool, with_version=with_version) as ghost:
            snapshot = backend(pool, **ANY_JOB).read_snapshot()
        assert [job_read.id for job_read in snapshot.jobs] == [job]
        [skipped] = snapshot.skipped
        assert skipped.name == ghost
        assert ("query failed" if with_version else "no CondorVersion") in skipped.reason
    finally:
        pool.clear_queue()
