"""The `files` backend: a pool described by ClassAd dumps in a directory.

Each cycle reads every `*.status` file (`condor_status -long` output, or new syntax, or
`-json`: slot ads) and every `*.queue` file (`condor_q -long` and the like: job ads) in the
directory, in name order, with `gridfair.classads`. One malformed ad is skipped with its reason
(file and line) and the rest are used. A dump whose inode, size and modification time (ns) are
those of the last read is not read again, and in a dump that changed only the ads whose text
changed are parsed and viewed again (`reread`): a steady pool costs what changed, not what it
holds. A name (slot Name, job id) used twice sends the read the long way, every ad parsed, so
the views' rules say which ad is skipped and why.
The snapshot's time is the newest file's modification time: a stale dump is recognised as
stale by the safety rules.

Actions are appended to a JSON-lines file, one object per action, so a policy can be tried on
a snapshot of a real pool and its decisions read afterwards.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from gridfair.classads.reader import Reread, SourcedAd, read_ads, read_text, reread
from gridfair.classads.views import AdConfig, job_view, machine_view, skipped_ad
from gridfair.daemon.backends import ActionFailed, PoolBackend, PoolUnavailable
from gridfair.daemon.backends.ads import snapshot_from_ads, snapshot_of
from gridfair.errors import InputError
from gridfair.model import (
    MACHINE_NAME,
    Job,
    JobStatus,
    Machine,
    SkippedAd,
    Snapshot,
    index_jobs,
)

SLOT_SUFFIX = ".status"
JOB_SUFFIX = ".queue"


@dataclass
class DumpRead:
    """What one dump gave when last read, and the stat identity it had then: the views built
    from its ads, the ads skipped, and the views by ad text for the next read (`reread`)."""

    identity: tuple[int, int, int] | None = None
    read: Reread = field(default_factory=lambda: Reread([], [], [], {}))


def _identity(path: Path) -> tuple[int, int, int]:
    try:
        status = path.stat()
    except OSError:
        raise PoolUnavailable(f"dump vanished while reading: {path}") from None
    return status.st_ino, status.st_size, status.st_mtime_ns


def _unreadable(path: Path, error: InputError) -> SkippedAd:
    """A dump with nothing usable in it (empty, not text) is skipped, not the cycle failed;
    one that vanished fails the cycle."""
    if not path.exists():
        raise PoolUnavailable(f"dump vanished while reading: {path}") from None
    return SkippedAd(str(path), 0, None, error.message)


def read_dumps(paths: Sequence[Path], build: Callable[..., Any],
               reads: dict[Path, DumpRead], *, keep_text: bool = False) -> Reread:
    """`build` (a view) of every ad of the dumps, in order, with the ads skipped.

    `reads` holds the last reads, updated in place: an unchanged dump is not read again and a
    changed one builds only its changed ads anew."""
    views: list[Any] = []
    unparsed: list[SkippedAd] = []
    refused: list[SkippedAd] = []
    for path in paths:
        identity = _identity(path)
        last = reads.setdefault(path, DumpRead())
        if last.identity != identity:
            try:
                last.read = reread(read_text(path), str(path), last.read.memo, build,
                                   skipped_ad, keep_text)
            except InputError as error:
                last.read = Reread([], [_unreadable(path, error)], [], {})
            # Taken before the read: a dump rewritten during it is read again next cycle.
            last.identity = identity
        views.extend(last.read.values)
        unparsed.extend(last.read.unparsed)
        refused.extend(last.read.refused)
    return Reread(views, unparsed, refused, {})


def read_afresh(paths: Sequence[Path], skipped: list[SkippedAd]) -> list[SourcedAd]:
    """The ads of the dumps, every one parsed; dumps and ads that cannot be read go to
    `skipped`."""
    ads: list[SourcedAd] = []
    for path in paths:
        try:
            read, unparsed = read_ads(path, lenient=True)
        except InputError as error:
            read, unparsed = [], [_unreadable(path, error)]
        ads.extend(read)
        skipped.extend(unparsed)
    return ads


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
        # What the last snapshot showed, to refuse actions on jobs it did not have.
        self._last: Snapshot | None = None
        self._reads: dict[Path, DumpRead] = {}
        self._machine_view = partial(machine_view, config=self.ad_config)

    def _dumps(self) -> tuple[list[Path], list[Path]]:
        try:
            entries = sorted(self.directory.iterdir())
        except OSError as error:
            raise PoolUnavailable(
                f"cannot list {self.directory}: {error.strerror or error}"
            ) from None
        slots = [p for p in entries if p.name.endswith(SLOT_SUFFIX)]
        jobs = [p for p in entries if p.name.endswith(JOB_SUFFIX)]
        if not slots:
            raise PoolUnavailable(f"no *{SLOT_SUFFIX} dump in {self.directory}")
        return slots, jobs

    def read_snapshot(self) -> Snapshot:
        slot_files, job_files = self._dumps()
        try:
            taken = max(p.stat().st_mtime for p in slot_files + job_files)
        except OSError as error:
            raise PoolUnavailable(f"dump vanished while reading: {error.filename}") from None
        # Dumps gone from the directory are forgotten with their ads.
        present = set(slot_files) | set(job_files)
        self._reads = {path: read for path, read in self._reads.items() if path in present}
        slots = read_dumps(slot_files, self._machine_view, self._reads)
        # Jobs keep their ads as text, parsed again only to be matched (`AdText`).
        jobs = read_dumps(job_files, job_view, self._reads, keep_text=True)
        jobs_by_id = index_jobs(jobs.values)
        if (len(set(map(MACHINE_NAME, slots.values))) != len(slots.values)
                or len(jobs_by_id) != len(jobs.values)):
            # A name used twice: the views' own rules say which ad is skipped and why.
            skipped: list[SkippedAd] = []
            slot_ads, job_ads = read_afresh(slot_files, skipped), read_afresh(job_files, skipped)
            snapshot = snapshot_from_ads(taken, slot_ads, job_ads, self.ad_config, skipped)
        else:
            snapshot = snapshot_of(taken, slots.values, jobs.values, (
                *slots.unparsed, *jobs.unparsed, *slots.refused, *jobs.refused), jobs_by_id)
        self._last = snapshot
        return snapshot

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
