"""The kept pool (`gridfair.classads.kept_pool`) against the rebuild (`pool_from_snapshot`):
on the same snapshot sequences both must give the same decisions, figures and per-user totals
every cycle, and the sequences must bring every kind of change the kept pool handles."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import classad2
import pytest

from gridfair.ad_views import JOB_ID, JobStatus
from gridfair.classads.kept_pool import EVENT_KINDS, KeptPool, unsupported
from gridfair.classads.reader import AdFormat
from gridfair.classads.to_pool import place_running, pool_from_snapshot, queue_order
from gridfair.core.pool import Node, Pool, Task, fifo_key, least_demand_key
from gridfair.core.shares import share_rows
from gridfair.core.stages import ALLOCATE
from gridfair.daemon.backends.files import FilesBackend
from gridfair.daemon.config import validate
from gridfair.daemon.cycle import CycleRunner
from gridfair.daemon.reconcile import KnownJobs, reconcile
from gridfair.daemon.store import Store
from gridfair.policies.registry import build_stages
from tests.harness.synthetic import job_ads, machine_ads, write_ads

ROOT = Path(__file__).resolve().parent.parent
REAL_POOL = ROOT / "tests" / "data" / "daemon" / "pool"

#: (order, preempt): every composition the kept pool serves.
KEPT = [("hosep", "hosep"), ("osep", "osep"), ("hosep", "reclaim"), ("drf", None),
        ("wdrf", None)]


def stages_of(order: str, preempt: str | None):
    return build_stages(None, order=order, preempt=preempt or "none")


def outcome(loaded, now: float) -> tuple[list, tuple]:
    """The decisions of a cycle, and what must be equal: the decisions as recorded, the
    per-user rows and totals before the cycle, and the pool's totals."""
    pool = loaded.pool
    rows = share_rows(pool)
    users = [(u.name, u.index, u.allocated_power, u.provided_power, tuple(u.usage), u.running,
              u.idle_count) for u in pool.users.values()]
    totals = [*pool.capacity, *pool.used, pool.running]
    decisions = loaded.negotiator.cycle(now)
    return decisions, ([d.as_dict() for d in decisions], rows, users, totals,
                       [u.name for u in loaded.unplaced])


def places(snapshot) -> dict[str, str | None]:
    """Where each job of the snapshot's pool is, its slot or None for the queue, found over
    every job (as the kept pool once did, and the rebuild does)."""
    running = sorted((job for job in snapshot.jobs if job.status is JobStatus.RUNNING),
                     key=queue_order)
    placed, _ = place_running(snapshot.machines, running)
    where: dict[str, str | None] = {job.id: slot for job, slot in placed.items()}
    where.update((job.id, None) for job in snapshot.jobs if job.status is JobStatus.IDLE)
    return where


def job_events(before: dict[str, str | None], after: dict[str, str | None]) -> dict[str, int]:
    """The job events between two pools' places, counted over every job."""
    counts = dict.fromkeys(("submitted", "started", "vacated", "moved", "finished"), 0)
    for job_id, slot in after.items():
        if job_id not in before:
            counts["submitted" if slot is None else "started"] += 1
        elif before[job_id] != slot:
            was = before[job_id]
            counts["started" if was is None else ("vacated" if slot is None else "moved")] += 1
    counts["finished"] = len(before.keys() - after.keys())
    return counts


def compare_along(backend: FilesBackend, steps, order: str, preempt: str | None) -> dict:
    """Run both paths on the snapshot after each step; returns the kept pool's event counts,
    checked against a count over every job."""
    kept = KeptPool()
    seen = dict.fromkeys(EVENT_KINDS, 0)
    decided = 0
    where: dict[str, str | None] = {}
    for number, step in enumerate(steps):
        step()
        snapshot = backend.read_snapshot()
        _, fresh = outcome(pool_from_snapshot(snapshot, stages_of(order, preempt)),
                           snapshot.time)
        decisions, kept_outcome = outcome(kept.update(snapshot, stages_of(order, preempt)),
                                          snapshot.time)
        assert kept_outcome == fresh, f"cycle {number}: the kept pool decided otherwise"
        decided += len(decisions)
        where, before = places(snapshot), where
        expected = job_events(before, where)
        assert {kind: kept.events.counts[kind] for kind in expected} == expected, number
        for kind, count in kept.events.counts.items():
            seen[kind] += count
    assert decided > 0, "a sequence that decides nothing compares nothing"
    return seen


# ----------------------------------------------------------------- synthetic churn
class ChurningPool:
    """A synthetic pool written as dumps, changed at random between cycles by every kind of
    change a real pool sees (the slot and job ads kept consistent with each other)."""

    def __init__(self, directory: Path, seed: int) -> None:
        self.rng = random.Random(seed)
        self.directory = directory
        self.machines = machine_ads(40, 6, seed=seed)
        self.jobs = job_ads(300, 9, self.machines, running=30, seed=seed + 1)
        self.next_cluster = 1000
        self.next_slot = 1000
        self.clock = 1_700_100_000

    def write(self) -> None:
        write_ads(self.directory / "pool.status", self.machines, AdFormat.OLD)
        write_ads(self.directory / "pool.queue", self.jobs, AdFormat.OLD)

    def _free_slot(self):
        free = [m for m in self.machines if m["State"] == "Unclaimed"]
        return self.rng.choice(free) if free else None

    def _running(self):
        return [j for j in self.jobs if j["JobStatus"] == JobStatus.RUNNING]

    def _slot_of(self, job):
        return next(m for m in self.machines if m.get("JobId") == _job_id(job))

    def _release(self, slot) -> None:
        slot.update({"State": "Unclaimed", "Activity": "Idle"})
        for attribute in ("JobId", "RemoteUser", "RemoteOwner"):
            del slot[attribute]

    def _run(self, job, slot) -> None:
        self.clock += 1
        job.update({"JobStatus": int(JobStatus.RUNNING), "RemoteHost": slot["Name"],
                    "JobCurrentStartDate": self.clock})
        slot.update({"State": "Claimed", "Activity": "Busy", "JobId": _job_id(job),
                     "RemoteUser": job["User"], "RemoteOwner": job["User"]})

    def submit(self) -> None:
        for proc in range(self.rng.randint(1, 5)):
            self.clock += 1
            user = f"user{self.rng.randrange(12)}@grid"  # sometimes a user never seen before
            ad = classad2.ClassAd({"MyType": "Job", "ClusterId": self.next_cluster,
                                   "ProcId": proc, "Owner": user.partition("@")[0],
                                   "User": user, "JobStatus": int(JobStatus.IDLE),
                                   "QDate": self.clock - self.rng.choice((0, 5)),
                                   "RequestCpus": 1, "RequestMemory": 1024})
            self.jobs.append(ad)
        self.next_cluster += 1

    def start(self) -> None:
        idle = [j for j in self.jobs if j["JobStatus"] == JobStatus.IDLE]
        slot = self._free_slot()
        if idle and slot is not None:
            self._run(self.rng.choice(idle), slot)

    def finish(self) -> None:
        running = self._running()
        if running:
            job = self.rng.choice(running)
            self._release(self._slot_of(job))
            self.jobs.remove(job)

    def vacate(self) -> None:
        running = self._running()
        if running:
            job = self.rng.choice(running)
            self._release(self._slot_of(job))
            job["JobStatus"] = int(JobStatus.IDLE)
            del job["RemoteHost"]

    def move(self) -> None:
        running, slot = self._running(), self._free_slot()
        if running and slot is not None:
            job = self.rng.choice(running)
            self._release(self._slot_of(job))
            self._run(job, slot)

    def hold(self) -> None:
        idle = [j for j in self.jobs if j["JobStatus"] == JobStatus.IDLE]
        if idle:
            self.rng.choice(idle)["JobStatus"] = int(JobStatus.HELD)

    def slot_came(self) -> None:
        ad = classad2.ClassAd(str(self.machines[0]))
        ad.update({"Name": f"slot1@new{self.next_slot}.grid", "State": "Unclaimed",
                   "Activity": "Idle", "GridOwner": f"user{self.rng.randrange(8)}@grid",
                   "MFlops": self.rng.choice((1000, 2000, 3000))})
        for attribute in ("JobId", "RemoteUser", "RemoteOwner"):
            if attribute in ad:
                del ad[attribute]
        self.next_slot += 1
        self.machines.insert(self.rng.randrange(len(self.machines) + 1), ad)

    def slot_went(self) -> None:
        slot = self.rng.choice(self.machines)
        job_id = slot.get("JobId")
        self.machines.remove(slot)
        for job in self.jobs:
            if job_id is not None and _job_id(job) == job_id:
                job["JobStatus"] = int(JobStatus.IDLE)
                del job["RemoteHost"]

    def slot_changed(self) -> None:
        slot = self.rng.choice(self.machines)
        slot["MFlops"] = self.rng.choice((500, 1000, 2000, 3000, 5000))
        if self.rng.random() < 0.3:
            slot["GridOwner"] = f"user{self.rng.randrange(8)}@grid"

    def step(self) -> None:
        changes = (self.submit, self.start, self.finish, self.vacate, self.move, self.hold,
                   self.slot_came, self.slot_went, self.slot_changed)
        for _ in range(self.rng.randint(1, 6)):
            self.rng.choice(changes)()
        self.write()


def _job_id(job) -> str:
    return f"{job['ClusterId']}.{job['ProcId']}"


@pytest.mark.parametrize(("order", "preempt"), KEPT)
@pytest.mark.parametrize("seed", [3, 11])
def test_kept_pool_decides_as_a_rebuild_under_synthetic_churn(tmp_path, order, preempt, seed):
    pool = ChurningPool(tmp_path, seed)
    pool.write()
    backend = FilesBackend(tmp_path, tmp_path / "actions.jsonl")
    seen = compare_along(backend, [lambda: None] + [pool.step] * 25, order, preempt)
    assert all(seen[kind] > 0 for kind in EVENT_KINDS), seen


# ----------------------------------------------------------------- real recorded ads
def _edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path.name}"
    path.write_text(text.replace(old, new, count))


@pytest.mark.parametrize(("order", "preempt"), KEPT)
def test_kept_pool_decides_as_a_rebuild_on_real_ads(tmp_path, order, preempt):
    directory = tmp_path / "pool"
    shutil.copytree(REAL_POOL, directory, copy_function=shutil.copy)
    aside = tmp_path / "partitionable.status"
    queue, static = directory / "jobs.queue", directory / "basic4slot.status"

    def hold_one() -> None:  # an idle job held: it leaves the pool
        _edit(queue, "JobStatus = 1", "JobStatus = 5")

    def slots_go() -> None:  # the partitionable machine leaves (its 4 running jobs with it)
        shutil.move(directory / "partitionable.status", aside)

    def slots_come() -> None:
        shutil.move(aside, directory / "partitionable.status")

    def slot_faster() -> None:
        _edit(static, "MFlops = 132250", "MFlops = 264500")

    def release() -> None:
        _edit(queue, "JobStatus = 5", "JobStatus = 1")

    steps = [lambda: None, hold_one, slots_go, slot_faster, slots_come, release, lambda: None]
    backend = FilesBackend(directory, tmp_path / "actions.jsonl")
    seen = compare_along(backend, steps, order, preempt)
    for kind in ("submitted", "finished", "slot_came", "slot_went", "slot_changed", "started"):
        assert seen[kind] > 0, (kind, seen)


def test_stages_that_integrate_over_time_are_rebuilt():
    assert unsupported(stages_of("hosep", "hosep")) is None
    assert "sdrf" in unsupported(stages_of("sdrf", None))
    assert "condor" in unsupported(stages_of("condor", None))
    assert "justice" in unsupported(build_stages("justice"))


# ----------------------------------------------------------------- the daemon, both ways
def _runner(tmp_path: Path, directory: Path, name: str, incremental: bool,
            **daemon: object) -> CycleRunner:
    raw = {"daemon": {"store": f"{name}.db", "incremental": incremental, **daemon},
           "backend": {"kind": "files", "files": {"directory": str(directory),
                                                  "actions": f"{name}.jsonl"}},
           "safety": {"max_snapshot_age": 1e9, "min_runtime": 0.0}}
    config = validate(raw, base=tmp_path)
    return CycleRunner(config, FilesBackend(directory, tmp_path / f"{name}.jsonl"),
                       Store(tmp_path / f"{name}.db"))


def test_daemon_journals_the_same_with_and_without_the_kept_pool(tmp_path):
    directory = tmp_path / "pool"
    directory.mkdir()
    pool = ChurningPool(directory, 5)
    pool.write()
    kept, rebuilt = (_runner(tmp_path, directory, "kept", True),
                     _runner(tmp_path, directory, "rebuilt", False))
    for _ in range(12):
        a, b = kept.run(), rebuilt.run()
        assert (a.outcome, a.counts) == (b.outcome, b.counts)
        pool.step()
    assert kept.carried.kept is not None and kept.carried.kept.cycles == 12
    assert rebuilt.carried.kept is None
    query = ("select cycle, seq, kind, job, user, machine, policy, reason, figures, action "
             "from decisions order by cycle, seq")
    journal = [list(s.db.query(query)) for s in (kept.store, rebuilt.store)]
    assert journal[0] == journal[1] and len(journal[0]) > 20


@pytest.mark.parametrize("seed", [3, 11])
def test_reconcile_passing_over_unchanged_jobs_finds_what_a_full_pass_finds(tmp_path, seed):
    # The daemon reconciles only jobs whose view or slot changed since the last reconciled
    # snapshot; a full pass over every job must find the same events, rows and start times.
    directory = tmp_path / "pool"
    directory.mkdir()
    pool = ChurningPool(directory, seed)
    pool.write()
    backend = FilesBackend(directory, tmp_path / "a.jsonl")
    known = KnownJobs.from_rows({})
    stored: dict[str, dict] = {}  # the `jobs` table as the rows written make it
    passed_over = 0
    for cycle in range(1, 16):
        snapshot = backend.read_snapshot()
        full = reconcile(snapshot, KnownJobs.from_rows(stored), cycle)
        incremental = reconcile(snapshot, known, cycle)
        assert list(incremental.events) == list(full.events)
        assert incremental.gone == full.gone and incremental.changed == full.changed
        assert list(incremental.rows()) == list(full.rows())
        stored.update((row.id, row._asdict()) for row in full.rows())
        for job_id in full.gone:
            del stored[job_id]
        # The known jobs, kept as the views and the `since` they do not say, are the rows.
        table = KnownJobs.from_rows(stored)
        assert list(incremental.after.ids()) == list(map(JOB_ID, snapshot.jobs))
        assert sorted(stored) == sorted(incremental.after.ids())
        assert all(incremental.after.get(job_id) == table.get(job_id)
                   and incremental.since_of(job_id) == table.since_of(job_id)
                   for job_id in stored)
        passed_over += len(snapshot.jobs) - incremental.looked_at
        known = incremental.after
        pool.step()
        if cycle % 4 == 0:
            _slot_ads_say_moved(pool)
    assert passed_over > 1000  # most jobs were passed over, not looked at again


def _slot_ads_say_moved(pool: ChurningPool) -> None:
    """A running job's slot ad moves to a free slot, its job ad unchanged (as when the
    collector's slot ads and the schedd disagree): the job's view is the same object, its
    slot is not."""
    running, slot = pool._running(), pool._free_slot()
    if running and slot is not None:
        job = pool.rng.choice(running)
        old = pool._slot_of(job)
        slot.update({key: old[key] for key in ("State", "Activity", "JobId", "RemoteUser",
                                               "RemoteOwner")})
        pool._release(old)
        pool.write()


@pytest.mark.parametrize("key", [fifo_key, least_demand_key])
@pytest.mark.parametrize("park", [False, True])
def test_deferred_queue_serves_as_the_tasks_would_when_a_vacated_task_rejoins(key, park):
    # The kept pool loads idle jobs as handles made into tasks at their queue's head. A
    # running task vacated back into the queue ranks after the deferred ones (a later QDate,
    # or a later seq under least demand): the next head must still be the deferred task.
    def pools():
        for deferred in (False, True):
            pool = Pool(task_key=key)
            node = Node("n", "owner", 100.0, cpus=10.0)
            late = Task("9.0", "u", 50.0)
            made = [Task(f"1.{proc}", "u", float(proc)) for proc in range(4)]
            if deferred:
                pool.make_task = lambda handle: Task(f"1.{handle}", "u", float(handle))
                pool.load([node], (), [(late, node, 0.0)], deferred=["u"] * 4)
            else:
                pool.load([node], made, [(late, node, 0.0)])
            yield pool, node, late

    served = []
    for pool, node, late in pools():
        user = pool.users["u"]
        order = [pool.head(user).id]
        pool.vacate(late, 1.0)
        if park:
            pool.park(user, 1.0)  # the head set aside: the next one must come from the queue
            order.append(pool.head(user).id)
        while (head := pool.head(user)) is not None:
            pool.start(head, node, 2.0)
            order.append(head.id)
        pool.unblock_all(3.0)
        order.append(pool.head(user).id if pool.head(user) else None)
        served.append(order)
    assert served[0] == served[1]
    assert served[0][-2] == "9.0" and served[0].count("9.0") == 1


# ----------------------------------------------------------------- the matcher kept
@pytest.mark.parametrize("side", ["jobs", "machines"])
def test_an_ad_edited_behind_a_kept_id_is_matched_anew(tmp_path, side):
    pool = ChurningPool(tmp_path, 5)
    pool.write()
    backend = FilesBackend(tmp_path, tmp_path / "actions.jsonl")
    kept = KeptPool()

    def allocations() -> int:
        snapshot = backend.read_snapshot()
        loaded = kept.update(snapshot, stages_of("hosep", "hosep"))
        decisions, _ = outcome(loaded, snapshot.time)
        return sum(1 for decision in decisions if decision.kind == ALLOCATE)

    assert allocations() > 0
    for ad in (pool.jobs if side == "jobs" else pool.machines):
        ad["Requirements"] = classad2.ExprTree("false")  # the same ids: nothing matches now
    pool.write()
    assert allocations() == 0


def test_the_kept_matcher_does_not_hold_the_groups_of_ads_gone_without_bound(tmp_path):
    pool = ChurningPool(tmp_path, 5)
    backend = FilesBackend(tmp_path, tmp_path / "actions.jsonl")
    kept = KeptPool()
    groups = []
    for cycle in range(10):
        for ad in pool.jobs:  # every job a new ad, of a new autocluster, each cycle
            ad["Requirements"] = classad2.ExprTree(f"TARGET.Memory >= {cycle}")
        pool.write()
        snapshot = backend.read_snapshot()
        loaded = kept.update(snapshot, stages_of("hosep", "hosep"))
        loaded.negotiator.cycle(snapshot.time)
        groups.append(loaded.pool.matcher.autoclusters)
    # A new matcher once the jobs it forgot outnumber the jobs and slots live (300 + 40):
    # two cycles' autoclusters at most, not ten.
    assert max(groups) <= 2 * groups[0], groups
