"""The `files` backend: a pool described by ClassAd dumps in a directory.

Each cycle reads every `*.status` file (`condor_status -long` output, or new syntax, or
`-json`: slot ads) and every `*.queue` file (`condor_q -long` and the like: job ads) in the
directory, in name order, with `gridfair.classads`. One malformed ad is skipped with its reason
(file and line) and the rest are used. A dump whose inode, size and modification time (ns) are
those of the last read is not read again, and in a dump that changed only the ads whose text
changed are parsed again (`AdMemo`): a steady pool costs what changed, not what it holds.
The snapshot's time is the newest file's modification time: a stale dump is recognised as
stale by the safety rules.

Actions are appended to a JSON-lines file, one object per action, so a policy can be tried on
a snapshot of a real pool and its decisions read afterwards.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gridfair.classads.reader import AdMemo, SourcedAd, read_ads
from gridfair.classads.views import AdConfig, ViewMemo
from gridfair.daemon.backends import ActionFailed, PoolBackend, PoolUnavailable
from gridfair.daemon.backends.ads import snapshot_from_ads
from gridfair.errors import InputError
from gridfair.model import Job, JobStatus, Machine, SkippedAd, Snapshot

SLOT_SUFFIX = ".status"
JOB_SUFFIX = ".queue"


@dataclass
class DumpRead:
    """What one dump gave when last read, and the stat identity it had then."""

    identity: tuple[int, int, int] | None = None
    ads: list[SourcedAd] = field(default_factory=list)
    skipped: list[SkippedAd] = field(default_factory=list)
    memo: AdMemo = field(default_factory=AdMemo)


def _identity(path: Path) -> tuple[int, int, int]:
    try:
        status = path.stat()
    except OSError:
        raise PoolUnavailable(f"dump vanished while reading: {path}") from None
    return status.st_ino, status.st_size, status.st_mtime_ns


def read_dumps(paths: Sequence[Path], skipped: list[SkippedAd],
               reads: dict[Path, DumpRead]) -> list[SourcedAd]:
    """The ads of the dumps, in order; malformed ads go to `skipped`, and so does a dump with
    nothing usable in it (empty, not text), so one bad file does not fail the cycle.

    `reads` holds the last reads, updated in place: an unchanged dump is not read again and a
    changed one re-parses only its changed ads."""
    ads: list[SourcedAd] = []
    for path in paths:
        identity = _identity(path)
        last = reads.setdefault(path, DumpRead())
        if last.identity != identity:
            try:
                last.ads, last.skipped = read_ads(path, lenient=True, memo=last.memo)
            except InputError as error:
                if not path.exists():
                    raise PoolUnavailable(f"dump vanished while reading: {path}") from None
                last.ads, last.skipped = [], [SkippedAd(str(path), 0, None, error.message)]
            last.memo.rotate()
            # Taken before the read: a dump rewritten during it is read again next cycle.
            last.identity = identity
        ads.extend(last.ads)
        skipped.extend(last.skipped)
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
        self._running: set[str] = set()
        self._idle: set[str] = set()
        self._reads: dict[Path, DumpRead] = {}
        self._views = ViewMemo()

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
        skipped: list[SkippedAd] = []
        # Dumps gone from the directory are forgotten with their ads.
        present = set(slot_files) | set(job_files)
        self._reads = {path: read for path, read in self._reads.items() if path in present}
        slot_ads = read_dumps(slot_files, skipped, self._reads)
        job_ads = read_dumps(job_files, skipped, self._reads)
        snapshot = snapshot_from_ads(taken, slot_ads, job_ads, self.ad_config, skipped,
                                     self._views)
        self._views.rotate()
        self._running = {j.id for j in snapshot.jobs if j.status == JobStatus.RUNNING}
        self._idle = {j.id for j in snapshot.jobs if j.status == JobStatus.IDLE}
        return snapshot

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
            job: None if job in self._running else "not running in the last snapshot"
            for job in job_ids
        }
        self._append([{"action": "vacate", "job": job, "time": now}
                      for job, problem in results.items() if problem is None])
        return results

    def allocate(self, job: Job, machine: Machine) -> None:
        if job.id not in self._idle:
            raise ActionFailed(f"job {job.id} is not idle in the last snapshot")
        self._append([{"action": "allocate", "job": job.id, "user": job.user,
                       "machine": machine.name, "time": time.time()}])
