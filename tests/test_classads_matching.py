"""Requirements matching with classad2, autoclusters, and snapshots as the core's pool."""

from __future__ import annotations

import itertools
from pathlib import Path

import classad2
import pytest

from gridfair.ad_views import JobStatus, Snapshot
from gridfair.classads.matching import AutoclusterMatcher, symmetric_match
from gridfair.classads.reader import AdFormat, AdText, SourcedAd, read_ads, readable
from gridfair.classads.to_pool import pool_from_snapshot
from gridfair.classads.views import jobs_from_ads, machines_from_ads, read_snapshot
from gridfair.core.pool import Node, Task
from gridfair.daemon.backends.files import FilesBackend
from gridfair.policies.registry import build_stages
from tests.harness.synthetic import job_ads, machine_ads, write_ads
from tests.test_classads_views import REAL, owned, with_lines


def real_job() -> classad2.ClassAd:
    return read_ads(REAL / "test.old.ad")[0][0].ad


def real_slots(path: Path = REAL / "basic4slot") -> list[classad2.ClassAd]:
    return [sourced.ad for sourced in read_ads(path)[0]]


def test_real_job_matches_every_real_slot() -> None:
    job = real_job()
    assert [symmetric_match(job, slot) for slot in real_slots()] == [True] * 4


@pytest.mark.parametrize(
    "change",
    [
        'Arch = "INTEL"',  # the job's Requirements: TARGET.Arch == "X86_64"
        "Memory = 0",  # TARGET.Memory >= RequestMemory (1)
        "HasFileTransfer = false",
        "Start = false",  # the slot's own Requirements: START && IsValidCheckpointPlatform
    ],
)
def test_either_requirements_failing_is_no_match(tmp_path: Path, change: str) -> None:
    path = with_lines("basic4slot", tmp_path, "", "", change, "")
    assert [symmetric_match(real_job(), slot) for slot in real_slots(path)] == [
        True, True, False, True]


def test_an_ad_without_requirements_constrains_nothing() -> None:
    job = classad2.ClassAd({"RequestMemory": 100})
    roomy, small = classad2.ClassAd({"Memory": 200}), classad2.ClassAd({"Memory": 50})
    assert symmetric_match(job, roomy) and symmetric_match(job, small)
    job["Requirements"] = classad2.ExprTree("TARGET.Memory >= RequestMemory")
    assert symmetric_match(job, roomy) and not symmetric_match(job, small)
    small["Requirements"] = classad2.ExprTree("TARGET.RequestMemory < 10")
    roomy["Requirements"] = classad2.ExprTree("TARGET.RequestMemory < 1000")
    job["Requirements"] = classad2.ExprTree("true")
    assert symmetric_match(job, roomy) and not symmetric_match(job, small)


def _task(ad: classad2.ClassAd, key: str) -> Task:
    return Task(key, "u", 0.0, ad=ad)


def _node(ad: classad2.ClassAd, key: str) -> Node:
    return Node(key, None, 1.0, ad=ad)


def test_autoclusters_agree_with_evaluating_every_pair() -> None:
    machines = machine_ads(120, 10, seed=5)
    jobs = job_ads(200, 20, machines, running=0, seed=6)
    matcher = AutoclusterMatcher()
    tasks = [_task(ad, f"j{index}") for index, ad in enumerate(jobs)]
    nodes = [_node(ad, f"m{index}") for index, ad in enumerate(machines)]
    for task, node in itertools.product(tasks, nodes):
        assert matcher(task, node) == symmetric_match(task.ad, node.ad), (task.id, node.name)
    # 5 Requirements x 3 image sizes (RequestMemory, which the slots read, derives from it);
    # slots by Arch, OpSys, Memory, MFlops and HasDocker, the attributes the jobs read.
    assert matcher.autoclusters == 15
    assert matcher.machine_classes < len(machines)
    assert matcher.evaluations < len(tasks) * len(nodes) / 10
    # Once every group has been seen, everything comes from the cache.
    evaluations = matcher.evaluations
    for task, node in itertools.product(tasks, nodes):
        matcher(task, node)
    assert matcher.evaluations == evaluations


@pytest.mark.parametrize("reads_owner", ['TARGET.Owner == "alice"',
                                         'eval(strcat("TARGET.Own", "er")) == "alice"'])
def test_an_attribute_read_later_splits_groups_formed_without_it(reads_owner: str) -> None:
    """A slot reading Owner splits alice's and bob's jobs, alike but for their owner and
    grouped before that slot was seen; also read through `eval`, which no reference list
    shows (before, alice's match was bob's)."""
    alice = classad2.ClassAd({"Owner": "alice", "RequestMemory": 1})
    bob = classad2.ClassAd({"Owner": "bob", "RequestMemory": 1})
    for job in (alice, bob):
        job["Requirements"] = classad2.ExprTree("TARGET.Memory >= RequestMemory")
    anyone = classad2.ClassAd({"Memory": 10})
    anyone["Requirements"] = classad2.ExprTree("true")
    only_alice = classad2.ClassAd({"Memory": 10})
    only_alice["Requirements"] = classad2.ExprTree(reads_owner)
    assert symmetric_match(alice, only_alice) and not symmetric_match(bob, only_alice)
    matcher = AutoclusterMatcher()
    a, b = _task(alice, "1.0"), _task(bob, "2.0")
    assert matcher(a, _node(anyone, "m1")) and matcher(b, _node(anyone, "m1"))
    assert matcher.autoclusters == 1  # nothing read Owner yet: one autocluster
    assert matcher(a, _node(only_alice, "m2")) is True
    assert matcher(b, _node(only_alice, "m2")) is False
    assert matcher.autoclusters == 2


def test_a_flood_of_jobs_each_reading_an_attribute_of_its_own_regroups_no_slot() -> None:
    """`TARGET.Flood<N> =?= undefined` in one submit of many jobs: an attribute no slot has
    cannot split the slots, so it regroups none (each regrouping classified every slot again:
    jobs times slots times names); an attribute a slot has still splits them."""
    machines = machine_ads(40, 4, seed=5)
    machines[7]["Flood13"] = True
    floods = []
    for index in range(200):
        ad = classad2.ClassAd({"RequestMemory": 1})
        ad["Requirements"] = classad2.ExprTree(
            f"TARGET.Memory >= RequestMemory && TARGET.Flood{index} =?= undefined")
        floods.append(_task(ad, f"1.{index}"))
    nodes = [_node(ad, f"m{index}") for index, ad in enumerate(machines)]
    matcher = AutoclusterMatcher()
    for task, node in itertools.product(floods, nodes):
        assert matcher(task, node) == symmetric_match(task.ad, node.ad), (task.id, node.name)
    assert not matcher(floods[13], nodes[7]) and matcher(floods[12], nodes[7])
    # The slots' Requirements read RequestMemory (the jobs regrouped once), Flood13 (the
    # slots once): not once per job.
    assert matcher.regroupings <= 3


def test_a_job_reading_its_own_attribute_through_eval_is_an_autocluster_of_its_own() -> None:
    """`eval(strcat("Cluster", "Id"))` reads ClusterId, which no reference list shows: jobs
    alike in every other line must not share an autocluster, or job 2's match would be job
    1's (it matched a slot its own Requirements refuse)."""
    jobs = []
    for cluster in (1, 2):
        ad = classad2.ClassAd({"ClusterId": cluster, "RequestMemory": 1})
        ad["Requirements"] = classad2.ExprTree(
            'eval(strcat("Cluster", "Id")) == 1 && TARGET.Memory >= RequestMemory')
        jobs.append(_task(ad, f"{cluster}.0"))
    slot = classad2.ClassAd({"Memory": 10})
    slot["Requirements"] = classad2.ExprTree("true")
    node = _node(slot, "m1")
    matcher = AutoclusterMatcher()
    assert [matcher(task, node) for task in jobs] == [True, False]
    assert [symmetric_match(task.ad, slot) for task in jobs] == [True, False]
    assert matcher.autoclusters == 2


@pytest.mark.parametrize(("job_requirements", "memory", "evaluated"), [
    ("TARGET.Memory > 0", "100", 1),  # kept from one snapshot to the next
    ("TARGET.Memory > 0", "time()", 2),  # a slot attribute the job reads
    ("time() > 0", "100", 2),
    ("eval(strcat(\"TARGET.Mem\", \"ory\")) > 0", "100", 2),  # may call anything
])
def test_a_match_that_may_read_the_clock_is_evaluated_again_each_snapshot(
        job_requirements: str, memory: str, evaluated: int) -> None:
    job = classad2.ClassAd(f"[Requirements = {job_requirements}]")
    slot = classad2.ClassAd(f"[Requirements = true; Memory = {memory}]")
    matcher = AutoclusterMatcher()
    for _ in range(2):
        matcher.next_snapshot()
        assert matcher(_task(job, "1.0"), _node(slot, "m"))
    assert matcher.evaluations == evaluated


def test_without_ads_only_resources_count() -> None:
    matcher = AutoclusterMatcher()
    assert matcher(Task("1.0", "u", 0.0), Node("m", None, 1.0, ad=real_slots()[0]))
    assert matcher(Task("1.0", "u", 0.0, ad=real_job()), Node("m", None, 1.0))


def hosep_pool(snapshot: Snapshot):
    return pool_from_snapshot(snapshot, build_stages("hosep"))


def test_real_snapshot_as_a_pool(tmp_path: Path) -> None:
    machines = owned("basic4slot", tmp_path, ["alice", "bob", "alice", "carol"],
                     [1000, 2000, 3000, 4000])
    loaded = hosep_pool(read_snapshot(machines, REAL / "test.old.ad", now=1417808400.0))
    users = loaded.pool.users
    # Slots 1 and 2 are claimed by bt@cs.wisc.edu, whose jobs are not in the jobs file: they
    # count as its allocation all the same.
    bt = users["bt@cs.wisc.edu"]
    assert (bt.allocated_power, bt.running, bt.provided_power) == (3000.0, 2, 0.0)
    assert (users["alice"].provided_power, users["alice"].provided_nodes) == (4000.0, 2)
    job_user = users["bbockelm@users.opensciencegrid.org"]
    assert (job_user.idle_count, job_user.running) == (1, 0)
    decisions = loaded.negotiator.cycle(1417808400.0)
    assert [(d.kind, d.task.id, d.node.name) for d in decisions] == [
        ("allocate", "15.0", "slot4@ingwe.cs.wisc.edu")]


def test_a_slot_naming_a_job_that_is_idle_gets_a_stand_in_of_its_own(tmp_path: Path) -> None:
    # The slot says it runs 15.0 for bt@cs.wisc.edu, the schedd says 15.0 is idle.
    machines = with_lines("small1slot", tmp_path,
                          'GridOwner = "alice"\nMFlops = 1000\nJobId = "15.0"')
    loaded = hosep_pool(read_snapshot(machines, REAL / "test.old.ad", now=1417808400.0))
    tasks = loaded.pool.tasks
    assert tasks["15.0"].user == "bbockelm@users.opensciencegrid.org"
    assert tasks["claim@ingwe.cs.wisc.edu"].node.name == "ingwe.cs.wisc.edu"
    assert loaded.pool.users["bt@cs.wisc.edu"].allocated_power == 1000.0


def test_running_jobs_are_started_on_their_slots_or_reported(tmp_path: Path) -> None:
    machines = owned("basic4slot", tmp_path, ["alice"] * 4, [1000, 2000, 3000, 4000])
    jobs = tmp_path / "jobs"
    job = (REAL / "test.old.ad").read_text().strip()
    running = "\nJobStatus = 2\nJobCurrentStartDate = 1417808000\nClusterId = {}\nProcId = {}"
    jobs.write_text("\n\n".join([
        job + running.format(2, 0),  # slot1's JobId is "2.0"
        job + running.format(3, 0) + '\nRemoteHost = "slot9@elsewhere"',
    ]) + "\n")
    loaded = hosep_pool(read_snapshot(machines, jobs, now=1417808400.0))
    placed = loaded.pool.tasks["2.0"]
    assert (placed.node.name, placed.start_time) == ("slot1@ingwe.cs.wisc.edu", 1417808000.0)
    owner = loaded.pool.users["bbockelm@users.opensciencegrid.org"]
    assert (owner.allocated_power, owner.running) == (1000.0, 1)
    # Slot 2 still runs 2.1 for bt@cs.wisc.edu, whose job was not read.
    assert loaded.pool.users["bt@cs.wisc.edu"].allocated_power == 2000.0
    assert [(item.name, item.reason) for item in loaded.unplaced] == [
        ("3.0", "running on slot9@elsewhere, which is not a claimed slot among the machines read")]


def test_requirements_steer_the_allocation(tmp_path: Path) -> None:
    machines = with_lines("basic4slot", tmp_path, *(
        f'GridOwner = "alice"\nMFlops = {power}' + extra
        for power, extra in ((1000, ""), (2000, ""), (3000, ""), (4000, '\nArch = "INTEL"'))))
    loaded = hosep_pool(read_snapshot(machines, REAL / "test.old.ad", now=1417808400.0))
    decisions = loaded.negotiator.cycle(1417808400.0)
    # The fastest slot is not X86_64: the job goes to the fastest slot it matches.
    assert [d.node.name for d in decisions] == ["slot3@ingwe.cs.wisc.edu"]


def test_generated_snapshot_totals_and_one_cycle() -> None:
    machine_list = machine_ads(400, 40, seed=3)
    job_list = job_ads(1500, 50, machine_list, running=300, seed=4)
    def sourced(ads: list[classad2.ClassAd]) -> list[SourcedAd]:
        return [SourcedAd(ad, "generated", index, None) for index, ad in enumerate(ads, 1)]

    machines, _ = machines_from_ads(sourced(machine_list))
    jobs, _ = jobs_from_ads(sourced(job_list))
    snapshot = Snapshot(1.8e9, tuple(machines), tuple(jobs))
    loaded = hosep_pool(snapshot)
    assert loaded.unplaced == ()
    pool = loaded.pool
    running = {}
    for job in jobs:
        if job.status is JobStatus.RUNNING:
            running[job.user] = running.get(job.user, 0) + 1
    assert {name: user.running for name, user in pool.users.items() if user.running} == running
    assert sum(user.allocated_power for user in pool.users.values()) == pytest.approx(
        sum(m.power for m in machines if m.running_job is not None))
    decisions = loaded.negotiator.cycle(snapshot.time)
    allocated = [d for d in decisions if d.kind == "allocate"]
    assert allocated
    for decision in allocated:
        assert symmetric_match(decision.task.ad, decision.node.ad)


def test_jobs_kept_as_ad_text_match_as_their_parsed_ads(tmp_path: Path) -> None:
    # The files backend keeps a job's ad as its text (`AdText`) and the matcher parses it to
    # classify the job: every pair must match as the parsed ads do, and the job must not keep
    # a parsed ad.
    machines = machine_ads(60, 6, seed=5)
    jobs = job_ads(80, 8, machines, running=0, seed=6)
    directory = tmp_path / "pool"
    directory.mkdir()
    write_ads(directory / "pool.status", machines, AdFormat.OLD)
    write_ads(directory / "pool.queue", jobs, AdFormat.OLD)
    snapshot = FilesBackend(directory, tmp_path / "a.jsonl").read_snapshot()
    assert all(isinstance(job.ad, AdText) for job in snapshot.jobs)
    matcher = AutoclusterMatcher()
    tasks = [_task(job.ad, job.id) for job in snapshot.jobs]
    nodes = [_node(machine.ad, machine.name) for machine in snapshot.machines]
    answers = [matcher(task, node) for task, node in itertools.product(tasks, nodes)]
    assert answers == [symmetric_match(readable(task.ad), readable(node.ad))
                       for task, node in itertools.product(tasks, nodes)]
    assert answers == [symmetric_match(job, machine)
                       for job, machine in itertools.product(jobs, machines)]
    assert 0 < sum(answers) < len(answers)  # some pairs match and some do not


def test_slots_kept_as_ad_text_match_as_their_parsed_ads(tmp_path: Path) -> None:
    # The files backend keeps a slot's ad as its text too: parsed again to be matched, a
    # partitionable slot is the whole machine (TotalSlotCpus 8, though its dynamic slots
    # leave 4), as the parsed view's ad is.
    directory = tmp_path / "pool"
    directory.mkdir()
    slots = owned("partionable8core", tmp_path, ["alice"] * 5, [8000, 1000, 1000, 1000, 1000])
    (directory / "pool.status").write_text(slots.read_text())
    (directory / "pool.queue").write_text("")
    snapshot = FilesBackend(directory, tmp_path / "a.jsonl").read_snapshot()
    parsed = read_snapshot(slots, REAL / "test.old.ad").machines
    assert all(isinstance(machine.ad, AdText) for machine in snapshot.machines)
    assert readable(snapshot.machines[0].ad)["Cpus"] == parsed[0].ad["Cpus"] == 8
    job = real_job()
    for cpus in (1, 6):
        job["RequestCpus"] = cpus
        job["Requirements"] = classad2.ExprTree("TARGET.Cpus >= RequestCpus")
        task = _task(job, "15.0")
        answers = [AutoclusterMatcher()(task, _node(machine.ad, machine.name))
                   for machine in snapshot.machines]
        assert answers == [symmetric_match(job, machine.ad) for machine in parsed]
    assert answers[0] and not any(answers[1:])  # 6 cpus: the whole machine alone


def test_ads_kept_as_text_are_parsed_again_when_a_new_class_regroups_their_side() -> None:
    # A job classified against a first slot is classified again when a slot whose
    # Requirements read a job attribute comes (its side is regrouped): kept as text, its ad is
    # parsed again then too (it was handed over as text, and failed). Slots alike.
    job = 'MyType = "Job"\nOwner = "alice"\nRequirements = true\n'
    first = 'MyType = "Machine"\nName = "a"\nRequirements = true\n'
    picky = 'MyType = "Machine"\nName = "b"\nRequirements = TARGET.Owner == "bob"\n'
    task = _task(AdText(job, AdFormat.OLD), "1.0")
    matcher = AutoclusterMatcher()
    assert matcher(task, _node(readable(AdText(first, AdFormat.OLD)), "a"))
    assert not matcher(task, _node(readable(AdText(picky, AdFormat.OLD)), "b"))
    assert matcher.regroupings == 1
    slot = _node(AdText(first, AdFormat.OLD), "a")
    named = 'MyType = "Job"\nOwner = "bob"\nRequirements = TARGET.Name == "a"\n'
    matcher = AutoclusterMatcher()
    assert matcher(task, slot)
    assert matcher(_task(readable(AdText(named, AdFormat.OLD)), "2.0"), slot)
    assert matcher.regroupings == 1
