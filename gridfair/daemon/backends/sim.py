"""The `sim` backend: the embedded simulated grid, as a pool the daemon can act on.

The grid file's machines (`gridfair.sim.grid`) and one of its synthetic workloads
(`gridfair.sim.workloads.hosep`) make a small in-process world. Every snapshot read after the
first advances simulated time by `step` seconds: running jobs progress at their machine's
power (MFlops) and finish, submitted jobs arrive. The daemon's vacates put jobs back in the
queue (their progress is lost, no checkpointing) and its allocations start them. Nothing else
schedules jobs here, so what runs is exactly what the daemon decided.

The world lives in memory: a restarted daemon starts a fresh simulation, its clock starting at
the wall clock's time (the daemon's own state - journal, history, policy state - persists).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gridfair.ad_views import Job, JobStatus, Machine, Snapshot
from gridfair.daemon.backends import ActionFailed, PoolBackend
from gridfair.sim.grid_loader import load_grid
from gridfair.sim.workloads.hosep import hosep_workload

if TYPE_CHECKING:
    from gridfair.daemon.config import Config

#: The grid `make run` uses when the config names none: embedded in the package.
EMBEDDED_GRID = "hosep-table1"


@dataclass
class _SimJob:
    id: str
    user: str
    submit: float
    work: float  # MFlop
    done: float = 0.0
    machine: str | None = None
    start: float | None = None


class SimBackend(PoolBackend):
    name = "sim"

    def __init__(
        self, grid: str | Path = "", *, workload: str = "medium", step: float = 60.0,
        seed: int = 1, origin: float | None = None,
    ) -> None:
        self.grid = load_grid(grid or EMBEDDED_GRID)
        self.step = step
        # Simulated time starts at the wall clock's now: each start is a new world, and its
        # jobs' times (hence the journal's idempotency keys) never repeat an earlier run's
        # kept in the same store.
        self.time = time.time() if origin is None else origin
        self.simulated_since = self.time
        self._reads = 0
        self.machines = {spec.name: spec for spec in self.grid.machines}
        self.running_on: dict[str, str] = {}  # machine -> job id
        # HTCondor-style ids ("cluster.proc", one cluster per user), as real pools have.
        clusters: dict[str, int] = {}
        procs: dict[str, int] = {}
        self.jobs: dict[str, _SimJob] = {}
        for task in hosep_workload(self.grid, workload, seed):
            cluster = clusters.setdefault(task.user, len(clusters) + 1)
            proc = procs[task.user] = procs.get(task.user, -1) + 1
            job_id = f"{cluster}.{proc}"
            self.jobs[job_id] = _SimJob(job_id, task.user, self.time + task.submit_time,
                                        task.work or 0.0)
        self.finished: list[str] = []

    @classmethod
    def from_config(cls, section: Mapping[str, Any], config: Config) -> SimBackend:
        return cls(section["grid"], workload=section["workload"], step=section["step"],
                   seed=section["seed"])

    def now(self) -> float:
        return self.time

    def _advance(self, seconds: float) -> None:
        end = self.time + seconds
        for machine_name, job_id in list(self.running_on.items()):
            job = self.jobs[job_id]
            spec = self.machines[machine_name]
            job.done += spec.mflops * (1.0 - spec.load) * seconds
            if job.done >= job.work:
                del self.running_on[machine_name]
                del self.jobs[job_id]
                self.finished.append(job_id)
        self.time = end

    def read_snapshot(self) -> Snapshot:
        if self._reads:
            self._advance(self.step)
        self._reads += 1
        machines = []
        for name, spec in self.machines.items():
            job_id = self.running_on.get(name)
            machines.append(Machine(
                name=name, owner=spec.owner, power=spec.mflops, cpus=spec.cpus,
                memory=spec.memory, state="Claimed" if job_id else "Unclaimed",
                activity="Busy" if job_id else "Idle", running_job=job_id,
                running_user=self.jobs[job_id].user if job_id else None, load=spec.load,
            ))
        jobs = tuple(
            Job(id=job.id, user=job.user,
                status=JobStatus.RUNNING if job.machine else JobStatus.IDLE,
                qdate=job.submit, start_time=job.start, machine=job.machine)
            for job in self.jobs.values() if job.submit <= self.time
        )
        return Snapshot(self.time, tuple(machines), jobs)

    def vacate(self, job_ids: Sequence[str]) -> dict[str, str | None]:
        results: dict[str, str | None] = {}
        for job_id in job_ids:
            job = self.jobs.get(job_id)
            if job is None or job.machine is None:
                results[job_id] = "not running"
                continue
            del self.running_on[job.machine]
            job.machine, job.start, job.done = None, None, 0.0
            results[job_id] = None
        return results

    def allocate(self, job: Job, machine: Machine) -> None:
        sim_job = self.jobs.get(job.id)
        if sim_job is None or sim_job.submit > self.time:
            raise ActionFailed(f"job {job.id} is not in the queue")
        if sim_job.machine is not None:
            raise ActionFailed(f"job {job.id} is already running on {sim_job.machine}")
        if machine.name not in self.machines:
            raise ActionFailed(f"no machine {machine.name}")
        if machine.name in self.running_on:
            raise ActionFailed(f"{machine.name} is busy with {self.running_on[machine.name]}")
        sim_job.machine, sim_job.start = machine.name, self.time
        self.running_on[machine.name] = job.id
