"""Machine and job views of real and generated ads, and every kind of bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from gridfair.ad_views import JobStatus
from gridfair.classads.reader import AdFormat, readable
from gridfair.classads.views import AdConfig, read_jobs, read_machines, read_snapshot
from gridfair.errors import InputError
from tests.conftest import TEST_DATA
from tests.harness.synthetic import job_ads, machine_ads, write_ads

REAL = TEST_DATA / "htcondor"


def with_lines(name: str, tmp_path: Path, *extra_per_ad: str) -> Path:
    """A copy of a real ad file with the given lines appended to each ad, in order (the n-th
    ad gets the n-th entry; an empty entry adds nothing)."""
    blocks = (REAL / name).read_text().strip().split("\n\n")
    path = tmp_path / name
    path.write_text("\n\n".join(
        block + ("\n" + extra if extra else "")
        for block, extra in zip(blocks, extra_per_ad, strict=True)
    ) + "\n")
    return path


def owned(name: str, tmp_path: Path, owners: list[str], mflops: list[float]) -> Path:
    """A real machine file with `GridOwner` and `MFlops` added to each ad."""
    return with_lines(name, tmp_path, *(f'GridOwner = "{owner}"\nMFlops = {power}'
                                        for owner, power in zip(owners, mflops, strict=True)))


def test_real_static_slots(tmp_path: Path) -> None:
    path = owned("basic4slot", tmp_path, ["alice", "bob", "alice", "carol"],
                 [1000, 2000, 3000, 4000])
    machines, skipped = read_machines(path)
    assert skipped == []
    assert [(m.name, m.owner, m.power) for m in machines] == [
        ("slot1@ingwe.cs.wisc.edu", "alice", 1000.0), ("slot2@ingwe.cs.wisc.edu", "bob", 2000.0),
        ("slot3@ingwe.cs.wisc.edu", "alice", 3000.0), ("slot4@ingwe.cs.wisc.edu", "carol", 4000.0),
    ]
    busy = machines[0]
    assert (busy.state, busy.activity, busy.running_job, busy.running_user) == (
        "Claimed", "Busy", "2.0", "bt@cs.wisc.edu")
    assert (busy.cpus, busy.memory) == (1.0, 3985.0)
    free = machines[3]
    assert (free.state, free.running_job, free.running_user, free.is_free) == (
        "Unclaimed", None, None, True)


def test_real_partitionable_and_dynamic_slots(tmp_path: Path) -> None:
    path = owned("partionable8core", tmp_path, ["alice"] * 5, [8000, 1000, 1000, 1000, 1000])
    machines, _ = read_machines(path)
    pslot, *dynamic = machines
    # The partitionable slot is the whole machine (TotalSlotCpus 8, TotalSlotMemory 15940;
    # its Cpus 4 are what the dynamic slots leave), its power that of a CPU times 8.
    assert (pslot.slot_type, pslot.cpus, pslot.memory, pslot.running_job) == (
        "Partitionable", 8.0, 15940.0, None)
    assert pslot.power == 8 * 8000
    assert [m.running_job for m in dynamic] == ["2.0", "2.1", "2.2", "2.3"]
    assert {m.running_user for m in dynamic} == {"bt@cs.wisc.edu"}
    assert {(m.slot_type, m.parent, m.cpus) for m in dynamic} == {
        ("Dynamic", "slot1@ingwe.cs.wisc.edu", 1.0)}


def test_real_job_with_memory_expression(tmp_path: Path) -> None:
    jobs, _ = read_jobs(REAL / "test.old.ad")
    (job,) = jobs
    assert job.id == "15.0"
    assert job.user == "bbockelm@users.opensciencegrid.org"
    assert job.status is JobStatus.IDLE
    # RequestMemory = ifthenelse(MemoryUsage isnt undefined, MemoryUsage, (ImageSize+1023)/1024)
    # with ImageSize 100: (100 + 1023) / 1024 = 1 in integer arithmetic.
    assert job.request_memory == 1.0
    assert (job.request_cpus, job.qdate, job.start_time, job.machine) == (1.0, 1357311627.0,
                                                                          None, None)
    assert str(readable(job.ad).lookup("Requirements")).startswith('(TARGET.Arch == "X86_64")')


@pytest.mark.parametrize(
    ("extra", "group"),
    [
        ('AccountingGroup = "group_physics.alice"', "group_physics"),
        ('AccountingGroup = "group_physics.alice@other.org"', "group_physics"),
        ('AcctGroup = "hep"\nAcctGroupUser = "dave"\nAccountingGroup = "hep.dave"', "hep"),
        ('AccountingGroup = "physics"', "physics"),
        ("", None),
    ],
)
def test_job_user_is_who_htcondor_authenticated_whatever_group_it_names(
        tmp_path: Path, extra: str, group: str | None) -> None:
    """The submitter writes the accounting group (and its user part); the schedd writes User
    from the account that submitted. The group is kept for pools that validate it."""
    user = "bbockelm@users.opensciencegrid.org"
    jobs, _ = read_jobs(with_lines("test.old.ad", tmp_path, extra))
    assert (jobs[0].user, jobs[0].group) == (user, group)


def test_the_jobs_of_one_user_share_its_name_and_group(tmp_path: Path) -> None:
    # A pool's million jobs have a few hundred users: one string each, not one a job. Both
    # ways of reading a job (plain values, or attribute by attribute) share them.
    text = (REAL / "test.old.ad").read_text().strip()
    plain = text + '\nAcctGroup = "hep"\n'
    explained = plain + "QDate = 1357311627 + 0\n"  # an expression: the long way
    ads = [ad.replace("ProcId = 0", f"ProcId = {proc}") for proc, ad in
           enumerate((plain, plain, explained, explained))]
    path = tmp_path / "jobs.ad"
    path.write_text("\n\n".join(ads) + "\n")
    jobs, _ = read_jobs(path)
    assert [job.id for job in jobs] == ["15.0", "15.1", "15.2", "15.3"]
    assert len({id(job.user) for job in jobs}) == len({id(job.group) for job in jobs}) == 1


def test_power_falls_back_to_kflops_then_mips(tmp_path: Path) -> None:
    path = with_lines("basic4slot", tmp_path, 'GridOwner = "a"\nKFlops = 1500000',
                      'GridOwner = "a"\nMips = 900', 'GridOwner = "a"\nMFlops = 7\nMips = 3',
                      'GridOwner = "a"\nKFlops = 2000\nMips = 5')
    machines, _ = read_machines(path)
    assert [m.power for m in machines] == [1500.0, 900.0, 7.0, 2.0]


def test_owner_and_power_attributes_are_configurable(tmp_path: Path) -> None:
    path = with_lines("small1slot", tmp_path, 'Provider = "eve"\nSpeed = 42')
    config = AdConfig.with_attributes(owner_attr="Provider", power_attr="Speed")
    machines, _ = read_machines(path, config)
    assert (machines[0].owner, machines[0].power) == ("eve", 42.0)
    with pytest.raises(InputError, match="attribute GridOwner: missing"):
        read_machines(path)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ('MFlops = 1000', "ad #1 ingwe.cs.wisc.edu, attribute GridOwner: missing"),
        ('GridOwner = "a"', "ad #1 ingwe.cs.wisc.edu, attribute MFlops: no power: the ad has "
         "none of MFlops, KFlops, Mips"),
        ('GridOwner = "a"\nMFlops = "fast"', "attribute MFlops: not a number: 'fast'"),
        ('GridOwner = "a"\nMFlops = 0', "attribute MFlops: must be positive, is 0"),
        ('GridOwner = "a"\nMFlops = -5', "attribute MFlops: must be positive, is -5"),
        ('GridOwner = "a"\nMFlops = 1 / 0', "attribute MFlops: evaluates to error"),
        ('GridOwner = 7\nMFlops = 100', "attribute GridOwner: not a string: 7"),
        ('GridOwner = ""\nMFlops = 100', "attribute GridOwner: empty"),
        ('GridOwner = "a"\nMFlops = 100\nCpus = 0', "attribute Cpus: must be positive, is 0"),
        ('GridOwner = "a"\nMFlops = = 100', "malformed ad: cannot parse 'MFlops = = 100'"),
    ],
)
def test_bad_machine_ads_are_one_line_errors_naming_file_ad_and_attribute(
    tmp_path: Path, extra: str, expected: str
) -> None:
    path = with_lines("small1slot", tmp_path, extra)
    with pytest.raises(InputError) as caught:
        read_machines(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:")
    assert expected in message
    assert "\n" not in message
    machines, skipped = read_machines(path, lenient=True)
    assert machines == []
    assert len(skipped) == 1 and skipped[0].index == 1


def test_duplicate_machine_names(tmp_path: Path) -> None:
    path = tmp_path / "dup"
    one = (REAL / "small1slot").read_text().strip() + '\nGridOwner = "a"\nMFlops = 100\n'
    path.write_text(one + "\n" + one)
    with pytest.raises(InputError) as caught:
        read_machines(path)
    # Ad #2 starts on line 161; its Name is its 92nd line: the error names that line.
    assert str(caught.value) == (f"{path}:252, ad #2 ingwe.cs.wisc.edu, attribute Name: "
                                 f"duplicate machine name (also ad #1 of {path})")
    machines, skipped = read_machines(path, lenient=True)
    assert len(machines) == 1
    assert (skipped[0].index, skipped[0].name) == (2, "ingwe.cs.wisc.edu")


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("JobStatus = 9", "ad #1 15.0, attribute JobStatus: unknown job status 9"),
        ("ProcId = 0.5", "attribute ProcId: not a whole number: 0.5"),
        ('RequestCpus = "many"', "ad #1 15.0, attribute RequestCpus: not a number: 'many'"),
        ("RequestMemory = -1", "attribute RequestMemory: must not be negative, is -1"),
    ],
)
def test_bad_job_ads(tmp_path: Path, extra: str, expected: str) -> None:
    path = with_lines("test.old.ad", tmp_path, extra)  # a later line overrides the original
    with pytest.raises(InputError) as caught:
        read_jobs(path)
    # At line 97, the line added: the ad sets the attribute there the last time.
    assert str(caught.value).startswith(f"{path}:97, ")
    assert expected in str(caught.value)


def test_lenient_snapshot_keeps_the_good_machines(tmp_path: Path) -> None:
    machines = with_lines("basic4slot", tmp_path, 'GridOwner = "a"\nMFlops = 100', "",
                          'GridOwner = "b"\nMFlops = "x"', 'GridOwner = "c"\nMFlops = 400')
    snapshot = read_snapshot(machines, REAL / "test.old.ad", now=5.0, lenient=True)
    assert [m.owner for m in snapshot.machines] == ["a", "c"]
    assert [(item.index, item.name) for item in snapshot.skipped] == [
        (2, "slot2@ingwe.cs.wisc.edu"), (3, "slot3@ingwe.cs.wisc.edu")]
    # The attribute's own line (ad #3 starts on line 317), the line added to it.
    assert snapshot.skipped[1].reason == "line 458, attribute MFlops: not a number: 'x'"
    assert (snapshot.time, len(snapshot.jobs)) == (5.0, 1)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[AdFormat, tuple[Path, Path]]:
    """3,000 slots and 5,000 jobs (1,000 running), written in each format."""
    directory = tmp_path_factory.mktemp("generated")
    machines = machine_ads(3000, 300)
    jobs = job_ads(5000, 200, machines, running=1000)
    return {
        ad_format: (write_ads(directory / f"machines.{ad_format}", machines, ad_format),
                    write_ads(directory / f"jobs.{ad_format}", jobs, ad_format))
        for ad_format in AdFormat
    }


def test_thousands_of_generated_ads_give_the_same_views_in_every_format(
    generated: dict[AdFormat, tuple[Path, Path]],
) -> None:
    snapshots = {ad_format: read_snapshot(*paths) for ad_format, paths in generated.items()}
    old = snapshots[AdFormat.OLD]
    assert (len(old.machines), len(old.jobs), old.skipped) == (3000, 5000, ())
    assert len({m.owner for m in old.machines}) == 300
    assert sum(job.status is JobStatus.RUNNING for job in old.jobs) == 1000
    assert old.jobs[0].request_memory in (98.0, 977.0, 1954.0)  # (ImageSize + 1023) / 1024
    for ad_format in (AdFormat.NEW, AdFormat.JSON):
        assert snapshots[ad_format] == old, ad_format


def test_one_bad_ad_among_thousands_is_found_and_named(
    generated: dict[AdFormat, tuple[Path, Path]], tmp_path: Path
) -> None:
    blocks = generated[AdFormat.OLD][0].read_text().split("\n\n")
    blocks[1234] += "\nMFlops = -1"  # the last value of a repeated attribute wins
    path = tmp_path / "machines"
    path.write_text("\n\n".join(blocks))
    with pytest.raises(InputError, match=r"ad #1235 slot1@node01234\.grid, attribute MFlops"):
        read_machines(path)
    machines, skipped = read_machines(path, lenient=True)
    assert (len(machines), [item.index for item in skipped]) == (2999, [1235])


# ------------------------------------------------- narrow rows (htcondor backend)
def _row_views(rows, monkeypatch, plain: bool, own_request: bool = False):
    """Each row's job (or its error) as `grouped_job_view` reads it against one autocluster's
    request (or, `own_request`, as a whole job ad asking for what it says itself), with the
    plain path on or off."""
    import classad2

    from gridfair.classads import views
    from gridfair.classads.reader import SourcedAd

    if not plain:
        monkeypatch.setattr(views, "_plain_job", lambda ad, request, keep_ad: None)
    request = views.job_request(SourcedAd(classad2.ClassAd(
        {"RequestCpus": 2, "RequestMemory": 512, "Requirements": classad2.ExprTree(
            "TARGET.Memory >= 512")}), "autoclusters", 1, None))
    seen = []
    for index, row in enumerate(rows, 1):
        sourced = SourcedAd(classad2.ClassAd(row), "rows", index, None)
        asks = sourced if own_request else request
        try:
            job = views.grouped_job_view(sourced, asks)
            seen.append((job, job.ad is (sourced.ad if own_request else request.ad)))
        except InputError as error:
            seen.append(str(error))
    return seen


def test_plain_rows_read_fast_give_the_jobs_and_errors_the_long_way_gives(monkeypatch):
    import classad2

    base = {"ClusterId": 7, "ProcId": 3, "JobStatus": 1, "QDate": 1_764_000_000,
            "Owner": "nobody", "User": "User1@gridfair.test",
            "AccountingGroup": "owners.User1@gridfair.test", "AcctGroup": "owners",
            "AcctGroupUser": "User1", "AutoClusterId": 4}
    rows = [
        base,
        {**base, "JobStatus": 2, "RemoteHost": "slot1@node1", "JobCurrentStartDate": 17.5},
        {key: value for key, value in base.items() if not key.startswith("A")},  # User only
        {"ClusterId": 1, "ProcId": 0, "JobStatus": 1, "QDate": 5.0, "Owner": "alice"},
        {**base, "ClusterId": 7.0},  # whole, but a float: the long way
        {**base, "ProcId": 2.5},
        {**base, "JobStatus": 9},
        {**base, "QDate": -1},
        {**base, "JobCurrentStartDate": classad2.ExprTree("QDate + 10")},  # evaluated
        {**base, "User": classad2.ExprTree("undefined"), "AccountingGroup": ""},
        {key: value for key, value in base.items() if key not in ("User", "Owner",
                                                                  "AccountingGroup")},
        {**base, "User": 12},
        {**base, "RemoteHost": True},
    ]
    fast, slow = _row_views(rows, monkeypatch, True), _row_views(rows, monkeypatch, False)
    assert fast == slow
    assert fast[0][0].user == "User1@gridfair.test" and fast[0][0].request_cpus == 2
    assert fast[0][1] and fast[1][0].start_time == 17.5
    assert fast[8][0].start_time == 1_764_000_010
    assert sum(isinstance(outcome, str) for outcome in fast) == 6  # refused, each explained


def test_whole_job_ads_read_fast_give_the_jobs_and_errors_the_long_way_gives(monkeypatch):
    import classad2

    base = {"ClusterId": 7, "ProcId": 3, "JobStatus": 2, "QDate": 1_764_000_000,
            "Owner": "alice", "User": "alice@grid", "RequestCpus": 1, "ImageSize": 3000,
            "RequestMemory": classad2.ExprTree("(ImageSize + 1023) / 1024"),
            "Requirements": classad2.ExprTree("TARGET.Arch == \"X86_64\""),
            "RemoteHost": "slot1@node7", "JobCurrentStartDate": 1_764_000_100}
    rows = [
        base,
        {**base, "RequestCpus": 0},  # refused by the request, after everything else
        {**base, "RequestMemory": classad2.ExprTree("strcat(\"a\", \"b\")")},  # a string
        {**base, "RequestCpus": "many", "QDate": -5},  # the QDate is told first
        {**base, "JobCurrentStartDate": -1, "RequestCpus": 0},
        {key: value for key, value in base.items() if key != "RequestCpus"},
        {**base, "ProcId": 3.0},
    ]
    fast = _row_views(rows, monkeypatch, True, own_request=True)
    slow = _row_views(rows, monkeypatch, False, own_request=True)
    assert fast == slow
    assert fast[0][0].request_memory == 3 and fast[0][0].machine == "slot1@node7"
    assert fast[0][1]  # the job keeps its own ad
    assert "QDate" in fast[3] and "RequestCpus" in fast[1]
    assert sum(isinstance(outcome, str) for outcome in fast) == 4


def test_a_job_charged_to_another_user_keeps_every_other_field():
    import dataclasses

    from gridfair.ad_views import Job

    names = [field.name for field in dataclasses.fields(Job)]
    job = Job(**{name: object() for name in names})
    moved = job.with_user("User2", "user2@pool")
    assert (moved.user, moved.identity) == ("User2", "user2@pool")
    assert all(getattr(moved, name) is getattr(job, name) for name in names
               if name not in ("user", "identity"))


def test_jobs_asking_for_the_same_whole_numbers_share_their_floats(tmp_path: Path) -> None:
    # A float a job's CPUs and memory was 48 B a job: a million jobs ask for a few values.
    ad = ('ClusterId = {n}\nProcId = 0\nOwner = "a"\nJobStatus = 1\nQDate = 1\n'
          'RequestCpus = 2\nRequestMemory = {memory}\n\n')
    path = tmp_path / "q"
    path.write_text("".join(ad.format(n=n, memory=m) for n, m in
                            ((1, 2048), (2, 2048), (3, 2048.5), (4, 70000))))
    first, second, fraction, large = read_jobs(path)[0]
    assert (second.request_cpus, second.request_memory) == (2.0, 2048.0)
    assert second.request_cpus is first.request_cpus
    assert second.request_memory is first.request_memory
    assert (fraction.request_memory, large.request_memory) == (2048.5, 70000.0)
