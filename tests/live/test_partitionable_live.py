"""The daemon, as its account, on a partitionable pool of multi-cpu machines (a short version of
bench/live_pool_showcase.py): a guest fills both machines with 2-cpu jobs, the owner of one
of them asks for all 4 of its cpus; owner reclaim vacates both guest jobs there and steers the
4-cpu job to the machine's partitionable slot, where it starts. Checked against HTCondor's
own records (the job event log and the slot ads), not the daemon's word."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from gridfair.ad_views import whole_slot
from tests.harness.pool_record import read_runs
from tests.live.conftest import POOL_CONFIG, QUICK_SAFETY, own_pool, run_daemon, write_daemon_config
from tests.live.harness.personal_pool import JobSpec, PersonalPool, SlotSpec

#: owner, cpus, MFlops per cpu; 2 GiB a cpu
MACHINES = (("O1", 4, 4000), ("O2", 4, 2000))
LONG = 4000 * 600  # 10 minutes on the fastest cpu: nothing ends by itself during the test


def test_a_four_cpu_owner_job_takes_its_machine_back_from_two_guest_jobs(
        daemon_python: Path, daemon_dir: Path) -> None:
    slots = [SlotSpec(owner, cpus * per_cpu, cpus, cpus * 2048)
             for owner, cpus, per_cpu in MACHINES]
    with own_pool(slots, layout="partitionable",
                  extra_config=POOL_CONFIG.read_text().splitlines()) as pool:
        event_log = pool.shared_file("events.log")
        extra = [f"log = {event_log}"]
        # No daemon yet, so no lease: HTCondor fills the pool by itself (failing open).
        guests = pool.submit_cluster([JobSpec("G1", LONG, 2, 1024)] * 4, extra=extra)
        pool.wait_until(lambda: set(pool.running()) == set(guests), 30)
        [owners] = pool.submit_cluster([JobSpec("O1", LONG, 4, 2048)], extra=extra)
        on_slot1 = {job for job, node in pool.running_on_nodes().items() if node == "slot1@vm"}
        write_daemon_config(daemon_dir, pool,
                            daemon={"interval": 2},
                            policy={"name": "reclaim"},
                            safety={**QUICK_SAFETY, "max_snapshot_age": 60, "landing_timeout": 8})
        with _Watch(pool) as watch:
            done = run_daemon(daemon_python, pool, daemon_dir, "--cycles", "7")
        assert done.returncode == 0, done.stderr
        runs = read_runs(event_log, {job: "G1" for job in guests} | {owners: "O1"},
                         float("inf"))
        with sqlite3.connect(daemon_dir / "state.db") as db:
            actions = list(db.execute("select kind, job, machine, state, error from actions"))
    allocations = [(job, machine, state) for kind, job, machine, state, _ in actions
                   if kind == "allocate"]
    # The 4-cpu job was given the machine, named by its partitionable slot, and ran there.
    assert allocations == [(owners, "slot1@vm", "landed")], actions
    ran = [(whole_slot(run.slot), run.slot) for run in runs if run.job == owners]
    assert ran and ran[0][0] == "slot1@vm" and ran[0][1] != "slot1@vm", ran
    # Both guest jobs on that machine were vacated for it (it needs all 4 cpus), no other.
    vacated = {job for kind, job, _, state, _ in actions if kind == "vacate"
               and state == "confirmed"}
    assert len(on_slot1) == 2 and vacated == on_slot1, (on_slot1, actions)
    assert {run.job for run in runs if run.evicted} == vacated
    # Never more than a machine's cpus: in the slot ads all along, and in the event log.
    assert watch.most_used == {"slot1@vm": 4, "slot2@vm": 4}, watch.most_used
    assert all(state != "failed" for *_, state, _ in actions), actions
    for machine, cpus in (("slot1@vm", 4), ("slot2@vm", 4)):
        held = [(run.start, run.end or float("inf"), 4 if run.job == owners else 2)
                for run in runs if whole_slot(run.slot) == machine]
        assert all(sum(size for start, end, size in held if start <= moment < end) <= cpus
                   for moment, _, _ in held), (machine, held)


class _Watch(threading.Thread):
    """The most cpus the dynamic slots of each partitionable slot held, polled every second."""

    def __init__(self, pool: PersonalPool) -> None:
        super().__init__(daemon=True)
        self.pool = pool
        self.most_used: dict[str, int] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(1.0):
            used: dict[str, int] = {}
            for name, cpus in self.pool.status("Name", "Cpus",
                                               constraint="DynamicSlot =?= true"):
                used[whole_slot(name)] = used.get(whole_slot(name), 0) + int(cpus)
            for machine, cpus in used.items():
                self.most_used[machine] = max(self.most_used.get(machine, 0), cpus)

    def __enter__(self) -> _Watch:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stopping.set()
        self.join()
