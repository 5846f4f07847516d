"""Partitionable slots: one node per machine, dynamic slots as shares of it, allocations in
flight holding what they asked for on it. On HTCondor's own test ads (partionable8core, in
tests/data/daemon/pool) and on hand-made snapshots."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gridfair.ad_views import Job, JobStatus, Machine, Snapshot
from gridfair.classads.to_pool import pool_from_snapshot
from gridfair.classads.views import AdConfig, read_snapshot
from gridfair.daemon.inflight import Flight, settle
from gridfair.errors import ConfigError
from gridfair.policies.registry import build_stages

POOL = Path(__file__).resolve().parent / "data" / "daemon" / "pool"
PSLOT = "slot1@ingwe2.cs.wisc.edu"
BT, BB = "bt@cs.wisc.edu", "bbockelm@users.opensciencegrid.org"
T0 = 1_000_000.0


def real_snapshot(tmp_path: Path, edit=lambda text: text) -> Snapshot:
    status = tmp_path / "partitionable.status"
    status.write_text(edit((POOL / "partitionable.status").read_text()))
    return read_snapshot(status, POOL / "jobs.queue", AdConfig(), T0, lenient=True)


def test_a_partitionable_slot_is_one_node_and_its_dynamic_slots_are_shares(tmp_path):
    """The real machine: 8 CPUs of 54,760 MFlops, four of them in dynamic slots running bt's
    jobs. One node of 438,080 MFlops, four 1-CPU tasks of bt on it, four CPUs free; HOSEP
    gives them to bbockelm, the owner, and then preempts bt's jobs one at a time for his."""
    snapshot = real_snapshot(tmp_path)
    loaded = pool_from_snapshot(snapshot, build_stages("hosep"))
    pool = loaded.pool
    assert [node.name for node in pool.nodes] == [PSLOT]
    [node] = pool.nodes
    assert (node.cpus, node.memory, node.power, node.free_cpus) == (8.0, 15940.0, 438080.0,
                                                                     4.0)
    running = sorted((task.id, task.cpus, task.memory) for task in pool.tasks.values()
                     if task.node is node)
    assert running == [("3.0", 1.0, 128.0), ("3.1", 1.0, 128.0), ("3.2", 1.0, 128.0),
                       ("3.3", 1.0, 128.0)]
    assert pool.users[BT].allocated_power == 4 * 54760
    assert loaded.unplaced == ()
    decisions = loaded.negotiator.cycle(T0)
    allocated = [d for d in decisions if d.kind == "allocate"]
    assert {d.node.name for d in decisions} == {PSLOT}
    assert len(allocated) == 8 and {d.task.user for d in allocated} == {BB}
    assert node.free_cpus == 0.0  # never beyond the machine


def test_a_dynamic_slot_whose_partitionable_slot_is_not_read_is_skipped(tmp_path):
    snapshot = real_snapshot(tmp_path, lambda text: text.split("\n\n", 1)[1])  # no pslot ad
    loaded = pool_from_snapshot(snapshot, build_stages("hosep"))
    assert loaded.pool.nodes == []
    reasons = {item.name: item.reason for item in loaded.unplaced}
    assert {reasons[f"slot1_{n}@ingwe2.cs.wisc.edu"] for n in range(1, 5)} == {
        "dynamic slot of slot1@ingwe2.cs.wisc.edu, which is not among the partitionable slots "
        "read"}


def test_a_partitionable_slot_that_does_not_say_what_is_left_is_skipped(tmp_path):
    snapshot = real_snapshot(tmp_path, lambda text: text.replace("Cpus = 4\n", "", 1))
    [skipped] = [item for item in snapshot.skipped if item.name == PSLOT]
    assert skipped.reason.endswith("attribute Cpus: missing")


def pslot(cpus: float = 4.0, memory: float = 4096.0, state: str = "Unclaimed") -> Machine:
    return Machine("slot1@h", "User1", 400.0, cpus, memory, state=state,
                   slot_type="Partitionable")


def dslot(number: int, job: str, user: str, cpus: float = 1.0) -> Machine:
    return Machine(f"slot1_{number}@h", "User1", 100.0 * cpus, cpus, 1024.0 * cpus,
                   state="Claimed", activity="Busy", running_job=job, running_user=user,
                   slot_type="Dynamic")


def idle(job_id: str, user: str, cpus: float) -> Job:
    return Job(job_id, user, JobStatus.IDLE, T0 - 100, request_cpus=cpus,
               request_memory=1024.0 * cpus)


def running(job_id: str, user: str, slot: str, start: float = T0 - 50) -> Job:
    return Job(job_id, user, JobStatus.RUNNING, T0 - 100, start_time=start, machine=slot)


def flight(job_id: str, at: float = T0) -> Flight:
    return Flight(f"allocate:{job_id}@slot1@h:0", job_id, "slot1@h", at)


def test_an_allocation_in_flight_holds_its_cpus_on_the_partitionable_slot():
    """Two 2-CPU jobs of User1 sent to a 4-CPU machine where User2's 3-CPU job was vacated for
    them and is still there: both held (the victim leaves, with its dynamic slot), the view
    runs them on the partitionable slot with what they asked for, and nothing is left."""
    machines = [pslot(), dslot(1, "5.0", "User2", cpus=3.0)]
    jobs = [running("5.0", "User2", "slot1_1@h"), idle("9.0", "User1", 2), idle("9.1", "User1",
                                                                                2)]
    result = settle(Snapshot(T0 + 1, tuple(machines), tuple(jobs)),
                    [flight("9.0"), flight("9.1")], {("5.0", "slot1@h"): T0}, 4.0)
    assert sorted(result.held) == ["9.0", "9.1"] and not result.missed
    view = {job.id: job for job in result.view.jobs}
    assert [(view[j].status, view[j].machine) for j in ("9.0", "9.1")] == [
        (JobStatus.RUNNING, "slot1@h")] * 2
    assert view["5.0"].status is JobStatus.IDLE
    assert [m.name for m in result.view.machines] == ["slot1@h"]
    loaded = pool_from_snapshot(result.view, build_stages("hosep"))
    [node] = loaded.pool.nodes
    assert node.free_cpus == 0.0
    assert sorted((t.id, t.cpus) for t in loaded.pool.tasks.values() if t.node is node) == [
        ("9.0", 2.0), ("9.1", 2.0)]


def test_a_flight_that_no_longer_fits_beside_the_rest_is_not_landed():
    """The victim was not vacated for it (another user's job now holds 3 of the 4 CPUs): the
    2-CPU job cannot be held there, and says why."""
    machines = [pslot(), dslot(1, "7.0", "User3", cpus=3.0)]
    jobs = [running("7.0", "User3", "slot1_1@h"), idle("9.0", "User1", 2)]
    result = settle(Snapshot(T0 + 1, tuple(machines), tuple(jobs)), [flight("9.0")], {}, 4.0)
    [(missed, why)] = result.missed
    assert missed.job == "9.0"
    assert why == ("not landed: slot1@h has no room for 2 CPUs and 2048 MiB (left: 1 CPUs, "
                   "1024 MiB)")


def test_a_flight_whose_job_starts_in_a_dynamic_slot_not_naming_it_yet_holds():
    """Seen live (tests/live/test_failopen_live.py, partitionable, one run in three): the job
    had left the idle rows and its dynamic slot was claimed, taking the machine's last CPU,
    but the slot's ad named no job yet; the flight was "not landed: no room" while its job
    started there. That room is the flight's own: it holds, the view shows the job once (on
    the partitionable slot, the jobless dynamic slot left out), never beyond the machine;
    the slot is one flight's, so a second finds no room."""
    starting = dataclasses.replace(dslot(1, "", "User1", cpus=2.0), running_job=None,
                                   running_user=None, activity="Idle")
    machines = [pslot(cpus=2.0, memory=2048.0), starting]
    flights = [Flight(f"allocate:{job_id}@slot1@h:0", job_id, "slot1@h", T0, "User1", 2.0,
                      2048.0, 0.0) for job_id in ("9.0", "9.1")]
    result = settle(Snapshot(T0 + 1, tuple(machines), ()), flights, {}, 4.0)
    assert list(result.held) == ["9.0"]
    [(missed, why)] = result.missed
    assert missed.job == "9.1" and why.startswith("not landed: slot1@h has no room")
    assert [m.name for m in result.view.machines] == ["slot1@h"]
    loaded = pool_from_snapshot(result.view, build_stages("hosep"))
    [node] = loaded.pool.nodes
    assert node.free_cpus == 0.0
    assert [(t.id, t.cpus) for t in loaded.pool.tasks.values() if t.node is node] == [
        ("9.0", 2.0)]


def test_a_taken_back_partitionable_slot_takes_no_new_job_but_keeps_its_running_ones():
    """Its owner took the machine back (State Owner): what runs in its dynamic slots stays
    charged, and nothing new is placed there, neither on free room nor by preemption."""
    machines = [pslot(state="Owner"), dslot(1, "5.0", "User2")]
    jobs = [running("5.0", "User2", "slot1_1@h"), idle("9.0", "User1", 1)]
    loaded = pool_from_snapshot(Snapshot(T0, tuple(machines), tuple(jobs)), build_stages("hosep"))
    [node] = loaded.pool.nodes
    assert node.free_cpus == 0.0
    assert loaded.pool.users["User2"].running == 1
    assert [d.kind for d in loaded.negotiator.cycle(T0)] == []


def test_a_job_on_a_dynamic_slot_the_collector_does_not_list_yet_holds_its_machine():
    """The schedd says 5.0 runs on slot1_2@h before the startd's new dynamic slot reaches the
    collector: the job is counted on the partitionable slot with what it asked for (not
    skipped), so its cpus are not given to another job (found live). User3, who owns
    nothing, waits: one cpu is left."""
    machines = [pslot(), dslot(1, "4.0", "User2")]
    jobs = [running("4.0", "User2", "slot1_1@h"),
            dataclasses.replace(running("5.0", "User2", "slot1_2@h"), request_cpus=2.0,
                                request_memory=2048.0),
            idle("9.0", "User3", 2)]
    loaded = pool_from_snapshot(Snapshot(T0, tuple(machines), tuple(jobs)),
                                build_stages("hosep"))
    assert loaded.unplaced == ()
    [node] = loaded.pool.nodes
    assert sorted((t.id, t.cpus) for t in loaded.pool.tasks.values() if t.node is node) == [
        ("4.0", 1.0), ("5.0", 2.0)]
    assert node.free_cpus == 1.0
    assert loaded.negotiator.cycle(T0) == []  # User3's 2-cpu job finds no room


def test_a_flight_whose_job_no_ad_lists_holds_what_the_job_asked_for():
    """Read from autoclusters, a job that has just started is on no ad until its dynamic
    slot's ad reaches the collector (about 1 s, measured live): its flight holds the 2 CPUs
    and 2 GiB the journal recorded, not 1 CPU, so a 3-CPU job finds no room beside it and
    User3's 2-CPU job does (found live: a ninth CPU allocated on an 8-CPU machine)."""
    jobs = [idle("9.1", "User1", 3), idle("9.2", "User1", 2)]
    result = settle(Snapshot(T0 + 1, (pslot(),), tuple(jobs)),
                    [dataclasses.replace(flight("9.0"), cpus=2.0, memory=2048.0),
                     flight("9.1"), flight("9.2")], {}, 4.0)
    assert sorted(result.held) == ["9.0", "9.2"]
    [(missed, why)] = result.missed
    assert missed.job == "9.1" and why.startswith("not landed: slot1@h has no room for 3 CPUs")
    loaded = pool_from_snapshot(result.view, build_stages("hosep"))
    [node] = loaded.pool.nodes
    assert sorted((t.id, t.cpus) for t in loaded.pool.tasks.values() if t.node is node) == [
        ("9.0", 2.0), ("9.2", 2.0)]
    assert node.free_cpus == 0.0


def test_a_request_grown_after_the_steering_does_not_push_other_flights_off_the_machine():
    """User1's job was allocated 1 CPU and 1 GiB, then its submitter edited its request to 3
    CPUs (condor_qedit): the pool's START cuts it no dynamic slot larger than the allocation,
    so its flight holds 1 CPU, and User3's 2-CPU flight settled after it still lands beside
    it. Charged what the job asks now, User3's flight was "not landed: no room"."""
    grown = dataclasses.replace(idle("9.0", "User1", 3), request_memory=3072.0)
    jobs = [grown, idle("8.0", "User3", 2)]
    flights = [dataclasses.replace(flight("9.0"), cpus=1.0, memory=1024.0, gpus=0.0),
               dataclasses.replace(flight("8.0"), cpus=2.0, memory=2048.0, gpus=0.0)]
    result = settle(Snapshot(T0 + 1, (pslot(),), tuple(jobs)), flights, {}, 4.0)
    assert sorted(result.held) == ["8.0", "9.0"] and not result.missed
    loaded = pool_from_snapshot(result.view, build_stages("hosep"))
    [node] = loaded.pool.nodes
    assert sorted((t.id, t.cpus) for t in loaded.pool.tasks.values() if t.node is node) == [
        ("8.0", 2.0), ("9.0", 1.0)]
    assert node.free_cpus == 1.0


@pytest.mark.parametrize("allocation, allocated", [("stop", []), ("backfill", ["9.1"]),
                                                   (None, [])])
def test_the_daemons_allocation_rule_backfills_past_a_job_that_fits_nowhere(
        allocation, allocated):
    """SDRF's paper stops at the first job that fits no free node (None: the order's own
    rule); `policy.allocation = "backfill"`, the daemon's default, goes on as HTCondor's
    negotiator does: User1's 1-cpu job takes the machine's last 2 cpus' room past its 3-cpu
    one."""
    machines = [pslot(), dslot(1, "5.0", "User2", cpus=2.0)]
    jobs = [running("5.0", "User2", "slot1_1@h"),
            dataclasses.replace(idle("9.0", "User1", 3), qdate=T0 - 200),
            idle("9.1", "User1", 1)]
    loaded = pool_from_snapshot(Snapshot(T0, tuple(machines), tuple(jobs)),
                                build_stages(order="sdrf", allocation=allocation))
    assert [d.task.id for d in loaded.negotiator.cycle(T0)] == allocated


def test_an_unknown_allocation_rule_is_refused():
    with pytest.raises(ConfigError, match="unknown allocation rule 'greedy'"):
        build_stages(order="sdrf", allocation="greedy")


def test_a_flight_asking_for_a_gpu_the_machine_has_no_more_of_is_not_landed():
    """GPUs are held like cpus and memory: the machine's one GPU is in a dynamic slot."""
    machines = [dataclasses.replace(pslot(), gpus=1.0),
                dataclasses.replace(dslot(1, "7.0", "User3"), gpus=1.0)]
    jobs = [running("7.0", "User3", "slot1_1@h"),
            dataclasses.replace(idle("9.0", "User1", 1), request_gpus=1.0)]
    result = settle(Snapshot(T0 + 1, tuple(machines), tuple(jobs)), [flight("9.0")], {}, 4.0)
    [(missed, why)] = result.missed
    assert why == ("not landed: slot1@h has no room for 1 CPUs and 1024 MiB and 1 GPUs (left: "
                   "3 CPUs, 3072 MiB, 0 GPUs)")
