"""The `files` backend's match groups: jobs alike for matching share one ad text, and a job
whose match can depend on what differs between them keeps its own."""

from __future__ import annotations

from pathlib import Path

from gridfair.ad_views import Snapshot
from gridfair.classads.matching import AutoclusterMatcher
from gridfair.classads.reader import AdText
from gridfair.classads.to_pool import node_from_machine, task_from_job
from gridfair.daemon.backends.files import FilesBackend

SLOT = ('MyType = "Machine"\nName = "slot{n}@host"\nGridOwner = "owner"\nCpus = 4\n'
        'Memory = 8000\nMFlops = 1000\nRequirements = {requirements}\n\n')
JOB = ('MyType = "Job"\nClusterId = {cluster}\nProcId = {proc}\nOwner = "{owner}"\n'
       'JobStatus = 1\nQDate = {qdate}\nRequestCpus = 1\nRequestMemory = 100\n{extra}'
       'Requirements = {requirements}\n\n')


def _pool(tmp_path: Path, jobs: list[dict], slot_requirements: str = "true") -> FilesBackend:
    pool = tmp_path / "pool"
    pool.mkdir(parents=True, exist_ok=True)
    _write(pool, jobs, slot_requirements)
    return FilesBackend(pool, tmp_path / "actions.jsonl")


def _write(pool: Path, jobs: list[dict], slot_requirements: str = "true") -> None:
    (pool / "slots.status").write_text(
        "".join(SLOT.format(n=n, requirements=slot_requirements) for n in range(2)))
    (pool / "jobs.queue").write_text("".join(
        JOB.format(**{"proc": 0, "owner": "alice", "qdate": 1000 + n, "extra": "",
                      "requirements": "TARGET.Cpus >= 1", **job})
        for n, job in enumerate(jobs)))


def _matches(snapshot: Snapshot) -> dict[str, bool]:
    """Job id -> whether it matches the first slot, as the daemon's matcher says."""
    matcher = AutoclusterMatcher()
    node = node_from_machine(snapshot.machines[0])
    return {job.id: matcher(task_from_job(job), node) for job in snapshot.jobs}


def test_jobs_alike_but_for_their_ids_dates_and_owners_share_one_text(tmp_path: Path) -> None:
    jobs = [{"cluster": 1}, {"cluster": 2, "proc": 3, "owner": "bob"},
            {"cluster": 3, "requirements": "TARGET.Cpus >= 2"}]
    snapshot = _pool(tmp_path, jobs).read_snapshot()
    first, second, other = snapshot.jobs
    assert isinstance(first.ad, AdText)
    assert second.ad is first.ad  # one text for the two
    assert (second.id, second.user, second.qdate) == ("2.3", "bob", 1001.0)  # its own view
    assert other.ad is not first.ad  # another Requirements: another group


def test_a_job_whose_requirements_read_its_cluster_id_keeps_its_own_text(
        tmp_path: Path) -> None:
    # Through another attribute, as a user may hide it; the match must be each job's own.
    jobs = [{"cluster": cluster, "extra": "Mine = ClusterId\n",
             "requirements": "Mine == 1 && TARGET.Cpus >= 1"} for cluster in (1, 2)]
    snapshot = _pool(tmp_path, jobs).read_snapshot()
    first, second = snapshot.jobs
    assert second.ad is not first.ad
    assert "ClusterId = 2" in second.ad.text
    assert _matches(snapshot) == {"1.0": True, "2.0": False}


def test_jobs_share_no_identity_a_slot_reads_and_are_regrouped_when_a_slot_starts_to(
        tmp_path: Path) -> None:
    jobs = [{"cluster": 1, "owner": "alice"}, {"cluster": 2, "owner": "bob"}]
    backend = _pool(tmp_path, jobs)
    first, second = backend.read_snapshot().jobs
    assert second.ad is first.ad
    # The slots now take alice's jobs alone: bob's job must not be matched by alice's text.
    _write(tmp_path / "pool", jobs, 'TARGET.Owner == "alice"')
    snapshot = backend.read_snapshot()
    first, second = snapshot.jobs
    assert second.ad is not first.ad
    assert _matches(snapshot) == {"1.0": True, "2.0": False}


def test_a_job_or_slot_reading_names_no_reference_shows_shares_nothing(tmp_path: Path) -> None:
    # `eval` reads an attribute named by a value: no reference list shows it is ClusterId.
    hidden = [{"cluster": cluster, "extra": 'Mine = eval(strcat("Cluster", "Id"))\n',
               "requirements": "Mine == 1"} for cluster in (1, 2)]
    first, second = _pool(tmp_path, hidden).read_snapshot().jobs
    assert second.ad is not first.ad
    # A slot's Requirements may read any job attribute so: no job shares its text then.
    backend = _pool(tmp_path / "slot", [{"cluster": 1}, {"cluster": 2}],
                    'eval(strcat("TARGET.Cluster", "Id")) == 1')
    first, second = backend.read_snapshot().jobs
    assert second.ad is not first.ad


def test_the_matcher_parses_a_shared_text_once(tmp_path: Path) -> None:
    parsed: list[AdText] = []

    class Counted(AdText):
        __slots__ = ()

        def parsed(self):
            parsed.append(self)
            return super().parsed()

    snapshot = _pool(tmp_path, [{"cluster": n} for n in range(1, 6)]).read_snapshot()
    shared = snapshot.jobs[0].ad
    counted = Counted(shared.text, shared.syntax)
    matcher = AutoclusterMatcher()
    node = node_from_machine(snapshot.machines[0])
    for job in snapshot.jobs:
        assert job.ad is shared
        task = task_from_job(job)
        task.ad = counted
        assert matcher(task, node)
    assert len(parsed) == 1


def test_jobs_keep_their_own_text_where_a_slot_reads_what_their_ids_make(
        tmp_path: Path) -> None:
    # The slot reads TARGET.Mine, an attribute alike in every job's text, which each job
    # computes from its own ClusterId.
    jobs = [{"cluster": cluster, "extra": "Mine = ClusterId\n"} for cluster in (1, 2)]
    snapshot = _pool(tmp_path, jobs, "TARGET.Mine == 1").read_snapshot()
    first, second = snapshot.jobs
    assert second.ad is not first.ad
    assert _matches(snapshot) == {"1.0": True, "2.0": False}
