"""What an HTCondor pool did between two of gridfair's reads, cheaply.

- `PoolLook`: the free slots, the jobs the busy slots run, and the submitters' idle jobs, two
  small projected collector queries; a later look says whether a slot was freed, a job
  started or jobs were submitted since (the daemon's `poll` starts a cycle then, rather than
  wait for its interval: a start on a kept claim frees no slot, and its slot's next job is
  to be steered ahead before it ends).
- `ended_runs`: from a schedd's history, where and when the jobs that left its queue last
  started (a short job that started and ended between two reads has landed where it ran).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import htcondor2

#: A slot with room for a job (a partitionable slot is Unclaimed while it has any), or one
#: running a job.
FREE_SLOT = 'State == "Unclaimed"'
FREE_OR_BUSY_SLOT = f'{FREE_SLOT} || JobId isnt undefined'
FREE_SLOT_ATTRIBUTES = ["Name", "State", "EnteredCurrentState", "Cpus", "Memory", "JobId"]
#: What an ended job's history ad says of its last run.
ENDED_RUN_ATTRIBUTES = ["ClusterId", "ProcId", "LastRemoteHost", "JobCurrentStartDate"]
#: Seconds the schedd's clock may be behind this host's, in reading its history.
HISTORY_SLACK = 5.0
#: Clusters a history constraint names (a chain of hundreds of terms gets no answer).
HISTORY_CLUSTERS = 50


@dataclass(frozen=True, slots=True)
class PoolLook:
    """Each free slot's (EnteredCurrentState, Cpus, Memory), the job each busy slot runs,
    and each submitter's IdleJobs."""

    free: Mapping[str, tuple[Any, Any, Any]]
    idle: Mapping[str, Any]
    running: Mapping[str, Any]

    @classmethod
    def of(cls, collector: Any, slot_constraint: str) -> PoolLook:
        """A look through `collector` at the slots of `slot_constraint` and the submitters."""
        slots = collector.query(htcondor2.AdType.Startd,
                                f"({slot_constraint}) && ({FREE_OR_BUSY_SLOT})",
                                FREE_SLOT_ATTRIBUTES)
        submitters = collector.query(htcondor2.AdType.Submitter, "true", ["Name", "IdleJobs"])
        return cls({str(ad.get("Name")): (ad.get("EnteredCurrentState"), ad.get("Cpus", 0),
                                          ad.get("Memory", 0))
                    for ad in slots if ad.get("State") == "Unclaimed"},
                   {str(ad.get("Name")): ad.get("IdleJobs", 0) for ad in submitters},
                   {str(ad.get("Name")): ad.get("JobId") for ad in slots
                    if ad.get("JobId") is not None})

    def changed_since(self, before: PoolLook) -> bool:
        """A free slot that was not free then, or has been claimed and freed since (its
        EnteredCurrentState moved), or has more room (a partitionable slot); a slot running
        a job it did not run then (a start, on a kept claim or a match); or a submitter with
        more idle jobs."""
        for name, (entered, cpus, memory) in self.free.items():
            then = before.free.get(name)
            if then is None or entered != then[0] or cpus > then[1] or memory > then[2]:
                return True
        if any(job != before.running.get(name) for name, job in self.running.items()):
            return True
        return any(count > before.idle.get(name, 0) for name, count in self.idle.items())


def history_constraints(job_ids: Iterable[str]) -> Iterator[tuple[str, int]]:
    """Constraints that select these jobs ("cluster.proc") in a schedd's history, with how
    many jobs each asks for, `HISTORY_CLUSTERS` clusters a constraint: `ClusterId == c &&
    member(ProcId, {...})` a cluster (the record lookup `fetch_constraints` sends a queue
    query fails a history query: "Failed to receive history ad", HTCondor 25.14)."""
    procs: dict[str, list[str]] = {}
    for job_id in job_ids:
        cluster, _, proc = job_id.partition(".")
        procs.setdefault(cluster, []).append(proc)
    clusters = sorted(procs)
    for start in range(0, len(clusters), HISTORY_CLUSTERS):
        batch = clusters[start:start + HISTORY_CLUSTERS]
        yield (" || ".join(f"(ClusterId == {cluster} && member(ProcId, "
                           f"{{{', '.join(procs[cluster])}}}))" for cluster in batch),
               sum(len(procs[cluster]) for cluster in batch))


def ended_runs(schedd: Any, job_ids: Iterable[str], since: float) -> dict[str, tuple[str, float]]:
    """From `schedd`'s history: each of these jobs that left the queue at `since` or later,
    with the slot of its last run (`LastRemoteHost`) if that run started then or later
    (`JobCurrentStartDate`). The history is read newest first and no further back than
    `since` (`HISTORY_SLACK` earlier, for the schedd's clock)."""
    oldest = f"EnteredCurrentStatus < {math.floor(since - HISTORY_SLACK)}"
    found: dict[str, tuple[str, float]] = {}
    for constraint, asked in history_constraints(job_ids):
        for ad in schedd.history(constraint, ENDED_RUN_ATTRIBUTES, match=asked, since=oldest):
            slot, start = ad.get("LastRemoteHost"), ad.get("JobCurrentStartDate")
            if isinstance(slot, str) and isinstance(start, int | float) and (
                    start >= since - HISTORY_SLACK):
                found[f"{ad['ClusterId']}.{ad['ProcId']}"] = (slot, float(start))
    return found
