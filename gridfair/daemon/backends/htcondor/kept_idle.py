"""A schedd's idle jobs kept from one read to the next, so that a steady read fetches the rows
of the jobs that changed alone (issue 49).

Each read still lists every idle job, but by its ids and the attributes whose change a kept
view would miss (`LISTED`): `AutoClusterId`, which the schedd drops when an attribute its
autoclusters are keyed by is edited (`qmgmt.cpp`, `preSetAttribute`) and sets again, so a
`condor_qedit` of a request or a Requirements moves the job's id; `JobRunCount` and
`EnteredCurrentStatus`, which the schedd sets at each start and status change. A job not kept,
or whose listed values differ from its kept row's, has its row fetched by id; a kept job no
longer listed is gone. The autocluster ads read are those of ids past the highest kept and of
the kept ones the fetched jobs are in (`KeptClusters`, not 21,000 ads every read at 10,000
slots): the schedd gives an id again only once it forgot its autoclusters, which a change of
its significant attributes (one job's `AutoClusterAttrs`, read every time) or a kept id with
another ad shows, and the read is then a full one. What
else a decision reads of a row a user cannot change after submit: `QDate` and `JobRunCount`
are in `PROTECTED_JOB_ATTRS` (`configs/htcondor-pool.config`), `Owner` and `User` are the
schedd's, an accounting group is trusted only where the pool makes it immutable, and
`JobCurrentStartDate` and `RemoteHost` are read of running jobs alone. So no edit hides a
change; an edit of `EnteredCurrentStatus` only costs its job a fetch.

The list is not a `since` query (the live queue has none): a constraint on
`EnteredCurrentStatus` past a high-water mark misses the edits above, and the history finds
the removed jobs (cheaply: 0.004 s of CPU for 1,000 of 100,000, against the list's 0.5 s) but
not the edited ones, which the list finds too (`docs/results/scale.md`, 2026-11-29).

Every `full_read_every` reads (and the first, and after the schedd did not answer) the rows
of every idle job and every autocluster ad are read again as the ground truth: what the kept
views differ in is logged and the full read kept (`compare`).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import classad2

from gridfair.ad_views import Job, SkippedAd
from gridfair.classads.views import JobRequest
from gridfair.daemon.backends.htcondor.demand import autocluster_requests

log = logging.getLogger("gridfair.daemon")

#: What a steady read lists of every idle job (see the module docstring).
LISTED = ("ClusterId", "ProcId", "AutoClusterId", "JobRunCount", "EnteredCurrentStatus")
#: Differences logged one line each at a full read; the others counted in one line.
LOGGED_DIFFERENCES = 5
#: What an autocluster's ad says of its jobs, not of what they ask (`ad_signature`).
_OF_ITS_JOBS = ("jobcount ", "jobids ", "jidrange ")
#: Kept autoclusters a steady read names in its query at most (past them, it reads all).
NAMED_CLUSTERS = 200


def job_id(row: classad2.ClassAd) -> str:
    return f"{row.get('ClusterId')}.{row.get('ProcId')}"


def listed_values(row: classad2.ClassAd) -> tuple:
    """The row's `LISTED` values past its ids (a string for any that is not a plain value)."""
    return tuple(_plain(row.get(name)) for name in LISTED[2:])


def _plain(value: object) -> object:
    return value if value is None or type(value) in (int, float, str, bool) else str(value)


def cluster_signatures(clusters: Iterable[classad2.ClassAd]) -> dict[object, str]:
    """AutoClusterId -> its ad's text less `JobCount` (`ad_signature`)."""
    return {_plain(ad.get("AutoClusterId")): ad_signature(ad) for ad in clusters}


def ad_signature(ad: classad2.ClassAd) -> str:
    """The ad's text less what an autocluster's ad says of its jobs (`JobCount`, `JobIds`,
    `JidRange`: they move as jobs come and go, `autocluster.cpp`), sorted."""
    return "\n".join(sorted(line for line in ad.printOld().splitlines()
                            if not line.lower().startswith(_OF_ITS_JOBS)))


def significant_attributes(schedd: Any, job_constraint: str) -> object:
    """The schedd's significant attributes (`AutoClusterAttrs`) as one job in an autocluster
    has them (None if no job is in one). When they change the schedd forgets its
    autoclusters and deletes every job's `AutoClusterId` (`schedd.cpp`,
    `clear_autocluster_id`): a job in an autocluster since has the new ones."""
    rows = schedd.query(f"({job_constraint}) && AutoClusterId =!= undefined",
                        ["AutoClusterAttrs"], limit=1)
    return _plain(rows[0].get("AutoClusterAttrs")) if rows else None


@dataclass
class KeptClusters:
    """A schedd's autoclusters as last read: each one's signature (`ad_signature`), what its
    jobs ask for (`demand.autocluster_requests`), its ad's skip if unusable, and the schedd's
    significant attributes then.

    The schedd numbers its autoclusters from a counter (`autocluster.cpp`, `next_id`) and
    gives an id again only after it forgot them all (its significant attributes changed, or
    it restarted): a steady read asks for the ads of ids past the highest kept (new ones)
    and of the kept ones a changed job is in, whose signature must be the kept one."""

    signatures: dict[object, str] = field(default_factory=dict)
    requests: dict[object, JobRequest | str] = field(default_factory=dict)
    skips: dict[object, SkippedAd] = field(default_factory=dict)
    significant: object = None

    @classmethod
    def of(cls, ads: Sequence[classad2.ClassAd], requests: dict[int, JobRequest | str],
           skipped: Iterable[SkippedAd], significant: object) -> KeptClusters:
        """The autoclusters read (`ads`), with their requests and skips (named `autocluster
        ID`, as `autocluster_requests` names them)."""
        signatures = cluster_signatures(ads)
        named = {f"autocluster {cluster}": cluster for cluster in signatures}
        return cls(signatures, dict(requests),
                   {named.get(skip.name): skip for skip in skipped}, significant)

    def constraint(self, clusters: Iterable[object]) -> str:
        """The autocluster ads a steady read asks for: ids past the highest kept, and the
        kept ones of `clusters` (those the changed jobs are in); all, past `NAMED_CLUSTERS`."""
        named = sorted({cluster for cluster in clusters if type(cluster) is int
                        and cluster in self.signatures})
        if len(named) > NAMED_CLUSTERS:
            return "true"
        highest = max((cluster for cluster in self.signatures if type(cluster) is int),
                      default=0)
        return " || ".join([f"AutoClusterId > {highest}",
                            *(f"AutoClusterId == {cluster}" for cluster in named)])

    def with_ads(self, ads: Sequence[classad2.ClassAd], source: str,
                 steering: Collection[str]) -> KeptClusters | str:
        """These autoclusters with the ads a steady read got added, or what differs when a
        kept one's ad is not its kept signature (the schedd numbered its autoclusters anew)."""
        signatures = cluster_signatures(ads)
        for cluster, text in signatures.items():
            kept = self.signatures.get(cluster, text)
            if kept != text:
                was, now = set(kept.splitlines()), set(text.splitlines())
                return (f"autocluster {cluster}: kept {sorted(was - now)}, "
                        f"read {sorted(now - was)}")
        added = [ad for ad in ads if _plain(ad.get("AutoClusterId")) not in self.signatures]
        requests, skipped = autocluster_requests(added, source, steering)
        made = KeptClusters.of(added, requests, skipped, self.significant)
        return KeptClusters({**self.signatures, **made.signatures},
                            {**self.requests, **made.requests}, {**self.skips, **made.skips},
                            self.significant)

    def skips_of(self, clusters: Collection[object]) -> list[SkippedAd]:
        """The skips of the unusable autocluster ads that idle jobs listed are in."""
        return [skip for cluster, skip in self.skips.items() if cluster in clusters]


@dataclass
class KeptIdle:
    """One schedd's idle jobs as last read: each kept job's view and its row's listed values,
    and the autoclusters they were read with."""

    views: dict[str, Job] = field(default_factory=dict)
    listed: dict[str, tuple] = field(default_factory=dict)
    clusters: KeptClusters = field(default_factory=KeptClusters)
    reads: int = 0  # steady reads since the last full one

    def wanted(self, rows: Iterable[classad2.ClassAd],
               ) -> tuple[list[str], list[str], set[object]]:
        """(every listed job id in the schedd's order, the ids whose row must be fetched:
        those not kept or whose listed values moved, the autoclusters the listed jobs are
        in)."""
        order: list[str] = []
        fetch: list[str] = []
        clusters: set[object] = set()
        for row in rows:
            name = job_id(row)
            order.append(name)
            values = listed_values(row)
            clusters.add(values[0])
            if self.listed.get(name) != values:
                fetch.append(name)
        return order, fetch, clusters

    @classmethod
    def of(cls, views: Iterable[Job], listed: dict[str, tuple],
           clusters: KeptClusters) -> KeptIdle:
        """The views made of rows with `clusters`' requests, kept with their rows' listed
        values (`listed`: job id -> `listed_values` of its row)."""
        kept = cls(clusters=clusters)
        for view in views:
            kept.views[view.id] = view
            kept.listed[view.id] = listed[view.id]
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
