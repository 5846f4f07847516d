"""A schedd's idle jobs kept from one read to the next, so that a steady read fetches the rows
of the jobs that changed alone (issue 49).

Each read still lists every idle job, but by its ids and the attributes whose change a kept
view would miss (`LISTED`): `AutoClusterId`, which the schedd drops when an attribute its
autoclusters are keyed by is edited (`qmgmt.cpp`, `preSetAttribute`) and sets again, so a
`condor_qedit` of a request or a Requirements moves the job's id; `JobRunCount` and
`EnteredCurrentStatus`, which the schedd sets at each start and status change. A job not kept,
or whose listed values differ from its kept row's, has its row fetched by id; a kept job no
longer listed is gone; a kept job of an autocluster whose ad changed is fetched again. What
else a decision reads of a row a user cannot change after submit: `QDate` and `JobRunCount`
are in `PROTECTED_JOB_ATTRS` (`configs/htcondor-pool.config`), `Owner` and `User` are the
schedd's, an accounting group is trusted only where the pool makes it immutable, and
`JobCurrentStartDate` and `RemoteHost` are read of running jobs alone. So no edit hides a
change; an edit of `EnteredCurrentStatus` only costs its job a fetch.

The list is not a `since` query (the live queue has none): a constraint on
`EnteredCurrentStatus` past a high-water mark misses the edits above, and the history finds
the removed jobs (cheaply: 0.004 s of CPU for 1,000 of 100,000, against the list's 0.5 s) but
not the edited ones, which the list finds too (`docs/results/scale.md`, 2026-11-29).

Every `full_every` reads (and the first, and after the schedd did not answer) the rows of
every idle job are read again as the ground truth: what the kept views differ in is logged and
the full read kept (`compare`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import classad2

from gridfair.ad_views import Job
from gridfair.classads.views import JobRequest

log = logging.getLogger("gridfair.daemon")

#: What a steady read lists of every idle job (see the module docstring).
LISTED = ("ClusterId", "ProcId", "AutoClusterId", "JobRunCount", "EnteredCurrentStatus")
#: Differences logged one line each at a full read; the others counted in one line.
LOGGED_DIFFERENCES = 5


def job_id(row: classad2.ClassAd) -> str:
    return f"{row.get('ClusterId')}.{row.get('ProcId')}"


def listed_values(row: classad2.ClassAd) -> tuple:
    """The row's `LISTED` values past its ids (a string for any that is not a plain value)."""
    return tuple(_plain(row.get(name)) for name in LISTED[2:])


def _plain(value: object) -> object:
    return value if value is None or type(value) in (int, float, str, bool) else str(value)


def cluster_signatures(clusters: Iterable[classad2.ClassAd]) -> dict[object, str]:
    """AutoClusterId -> its ad's text less `JobCount` (which moves every read): an id whose
    text changed (the schedd may reuse ids) has its kept jobs fetched again."""
    signatures: dict[object, str] = {}
    for ad in clusters:
        signatures[_plain(ad.get("AutoClusterId"))] = ad_signature(ad)
    return signatures


def ad_signature(ad: classad2.ClassAd) -> str:
    """The ad's text less `JobCount` (an autocluster's moves every read), sorted."""
    return "\n".join(sorted(line for line in ad.printOld().splitlines()
                            if not line.lower().startswith("jobcount ")))


@dataclass
class KeptIdle:
    """One schedd's idle jobs as last read: each kept job's view and its row's listed values,
    and the autoclusters' signatures they were read with."""

    views: dict[str, Job] = field(default_factory=dict)
    listed: dict[str, tuple] = field(default_factory=dict)
    signatures: dict[object, str] = field(default_factory=dict)
    # AutoClusterId -> what its jobs ask for, as the kept views were made with: an
    # autocluster whose ad is the same keeps its request, so that all its jobs' views, kept
    # or made, share one ad (the matcher groups jobs by it).
    requests: dict[object, JobRequest | str] = field(default_factory=dict)
    reads: int = 0  # steady reads since the last full one

    def unchanged_requests(self, signatures: dict[object, str]
                           ) -> dict[object, JobRequest | str]:
        """The kept request of each autocluster whose ad is the same (`signatures`): taken as
        it is, its ad not read again (an autocluster a steered job, 21,000 of them at 10,000
        slots, cost a second of CPU a read), and all its jobs' views, kept or made, share
        its one ad (the matcher groups jobs by it)."""
        return {cluster: request for cluster, request in self.requests.items()
                if self.signatures.get(cluster) == signatures.get(cluster)}

    def wanted(self, rows: Iterable[classad2.ClassAd], signatures: dict[object, str],
               ) -> tuple[list[str], list[str]]:
        """(every listed job id in the schedd's order, the ids whose row must be fetched):
        those not kept, whose listed values moved, or whose autocluster's ad changed."""
        changed = {cluster for cluster, text in self.signatures.items()
                   if signatures.get(cluster) != text}
        order: list[str] = []
        fetch: list[str] = []
        for row in rows:
            name = job_id(row)
            order.append(name)
            values = listed_values(row)
            if self.listed.get(name) != values or values[0] in changed:
                fetch.append(name)
        return order, fetch

    @classmethod
    def of(cls, views: Iterable[Job], rows: dict[str, classad2.ClassAd],
           signatures: dict[object, str], requests: dict[int, JobRequest | str],
           ) -> KeptIdle:
        """The views made of `rows` (job id -> its row) with `requests`, kept with the rows'
        listed values."""
        kept = cls(signatures=signatures, requests=dict(requests))
        for view in views:
            kept.views[view.id] = view
            kept.listed[view.id] = listed_values(rows[view.id])
        return kept


def compare(source: str, kept: KeptIdle, fresh: KeptIdle) -> list[str]:
    """What the kept views differ in from a full read's, logged (the full read is kept)."""
    found = sorted(_differences(kept.views, fresh.views))
    for line in found[:LOGGED_DIFFERENCES]:
        log.warning("%s: the kept idle jobs differed from a full read: %s", source, line)
    if len(found) > LOGGED_DIFFERENCES:
        log.warning("%s: %d more differences from the full read", source,
                    len(found) - LOGGED_DIFFERENCES)
    if found:
        log.warning("%s: the kept idle jobs are repaired: the full read is kept", source)
    return found


def _differences(kept: dict[str, Job], fresh: dict[str, Job]) -> Iterator[str]:
    for name in kept.keys() - fresh.keys():
        yield f"job {name} kept, not in the full read"
    for name in fresh.keys() - kept.keys():
        yield f"job {name} in the full read, not kept"
    texts: dict[int, str | None] = {}  # what matching reads: the ad's text, once an ad

    def asks(job: Job) -> str | None:
        if id(job.ad) not in texts:
            texts[id(job.ad)] = None if job.ad is None else ad_signature(job.ad)
        return texts[id(job.ad)]

    for name in kept.keys() & fresh.keys():
        was, truth = kept[name], fresh[name]
        if was != truth or asks(was) != asks(truth):
            yield f"job {name}: kept {was!r}, read {truth!r}"
