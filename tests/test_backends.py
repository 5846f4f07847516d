"""One contract, every pool backend (as APScheduler 4 runs one suite over every data store).

The `htcondor` backend runs against fake Collector/Schedd objects: HTCondor's daemons cannot
be installed here. The fakes have the REAL htcondor2 signatures (checked below with
`inspect.signature` against the installed classes, so a drift in the bindings fails the
tests) and answer with the real ads of tests/data/daemon/pool (HTCondor's own test ads with
GridOwner/MFlops added), honouring the constraint and the projection as a collector does.
"""

from __future__ import annotations

import inspect
import shutil
import time
from pathlib import Path

import classad2
import htcondor2
import pytest

from gridfair.ad_views import JobStatus, Snapshot
from gridfair.classads.reader import read_ads
from gridfair.daemon.backends import ActionFailed, PoolBackend
from gridfair.daemon.backends.files import FilesBackend
from gridfair.daemon.backends.htcondor import HTCondorBackend
from gridfair.daemon.backends.htcondor.demand import (
    FETCH_CLUSTERS,
    autocluster_requests,
    fetch_constraints,
)
from gridfair.daemon.backends.htcondor.learning import DIRECT_LEARNING
from gridfair.daemon.backends.sim import SimBackend

POOL = Path(__file__).parent / "data" / "daemon" / "pool"


# ------------------------------------------------------------ htcondor fakes
def _ads(pattern: str) -> list[classad2.ClassAd]:
    return [sourced.ad for path in sorted(POOL.glob(pattern)) for sourced in read_ads(path)[0]]


def _select(ads, constraint, projection):
    """What a collector/schedd returns: the ads matching `constraint`, projected."""
    test = classad2.ExprTree(str(constraint or "true"))
    chosen = []
    for ad in ads:
        if test.eval(ad) is not True:
            continue
        if projection:
            ad = classad2.ClassAd({name: ad.lookup(name) for name in projection if name in ad})
        chosen.append(ad)
    return chosen


SCHEDDS = ("ingwe.cs.wisc.edu", "ingwe2.cs.wisc.edu")
#: What the fake schedd's autoclusters group jobs by (a real one: what matching reads).
SIGNIFICANT = ("RequestCpus", "RequestMemory", "RequestDisk", "Requirements", "Rank",
               "ImageSize", "DiskUsage")


def _queues() -> dict[str, list[classad2.ClassAd]]:
    """Each schedd's queue: the idle jobs of jobs.queue on the first, and on its own schedd
    (named by the slot's GlobalJobId, as HTCondor names it) a job ad for every job the slot
    ads show running, as a real schedd would have."""
    queues = {name: [] for name in SCHEDDS}
    queues[SCHEDDS[0]] = _ads("*.queue")
    for slot in _ads("*.status"):
        if slot.get("State") != "Claimed" or "GlobalJobId" not in slot:
            continue
        schedd, job_id, qdate = slot["GlobalJobId"].split("#")
        cluster, proc = job_id.split(".")
        queues[schedd].append(classad2.ClassAd({
            "ClusterId": int(cluster), "ProcId": int(proc), "JobStatus": 2,
            "Owner": slot["RemoteUser"].split("@")[0], "User": slot["RemoteUser"],
            "QDate": int(qdate), "JobCurrentStartDate": slot["JobStart"],
            "RemoteHost": slot["Name"], "RequestCpus": slot["Cpus"],
        }))
    return queues


def schedd_location(name: str, number: int) -> classad2.ClassAd:
    """A schedd's location as `Collector.locateAll` gives it: what `htcondor2.Schedd` reads."""
    return classad2.ClassAd({"Name": name, "MyAddress": f"<127.0.0.{number}:9618>",
                             "CondorVersion": "$CondorVersion: 25.14.0 2026-08-21 $"})


class FakeCollector:
    """htcondor2.Collector's query/locateAll, over the test pool's slot ads."""

    def __init__(self, pool=None, security=None) -> None:
        self.slots = _ads("*.status")
        self.schedds = [schedd_location(name, number)
                        for number, name in enumerate(SCHEDDS, start=1)]
        self.queries: list[tuple] = []
        self.down = False
        self.advertised: list[tuple[str, classad2.ClassAd]] = []
        self.refuse_ads = False  # as a collector refuses an account without DAEMON there

    def query(self, ad_type=htcondor2.AdType.Any, constraint=None, projection=None,
              statistics=None):
        if self.down:
            raise htcondor2.HTCondorException("Failed communication with collector")
        if ad_type == htcondor2.AdType.Negotiator:
            return []  # the test pool has no negotiator: a reschedule goes nowhere
        self.queries.append((ad_type, constraint, projection))
        if ad_type == htcondor2.AdType.Collector:  # its own ad, under `time() >= T`
            return _select([classad2.ClassAd({"Name": "cm"})], constraint, projection)
        assert ad_type == htcondor2.AdType.Startd
        return _select(self.slots, constraint, projection)

    def locateAll(self, daemon_type):  # noqa: N802 - the binding's name
        assert daemon_type == htcondor2.DaemonType.Schedd
        return self.schedds

    def advertise(self, ad_list, command="UPDATE_AD_GENERIC", use_tcp=True):
        if self.refuse_ads:
            raise htcondor2.HTCondorException("Failed to send update to collector")
        self.advertised.extend((command, ad) for ad in ad_list)


class FakeSchedd:
    """htcondor2.Schedd's query/act/edit/reschedule over one schedd's queue (`queues`,
    shared by every connection to the same schedd)."""

    queues: dict[str, list[classad2.ClassAd]] = {}
    # A queue's (by its list's identity) autocluster ids by their significant values.
    cluster_ids: dict[int, dict[tuple, int]] = {}
    acted: list[tuple] = []
    edits: list[tuple] = []

    def __init__(self, location=None) -> None:
        self.jobs = self.queues.setdefault(location["Name"], [])

    def query(self, constraint="True", projection=[], callback=None, limit=-1,  # noqa: B006
              opts=htcondor2.QueryOpt.Default):
        groups = self._autoclusters()
        if opts == htcondor2.QueryOpt.AutoCluster:
            return _select(groups, constraint, projection)
        return _select(self.jobs, constraint, projection)

    def _autoclusters(self) -> list[classad2.ClassAd]:
        """As a schedd groups its jobs: one ad per set of significant attribute values (what
        a job asks for and requires), with `JobCount`; each job gets its `AutoClusterId`
        (from a counter: an id is never given to other values, as a schedd's until it forgets
        its autoclusters) and `AutoClusterAttrs`."""
        numbered = self.cluster_ids.setdefault(id(self.jobs), {})
        groups: dict[tuple, classad2.ClassAd] = {}
        for job in self.jobs:
            values = {name: job.lookup(name) for name in SIGNIFICANT if name in job}
            key = tuple(sorted((name, str(value)) for name, value in values.items()))
            group = groups.get(key)
            if group is None:
                number = numbered.setdefault(key, len(numbered) + 1)
                group = groups[key] = classad2.ClassAd(
                    {**values, "AutoClusterId": number, "JobCount": 0})
            group["JobCount"] += 1
            # As a schedd lists them (its first and last, then more): they move as jobs do.
            ids = str(group.get("JobIds", "")).split()
            group["JobIds"] = " ".join([*ids[:1], f"{job['ClusterId']}.{job['ProcId']}"])
            job["AutoClusterId"] = group["AutoClusterId"]
            job["AutoClusterAttrs"] = ",".join(SIGNIFICANT)
        return list(groups.values())

    def _find(self, job_id):
        for ad in self.jobs:
            if f"{ad['ClusterId']}.{ad['ProcId']}" == job_id:
                return ad
        return None

    def act(self, action, job_spec, reason=None):
        self.acted.append((action, list(job_spec)))
        result = classad2.ClassAd({"TotalSuccess": 0, "TotalNotFound": 0, "TotalBadStatus": 0})
        for job_id in job_spec:
            ad = self._find(job_id)
            if ad is None:
                result["TotalNotFound"] += 1
            elif ad["JobStatus"] != 2:
                result["TotalBadStatus"] += 1
            else:
                ad["JobStatus"] = 1  # vacated: back to idle
                result["TotalSuccess"] += 1
        return result

    def edit(self, job_spec, attr, value, flags=htcondor2.TransactionFlag.Default):
        found = [self._find(job) for job in job_spec]
        for ad in found:
            if ad is not None:
                ad[attr] = classad2.ExprTree(value)
        self.edits.append((list(job_spec), attr, value))
        return sum(1 for ad in found if ad is not None)

    def reschedule(self):
        return None

    def history(self, constraint=None, projection=[], match=-1, since=None):  # noqa: B006 - the binding's
        return []  # no job has left the queue


def _parameters(function) -> list[tuple]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


@pytest.mark.parametrize(("fake", "real"), [
    (FakeCollector.__init__, htcondor2.Collector.__init__),
    (FakeCollector.query, htcondor2.Collector.query),
    (FakeCollector.locateAll, htcondor2.Collector.locateAll),
    (FakeSchedd.__init__, htcondor2.Schedd.__init__),
    (FakeSchedd.query, htcondor2.Schedd.query),
    (FakeSchedd.act, htcondor2.Schedd.act),
    (FakeSchedd.edit, htcondor2.Schedd.edit),
    (FakeSchedd.reschedule, htcondor2.Schedd.reschedule),
    (FakeSchedd.history, htcondor2.Schedd.history),
])
def test_fakes_have_the_real_htcondor2_signatures(fake, real):
    assert _parameters(fake) == _parameters(real)


def htcondor_backend() -> HTCondorBackend:
    FakeSchedd.queues = _queues()
    FakeSchedd.acted, FakeSchedd.edits = [], []
    # No lease: it is a negotiator's runtime configuration, proven live
    # (tests/live/test_failopen_live.py).
    return HTCondorBackend(FakeCollector(), schedd_factory=FakeSchedd, lease_knob="")


# ------------------------------------------------------------ the contract
@pytest.fixture(params=["sim", "files", "htcondor"])
def backend(request, tmp_path) -> PoolBackend:
    if request.param == "sim":
        sim = SimBackend(step=60.0)
        # Something running, so vacate has a victim: start the first two idle jobs.
        snapshot = sim.read_snapshot()
        free = [m for m in snapshot.machines if m.is_free]
        for job, machine in zip([j for j in snapshot.jobs if j.status == JobStatus.IDLE][:2],
                                free, strict=False):
            sim.allocate(job, machine)
        return sim
    if request.param == "files":
        shutil.copytree(POOL, tmp_path / "pool", copy_function=shutil.copy)
        return FilesBackend(tmp_path / "pool", tmp_path / "actions.jsonl")
    return htcondor_backend()


from tests.backend_contract import (  # noqa: E402, F401 - the contract, run here
    _idle,
    _running,
    test_a_handover_is_done_where_offered_else_refused,
    test_allocate_all_reports_each_allocation,
    test_allocate_idle_job_to_free_slot,
    test_allocate_unknown_job_fails,
    test_an_allocation_can_be_withdrawn,
    test_reading_twice_gives_the_same_pool_shape,
    test_snapshot_has_owners_and_running_jobs_on_slots,
    test_snapshot_is_consistent,
    test_the_advert_is_shown_and_withdrawn_or_there_is_nowhere_to_show_it,
    test_the_clock_moves_forward,
    test_the_clock_skew_is_a_figure_or_says_why_not,
    test_the_lease_is_renewed_and_released_or_there_is_none,
    test_vacate_reports_each_job,
)


# ------------------------------------------------- backend-specific behaviour
def test_htcondor_queries_use_projections_and_every_schedd():
    backend = htcondor_backend()
    snapshot = backend.read_snapshot()
    ad_type, _, projection = backend.collector.queries[0]
    assert ad_type == htcondor2.AdType.Startd
    assert "GridOwner" in projection and "MFlops" in projection and "Name" in projection
    assert len(_idle(snapshot)) == 8
    assert {j.id for j in _running(snapshot)} == {"2.0", "2.1", "3.0", "3.1", "3.2", "3.3"}
    assert not snapshot.skipped


def test_htcondor_reads_idle_demand_from_autoclusters_as_the_job_ads_say():
    """Autocluster ads and narrow rows give the idle jobs the whole job ads give (ids, users,
    queue dates, what they ask for); jobs of one group share its one ad; running jobs come
    from the slots alone."""
    grouped = htcondor_backend().read_snapshot()
    whole = HTCondorBackend(FakeCollector(), schedd_factory=FakeSchedd, demand="jobs",
                            job_constraint="JobStatus == 1").read_snapshot()

    def idle(snapshot):
        # Requirements as matching reads them: the autocluster's ad, or the job's own.
        return {j.id: (j.user, j.qdate, j.request_cpus, j.request_memory,
                       str(j.ad.lookup("Requirements"))) for j in _idle(snapshot)}

    assert idle(grouped) == idle(whole) and len(idle(grouped)) == 8
    assert len({id(j.ad) for j in _idle(grouped)}) == 1  # eight identical jobs: one group
    assert "AutoClusterId" in _idle(grouped)[0].ad and "ClusterId" not in _idle(grouped)[0].ad
    running = {(j.id, j.user, j.machine) for j in _running(grouped)}
    assert running == {(m.running_job, m.running_user, m.name) for m in grouped.machines
                       if m.running_job}
    assert not grouped.skipped


def edit_answers(monkeypatch, edit) -> None:
    """The fake schedds answer `edit(answer, constraint, opts)` instead of their answer."""
    real_query = FakeSchedd.query

    def query(self, constraint="True", projection=[], callback=None, limit=-1,  # noqa: B006
              opts=htcondor2.QueryOpt.Default):
        return edit(real_query(self, constraint, projection, callback, limit, opts),
                    str(constraint), opts)

    monkeypatch.setattr(FakeSchedd, "query", query)


def test_htcondor_fetches_the_whole_ad_of_a_job_whose_autocluster_is_missing(monkeypatch):
    backend = htcondor_backend()
    edit_answers(monkeypatch, lambda answer, constraint, opts: answer[1:]
                 if opts == htcondor2.QueryOpt.AutoCluster else answer)
    snapshot = backend.read_snapshot()
    jobs = _idle(snapshot)
    assert len(jobs) == 8 and all("ClusterId" in job.ad for job in jobs)  # whole ads
    assert not snapshot.skipped


def test_htcondor_fetch_constraints_select_the_jobs_asked_in_batches_of_clusters(monkeypatch):
    import gridfair.daemon.backends.htcondor.demand as demand_module

    monkeypatch.setattr(demand_module, "FETCH_JOBS", 150)
    queue = [classad2.ClassAd({"ClusterId": cluster, "ProcId": proc})
             for cluster in range(1, 121) for proc in range(3)]
    queue += [classad2.ClassAd({"ClusterId": 200, "ProcId": proc}) for proc in range(400)]
    asked = [f"{cluster}.{proc}" for cluster in range(1, 121) for proc in (0, 2)]
    asked += [f"200.{proc}" for proc in range(1, 400, 2)]  # 200 procs of a large cluster
    batches = list(fetch_constraints(asked))
    # 50 clusters a query, 150 jobs a query: the large cluster's procs split over two.
    assert [len(ids) for _, ids in batches] == [100, 100, 40, 150, 50]
    for constraint, ids in batches:
        # A schedd gave no answer to a chain of a few hundred terms: one term a cluster.
        assert constraint.count("||") < FETCH_CLUSTERS
        assert "member(" not in constraint  # a scan of the list for every job: quadratic
        found = [f"{ad['ClusterId']}.{ad['ProcId']}" for ad in _select(queue, constraint, [])]
        assert found == ids
    assert [job_id for _, ids in batches for job_id in ids] == asked


def test_htcondor_skips_a_fetched_job_the_schedd_does_not_answer_for(monkeypatch):
    backend = htcondor_backend()

    def edit(answer, constraint, opts):
        if opts == htcondor2.QueryOpt.AutoCluster:
            return answer[1:]  # the eight idle jobs' autocluster: their ads are fetched
        # One has left, as the whole ads are fetched (a row fetched by id is of an idle job).
        whole = "string(ProcId)" in constraint and "JobStatus" not in constraint
        return answer[1:] if whole else answer

    edit_answers(monkeypatch, edit)
    snapshot = backend.read_snapshot()
    assert len(_idle(snapshot)) == 7
    [skipped] = snapshot.skipped
    assert skipped.name not in {job.id for job in snapshot.jobs}
    assert "no job ad in the schedd's answer" in skipped.reason


def test_htcondor_skips_an_unusable_autocluster_with_its_reason():
    requests, skipped = autocluster_requests(
        [classad2.ClassAd({"AutoClusterId": 4, "RequestCpus": "many"})], "schedd s autoclusters")
    assert requests == {}
    assert skipped[0].name == "autocluster 4" and "RequestCpus" in skipped[0].reason


def test_htcondor_unreachable_schedd_is_skipped_not_fatal():
    backend = htcondor_backend()
    backend.collector.schedds.append(schedd_location("gone@example", 99))

    def factory(location):
        if location["Name"] == "gone@example":
            raise htcondor2.HTCondorException("Failed to connect to schedd")
        return FakeSchedd(location)

    backend.schedd_factory = factory
    snapshot = backend.read_snapshot()
    assert [s.name for s in snapshot.skipped] == ["gone@example"]
    assert len(snapshot.jobs) == 14


@pytest.mark.parametrize("demand", ["autocluster", "jobs"])
def test_htcondor_schedds_that_hang_cost_one_wait_together_and_are_skipped(demand):
    """Two schedds that never answer: probed side by side, both skipped after one
    `schedd_timeout` (not one each, nor one a learning round of the read), and the
    answering schedd's jobs used."""
    htcondor_backend()  # the test pool's queues
    expected = HTCondorBackend(FakeCollector(), schedd_factory=FakeSchedd, demand=demand,
                               lease_knob="").read_snapshot().jobs
    backend = HTCondorBackend(FakeCollector(), demand=demand, lease_knob="",
                              schedd_timeout=1.0)
    backend.collector.schedds += [schedd_location(f"hung{n}@example", 100 + n)
                                  for n in (1, 2)]

    class HungSchedd(FakeSchedd):
        def query(self, *args, **kwargs):
            time.sleep(60)  # in the probe's child process, killed at the timeout

    backend.schedd_factory = (lambda location: HungSchedd(location)
                              if location["Name"].startswith("hung") else FakeSchedd(location))
    started = time.monotonic()
    snapshot = backend.read_snapshot()
    assert time.monotonic() - started < 1.9
    assert [(s.name, s.reason) for s in snapshot.skipped if s.index == 0] == [
        ("hung1@example", "no answer within 1 s"), ("hung2@example", "no answer within 1 s")]
    assert snapshot.jobs == expected and expected


def two_collectors(second: FakeCollector | None = None) -> HTCondorBackend:
    """The test pool's backend on two collectors: the test pool's at cm1, `second` at cm2
    (by default one listing the same slots, as the other collector of an HA pair)."""
    htcondor_backend()  # the test pool's queues
    return HTCondorBackend(FakeCollector(), schedd_factory=FakeSchedd, lease_knob="",
                           pool="cm1:9618", collector_timeout=1.0,
                           more_collectors={"cm2:9618": second or FakeCollector()})


def test_htcondor_reads_every_collector_and_skips_a_duplicate_machine_name():
    """The second collector has every slot of the first (the same startds, as both of an HA
    pair hear them: read once, no reason given), a slot of its own, and one of the first
    collector's names at another startd's address: skipped with the reason, the first
    collector's ad kept."""
    second = FakeCollector()
    own = classad2.ClassAd(str(second.slots[0]))
    own["Name"], own["Machine"] = "slot1@flocked.example", "flocked.example"
    impostor = second.slots[1]
    impostor["MyAddress"], impostor["GridOwner"] = "<10.0.0.9:9618>", "Impostor"
    second.slots.append(own)
    backend = two_collectors(second)
    one = htcondor_backend().read_snapshot()
    snapshot = backend.read_snapshot()
    assert [m.name for m in snapshot.machines] == [m.name for m in one.machines] + [
        "slot1@flocked.example"]
    assert snapshot.machines_by_name[impostor["Name"]].owner != "Impostor"
    assert [(skip.source, skip.index, skip.reason) for skip in snapshot.skipped] == [
        ("collector cm2:9618", 2, "attribute Name: duplicate machine name (also ad #2 of "
         "collector cm1:9618)")]
    assert snapshot.jobs == one.jobs


def test_htcondor_collector_that_hangs_is_skipped_and_the_others_read():
    """A collector that accepts and never answers (a stopped one) costs one
    `collector_timeout`, is skipped with the reason, and is not asked by the cycle's
    adverts; the first collector's pool is read as if alone."""

    class HungCollector(FakeCollector):
        def query(self, *args, **kwargs):
            time.sleep(60)  # in the probe's child process, killed at the timeout

    backend = two_collectors(HungCollector())
    started = time.monotonic()
    snapshot = backend.read_snapshot()
    assert time.monotonic() - started < 1.9
    assert [(s.source, s.name, s.reason) for s in snapshot.skipped] == [
        ("collector cm2:9618", "cm2:9618", "no answer within 1 s")]
    alone = htcondor_backend().read_snapshot()
    assert snapshot.machines == alone.machines and snapshot.jobs == alone.jobs
    backend.advertise({"MyType": "GridfairNegotiator", "Name": "gridfair@cm"})
    assert [ad["Name"] for _, ad in backend.collector.advertised] == ["gridfair@cm"]


def test_htcondor_no_collector_answering_fails_the_read_with_each_reason():
    from gridfair.daemon.backends import PoolUnavailable

    second = FakeCollector()
    backend = two_collectors(second)
    backend.collector.down = second.down = True
    with pytest.raises(PoolUnavailable, match=(
            "collector cm1:9618: query failed: Failed communication with collector; "
            "collector cm2:9618: query failed: Failed communication with collector")):
        backend.read_snapshot()


def test_htcondor_daemon_ad_goes_to_every_collector_that_answered():
    second = FakeCollector()
    backend = two_collectors(second)
    backend.read_snapshot()
    backend.advertise({"MyType": "GridfairNegotiator", "Name": "gridfair@cm"})
    second.refuse_ads = True
    with pytest.raises(ActionFailed, match=r"^advert: collector cm2:9618 refused "
                       "UPDATE_AD_GENERIC \\(Failed to send update to collector\\)"):
        backend.advertise({"MyType": "GridfairNegotiator", "Name": "gridfair@cm"})
    assert len(backend.collector.advertised) == 2 and len(second.advertised) == 1


def _jobs_demand() -> HTCondorBackend:
    backend = htcondor_backend()
    backend.demand = "jobs"
    backend.job_constraint = "JobStatus == 1 || JobStatus == 2"
    return backend


def _own_ads() -> dict[str, classad2.ClassAd]:
    return {f"{ad['ClusterId']}.{ad['ProcId']}": ad for queue in FakeSchedd.queues.values()
            for ad in queue}


def test_htcondor_jobs_demand_shares_one_ad_among_jobs_that_match_alike():
    """With `demand = "jobs"` the jobs whose ads differ only in ids, dates and owners keep one
    ad between them (each job's own ad is let go), and every match is the one of the job's
    own ad."""
    from gridfair.classads.matching import symmetric_match

    backend = _jobs_demand()
    snapshot = backend.read_snapshot()
    assert len(snapshot.jobs) == 14 and len({id(job.ad) for job in snapshot.jobs}) == 2
    own = _own_ads()
    for job in snapshot.jobs:
        for machine in snapshot.machines:
            assert symmetric_match(job.ad, machine.ad) == symmetric_match(own[job.id],
                                                                           machine.ad)


def test_htcondor_jobs_demand_keeps_its_own_ad_where_a_slot_reads_the_job_id():
    """A slot that reads `TARGET.Half`, which each job computes from its ProcId: jobs no
    longer match alike, so none shares its ad and each matches as its own ad says."""
    from gridfair.classads.matching import symmetric_match

    backend = _jobs_demand()
    for ad in FakeSchedd.queues[SCHEDDS[0]]:
        ad["Half"] = classad2.ExprTree("ProcId % 2")
    slot = backend.collector.slots[0]
    slot["Requirements"] = classad2.ExprTree(f"({slot.lookup('Requirements')}) && "
                                             "TARGET.Half =?= 0")
    snapshot = backend.read_snapshot()
    machine = snapshot.machines_by_name[slot["Name"]]
    idle = _idle(snapshot)
    assert len(idle) == 8 and len({id(job.ad) for job in idle}) == 8
    own = _own_ads()
    assert [symmetric_match(job.ad, machine.ad) for job in idle] == [
        symmetric_match(own[job.id], machine.ad) for job in idle]
    assert {symmetric_match(job.ad, machine.ad) for job in idle} == {True, False}


def test_htcondor_vacate_and_allocate_use_act_and_edit():
    backend = htcondor_backend()
    snapshot = backend.read_snapshot()
    assert backend.vacate(["3.0"]) == {"3.0": None}
    assert FakeSchedd.acted == [(htcondor2.JobAction.Vacate, ["3.0"])]
    assert backend.vacate(["3.0"]) == {"3.0": "job not in a state that can be vacated"}
    job = _idle(snapshot)[0]
    partitionable = snapshot.machines_by_name["slot1@ingwe2.cs.wisc.edu"]
    before = time.time()
    backend.allocate(job, partitionable)
    # The size allocated first, then the run the steering is for and its expiry, as
    # literals, then the slot (which makes the job matchable).
    edits = FakeSchedd.edits[-4:]
    assert edits[:2] == [([job.id], "GridfairSlotSize", "{1, 1, 0}"),
                         ([job.id], "GridfairSteerRunCount", str(job.run_count))]
    assert edits[2][:2] == ([job.id], "GridfairSteerUntil")
    life = backend.steering_life
    assert before + life <= int(edits[2][2]) <= time.time() + life + 1
    assert edits[3] == ([job.id], "GridfairSlot", classad2.quote(partitionable.name))
    # A static slot's START does not read the size: the slot alone, with its run and expiry.
    static = snapshot.machines[0]
    backend.allocate(job, static)
    assert [edit[1] for edit in FakeSchedd.edits[-3:]] == [
        "GridfairSteerRunCount", "GridfairSteerUntil", "GridfairSlot"]
    assert FakeSchedd.edits[-1:] == [([job.id], "GridfairSlot", classad2.quote(static.name))]


@pytest.mark.parametrize("demand", ["autocluster", "jobs"])
def test_htcondor_does_not_steer_idle_jobs_whose_requests_read_the_slot_or_the_clock(demand):
    """Every idle job of the first schedd asks for `TARGET.Cpus`: each is skipped with the
    reason (no ad index: the ad is usable), and a pool of such jobs alone is a quiet one,
    not an unusable pool nor one whose schedds did not answer."""
    backend = htcondor_backend()
    backend.demand = demand
    backend.job_constraint = "JobStatus == 1 || JobStatus == 2"
    for ad in FakeSchedd.queues[SCHEDDS[0]]:
        if ad["JobStatus"] == 1:
            ad["RequestCpus"] = classad2.ExprTree("ifThenElse(TARGET.Cpus > 1, TARGET.Cpus, 1)")
    snapshot = backend.read_snapshot()
    assert _idle(snapshot) == []
    assert len(snapshot.skipped) == 8
    assert {(skip.index, skip.reason) for skip in snapshot.skipped} == {(0, (
        "not steered: RequestCpus reads the slot or the clock (HTCondor evaluates it against "
        "the slot it cuts for the job: gridfair cannot know the size it would allocate); ask "
        "for a number"))}


@pytest.mark.parametrize("demand", ["autocluster", "jobs"])
@pytest.mark.parametrize("requirements", [
    "(MY.GridfairSlot =?= undefined) && TARGET.Cpus >= 1",
    "TARGET.Cpus >= 1 && gridfairslotsize =?= undefined",  # unscoped, another case
    "TARGET.Cpus >= 1 && eval(\"GridfairSlot\") =?= undefined",  # may read it: eval
])
def test_htcondor_does_not_steer_jobs_whose_match_reads_the_steering(demand, requirements):
    """Issue 43, attack 2: a job that matches every slot as gridfair reads it and none once
    steered (its Requirements read the steering gridfair writes) is not steered, so it is
    never a reason to vacate another user's job or hold a free slot. The other idle jobs are
    steered as before."""
    backend = htcondor_backend()
    backend.demand = demand
    backend.job_constraint = "JobStatus == 1 || JobStatus == 2"
    crafted = [ad for ad in FakeSchedd.queues[SCHEDDS[0]]
               if ad["JobStatus"] == 1 and ad["ProcId"] % 2 == 0]
    for ad in crafted:
        ad["Requirements"] = classad2.ExprTree(requirements)
    snapshot = backend.read_snapshot()
    crafted_ids = {f"{ad['ClusterId']}.{ad['ProcId']}" for ad in crafted}
    assert not crafted_ids & {job.id for job in _idle(snapshot)}
    assert _idle(snapshot)
    reasons = {skip.reason for skip in snapshot.skipped if skip.name in crafted_ids}
    assert reasons == {"not steered: its Requirements or Rank read gridfair's steering "
                       "attributes (or may: eval), which gridfair sets when it steers the job: "
                       "it would not match as steered"}


def test_htcondor_jobs_demand_counts_a_job_running_only_where_its_slot_says_so():
    """A job ad edited by its owner to say it runs (JobStatus 2, RemoteHost an owner's slot)
    is skipped; a running job is placed on the slot whose ad names it, whatever its ad says."""
    backend = htcondor_backend()
    backend.demand = "jobs"
    backend.job_constraint = "JobStatus == 1 || JobStatus == 2"
    idle = next(ad for ad in FakeSchedd.queues[SCHEDDS[0]] if ad["JobStatus"] == 1)
    liar = f"{idle['ClusterId']}.{idle['ProcId']}"
    idle["JobStatus"], idle["RemoteHost"] = 2, "slot1@ingwe.cs.wisc.edu"
    running = next(ad for queue in FakeSchedd.queues.values() for ad in queue
                   if ad["JobStatus"] == 2 and ad is not idle)
    slot = running["RemoteHost"]
    running["RemoteHost"] = "elsewhere@example"
    snapshot = backend.read_snapshot()
    assert liar not in snapshot.jobs_by_id
    assert [(skip.name, skip.reason) for skip in snapshot.skipped] == [
        (liar, "its ad says it runs, and no slot's ad names it: not counted as running")]
    assert snapshot.jobs_by_id[f"{running['ClusterId']}.{running['ProcId']}"].machine == slot


def test_htcondor_collector_down_is_pool_unavailable():
    from gridfair.daemon.backends import PoolUnavailable

    backend = htcondor_backend()
    backend.collector.down = True
    with pytest.raises(PoolUnavailable, match="collector"):
        backend.read_snapshot()


def test_files_backend_skips_a_malformed_ad(tmp_path):
    shutil.copytree(POOL, tmp_path / "pool", copy_function=shutil.copy)
    (tmp_path / "pool" / "broken.status").write_text('Name = "x"\nCpus = (((\n')
    snapshot = FilesBackend(tmp_path / "pool", tmp_path / "a.jsonl").read_snapshot()
    assert [s.source for s in snapshot.skipped] == [str(tmp_path / "pool" / "broken.status")]
    assert len(snapshot.machines) == 9


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [("broken.status", b"\x89PNG\r\n\x1a\n\x00", "not text"),  # binary; not UTF-8: skipped
     ("broken.queue", b"A = 1\n\x00\x01", "not text"),
     ("blank.queue", b"\n", "empty: no ads in it"),  # what a failed condor_q writes
     ("empty.status", b"", "empty: no ads in it")],
)
def test_files_backend_fails_the_read_naming_a_dump_it_cannot_use(tmp_path, name, content,
                                                                   expected):
    from gridfair.daemon.backends import PoolUnavailable

    shutil.copytree(POOL, tmp_path / "pool", copy_function=shutil.copy)
    (tmp_path / "pool" / name).write_bytes(content)
    with pytest.raises(PoolUnavailable) as caught:
        FilesBackend(tmp_path / "pool", tmp_path / "a.jsonl").read_snapshot()
    assert str(caught.value).startswith(f"{tmp_path / 'pool' / name}: {expected}")


def test_files_backend_reads_a_job_dump_of_zero_bytes_as_an_empty_queue(tmp_path):
    # `condor_q -long` (and -json) on an empty queue writes nothing and exits 0 (HTCondor 25,
    # measured on a personal pool); a failed condor_q writes a blank line (above).
    shutil.copytree(POOL, tmp_path / "pool", copy_function=shutil.copy)
    (tmp_path / "pool" / "jobs.queue").write_bytes(b"")
    snapshot = FilesBackend(tmp_path / "pool", tmp_path / "a.jsonl").read_snapshot()
    assert len(snapshot.machines) == 9 and not snapshot.skipped
    # The running jobs are still known from their slots' ads.
    assert {job.status for job in snapshot.jobs} == {JobStatus.RUNNING}


def test_files_backend_warns_about_an_attribute_set_twice_on_every_read(tmp_path):
    shutil.copytree(POOL, tmp_path / "pool", copy_function=shutil.copy)
    status = tmp_path / "pool" / "basic4slot.status"
    text = status.read_text()
    status.write_text(text.replace("\n\n", "\n", 1))  # ads 1 and 2 run together
    backend = FilesBackend(tmp_path / "pool", tmp_path / "a.jsonl")
    first = backend.read_snapshot()
    assert len(first.machines) == 8
    assert [(w.source, w.index) for w in first.warnings] == [(str(status), 1)]
    assert backend.read_snapshot().warnings == first.warnings  # unchanged dump: warned again
    status.write_text(status.read_text() + "\n")  # changed: the memo keeps no warned ad
    assert backend.read_snapshot().warnings == first.warnings


def test_sim_backend_advances_time_and_finishes_jobs():
    sim = SimBackend(step=3600.0, origin=0.0)
    snapshot = sim.read_snapshot()
    for job, machine in zip(_idle(snapshot), [m for m in snapshot.machines if m.is_free],
                            strict=False):
        sim.allocate(job, machine)
    for _ in range(5):
        sim.read_snapshot()
    assert sim.now() == 5 * 3600.0
    assert sim.finished


def test_daemon_cycles_on_the_htcondor_backend(tmp_path):
    """Three daemon cycles through htcondor2-shaped calls. After a vacate the fake schedd has
    the job idle while its slot still names it (as during HTCondor's Preempting state): the
    daemon must take that in its stride and not vacate it again."""
    from gridfair.daemon.config import validate
    from gridfair.daemon.service import Daemon

    raw = {"daemon": {"store": "state.db"}, "backend": {"kind": "htcondor"},
           "safety": {"max_snapshot_age": 3600.0}}
    backend = htcondor_backend()
    daemon = Daemon(validate(raw, base=tmp_path), backend=backend, max_cycles=3)
    for _ in range(3):
        assert daemon.tick().outcome == "ok"
    daemon.close()
    # The daemon's ad after each cycle, withdrawn when it stops (advert.py).
    sent = backend.collector.advertised
    assert [command for command, _ in sent] == ["UPDATE_AD_GENERIC"] * 3 + [
        "INVALIDATE_ADS_GENERIC"]
    assert [ad["LastCycle"] for _, ad in sent[:3]] == [1, 2, 3]
    assert sent[0][1]["MyType"] == "GridfairNegotiator"
    assert sent[3][1]["TargetType"] == "GridfairNegotiator"
    assert sent[3][1]["Name"] == sent[0][1]["Name"]
    vacated = [spec for action, spec in FakeSchedd.acted if action == htcondor2.JobAction.Vacate]
    assert len(vacated) == 2 and all(len(spec) == 1 for spec in vacated)
    steered = [job for jobs, attr, value in FakeSchedd.edits
               if attr == "GridfairSlot" and value != "undefined" for job in jobs]
    assert len(steered) == len(set(steered)) == 8  # every idle job steered to a slot, once
    # A vacated job is unsteered first, or HTCondor matches it straight back to its slot.
    unsteered = [job for jobs, attr, value in FakeSchedd.edits if value == "undefined"
                 for job in jobs]
    assert sorted(unsteered) == sorted(job for spec in vacated for job in spec)


def test_a_refused_ad_is_logged_once_and_never_fails_a_cycle(tmp_path, caplog):
    from gridfair.daemon.config import validate
    from gridfair.daemon.service import Daemon

    raw = {"daemon": {"store": "state.db"}, "backend": {"kind": "htcondor"},
           "safety": {"max_snapshot_age": 3600.0}}
    backend = htcondor_backend()
    backend.collector.refuse_ads = True
    daemon = Daemon(validate(raw, base=tmp_path), backend=backend, max_cycles=3)
    with caplog.at_level("INFO", logger="gridfair"):
        assert [daemon.tick().outcome for _ in range(2)] == ["ok", "ok"]
        backend.collector.refuse_ads = False
        assert daemon.tick().outcome == "ok"
    daemon.close()
    refused = [r.getMessage() for r in caplog.records if "ad is not in the pool" in r.message]
    assert len(refused) == 1 and "collector refused UPDATE_AD_GENERIC" in refused[0]
    assert any("ad is in the pool again" in r.message for r in caplog.records)
    assert [ad["LastCycle"] for command, ad in backend.collector.advertised
            if command == "UPDATE_AD_GENERIC"] == [3]


def test_htcondor_learns_what_matching_reads_and_keeps_it():
    backend = htcondor_backend()
    backend.read_snapshot()
    first_queries = len(backend.collector.queries)
    assert first_queries > 1  # the first read learnt attributes and asked again
    learnt = set(backend.slot_projection)
    # The slots' Requirements read START; the job's Requirements read HasFileTransfer.
    assert {"start", "hasfiletransfer", "isvalidcheckpointplatform"} <= learnt
    assert "requestdisk" in backend.job_projection
    backend.read_snapshot()
    assert len(backend.collector.queries) == first_queries + 1  # nothing new: one query


def _flood(scope: str) -> None:
    """`DIRECT_LEARNING * 3` idle jobs on the first schedd, each reading `<scope>.Flood<N>`."""
    queue = FakeSchedd.queues[SCHEDDS[0]]
    template = next(ad for ad in queue if ad["JobStatus"] == 1)
    for index in range(DIRECT_LEARNING * 3):
        job = classad2.ClassAd({name: template.lookup(name) for name in template})
        job["ClusterId"], job["ProcId"] = 1000, index
        job["Requirements"] = classad2.ExprTree(
            f"({template.lookup('Requirements')}) && {scope}.Flood{index} =?= undefined")
        queue.append(job)


def test_a_flood_of_jobs_reading_slot_attributes_of_their_own_stays_out_of_slot_queries():
    """`TARGET.Flood$(Process) =?= undefined` in one submit of many jobs: each name read by
    an autocluster would have joined the slot projection, every slot query carrying them all,
    every cycle (slots times names). Names no slot has are looked for once in the slots'
    whole ads and kept out; one a slot has is learnt."""
    backend = htcondor_backend()
    backend.collector.slots[0]["Flood7"] = True
    _flood("TARGET")
    snapshot = backend.read_snapshot()
    assert len(snapshot.jobs) > DIRECT_LEARNING * 3
    flood = {name for name in backend.slot_projection if name.startswith("flood")}
    assert flood == {"flood7"}
    assert max(len(projection or ()) for _, _, projection in backend.collector.queries) < (
        DIRECT_LEARNING)
    asked = len(backend.collector.queries)
    backend.read_snapshot()
    assert len(backend.collector.queries) == asked + 1  # nothing new to look for


def test_a_flood_of_jobs_reading_attributes_of_their_own_stays_out_of_job_queries():
    """`MY.Flood$(Process) =?= undefined`, with `demand = "jobs"` (every job ad queried with
    the job projection): names no job has stay out of it; one a job has is learnt."""
    htcondor_backend()  # the queues
    backend = HTCondorBackend(FakeCollector(), schedd_factory=FakeSchedd, lease_knob="",
                              demand="jobs")
    _flood("MY")
    FakeSchedd.queues[SCHEDDS[0]][-1]["Flood7"] = True
    assert len(backend.read_snapshot().jobs) > DIRECT_LEARNING * 3
    assert {name for name in backend.job_projection if name.startswith("flood")} == {"flood7"}


# ------------------------------------------------ files: a re-read costs what changed
def _ads_by_job(snapshot: Snapshot) -> dict[str, object]:
    return {job.id: job.ad for job in snapshot.jobs}


def test_files_backend_does_not_reparse_an_unchanged_dump(tmp_path):
    shutil.copytree(POOL, tmp_path / "pool", copy_function=shutil.copy)
    backend = FilesBackend(tmp_path / "pool", tmp_path / "a.jsonl")
    first, second = backend.read_snapshot(), backend.read_snapshot()
    assert second == first
    # The very same parsed ads: nothing was read or parsed again.
    assert all(a is b for a, b in zip(_ads_by_job(first).values(),
                                      _ads_by_job(second).values(), strict=True))


def test_files_backend_reparses_only_the_changed_ad_and_sees_the_change(tmp_path):
    shutil.copytree(POOL, tmp_path / "pool", copy_function=shutil.copy)
    queue = tmp_path / "pool" / "jobs.queue"
    backend = FilesBackend(tmp_path / "pool", tmp_path / "a.jsonl")
    before = _ads_by_job(backend.read_snapshot())
    changed = "15.0"
    text = queue.read_text()
    assert "QDate = " in text
    # Job 15.0's ad gets a new QDate (its first ad in the file); the others are untouched.
    head, tail = text.split("\n\n", 1)
    head = "\n".join(line if not line.startswith("QDate = ") else "QDate = 1234"
                     for line in head.splitlines())
    queue.write_text(head + "\n\n" + tail)
    snapshot = backend.read_snapshot()
    after = _ads_by_job(snapshot)
    assert after.keys() == before.keys()
    job = next(j for j in snapshot.jobs if j.id == changed)
    assert job.qdate == 1234
    # Its view is new (its QDate above); its ad for matching is still its group's: jobs whose
    # ads differ in a QDate no match expression reads share one.
    assert after[changed] is before[changed]
    assert all(after[k] is before[k] for k in after if k != changed)
    # A fresh backend on the same files sees the same pool: the memo changes nothing.
    assert FilesBackend(tmp_path / "pool", tmp_path / "b.jsonl").read_snapshot() == snapshot


def test_files_backend_names_the_line_of_an_ad_broken_after_a_good_read(tmp_path):
    shutil.copytree(POOL, tmp_path / "pool", copy_function=shutil.copy)
    status = tmp_path / "pool" / "basic4slot.status"
    backend = FilesBackend(tmp_path / "pool", tmp_path / "a.jsonl")
    assert not backend.read_snapshot().skipped
    status.write_text(status.read_text() + '\nName = "late"\nCpus = (((\n')
    skipped = backend.read_snapshot().skipped
    assert [s.source for s in skipped] == [str(status)]
    lines = status.read_text().splitlines()
    assert f"line {lines.index('Cpus = (((') + 1}" in skipped[0].reason


def test_htcondor_job_ads_none_of_which_is_usable_fail_the_read():
    """A pool whose schedds answer only with job ads gridfair cannot use (here, a queue date
    that is no number on every one, on a pool with nothing running) is not an empty queue: the
    read fails naming the first, as the files backend's does."""
    from gridfair.daemon.backends import UnusablePool

    backend = htcondor_backend()
    backend.collector.slots = [ad for ad in backend.collector.slots
                               if ad.get("State") != "Claimed"]
    for queue in FakeSchedd.queues.values():
        for ad in queue:
            ad["QDate"] = "yesterday"
    with pytest.raises(UnusablePool, match=r"no usable job ad in the schedds' answers \(\d+ "
                                           r"skipped; the first: .*QDate: not a number"):
        backend.read_snapshot()


@pytest.mark.parametrize(("down", "said"), [
    (True, "the collector does not answer INVALIDATE_ADS_GENERIC"),
    (False, "the collector refused INVALIDATE_ADS_GENERIC"),
])
def test_a_stopped_collector_is_not_blamed_on_the_accounts_rights(down, said):
    """Issue 45, item 8: at a pool's shutdown the ad's withdrawal failed with "is the
    daemon's account allowed DAEMON there?" when the collector had simply stopped. A
    collector that answers no query either is said not to answer; one that answers and
    refuses the ad still asks about the account's rights."""
    backend = htcondor_backend()
    backend.read_snapshot()
    backend.collector.refuse_ads = True
    backend.collector.down = down
    with pytest.raises(ActionFailed, match=said) as failure:
        backend.withdraw_ad({"Name": "gridfair@cm", "MyType": "GridfairNegotiator"})
    assert ("allowed DAEMON" in str(failure.value)) == (not down)


# ------------------------------------------------ claims a restarted schedd left idle
#: G1's claim on slot4_1@vm as Showcase 2's branch run 1 recorded it (the landing watch,
#: docs/results/records/showcase2-landing/branch-run1-...-landing-watch.json.gz, poll at
#: 1795930157.5): claimed at 1795929969, idle with no job since the schedd's crash at
#: 1795930071 (signal 11, `branch-run1-schedd-crash.txt`), which restarted 10 s later.
ORPHAN_SLOT = {"Name": "slot4_1@vm", "SlotType": "Dynamic", "State": "Claimed",
               "Activity": "Idle", "EnteredCurrentState": 1795929969,
               "EnteredCurrentActivity": 1795930071, "RemoteUser": "G1@gridfair.test",
               "RemoteOwner": "G1@gridfair.test", "RemoteScheddName": "vm", "Cpus": 2,
               "Memory": 4096, "MyAddress": "<127.0.0.1:41499?addrs=127.0.0.1-41499&alias=vm>"}
CRASH, RESTART, SEEN = 1795930071, 1795930081, 1795930157.5


class ClaimsCollector(FakeCollector):
    """A collector with `slots` and `schedds` ads; records the ad types asked for."""

    def __init__(self, slots, schedds) -> None:
        super().__init__()
        self.slots = [classad2.ClassAd(ad) for ad in slots]
        self.schedd_ads = [classad2.ClassAd(ad) for ad in schedds]
        self.asked: list = []

    def query(self, ad_type=htcondor2.AdType.Any, constraint=None, projection=None,
              statistics=None):
        self.asked.append(ad_type)
        ads = {htcondor2.AdType.Startd: self.slots, htcondor2.AdType.Schedd: self.schedd_ads}
        return _select(ads[ad_type], constraint, projection)


class VacatingStartd:
    """htcondor2.Startd's vacateSlot, recorded."""

    vacated: list = []

    def __init__(self, location=None) -> None:
        self.address = location["MyAddress"]

    def vacateSlot(self, slot_name=None, vacate_fast=htcondor2.VacateType.Graceful):  # noqa: N802 - the binding's name
        VacatingStartd.vacated.append((self.address, slot_name, vacate_fast))


@pytest.mark.parametrize(("fake", "real"), [
    (ClaimsCollector.query, htcondor2.Collector.query),
    (VacatingStartd.__init__, htcondor2.Startd.__init__),
    (VacatingStartd.vacateSlot, htcondor2.Startd.vacateSlot),
])
def test_the_claim_fakes_have_the_real_htcondor2_signatures(fake, real):
    assert _parameters(fake) == _parameters(real)


def _releaser(slots, schedds):
    from gridfair.daemon.backends.htcondor.orphan_claims import ClaimReleaser
    from gridfair.daemon.backends.htcondor.state import PoolState
    collector = ClaimsCollector(slots, schedds)
    state = PoolState(collector, pool="cm:9618", more_collectors=None,
                      schedd_factory=FakeSchedd, slot_constraint="true",
                      tool_environment=None)
    VacatingStartd.vacated = []
    return ClaimReleaser(state, startd_factory=VacatingStartd), collector


def test_a_claim_a_restarted_schedd_left_idle_is_released_with_its_figures():
    releaser, collector = _releaser([ORPHAN_SLOT], [{"Name": "vm",
                                                     "DaemonStartTime": RESTART}])
    [note] = releaser.release(SEEN)
    assert VacatingStartd.vacated == [(ORPHAN_SLOT["MyAddress"], "slot4_1@vm",
                                       htcondor2.VacateType.Fast)]
    assert note == ("slot4_1@vm: idle claim of G1@gridfair.test released: claimed at "
                    "1795929969, idle with no job for 86 s (bound 30 s), its schedd vm "
                    "restarted 112 s after the claim was made; it held 2 cpus, 4096 MB")
    # Slot and schedd ads alone: no job's attribute is read.
    assert set(collector.asked) == {htcondor2.AdType.Startd, htcondor2.AdType.Schedd}


@pytest.mark.parametrize("case", [
    "idle 14 s",  # the same claim 14 s after the crash: under the bound
    "kept claim",  # idle as long, its schedd running since before the claim (claim reuse)
    "schedd not listed",  # nothing says the process that made it is gone
    "two schedds of its name",  # one listed twice with different start times
    "start time an expression",  # not a literal: not a start time
    "busy",  # a job runs on it
])
def test_a_claim_not_shown_orphaned_by_slot_and_schedd_ads_is_kept(case):
    slot = dict(ORPHAN_SLOT)
    schedds = [{"Name": "vm", "DaemonStartTime": RESTART}]
    now = SEEN
    if case == "idle 14 s":
        now = CRASH + 14
    elif case == "kept claim":
        schedds = [{"Name": "vm", "DaemonStartTime": 1795929900}]
    elif case == "schedd not listed":
        schedds = [{"Name": "other", "DaemonStartTime": RESTART}]
    elif case == "two schedds of its name":
        schedds.append({"Name": "vm", "DaemonStartTime": 1795929900})
    elif case == "start time an expression":
        schedds = [{"Name": "vm", "DaemonStartTime": classad2.ExprTree("time()")}]
    else:
        slot.update(Activity="Busy", JobId="1.2")
    releaser, _ = _releaser([slot], schedds)
    assert releaser.release(now) == []
    assert VacatingStartd.vacated == []


def test_no_user_can_get_another_users_claim_released():
    """What a user writes is its jobs' attributes (and, as a submitter, nothing in slot or
    schedd ads, which the collector takes from daemons alone): a user's jobs naming the other
    user's claim, its slot, its schedd and a late start time get nothing released while the
    schedd that made the claim runs; only the ads of the startd and the schedd count."""
    from gridfair.daemon.backends.htcondor.orphan_claims import orphaned
    live_schedd = {"Name": "vm", "DaemonStartTime": 1795929900}
    forged_job = {"Owner": "G2", "Name": "vm", "RemoteHost": "slot4_1@vm",
                  "GridfairSlot": "slot4_1@vm", "RemoteScheddName": "vm",
                  "DaemonStartTime": RESTART, "JobStatus": 1,
                  "EnteredCurrentState": 0, "EnteredCurrentActivity": 0}
    slot = classad2.ClassAd(ORPHAN_SLOT)
    assert orphaned([slot], [classad2.ClassAd(live_schedd)], SEEN) == []
    # A job ad passed where ads are read is not a slot nor a schedd: no claim, no start.
    assert orphaned([slot, classad2.ClassAd(forged_job)],
                    [classad2.ClassAd(live_schedd), classad2.ClassAd(forged_job)], SEEN) == []
    releaser, collector = _releaser([ORPHAN_SLOT], [live_schedd])
    assert releaser.release(SEEN) == [] and VacatingStartd.vacated == []


def test_the_htcondor_backend_releases_orphaned_claims_and_others_none(tmp_path):
    """The cycle asks every backend (`release_orphaned_claims`) and journals the lines."""
    collector = ClaimsCollector([ORPHAN_SLOT], [{"Name": "vm", "DaemonStartTime": RESTART}])
    backend = HTCondorBackend(collector, schedd_factory=FakeSchedd, lease_knob="")
    backend.claims.startd_factory = VacatingStartd
    backend.now = lambda: SEEN
    VacatingStartd.vacated = []
    [note] = backend.release_orphaned_claims()
    assert note.startswith("slot4_1@vm: idle claim of G1@gridfair.test released")
    assert [name for _, name, _ in VacatingStartd.vacated] == ["slot4_1@vm"]
    shutil.copytree(POOL, tmp_path / "pool", copy_function=shutil.copy)
    assert FilesBackend(tmp_path / "pool", tmp_path / "actions.jsonl"
                        ).release_orphaned_claims() == []
