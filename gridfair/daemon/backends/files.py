"""The `files` backend: a pool described by ClassAd dumps in a directory.

Each cycle reads every `*.status` file (`condor_status -long` output, or new syntax, or
`-json`: slot ads) and every `*.queue` file (`condor_q -long` and the like: job ads) in the
directory, in name order, with `gridfair.classads`. `gridfair shares` reads its `--machines`
and `--jobs` files and directories the same way (`AdDumps`).

One malformed ad is skipped with its reason (file and line) and the rest are used; an ad that
sets an attribute twice is used (the last value wins, as in HTCondor) and warned about. A dump
that cannot be read or is not text fails the read, naming it, as does a slot dump with no ad in
it; a job dump of zero bytes is an empty queue (what `condor_q -long` and `-json` write for
one: HTCondor 25, measured), but one of blank lines is not (a failed `condor_q` writes one).

A dump whose inode, size and modification time (ns) are those of the last read is not read
again, and in a dump that changed only the ads whose text changed are parsed and viewed again
(`reread`): a steady pool costs what changed, not what it holds. A name (slot Name, job id)
used twice sends the read the long way, every ad parsed, so the views' rules say which ad is
skipped and why. The snapshot's time is the newest file's modification time: a stale dump is
recognised as stale by the safety rules.

Jobs alike for matching share one ad text, as a schedd's autoclusters share one ad: those
whose old-syntax ads differ only in identity attributes (`JOB_IDENTITY`: ids, dates, status,
owner) that no slot's Requirements or Rank reads keep the text of the first such job read
(found by `match_key`, a digest of the other lines), unless their own match expressions, or
what the slots read of them, reach such an attribute (`reaches`): those keep their own. A
million jobs of a few hundred shapes keep a few hundred texts.

Actions are appended to a JSON-lines file, one object per action, so a policy can be tried on
a snapshot of a real pool and its decisions read afterwards.
"""

from __future__ import annotations

import json
import os
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gridfair.ad_views import (
    MACHINE_NAME,
    AdWarning,
    Job,
    JobStatus,
    Machine,
    SkippedAd,
    Snapshot,
    index_jobs,
)
from gridfair.classads.matching import (
    JOB_IDENTITY,
    hides_reads,
    match_key,
    match_references,
    reaches,
)
from gridfair.classads.reader import (
    AdFile,
    AdFormat,
    AdText,
    Reread,
    SourcedAd,
    open_ads,
    parse_ads,
    reread,
)
from gridfair.classads.views import AdConfig, job_view, machine_view, skipped_ad
from gridfair.daemon.backends import (
    ActionFailed,
    PoolBackend,
    PoolUnavailable,
    UnusablePool,
    unusable,
)
from gridfair.daemon.backends.ads import snapshot_from_ads, snapshot_of
from gridfair.errors import InputError

if TYPE_CHECKING:
    from gridfair.daemon.config import Config

SLOT_SUFFIX = ".status"
JOB_SUFFIX = ".queue"


@dataclass
class DumpRead:
    """What one dump gave when last read, and the stat identity it had then: the views built
    from its ads, the ads skipped, and the views by their ad text's digest for the next read
    (`reread`)."""

    identity: tuple[int, int, int] | None = None
    read: Reread = field(default_factory=Reread.nothing)


def _identity(path: Path) -> tuple[int, int, int]:
    try:
        status = path.stat()
    except OSError:
        raise PoolUnavailable(f"dump vanished while reading: {path}") from None
    return status.st_ino, status.st_size, status.st_mtime_ns


def _dump_text(path: Path, size: int, jobs: bool) -> AdFile | None:
    """The dump's text, or None for a job dump of zero bytes (an empty queue); a dump that
    cannot be read, is not text or holds no ad fails the read, naming it."""
    if jobs and size == 0 and path.is_file():  # a FIFO has no size either: refused below
        return None
    try:
        return open_ads(path)
    except InputError as error:
        if not path.exists():
            raise PoolUnavailable(f"dump vanished while reading: {path}") from None
        raise PoolUnavailable(str(error)) from None


def read_dumps(paths: Sequence[Path], build: Callable[..., Any],
               reads: dict[Path, DumpRead], *, jobs: bool = False,
               ad_format: AdFormat | None = None) -> Reread:
    """`build` (a view, given the ad and its text, `AdText`, to keep instead of the parsed
    ad) of every ad of the dumps, in order, with the ads skipped and the warnings; `jobs`:
    they are job dumps (where zero bytes is an empty queue).

    `reads` holds the last reads, updated in place: an unchanged dump is not read again and a
    changed one builds only its changed ads anew."""
    total = Reread.nothing()
    for path in paths:
        identity = _identity(path)
        last = reads.setdefault(path, DumpRead())
        if last.identity != identity:
            text = _dump_text(path, identity[1], jobs)
            last.read = Reread.nothing() if text is None else reread(
                text, str(path), last.read.memo, build, skipped_ad, True, ad_format)
            # Taken before the read: a dump rewritten during it is read again next cycle.
            last.identity = identity
        total.values.extend(last.read.values)
        total.unparsed.extend(last.read.unparsed)
        total.refused.extend(last.read.refused)
        total.warned.extend(last.read.warned)
    return total


def read_afresh(paths: Sequence[Path], skipped: list[SkippedAd], warned: list[AdWarning],
                *, jobs: bool = False, ad_format: AdFormat | None = None) -> list[SourcedAd]:
    """The ads of the dumps, every one parsed; ads that cannot be parsed go to `skipped`,
    warnings to `warned`."""
    ads: list[SourcedAd] = []
    for path in paths:
        text = _dump_text(path, _identity(path)[1], jobs)
        if text is None:
            continue
        read, unparsed = parse_ads(text, str(path), ad_format, lenient=True, warnings=warned)
        ads.extend(read)
        skipped.extend(unparsed)
    return ads


def _dump_files(paths: Sequence[Path], suffix: str) -> list[Path]:
    """The files `paths` name: each file as it is, and each directory's `*suffix` files in
    name order."""
    files: list[Path] = []
    for path in paths:
        if not path.is_dir():
            if not path.exists():
                raise PoolUnavailable(f"{path}: no such file or directory")
            files.append(path)
            continue
        try:
            entries = sorted(path.iterdir())
        except OSError as error:
            raise PoolUnavailable(f"cannot list {path}: {error.strerror or error}") from None
        files += [entry for entry in entries if entry.name.endswith(suffix)]
    return files


def _listed(paths: Sequence[Path]) -> str:
    return ", ".join(map(str, paths))


class AdDumps:
    """A pool described by slot dumps and job dumps: files, or directories whose `*.status`
    (slots) and `*.queue` (jobs) files are read. Each `read` reads again what changed."""

    def __init__(self, slot_paths: Sequence[str | Path], job_paths: Sequence[str | Path],
                 ad_config: AdConfig, ad_format: AdFormat | None = None) -> None:
        self.slot_paths = [Path(path) for path in slot_paths]
        self.job_paths = [Path(path) for path in job_paths]
        self.ad_config = ad_config
        self.ad_format = ad_format
        self._reads: dict[Path, DumpRead] = {}
        # Lower-case names of a job's attributes that a slot's Requirements or Rank has read,
        # ever (a slot read anew adds its own): those identity attributes are no job's to
        # share. The job views were built knowing `_job_reads` of them.
        self._slot_reads: set[str] = set()
        self._job_reads = 0
        self._unread = JOB_IDENTITY
        # Match key -> the text its jobs share, as long as a job holds it.
        self._shared: weakref.WeakValueDictionary[bytes, AdText] = (
            weakref.WeakValueDictionary())

    def _slot_view(self, sourced: SourcedAd, text: AdText | None = None) -> Machine:
        self._slot_reads.update(name.lower() for name in match_references((sourced.ad,))[1]
                                if name)
        if hides_reads(sourced.ad):  # it may read any attribute of a job
            self._slot_reads |= JOB_IDENTITY
        return machine_view(sourced, self.ad_config, text)

    def _job_view(self, sourced: SourcedAd, text: AdText | None = None) -> Job:
        return job_view(sourced, self._match_text(sourced, text))

    def _match_text(self, sourced: SourcedAd, text: AdText | None) -> AdText | None:
        """The text the job is matched by: its group's (the first job's of its match key),
        or its own when it is the first, when its expressions (or what the slots read of it)
        reach an identity attribute that differs among the group, or when its syntax is not
        one attribute a line (JSON has no text kept: None, the parsed ad is)."""
        if text is None or text.syntax is not AdFormat.OLD:
            return text
        key = match_key(text.text, self._unread)
        shared = self._shared.get(key)
        if shared is not None:
            return shared
        if not reaches(sourced.ad, self._slot_reads, self._unread):
            self._shared[key] = text
        return text

    def _know_slot_reads(self, job_files: Sequence[Path]) -> None:
        """When the slots read of jobs names not read before, the jobs are grouped again:
        their views (and memos) are let go, to be built anew knowing them."""
        if len(self._slot_reads) == self._job_reads:
            return
        self._job_reads = len(self._slot_reads)
        self._unread = JOB_IDENTITY - self._slot_reads
        self._shared = weakref.WeakValueDictionary()
        for path in job_files:
            self._reads.pop(path, None)

    def dumps(self) -> tuple[list[Path], list[Path]]:
        """The slot dumps and the job dumps, as they are now."""
        slots = _dump_files(self.slot_paths, SLOT_SUFFIX)
        if not slots:
            raise PoolUnavailable(f"no *{SLOT_SUFFIX} dump in {_listed(self.slot_paths)}")
        return slots, _dump_files(self.job_paths, JOB_SUFFIX)

    def read(self) -> Snapshot:
        """The pool the dumps describe, at the newest dump's modification time. An
        `UnusablePool` when it has no usable slot ad, or job ads none of which is usable."""
        slot_files, job_files = self.dumps()
        try:
            taken = max(p.stat().st_mtime for p in slot_files + job_files)
        except OSError as error:
            raise PoolUnavailable(f"dump vanished while reading: {error.filename}") from None
        # Dumps gone are forgotten with their ads.
        present = set(slot_files) | set(job_files)
        self._reads = {path: read for path, read in self._reads.items() if path in present}
        # Slots and jobs keep their ads as text, parsed again only to be matched (`AdText`).
        slots = read_dumps(slot_files, self._slot_view, self._reads, ad_format=self.ad_format)
        self._know_slot_reads(job_files)
        jobs = read_dumps(job_files, self._job_view, self._reads, jobs=True,
                          ad_format=self.ad_format)
        jobs_by_id = index_jobs(jobs.values)
        # The long way below skips the later of two ads of one name: it never makes a
        # usable set of ads unusable, nor an unusable one usable.
        no_slots, no_jobs = not slots.values, not jobs.values and (jobs.unparsed or jobs.refused)
        if (len(set(map(MACHINE_NAME, slots.values))) != len(slots.values)
                or len(jobs_by_id) != len(jobs.values)):
            # A name used twice: the views' own rules say which ad is skipped and why.
            skipped: list[SkippedAd] = []
            warned: list[AdWarning] = []
            slot_ads = read_afresh(slot_files, skipped, warned, ad_format=self.ad_format)
            job_ads = read_afresh(job_files, skipped, warned, jobs=True,
                                  ad_format=self.ad_format)
            snapshot = snapshot_from_ads(taken, slot_ads, job_ads, self.ad_config, skipped,
                                         warned)
        else:
            snapshot = snapshot_of(taken, slots.values, jobs.values, (
                *slots.unparsed, *jobs.unparsed, *slots.refused, *jobs.refused), jobs_by_id,
                (*slots.warned, *jobs.warned))
        if no_slots:
            raise UnusablePool(unusable("machine", _listed(self.slot_paths),
                                        [*slots.unparsed, *slots.refused]), snapshot)
        if no_jobs:
            raise UnusablePool(unusable("job", _listed(self.job_paths),
                                        [*jobs.unparsed, *jobs.refused]), snapshot)
        return snapshot


class FilesBackend(PoolBackend):
    name = "files"

    def __init__(
        self,
        directory: str | Path,
        actions: str | Path,
        *,
        owner_attribute: str = "GridOwner",
        power_attribute: str = "",
    ) -> None:
        self.directory = Path(directory)
        self.actions = Path(actions)
        self.ad_config = AdConfig.with_attributes(owner_attribute, power_attribute or None)
        self.dumps = AdDumps([self.directory], [self.directory], self.ad_config)
        # What the last snapshot showed, to refuse actions on jobs it did not have.
        self._last: Snapshot | None = None

    @classmethod
    def from_config(cls, section: Mapping[str, Any], config: Config) -> FilesBackend:
        return cls(section["directory"], section["actions"],
                   owner_attribute=section["owner_attribute"],
                   power_attribute=section["power_attribute"])

    def read_snapshot(self) -> Snapshot:
        self._last = self.dumps.read()
        return self._last

    def _status(self, job_id: str) -> JobStatus | None:
        """The job's status in the last snapshot (None if it had no such job)."""
        job = self._last.jobs_by_id.get(job_id) if self._last is not None else None
        return job.status if job is not None else None

    def _append(self, records: Sequence[dict]) -> None:
        lines = "".join(json.dumps(record, sort_keys=True) + "\n" for record in records)
        try:
            with self.actions.open("a", encoding="utf-8") as out:
                out.write(lines)
                out.flush()
                # The journal marks an action confirmed only after this returns: it must be on
                # disk by then, or a crash could lose an action the journal calls done.
                os.fsync(out.fileno())
        except OSError as error:
            raise ActionFailed(f"cannot append to {self.actions}: {error.strerror}") from None

    def vacate(self, job_ids: Sequence[str]) -> dict[str, str | None]:
        now = time.time()
        results: dict[str, str | None] = {
            job: None if self._status(job) == JobStatus.RUNNING
            else "not running in the last snapshot"
            for job in job_ids
        }
        self._append([{"action": "vacate", "job": job, "time": now}
                      for job, problem in results.items() if problem is None])
        return results

    def allocate(self, job: Job, machine: Machine) -> None:
        if self._status(job.id) != JobStatus.IDLE:
            raise ActionFailed(f"job {job.id} is not idle in the last snapshot")
        self._append([{"action": "allocate", "job": job.id, "user": job.user,
                       "machine": machine.name, "time": time.time()}])
