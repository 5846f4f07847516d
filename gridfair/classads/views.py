"""Machine and job ads as the frozen views of `gridfair.ad_views`, and a snapshot of a pool.

Values are evaluated with classad2 in the ad's own scope (`RequestMemory` is often an
expression). Which attribute names the machine's owner and which its power is configurable
(`AdConfig`): by default the owner is `GridOwner` and the power the first of `MFlops`,
`KFlops / 1000` and `Mips` that the ad has: the power of the whole slot for a static slot, of
one CPU for a partitionable or dynamic slot (whose size changes: HTCondor's own benchmarks,
`KFlops` and `Mips`, are per core too). A partitionable slot is a whole machine: its size is
`TotalSlotCpus`, `TotalSlotMemory` and `TotalSlotGPUs` (its `Cpus`, `Memory` and `GPUs` are
what is left, and must be there), and its power the power of a CPU times its CPUs.

Strict functions raise an InputError naming file, line, ad (index and Name) and attribute for
the first unusable ad; lenient ones return the usable views with a `SkippedAd` for each other.
"""

from __future__ import annotations

import copy
import math
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import classad2

from gridfair.ad_views import (
    PARTITIONABLE,
    STATIC,
    AdWarning,
    Job,
    JobStatus,
    Machine,
    SkippedAd,
    Snapshot,
)
from gridfair.classads.reader import (
    AdFormat,
    AdText,
    SourcedAd,
    attribute_line,
    read_ads,
    skip_reason,
)
from gridfair.errors import InputError

#: (attribute, factor to MFlops), tried in order: HTCondor's KFlops is in kilo-flops; Mips is
#: taken as it is, a relative figure of the same order as MFlops on one core.
DEFAULT_POWER_SOURCES: tuple[tuple[str, float], ...] = (
    ("MFlops", 1.0),
    ("KFlops", 0.001),
    ("Mips", 1.0),
)


DEFAULT_OWNER_ATTR = "GridOwner"


@dataclass(frozen=True, slots=True)
class AdConfig:
    """Which attributes name a machine's owner and its power."""

    owner_attr: str = DEFAULT_OWNER_ATTR
    power_sources: tuple[tuple[str, float], ...] = DEFAULT_POWER_SOURCES

    @classmethod
    def with_attributes(cls, owner_attr: str | None = None,
                        power_attr: str | None = None) -> AdConfig:
        """The defaults, with the owner attribute and/or a single power attribute (in MFlops)
        replaced when given."""
        return cls(
            owner_attr=owner_attr or DEFAULT_OWNER_ATTR,
            power_sources=((power_attr, 1.0),) if power_attr else DEFAULT_POWER_SOURCES,
        )


# Looked up once: `AdValues.value` runs for every attribute of every ad read anew.
_EXPRESSION = classad2.ExprTree
_UNDEFINED = classad2.Value.Undefined
_ERROR = classad2.Value.Error
_JOB_STATUSES = {int(status): status for status in JobStatus}  # JobStatus(code) is slow
#: The whole numbers an ad's requests usually are (CPUs, MB), as one float each: not a float
#: a job (48 B a job of its CPUs and memory, 48 MB at a million jobs), for 2 MB once.
_WHOLE_FLOATS = tuple(map(float, range(1 << 16)))


class AdValues:
    """Typed reads of one ad's attributes; every failure names the ad and the attribute."""

    __slots__ = ("sourced", "name", "ad")

    def __init__(self, sourced: SourcedAd, name: str | None) -> None:
        self.sourced = sourced
        self.name = name
        self.ad = sourced.ad

    def error(self, message: str, attribute: str | None = None) -> InputError:
        """The error, at the line that sets `attribute` if the ad sets it, else at the
        ad's first line."""
        sourced = self.sourced
        label = f"#{sourced.index}" + (f" {self.name}" if self.name else "")
        line = attribute_line(sourced, attribute) if attribute else None
        return InputError(message, source=sourced.source,
                          line=sourced.line if line is None else line, ad=label,
                          attribute=attribute)

    def value(self, attribute: str) -> Any:
        """The evaluated value, or None when the ad lacks it or it evaluates to undefined."""
        ad = self.ad
        try:
            # A literal comes back as its value, anything else as an expression to evaluate:
            # one lookup for the common case.
            value = ad[attribute]
            if isinstance(value, _EXPRESSION):
                value = value.eval(ad)
        except KeyError:
            return None
        except (UnicodeDecodeError, SystemError):  # a string escape made bytes not UTF-8
            # (in a list, the bindings fail on them with a SystemError)
            raise self.error("not UTF-8 text: a string escape makes invalid bytes",
                             attribute) from None
        except (ValueError, TypeError, classad2.ClassAdException):
            raise self.error("cannot be evaluated", attribute) from None
        if value is _UNDEFINED:
            return None
        if value is _ERROR:
            raise self.error(f"evaluates to error ({ad.lookup(attribute)})", attribute)
        return value

    def text(self, attribute: str, *, required: bool = False) -> str | None:
        value = self.value(attribute)
        if value is None or (required and value == ""):
            if required:
                raise self.error("missing" if value is None else "empty", attribute)
            return None
        if not isinstance(value, str):
            raise self.error(f"not a string: {value!r}", attribute)
        return value

    def number(self, attribute: str, default: float | None = None, *,
               positive: bool = False) -> float:
        """The number; `default` when absent, or an error if there is no default."""
        number = self.optional_number(attribute, positive=positive)
        if number is None:
            if default is None:
                raise self.error("missing", attribute)
            return default
        return number

    def optional_number(self, attribute: str, *, positive: bool = False) -> float | None:
        value = self.value(attribute)
        if value is None:
            return None
        kind = type(value)  # exact types: a bool is an int to isinstance, not a number here
        if kind is not float and kind is not int:
            raise self.error(f"not a number: {value!r}", attribute)
        number = (_WHOLE_FLOATS[value] if kind is int and 0 <= value < len(_WHOLE_FLOATS)
                  else float(value))
        if not math.isfinite(number):
            raise self.error(f"not a finite number: {value!r}", attribute)
        if positive and number <= 0:
            raise self.error(f"must be positive, is {value!r}", attribute)
        if number < 0:
            raise self.error(f"must not be negative, is {value!r}", attribute)
        return number


# --------------------------------------------------------------------- machines
def machine_view(sourced: SourcedAd, config: AdConfig = AdConfig(),
                 keep_ad: AdText | None = None) -> Machine:
    """The machine an ad describes; an InputError if it cannot be used. The machine keeps its
    parsed ad for matching, or `keep_ad` instead (the ad as text, parsed again when matched:
    a parsed slot ad weighs about 5 KB against its 1 KB of text, and a cycle matches part of
    the slots)."""
    values = AdValues(sourced, None)
    values.name = values.text("Name", required=True)
    owner = values.text(config.owner_attr, required=True)
    slot_type = values.text("SlotType") or STATIC
    if slot_type == PARTITIONABLE:
        # What is left must be there (a slot that says nothing of it is not one to trust).
        values.number("Cpus")
        values.number("Memory")
        cpus = values.number("TotalSlotCpus", positive=True)
        memory = values.number("TotalSlotMemory")
        gpus = values.number("TotalSlotGPUs", 0.0)
    else:
        cpus = values.number("Cpus", 1.0, positive=True)
        memory = values.number("Memory", 0.0)
        gpus = values.number("GPUs", 0.0)
    power = _power(values, config)
    if keep_ad is not None:
        ad: Any = keep_ad if slot_type != PARTITIONABLE else _WholeMachineText(keep_ad)
    else:
        ad = sourced.ad if slot_type != PARTITIONABLE else _whole_machine(sourced.ad)
    return Machine(
        name=values.name,
        owner=owner,
        power=power if slot_type == STATIC else power * cpus,
        cpus=cpus,
        memory=memory,
        state=values.text("State") or "Unclaimed",
        activity=values.text("Activity") or "Idle",
        running_job=values.text("JobId"),
        running_user=values.text("RemoteUser") or values.text("RemoteOwner"),
        running_group=_group_of(values.text("AccountingGroup")),
        slot_type=slot_type,
        gpus=gpus,
        ad=ad,
    )


#: A partitionable slot's resources as its ad says what is left of them, and their totals.
_LEFT_AND_TOTAL = (("Cpus", "TotalSlotCpus"), ("Memory", "TotalSlotMemory"),
                   ("GPUs", "TotalSlotGPUs"), ("Disk", "TotalSlotDisk"))


def _whole_machine(ad: Any) -> Any:
    """A partitionable slot's ad as matching reads it: its resources at their totals, so
    that a job's Requirements (`TARGET.Cpus >= RequestCpus`, ...) say whether it could run
    on the machine at all; whether it fits beside what runs there is the pool's to say (a
    slot with no CPU left would match nothing, and nothing could be preempted for a job)."""
    whole = copy.deepcopy(ad)
    for left, total in _LEFT_AND_TOTAL:
        if total in ad:
            whole[left] = ad.lookup(total)
    return whole


class _WholeMachineText(AdText):
    """A partitionable slot's ad kept as text: parsed, it is the whole machine
    (`_whole_machine`), as matching reads it."""

    __slots__ = ()

    def __init__(self, text: AdText) -> None:
        super().__init__(text.text, text.syntax)

    def parsed(self) -> classad2.ClassAd:
        return _whole_machine(super().parsed())


def _power(values: AdValues, config: AdConfig) -> float:
    for attribute, factor in config.power_sources:
        if attribute in values.sourced.ad:
            return values.number(attribute, positive=True) * factor
    names = ", ".join(attribute for attribute, _ in config.power_sources)
    raise values.error("no power: the ad has none of " + names, config.power_sources[0][0])


def machines_from_ads(
    ads: Iterable[SourcedAd], config: AdConfig = AdConfig(), *, lenient: bool = False,
    view: Callable[[SourcedAd], Machine] | None = None,
) -> tuple[list[Machine], list[SkippedAd]]:
    """Machine views in ad order (`view`, by default `machine_view` with `config`). Names
    must be unique: a repeated Name is an error (or, when lenient, the later ad is
    skipped)."""
    machines: list[Machine] = []
    skipped: list[SkippedAd] = []
    first_seen: dict[str, SourcedAd] = {}
    for sourced in ads:
        try:
            machine = view(sourced) if view is not None else machine_view(sourced, config)
            earlier = first_seen.setdefault(machine.name, sourced)
            if earlier is not sourced:
                raise AdValues(sourced, machine.name).error(
                    f"duplicate machine name (also ad #{earlier.index} of {earlier.source})",
                    "Name",
                )
            machines.append(machine)
        except InputError as error:
            if not lenient:
                raise
            skipped.append(skipped_ad(sourced, error))
    return machines, skipped


# ------------------------------------------------------------------------- jobs
#: Every attribute `job_view` reads of a job ad: a reader that parses only part of an ad (the
#: history reader) parses these, so that it reads a job as the daemon does.
JOB_VIEW_ATTRIBUTES = (
    "ClusterId", "ProcId", "JobStatus", "QDate", "JobCurrentStartDate", "RemoteHost", "User",
    "Owner", "AccountingGroup", "AcctGroup", "AcctGroupUser", "RequestCpus", "RequestMemory",
    "RequestGPUs",
)


def job_view(sourced: SourcedAd, keep_ad: Any = None) -> Job:
    """The job an ad describes; an InputError if it cannot be used. The job keeps its parsed
    ad for matching, or `keep_ad` instead (the ad as text, `reader.AdText`)."""
    return grouped_job_view(sourced, sourced, keep_ad)


@dataclass(frozen=True, slots=True)
class JobRequest:
    """What a job asks for, and the ad that says what it requires (matching reads its
    `Requirements` there): the part of a job that its autocluster's ad holds for every job
    of the group."""

    cpus: float
    memory: float
    ad: Any
    gpus: float = 0.0


def job_request(sourced: SourcedAd, name: str | None = None) -> JobRequest:
    """What the jobs of an ad (a job's, or an autocluster's) ask for; an InputError (naming
    the ad `name`) if it cannot be used."""
    values = AdValues(sourced, name)
    return JobRequest(values.number("RequestCpus", 1.0, positive=True),
                      values.number("RequestMemory", 0.0), sourced.ad,
                      values.number("RequestGPUs", 0.0))


#: What a job asks for of a slot: a dynamic slot is cut to these, evaluated against the machine.
REQUEST_ATTRIBUTES = ("RequestCpus", "RequestMemory", "RequestGPUs")
#: Job attributes HTCondor itself keeps that its own default requests read (older versions:
#: `ifthenelse(MemoryUsage isnt undefined, MemoryUsage, (ImageSize + 1023) / 1024)`), and that
#: an idle job may not have yet.
JOB_OWN_ATTRIBUTES = frozenset(name.lower() for name in (
    "MemoryUsage", "DiskUsage", "ImageSize", "ResidentSetSize"))
#: Functions whose value changes from one evaluation to the next, or that can name any
#: attribute of either ad (`eval(strcat("TAR", "GET.Cpus"))`).
_VARYING_CALL = re.compile(r"\b(time|random|eval|evalineachcontext|evalinlistcontext)\s*\(",
                           re.IGNORECASE)


def request_varies(ad: Any) -> str | None:
    """The first of a job's (or an autocluster's) requests that can evaluate to another value
    than it does alone, or None. HTCondor evaluates a request against the slot when it cuts
    one for the job: `ifThenElse(TARGET.Cpus =!= undefined, TARGET.Cpus, 1)` is 1 alone and
    every CPU left on the machine there; so does an unscoped name the job lacks (`Cpus`),
    which the slot's ad answers, and `time()` or `random()` change from one evaluation to
    the next. A literal, or an expression of the job's own attributes, does not."""
    for attribute in REQUEST_ATTRIBUTES:
        value = ad.get(attribute)
        if not isinstance(value, _EXPRESSION):
            continue
        outside = {ref.lower() for ref in ad.externalRefs(value) if ref}
        if outside - JOB_OWN_ATTRIBUTES or _VARYING_CALL.search(str(value)):
            return attribute
    return None


def grouped_job_view(sourced: SourcedAd, request: SourcedAd | JobRequest,
                     keep_ad: Any = None) -> Job:
    """The job of an ad that names it (ids, status, QDate, submitter), asking for what
    `request` says: its own ad, or the `JobRequest` of its autocluster's ad (the `htcondor`
    backend reads idle jobs as narrow rows and one ad per autocluster)."""
    job = _plain_job(sourced.ad, request, keep_ad)
    if job is not None:
        return job
    values = AdValues(sourced, None)
    cluster = _whole(values, "ClusterId")
    proc = _whole(values, "ProcId")
    values.name = f"{cluster}.{proc}"
    status_code = _whole(values, "JobStatus")
    status = _JOB_STATUSES.get(status_code)
    if status is None:
        raise values.error(f"unknown job status {status_code}", "JobStatus")
    user, group = _accounting_principal(values.text)
    if user is None:
        raise values.error("missing: no User or Owner", "User")
    qdate = values.number("QDate")
    asks = request if isinstance(request, JobRequest) else job_request(request, values.name)
    return Job(
        id=values.name,
        user=user,
        status=status,
        qdate=qdate,
        request_cpus=asks.cpus,
        request_memory=asks.memory,
        request_gpus=asks.gpus,
        group=group,
        start_time=values.optional_number("JobCurrentStartDate"),
        machine=values.text("RemoteHost"),
        run_count=int(values.optional_number("JobRunCount") or 0),
        ad=asks.ad if keep_ad is None else keep_ad,
    )


def _plain_job(ad: Any, request: SourcedAd | JobRequest, keep_ad: Any) -> Job | None:
    """The job of an ad (or of a narrow row: the `htcondor` backend reads tens of thousands a
    cycle, the `files` backend a million ads on its first) whose own values are all plain:
    whole ids and status, numbers >= 0, strings or absent; None for any other, which
    `grouped_job_view` reads attribute by attribute (and explains). The same job either way:
    the checks are those reads' own, for plain values, and what the job asks for is read by
    `job_request` as that path reads it, after everything else it checks."""
    get = ad.get
    try:
        cluster, proc, status_code = get("ClusterId"), get("ProcId"), get("JobStatus")
        qdate, started, machine = get("QDate"), get("JobCurrentStartDate"), get("RemoteHost")
        runs = get("JobRunCount")
    except (ValueError, SystemError):  # a string that is not UTF-8: the reads below name it
        return None
    if not (type(cluster) is int and type(proc) is int and cluster >= 0 and proc >= 0
            and type(qdate) in _NUMBER_TYPES and 0 <= qdate < math.inf
            and (started is None or type(started) in _NUMBER_TYPES and 0 <= started < math.inf)
            and (machine is None or type(machine) is str)
            and (runs is None or type(runs) is int and runs >= 0)):
        return None
    status = _JOB_STATUSES.get(status_code) if type(status_code) is int else None
    if status is None:
        return None

    def text(attribute: str) -> str | None:
        try:
            value = get(attribute)
        except (ValueError, SystemError):  # not UTF-8, as above
            raise _NotPlain from None
        if value is None or type(value) is str:
            return value
        raise _NotPlain

    try:
        user, group = _accounting_principal(text)  # reading only what it needs, as below
    except _NotPlain:
        return None
    if user is None:
        return None
    job_id = f"{cluster}.{proc}"
    asks = request if isinstance(request, JobRequest) else job_request(request, job_id)
    return Job(id=job_id, user=user, status=status, qdate=float(qdate),
               request_cpus=asks.cpus, request_memory=asks.memory,
               request_gpus=asks.gpus, group=group,
               start_time=None if started is None else float(started), machine=machine,
               run_count=runs or 0, ad=asks.ad if keep_ad is None else keep_ad)


#: Exact types of a plain number (a bool is an int to isinstance, not a number here).
_NUMBER_TYPES = (int, float)


class _NotPlain(Exception):
    """A value `_plain_job` leaves to the attribute-by-attribute path."""


def _whole(values: AdValues, attribute: str) -> int:
    number = values.number(attribute)
    if not number.is_integer():
        raise values.error(f"not a whole number: {number:g}", attribute)
    return int(number)


def _accounting_principal(text: Callable[[str], str | None]) -> tuple[str | None, str | None]:
    """(user, group) from a job's attributes as strings (`text`): the user HTCondor
    authenticated, `User` (`owner@UID_DOMAIN`, set by the schedd) else `Owner` (None if
    neither), and the accounting group the job names (`AcctGroup`, else the group part of
    `AccountingGroup`; None if none), which only the pool can vouch for
    (`gridfair.classads.submitters`)."""
    user = text("User") or text("Owner")
    if user is None:
        return None, None
    group = text("AcctGroup") or _group_of(text("AccountingGroup"))
    # One string a user (and group), not one a job: a pool's million jobs have a few hundred.
    return sys.intern(user), group if group is None else sys.intern(group)


def _group_of(accounting_group: str | None) -> str | None:
    """The group of an `AccountingGroup` (`group.user`, `group.user@domain` on a slot), or
    the whole name when it has no user part."""
    if not accounting_group:
        return None
    principal = accounting_group.partition("@")[0]
    return principal.rpartition(".")[0] or principal


def jobs_from_ads(
    ads: Iterable[SourcedAd], *, lenient: bool = False
) -> tuple[list[Job], list[SkippedAd]]:
    """Job views in ad order. Ids must be unique, as machine names are."""
    jobs: list[Job] = []
    skipped: list[SkippedAd] = []
    first_seen: dict[str, SourcedAd] = {}
    for sourced in ads:
        try:
            job = job_view(sourced)
            earlier = first_seen.setdefault(job.id, sourced)
            if earlier is not sourced:
                raise AdValues(sourced, job.id).error(
                    f"duplicate job id (also ad #{earlier.index} of {earlier.source})", "ProcId"
                )
            jobs.append(job)
        except InputError as error:
            if not lenient:
                raise
            skipped.append(skipped_ad(sourced, error))
    return jobs, skipped


def skipped_ad(sourced: SourcedAd, error: InputError) -> SkippedAd:
    """The skipped ad of a view refused with `error`."""
    name = error.ad.partition(" ")[2] if error.ad else ""
    return SkippedAd(sourced.source, sourced.index, name or None, skip_reason(error))


# ----------------------------------------------------------------------- files
def read_machines(
    path: str | Path, config: AdConfig = AdConfig(), *,
    ad_format: str | AdFormat | None = None, lenient: bool = False,
    warnings: list[AdWarning] | None = None,
) -> tuple[list[Machine], list[SkippedAd]]:
    """The machines in a file of machine ads (`condor_status -long`, new syntax or JSON)."""
    ads, unparsed = read_ads(path, ad_format, lenient=lenient, warnings=warnings)
    machines, unusable = machines_from_ads(ads, config, lenient=lenient)
    return machines, _in_file_order(unparsed, unusable)


def read_jobs(
    path: str | Path, *, ad_format: str | AdFormat | None = None, lenient: bool = False,
    warnings: list[AdWarning] | None = None,
) -> tuple[list[Job], list[SkippedAd]]:
    """The jobs in a file of job ads (`condor_q -long`, new syntax or JSON)."""
    ads, unparsed = read_ads(path, ad_format, lenient=lenient, warnings=warnings)
    jobs, unusable = jobs_from_ads(ads, lenient=lenient)
    return jobs, _in_file_order(unparsed, unusable)


def read_snapshot(
    machines_path: str | Path,
    jobs_path: str | Path,
    config: AdConfig = AdConfig(),
    now: float = 0.0,
    *,
    lenient: bool = False,
    machines_format: str | AdFormat | None = None,
    jobs_format: str | AdFormat | None = None,
) -> Snapshot:
    """The pool the two files describe, at time `now`. Lenient: unusable ads are in
    `Snapshot.skipped` (machines' first) and the rest is read. Ads that set an attribute
    twice are in `Snapshot.warnings`."""
    warnings: list[AdWarning] = []
    machines, machines_skipped = read_machines(machines_path, config, ad_format=machines_format,
                                               lenient=lenient, warnings=warnings)
    jobs, jobs_skipped = read_jobs(jobs_path, ad_format=jobs_format, lenient=lenient,
                                   warnings=warnings)
    return Snapshot(now, tuple(machines), tuple(jobs),
                    tuple(machines_skipped) + tuple(jobs_skipped), tuple(warnings))


def _in_file_order(*groups: Sequence[SkippedAd]) -> list[SkippedAd]:
    return sorted((item for group in groups for item in group), key=lambda item: item.index)
