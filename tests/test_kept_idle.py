"""The htcondor backend's idle jobs kept between reads (`backends/htcondor/kept_idle.py`): a
steady read, which fetches the rows of the jobs that changed alone, gives the idle jobs a full
read gives, over random sequences of what a schedd's queue goes through."""

from __future__ import annotations

import logging
import threading

import classad2
import htcondor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridfair.ad_views import JobStatus
from gridfair.daemon.backends import PoolUnavailable
from gridfair.daemon.backends.htcondor import HTCondorBackend
from gridfair.daemon.backends.htcondor.kept_idle import LISTED, ad_signature
from gridfair.daemon.cycle import read_with_timeout
from tests import test_backends
from tests.test_backends import SCHEDDS, FakeCollector, FakeSchedd, _queues

#: What happens to a queue between two reads.
CHANGES = ("submit", "remove", "start", "requeue", "edit_request", "edit_requirements",
           "edit_status_time")


def _backend(full_read_every: int) -> HTCondorBackend:
    return HTCondorBackend(FakeCollector(), schedd_factory=FakeSchedd, lease_knob="",
                           full_read_every=full_read_every)


def _idle(backend: HTCondorBackend) -> list[tuple]:
    """The idle jobs read, in order, with what matching reads of each (a kept view's
    autocluster ad is an earlier read's: its `JobCount` may differ); and the skipped."""
    snapshot = backend.read_snapshot()
    jobs = [(job, ad_signature(job.ad)) for job in snapshot.jobs if job.status is JobStatus.IDLE]
    return [*jobs, sorted((skip.name, skip.reason) for skip in snapshot.skipped)]


def _change(queue: list[classad2.ClassAd], change: str, pick: int, now: int) -> None:
    """One change to the queue, on the `pick`th job it applies to, at schedd time `now`."""
    if change == "submit":
        template = next((ad for ad in queue if ad.get("JobStatus") == 1), None)
        if template is None:
            return
        ad = classad2.parseOne(template.printOld())
        ad["ClusterId"], ad["ProcId"] = 1000 + now, 0
        ad["QDate"] = ad["EnteredCurrentStatus"] = now
        queue.append(ad)
        return
    wanted = 2 if change == "requeue" else 1
    jobs = [ad for ad in queue if ad.get("JobStatus") == wanted]
    if not jobs:
        return
    ad = jobs[pick % len(jobs)]
    if change == "remove":
        queue.remove(ad)
    elif change in ("start", "requeue"):
        ad["JobStatus"] = 2 if change == "start" else 1
        ad["EnteredCurrentStatus"] = now
        if change == "requeue":
            ad["JobRunCount"] = ad.get("JobRunCount", 0) + 1
    elif change == "edit_request":  # the owner's condor_qedit: its autocluster moves
        ad["RequestCpus"] = 1 + pick % 3
    elif change == "edit_requirements":
        ad["Requirements"] = classad2.ExprTree(f"TARGET.Memory >= {pick % 4}")
    else:  # an owner's edit of EnteredCurrentStatus (back in time): costs a fetch alone
        ad["EnteredCurrentStatus"] = 1


@given(steps=st.lists(st.lists(st.tuples(st.sampled_from(CHANGES), st.integers(0, 50)),
                               max_size=6), min_size=1, max_size=6))
@settings(max_examples=25, deadline=None)
def test_a_steady_read_gives_the_idle_jobs_a_full_read_gives(steps):
    FakeSchedd.queues = _queues()
    steady, full = _backend(0), _backend(1)
    assert _idle(steady) == _idle(full)
    now = 2_000_000_000
    for changes in steps:
        for change, pick in changes:
            now += 1
            _change(FakeSchedd.queues[SCHEDDS[0]], change, pick, now)
        assert _idle(steady) == _idle(full)


def _answers(monkeypatch, wanted) -> list[tuple[str, int]]:
    """(constraint, ads answered) of each query `wanted(constraint, opts)` picks, from now
    on."""
    answers: list[tuple[str, int]] = []
    real_query = FakeSchedd.query

    def query(self, constraint="True", projection=[], callback=None, limit=-1,  # noqa: B006
              opts=htcondor2.QueryOpt.Default):
        answer = real_query(self, constraint, projection, callback, limit, opts)
        if wanted(str(constraint), opts):
            answers.append((str(constraint), len(answer)))
        return answer

    monkeypatch.setattr(FakeSchedd, "query", query)
    return answers


def _row_fetches(monkeypatch) -> list[tuple[str, int]]:
    """Rows fetched by id, a query each."""
    return _answers(monkeypatch, lambda constraint, _: "string(ProcId)" in constraint)


def test_a_steady_read_fetches_the_rows_and_autoclusters_of_the_jobs_that_changed_alone(
        monkeypatch):
    """Rows by id of the jobs that changed; the autocluster ads of ids past the highest kept
    and of the kept ones those jobs are in."""
    FakeSchedd.queues = _queues()
    idle = [ad for ad in FakeSchedd.queues[SCHEDDS[0]] if ad.get("JobStatus") == 1]
    for number, ad in enumerate(idle[:6]):  # autoclusters of their own
        ad["RequestMemory"] = 1000 + number
    backend = _backend(0)
    backend.read_snapshot()
    fetched = _answers(monkeypatch, lambda constraint, opts: "string(ProcId)" in constraint
                       or opts == htcondor2.QueryOpt.AutoCluster)
    backend.read_snapshot()
    highest = max(backend.reader._kept[SCHEDDS[0]].clusters.signatures)
    # Nothing changed: no row, and no autocluster ad (a query past the highest, each schedd).
    assert (f"AutoClusterId > {highest}", 0) in fetched
    assert all(asked.startswith("AutoClusterId > ") and not count for asked, count in fetched)
    queue = FakeSchedd.queues[SCHEDDS[0]]
    _change(queue, "requeue", 0, 2_000_000_001)
    _change(queue, "submit", 0, 2_000_000_002)
    _change(queue, "edit_request", 1, 2_000_000_003)  # into a kept autocluster or a new one
    moved = next(ad for ad in queue if ad.get("RequestCpus") == 2 and ad.get("JobStatus") == 1)
    fetched.clear()
    jobs = {job.id: job for job in backend.read_snapshot().jobs}
    assert [count for asked, count in fetched if "ProcId" in asked] == [3]
    clusters = [(asked, count) for asked, count in fetched if "ProcId" not in asked]
    # Of the autoclusters of the three jobs, not all the schedd has.
    assert sum(count for _, count in clusters) <= 3 < len(
        backend.reader._kept[SCHEDDS[0]].clusters.signatures)
    assert any(asked.startswith(f"AutoClusterId > {highest}") for asked, _ in clusters)
    assert jobs[f"{moved['ClusterId']}.{moved['ProcId']}"].request_cpus == 2


def test_a_full_read_repairs_what_the_kept_jobs_missed(caplog):
    """A change no listed attribute shows (a queue super user's edit of `QDate`, protected from
    owners) is found by the next full read, logged, and the full read kept."""
    FakeSchedd.queues = _queues()
    backend = _backend(0)
    backend.read_snapshot()
    ad = next(ad for ad in FakeSchedd.queues[SCHEDDS[0]] if ad.get("JobStatus") == 1)
    ad["QDate"] = 1
    job_id = f"{ad['ClusterId']}.{ad['ProcId']}"

    def qdate() -> float:
        return next(job.qdate for job in backend.read_snapshot().jobs if job.id == job_id)

    assert qdate() != 1  # a steady read keeps the job's view
    backend.reader.full_read_every = 1
    with caplog.at_level(logging.WARNING, "gridfair.daemon"):
        assert qdate() == 1
    assert backend.reader.idle_repairs == 1
    assert f"job {job_id}: kept" in caplog.text and "repaired" in caplog.text


def test_a_schedd_that_did_not_answer_is_read_whole_when_it_answers_again(monkeypatch):
    FakeSchedd.queues = _queues()
    backend = _backend(0)
    backend.read_snapshot()
    assert SCHEDDS[0] in backend.reader._kept
    real_query = FakeSchedd.query

    def hung(self, *args, **kwargs):
        if self.jobs is FakeSchedd.queues[SCHEDDS[0]]:
            raise htcondor2.HTCondorException("Failed to connect to schedd")
        return real_query(self, *args, **kwargs)

    monkeypatch.setattr(FakeSchedd, "query", hung)
    backend.read_snapshot()
    assert SCHEDDS[0] not in backend.reader._kept
    monkeypatch.setattr(FakeSchedd, "query", real_query)
    fetched = _row_fetches(monkeypatch)
    backend.read_snapshot()
    assert fetched == [] and SCHEDDS[0] in backend.reader._kept  # whole, not by id


def test_a_job_unchanged_since_the_last_read_is_the_same_object():
    """The kept pool passes over the jobs whose view is the last cycle's object (`is`) at C
    speed: a steady read hands on, charged, the very objects of the last read for the jobs
    that did not change, and new ones for those that did."""
    FakeSchedd.queues = _queues()
    backend = _backend(0)
    before = {job.id: job for job in backend.read_snapshot().jobs
              if job.status is JobStatus.IDLE}
    _change(FakeSchedd.queues[SCHEDDS[0]], "edit_request", 1, 2_000_000_001)  # 2 cpus
    after = {job.id: job for job in backend.read_snapshot().jobs
             if job.status is JobStatus.IDLE}
    same = {job_id for job_id, job in after.items() if job is before.get(job_id)}
    assert len(same) == len(before) - 1 and after.keys() == before.keys()


def test_a_read_that_timed_out_does_not_write_over_the_next_reads_kept_jobs(monkeypatch):
    """A read given up after its timeout still runs in its thread; when it ends after the
    next read began, it leaves that read's kept idle jobs and charges as they are."""
    FakeSchedd.queues = _queues()
    backend = _backend(0)
    backend.read_snapshot()
    real_query = FakeSchedd.query
    listing, release = threading.Event(), threading.Event()
    main = threading.current_thread()

    def slow_list(self, constraint="True", projection=(), *args, **kwargs):
        # The given-up read's listing alone waits (the next read is this thread's).
        if list(projection) == list(LISTED) and threading.current_thread() is not main:
            listing.set()
            release.wait(10)
        return real_query(self, constraint, projection, *args, **kwargs)

    monkeypatch.setattr(FakeSchedd, "query", slow_list)
    with pytest.raises(PoolUnavailable, match="timed out"):
        read_with_timeout(backend, 0.2)
    assert listing.is_set()
    late = next(thread for thread in threading.enumerate() if thread.name == "snapshot-read")
    backend.read_snapshot()  # the next cycle's read, whole: the late one took the kept jobs
    kept, charged = backend.reader._kept[SCHEDDS[0]], backend.reader.kept_charges._jobs
    release.set()
    late.join(10)
    assert not late.is_alive()
    assert backend.reader._kept[SCHEDDS[0]] is kept
    assert backend.reader.kept_charges._jobs is charged


def test_a_schedd_that_numbered_its_autoclusters_anew_is_read_whole(monkeypatch):
    """A restarted schedd numbers its autoclusters from 1 again: a job moved into an id the
    backend kept for other requests is read with its new autocluster's, as a full read
    reads it, not the kept one's."""
    FakeSchedd.queues = _queues()
    backend = _backend(0)
    truth = _backend(1)
    backend.read_snapshot()
    queue = FakeSchedd.queues[SCHEDDS[0]]
    FakeSchedd.cluster_ids.clear()  # the restart: ids given from 1 in another order
    queue.reverse()
    assert _idle(backend) == _idle(truth)
    assert backend.reader.whole_reads["an autocluster id kept has another ad"] == 1
    # The significant attributes changed: the schedd forgets its autoclusters and gives
    # the same ids to the same jobs, whose autoclusters' ads are others.
    FakeSchedd.cluster_ids.clear()
    monkeypatch.setattr(test_backends, "SIGNIFICANT", test_backends.SIGNIFICANT[:-1])
    assert _idle(backend) == _idle(truth)
    assert backend.reader.whole_reads["its significant attributes changed"] == 1
