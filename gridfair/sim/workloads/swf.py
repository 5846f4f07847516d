"""Reader of the Standard Workload Format (SWF) of the Parallel Workloads Archive.

Rules implemented (Feitelson et al., "Experience with using the Parallel Workloads Archive",
JPDC 2014; format at https://www.cs.huji.ac.il/labs/parallel/workload/swf.html):

- one job per line, 18 whitespace-separated numeric fields (see `SwfJob`); -1 means unknown;
- lines starting with `;` are header comments; `; Key: value` lines are kept in
  `SwfTrace.header` (a key that repeats keeps its first value; continuation lines, which have no
  key, are ignored); blank lines are ignored;
- the file may be gzip-compressed (recognised by its magic bytes, not by its name) or plain;
- a malformed line (wrong number of fields, a field that is not a number, a count field that is
  not an integer) is skipped and recorded with its line number and why in `SwfTrace.skipped`;
  `SwfTrace.skip_report()` names the first few for a warning;
- a file with no usable job line is an `InputError` that says how many lines were malformed and
  shows the first few.

The reader keeps every field and judges nothing else: whether a job with an unknown run time or
processor count is usable is the caller's decision (see `SwfJob.processors`).

API: `read_swf(path) -> SwfTrace`; `SwfTrace.jobs` are `SwfJob`s in file order. `SwfLines(path)`
yields them one by one instead, reading the file again on each pass.
"""

from __future__ import annotations

import gzip
import math
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from gridfair.classads.bounds import bounded_lines
from gridfair.errors import InputError

#: Field names, in SWF order (field 1 is `job_id`).
FIELDS = (
    "job_id", "submit_time", "wait_time", "run_time", "allocated_procs", "avg_cpu_time",
    "used_memory", "requested_procs", "requested_time", "requested_memory", "status",
    "user_id", "group_id", "executable", "queue", "partition", "preceding_job", "think_time",
)
#: Fields that count or identify something: they must be integers.
INTEGER_FIELDS = frozenset({
    "job_id", "allocated_procs", "requested_procs", "status", "user_id", "group_id",
    "executable", "queue", "partition", "preceding_job",
})
#: How many malformed lines `SwfTrace.skip_report` names.
REPORTED_SKIPS = 5

_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True, slots=True)
class SwfJob:
    """One job line: the 18 SWF fields (times in seconds, memory in KB), and its line number."""

    line: int
    job_id: int
    submit_time: float
    wait_time: float
    run_time: float
    allocated_procs: int
    avg_cpu_time: float
    used_memory: float
    requested_procs: int
    requested_time: float
    requested_memory: float
    status: int  # 1 completed, 0 failed, 5 cancelled (SWF's codes)
    user_id: int
    group_id: int
    executable: int
    queue: int
    partition: int
    preceding_job: int
    think_time: float

    @property
    def processors(self) -> int:
        """Processors the job asked for: requested (field 8), else allocated (field 5);
        -1 when neither is known."""
        if self.requested_procs > 0:
            return self.requested_procs
        if self.allocated_procs > 0:
            return self.allocated_procs
        return -1


@dataclass(frozen=True, slots=True)
class SkippedLine:
    line: int
    reason: str


@dataclass
class SwfTrace:
    """A parsed SWF file: its jobs in file order, its header, and the lines skipped."""

    source: str
    jobs: list[SwfJob]
    header: dict[str, str] = field(default_factory=dict)
    skipped: list[SkippedLine] = field(default_factory=list)

    def header_int(self, key: str) -> int | None:
        """A numeric header value (e.g. `MaxProcs`), or None when absent or not an integer."""
        try:
            return int(self.header[key])
        except (KeyError, ValueError):
            return None

    def skip_details(self) -> str:
        """The first few malformed lines with why (`line 3: 2 fields, expected 18; ...`)."""
        shown = "; ".join(f"line {skip.line}: {skip.reason}"
                          for skip in self.skipped[:REPORTED_SKIPS])
        more = len(self.skipped) - REPORTED_SKIPS
        return shown + (f"; and {more} more" if more > 0 else "")

    def skip_report(self) -> str | None:
        """One sentence naming the first few malformed lines, or None when none was skipped."""
        if not self.skipped:
            return None
        return f"{self.source}: skipped {self.skip_summary()}"

    def skip_summary(self) -> str:
        """How many lines were malformed, and the first few (`2 malformed lines (line 3: ...)`)."""
        noun = "line" if len(self.skipped) == 1 else "lines"
        return f"{len(self.skipped)} malformed {noun} ({self.skip_details()})"


def read_swf(path: str | Path) -> SwfTrace:
    """Parse an SWF file (gzip or plain). Raises `InputError` when no job line is usable."""
    lines = SwfLines(path)
    trace = SwfTrace(source=lines.source, jobs=list(lines), header=lines.header,
                     skipped=lines.skipped)
    if not trace.jobs:
        detail = f" ({trace.skip_summary()})" if trace.skipped else ""
        raise InputError(f"no usable job line in the SWF file{detail}", source=trace.source)
    return trace


class SwfLines:
    """An SWF file read line by line: iterating yields its jobs in file order (the file is
    opened again on each pass) and gathers the header and the malformed lines as it goes,
    so a reader that lets each job go keeps none (`swf_grid` streams them)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.source = str(self.path)
        self.header: dict[str, str] = {}
        self.skipped: list[SkippedLine] = []

    def __iter__(self) -> Iterator[SwfJob]:
        self.header, self.skipped = {}, []
        try:
            with open(self.path, "rb") as raw:
                compressed = raw.read(2) == _GZIP_MAGIC
            opener = gzip.open if compressed else open
            with opener(self.path, "rt", encoding="utf-8", errors="replace") as text:
                yield from self._jobs(bounded_lines(text, self.source))
        except (OSError, EOFError, zlib.error) as error:  # missing, unreadable, corrupt gzip
            raise InputError(f"cannot read SWF file: {error}", source=self.source) from None

    def _jobs(self, lines: Iterable[str]) -> Iterator[SwfJob]:
        for number, line in enumerate(lines, start=1):
            if "\0" in line:  # no text file has one: a binary file would be read as garbage
                raise InputError(f"not text (a NUL byte on line {number})", source=self.source)
            stripped = line.strip()
            if not stripped:
                continue
            if stripped.startswith(";"):
                key, colon, value = stripped[1:].partition(":")
                key = key.strip()
                if colon and key and " " not in key:
                    self.header.setdefault(key, value.strip())
                continue
            job_or_reason = _parse_job(stripped.split(), number)
            if isinstance(job_or_reason, str):
                self.skipped.append(SkippedLine(number, job_or_reason))
            else:
                yield job_or_reason


def _parse_job(fields: list[str], number: int) -> SwfJob | str:
    """The job of one line, or why the line is malformed."""
    if len(fields) != len(FIELDS):
        return f"{len(fields)} fields, expected {len(FIELDS)}"
    values: list[float | int] = []
    for position, (name, text) in enumerate(zip(FIELDS, fields, strict=True), start=1):
        try:
            value = float(text)
        except ValueError:
            return f"field {position} ({name}) is not a number: {text!r}"
        if not math.isfinite(value):
            return f"field {position} ({name}) is not a finite number: {text!r}"
        if name in INTEGER_FIELDS:
            if not value.is_integer():
                return f"field {position} ({name}) is not an integer: {text!r}"
            value = int(value)
        values.append(value)
    return SwfJob(number, *values)
