"""Demand as the `htcondor` backend reads it, ad by ad: which idle jobs gridfair may steer,
autocluster ads as requests, idle rows as jobs, the constraints that fetch single job ads,
and the ads that jobs matching alike share."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any

import classad2

from gridfair.ad_views import Job, SkippedAd
from gridfair.classads.matching import JOB_IDENTITY, match_key, reaches
from gridfair.classads.reader import SourcedAd, skip_reason
from gridfair.classads.views import JobRequest, grouped_job_view, job_request, request_varies
from gridfair.daemon.backends.htcondor.steering import DEFAULT_STEER_ATTRIBUTE, steering_names
from gridfair.errors import InputError

#: Clusters, and jobs, a query for single job ads names at most (`fetch_constraints`).
FETCH_CLUSTERS = 50
FETCH_JOBS = 10_000
#: What the backend reads of each idle job when demand comes from autoclusters.
IDLE_ROW_ATTRIBUTES = (
    "ClusterId", "ProcId", "JobStatus", "QDate", "AutoClusterId", "JobCurrentStartDate",
    "RemoteHost", "Owner", "User", "AcctGroup", "AcctGroupUser", "AccountingGroup",
    "JobRunCount",
)


def not_steered(attribute: str) -> str:
    """Why an idle job whose request can vary is not steered. (Its skipped item names no ad
    index: the ad is usable, gridfair declines it; a pool of such jobs alone is not an
    unusable one.)"""
    return (f"not steered: {attribute} reads the slot or the clock (HTCondor evaluates it "
            "against the slot it cuts for the job: gridfair cannot know the size it would "
            "allocate); ask for a number")


def unsteerable(ad: classad2.ClassAd, steering: Collection[str],
                slot_reads: Collection[str] = ()) -> str | None:
    """Why an idle job (or an autocluster's jobs) is not steered, or None. Its request can
    vary (`not_steered`), or its match reads the steering itself: gridfair decides on the job
    as it is and the negotiator matches it as gridfair writes it, so a Requirements of
    `MY.GridfairSlot =?= undefined` matches every slot when decided and none once steered
    (issue 43: such a job had other users' jobs vacated for it and held free slots, and never
    ran)."""
    varies = request_varies(ad)
    if varies is not None:
        return not_steered(varies)
    if reaches(ad, slot_reads, steering):
        return ("not steered: its Requirements or Rank read gridfair's steering attributes "
                "(or may: eval), which gridfair sets when it steers the job: it would not "
                "match as steered")
    return None


def shared_match_ads(jobs: Sequence[Job], own_reads: Collection[str],
                     slot_reads: Collection[str]) -> list[Job]:
    """The jobs, those whose ads differ only in `JOB_IDENTITY` attributes that no match
    expression reads sharing one ad for matching (the first one's), as a schedd's
    autoclusters share one: with `demand = "jobs"` every job ad was kept until the next
    read, a parsed ad of about 3.4 KB a job. `own_reads` are what the jobs' Requirements and
    Rank read of their own ads (`match_references`: with what those read in turn),
    `slot_reads` what the slots' read of a job; a group whose ad reaches an identity
    attribute through one of those (the slot reads `TARGET.A`, the job's `A` reads
    `ClusterId`) keeps each job's own ad. The matcher groups jobs again, by the same rule
    (`classads.matching`): the matches, hence the decisions, are those of the jobs' own ads."""
    read = {name.lower() for name in (*own_reads, *slot_reads)}
    unread = JOB_IDENTITY - read
    # A digest of the ad's text less the unread identity lines -> its group's ad, or None: a
    # digest (collision-resistant, whatever users write), not the text, so that jobs that
    # share nothing cost a few bytes each here, not their ad's text again.
    shared: dict[bytes, Any] = {}
    result = []
    for job in jobs:
        ad = job.ad
        if ad is None:
            result.append(job)
            continue
        try:
            text = ad.printOld()
        except (ValueError, SystemError):  # a string that is not UTF-8: the job keeps its ad
            result.append(job)
            continue
        key = match_key(text, unread)
        first = shared.get(key, False)
        if first is False:
            first = shared[key] = ad if not reaches(ad, slot_reads, unread) else None
        result.append(job if first is None or first is ad else
                      dataclasses.replace(job, ad=first))
    return result


def unsteered(ad: classad2.ClassAd, steering: Collection[str]) -> classad2.ClassAd:
    """An idle job's ad as gridfair decides on it: without the steering it wrote there (a job
    steered ahead names a busy slot, whose START would refuse it everywhere else in
    gridfair's own matching, and the policy may give it another slot)."""
    for name in steering:
        if name in ad:
            del ad[name]
    return ad


def steerable_ads(ads: Iterable[classad2.ClassAd], source: str,
                  steering: Collection[str] = steering_names(DEFAULT_STEER_ATTRIBUTE),
                  ) -> tuple[list[SourcedAd], list[SkippedAd]]:
    """The job ads gridfair may steer, and the idle ones it may not (`unsteerable`), skipped
    with the reason; running and other jobs are kept as they are."""
    kept: list[SourcedAd] = []
    skipped: list[SkippedAd] = []
    for index, ad in enumerate(ads, 1):
        idle = ad.get("JobStatus") == 1
        why = unsteerable(ad, steering) if idle else None
        if why is None:
            kept.append(SourcedAd(unsteered(ad, steering) if idle else ad, source, index, None))
        else:
            job_id = f"{ad.get('ClusterId')}.{ad.get('ProcId')}"
            skipped.append(SkippedAd(source, 0, job_id, why))
    return kept, skipped


def autocluster_requests(
    clusters: Iterable[classad2.ClassAd], source: str,
    steering: Collection[str] = steering_names(DEFAULT_STEER_ATTRIBUTE),
) -> tuple[dict[int, JobRequest | str], list[SkippedAd]]:
    """AutoClusterId -> what its jobs ask for, from a schedd's autocluster ads, or why its
    jobs are not steered (`unsteerable`); unusable ads are skipped with their reasons (their
    jobs are then fetched one by one)."""
    requests: dict[int, JobRequest | str] = {}
    skipped: list[SkippedAd] = []
    for index, ad in enumerate(clusters, 1):
        cluster = ad.get("AutoClusterId")
        try:
            if not isinstance(cluster, int):
                raise InputError("no AutoClusterId", source=source, attribute="AutoClusterId")
            why = unsteerable(ad, steering)
            if why is not None:
                requests[cluster] = why
                continue
            requests[cluster] = job_request(SourcedAd(unsteered(ad, steering), source, index,
                                                      None), f"autocluster {cluster}")
        except InputError as error:
            skipped.append(SkippedAd(source, index, f"autocluster {cluster}",
                                     skip_reason(error)))
    return requests, skipped


def fetch_constraints(job_ids: Iterable[str]) -> Iterator[tuple[str, list[str]]]:
    """Constraints that select these jobs (ids "cluster.proc", as the schedd's integers gave
    them), with the ids each asks for, at most `FETCH_CLUSTERS` clusters and `FETCH_JOBS`
    jobs a constraint. A cluster's procs are a record the job's ProcId is looked up in,
    `[p0 = true; p7 = true][strcat("p", string(ProcId))]`: a hash lookup for the schedd,
    where `member(ProcId, {...})` scans the list for every job of the cluster (25,000 jobs
    of 100,000 in 8 clusters: 0.87 s of the schedd's CPU against 19.0 s, measured by
    `bench/live_fetch_by_id.py`). A schedd answers a constraint of a few hundred `||` terms
    with no ads and no error (a chain of 500 `(ClusterId == c && ProcId == p)` terms, on
    HTCondor 25): one term a cluster."""
    procs: dict[str, list[str]] = {}
    for job_id in job_ids:
        cluster, _, proc = job_id.partition(".")
        procs.setdefault(cluster, []).append(proc)
    pieces = [(cluster, ids[start:start + FETCH_JOBS]) for cluster, ids in procs.items()
              for start in range(0, len(ids), FETCH_JOBS)]
    batch: list[tuple[str, list[str]]] = []
    asked = 0
    for piece in pieces:
        if batch and (len(batch) == FETCH_CLUSTERS or asked + len(piece[1]) > FETCH_JOBS):
            yield _procs_constraint(batch)
            batch, asked = [], 0
        batch.append(piece)
        asked += len(piece[1])
    if batch:
        yield _procs_constraint(batch)


def _procs_constraint(batch: list[tuple[str, list[str]]]) -> tuple[str, list[str]]:
    """`fetch_constraints`' constraint for (cluster, its procs asked) pairs, and the ids."""
    return (" || ".join(
        f"(ClusterId == {cluster} && [{'; '.join(f'p{proc} = true' for proc in ids)}]"
        '[strcat("p", string(ProcId))] =?= true)' for cluster, ids in batch),
        [f"{cluster}.{proc}" for cluster, ids in batch for proc in ids])


def jobs_of_rows(
    rows: Iterable[classad2.ClassAd], requests: dict[int, JobRequest | str], source: str,
) -> tuple[list[Job], list[str], list[SkippedAd]]:
    """(jobs, ids of jobs whose autocluster is not among `requests`, skipped rows): each row
    (`IDLE_ROW_ATTRIBUTES`) a job asking for what its autocluster's ad says, or skipped with
    the reason its autocluster's jobs are not steered."""
    jobs: list[Job] = []
    missing: list[str] = []
    skipped: list[SkippedAd] = []
    for index, row in enumerate(rows, 1):
        request = requests.get(row.get("AutoClusterId"))
        if isinstance(request, str):
            skipped.append(SkippedAd(source, 0, f"{row.get('ClusterId')}.{row.get('ProcId')}",
                                     request))
            continue
        if request is None and isinstance(row.get("ClusterId"), int) and isinstance(
                row.get("ProcId"), int):
            missing.append(f"{row['ClusterId']}.{row['ProcId']}")
            continue
        sourced = SourcedAd(row, source, index, None)
        try:
            jobs.append(grouped_job_view(sourced, request or sourced))
        except InputError as error:
            skipped.append(SkippedAd(source, index, None, skip_reason(error)))
    return jobs, missing, skipped


