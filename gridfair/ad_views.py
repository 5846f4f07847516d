"""Immutable views of a pool as ClassAds describe it: machines, jobs and a snapshot.

These are what the ClassAd layer produces and what the daemon reconciles against its state.
The simulator and the negotiator work on the lean mutable runtime objects of
`gridfair.core.pool` instead; `gridfair.classads.to_pool.pool_from_snapshot`
turns one into the other.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cached_property
from operator import attrgetter
from typing import Any

from gridfair.text import named_few


class JobStatus(IntEnum):
    """HTCondor's JobStatus codes (docs/codes-other-values/job-status-codes.rst)."""

    IDLE = 1
    RUNNING = 2
    REMOVING = 3
    COMPLETED = 4
    HELD = 5
    TRANSFERRING_OUTPUT = 6
    SUSPENDED = 7


#: HTCondor's slot types (`SlotType`): a static slot runs one job and is claimed whole; a
#: partitionable slot is a machine's resources, from which each job gets a dynamic slot.
STATIC, PARTITIONABLE, DYNAMIC = "Static", "Partitionable", "Dynamic"


@dataclass(frozen=True, slots=True)
class Machine:
    """One slot of the pool: who provides it, how fast it is, what runs on it. For a
    partitionable slot, `cpus`, `memory` and `gpus` are the machine's whole (TotalSlotCpus,
    ...), not what is left; for a dynamic slot, its own share."""

    name: str
    owner: str | None
    power: float  # MFlops of the whole slot (of a partitionable one: of all its cpus)
    cpus: float = 1.0
    memory: float = 0.0  # MiB
    state: str = "Unclaimed"
    activity: str = "Idle"
    running_job: str | None = None  # "ClusterId.ProcId"
    running_user: str | None = None  # who HTCondor authenticated (RemoteUser)
    running_group: str | None = None  # the running job's accounting group, as the slot says
    load: float = 0.0  # background occupancy, 0..1 (iSPD's machine load)
    slot_type: str = STATIC
    gpus: float = 0.0
    ad: Any = field(default=None, compare=False, repr=False)  # classad2.ClassAd, for matching

    @property
    def is_free(self) -> bool:
        return self.running_job is None and self.state == "Unclaimed"

    @property
    def parent(self) -> str | None:
        """The partitionable slot a dynamic slot is cut from (`whole_slot`); None for any
        other slot."""
        return whole_slot(self.name) if self.slot_type == DYNAMIC else None


@dataclass(frozen=True, slots=True)
class Job:
    """One job (one task) as the schedd describes it."""

    id: str  # "ClusterId.ProcId"
    # Who the job is charged to: the user HTCondor authenticated (User, else Owner), named as
    # the grid owner it maps to once a backend has charged it (`classads.submitters`).
    user: str
    status: JobStatus
    qdate: float
    request_cpus: float = 1.0
    request_memory: float = 0.0
    group: str | None = None  # the accounting group the job names (trusted or not)
    start_time: float | None = None  # JobCurrentStartDate
    machine: str | None = None  # RemoteHost, when running
    # The identity the job was charged as (`Charge.identity`), once a backend charged it.
    identity: str | None = None
    request_gpus: float = 0.0
    # JobRunCount: the starts the schedd has counted (0 before the first). A steering is for
    # one run: it names the count it authorizes a start at.
    run_count: int = 0
    # The ad matching reads (its Requirements, Rank, ...): the job's own, its autocluster's, or
    # the job's as text (`classads.reader.AdText`), parsed again when it is matched.
    ad: Any = field(default=None, compare=False, repr=False)

    def with_user(self, user: str, identity: str | None = None) -> Job:
        """The same job charged to `user` as `identity` (`dataclasses.replace`, a few times
        faster: the `htcondor` backend charges every job, each read)."""
        return Job(id=self.id, user=user, status=self.status, qdate=self.qdate,
                   request_cpus=self.request_cpus, request_memory=self.request_memory,
                   group=self.group, start_time=self.start_time, machine=self.machine,
                   identity=identity, request_gpus=self.request_gpus,
                   run_count=self.run_count, ad=self.ad)


@dataclass(frozen=True, slots=True)
class Charge:
    """Who the jobs of one identity are charged to, and why (`gridfair.classads.submitters`;
    shown by `gridfair shares` and `gridfair explain`)."""

    identity: str  # the authenticated user ("alice@pool"), or "group <name>" when trusted
    owner: str  # a grid owner, or the identity itself when it maps to none
    rule: str  # how the owner was found, or why none was
    mapped: bool
    ignored_groups: tuple[str, ...] = ()  # accounting groups its jobs named, not trusted

    @property
    def reason(self) -> str:
        """The rule, and the groups it did not go by (the first few: a flood of jobs may name
        a group each)."""
        if not self.ignored_groups:
            return self.rule
        return f"{self.rule}; accounting group {named_few(self.ignored_groups)} not trusted"


@dataclass(frozen=True, slots=True)
class AdNote:
    """Something to tell the user about one ad: where it is (its source, 1-based index there,
    or 0 for the whole source, and its Name or job id when known) and what (`reason`, which
    starts with the line and attribute when known)."""

    source: str
    index: int
    name: str | None
    reason: str

    def line(self) -> str:
        """One line for a log or a report: `source ad #index name: reason`."""
        return ad_note_line(self.source, self.index, self.name, self.reason)

    def row(self) -> dict[str, Any]:
        """As a report's JSON and the daemon's store keep it."""
        return {"source": self.source, "index": self.index, "name": self.name,
                "reason": self.reason}


@dataclass(frozen=True, slots=True)
class SkippedAd(AdNote):
    """An ad that could not be used, and why (reported, never fatal)."""


@dataclass(frozen=True, slots=True)
class AdWarning(AdNote):
    """An ad that was used but is suspect, and why (an attribute set twice in it)."""


def ad_note_line(source: str, index: int, name: str | None, reason: str) -> str:
    """A skipped ad or a warning, as `AdNote.line` writes it (also for the rows the daemon's
    store keeps of them)."""
    return (source + (f" ad #{index}" if index > 0 else "") + (f" {name}" if name else "")
            + f": {reason}")


#: A job's id and status and a machine's name, as getters that run in C: what passes over
#: every job of a big pool (a snapshot's indexes, the daemon's diffs) maps them, not loops.
JOB_ID, JOB_STATUS, MACHINE_NAME = attrgetter("id"), attrgetter("status"), attrgetter("name")


def index_jobs(jobs: Sequence[Job]) -> dict[str, Job]:
    """Job id -> job (the last of a repeated id), made in C."""
    return dict(zip(map(JOB_ID, jobs), jobs, strict=True))


@dataclass(frozen=True)
class Snapshot:
    """The pool at one time: what a negotiation cycle reads. Its indexes are made on first
    use and kept (a cycle looks jobs up by id in several places; at 100k jobs each index
    costs a pass)."""

    time: float
    machines: tuple[Machine, ...]
    jobs: tuple[Job, ...]
    skipped: tuple[SkippedAd, ...] = ()
    warnings: tuple[AdWarning, ...] = ()
    charges: tuple[Charge, ...] = ()  # one per identity seen, when a backend charged jobs

    @cached_property
    def jobs_by_id(self) -> dict[str, Job]:
        return index_jobs(self.jobs)

    @classmethod
    def indexed(cls, time: float, machines: tuple[Machine, ...], jobs: tuple[Job, ...],
                skipped: tuple[SkippedAd, ...], jobs_by_id: dict[str, Job],
                warnings: tuple[AdWarning, ...] = ()) -> Snapshot:
        """A snapshot whose job index its maker already has (`index_jobs(jobs)`, or one
        made from another snapshot's by the jobs that differ): at a million jobs, a pass
        saved."""
        snapshot = cls(time, machines, jobs, skipped, warnings)
        snapshot.__dict__["jobs_by_id"] = jobs_by_id  # where `cached_property` keeps it
        return snapshot

    @cached_property
    def machines_by_name(self) -> dict[str, Machine]:
        return dict(zip(map(MACHINE_NAME, self.machines), self.machines, strict=True))

    @cached_property
    def job_slots(self) -> dict[str, str]:
        """Job id -> the slot it runs on, as the slot ads say (more reliable than a job's
        RemoteHost)."""
        return {machine.running_job: machine.name for machine in self.machines
                if machine.running_job}


#: A dynamic slot's name (slot1_3@host) and the partitionable slot it is cut from (slot1@host).
_DYNAMIC_SLOT = re.compile(r"^(slot\d+)_\d+@(.*)$")


def whole_slot(name: str) -> str:
    """The partitionable slot a dynamic slot is cut from (by HTCondor's naming,
    `slot1_3@host` -> `slot1@host`), or the name itself for any other slot."""
    dynamic = _DYNAMIC_SLOT.match(name)
    return f"{dynamic.group(1)}@{dynamic.group(2)}" if dynamic else name
