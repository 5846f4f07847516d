"""HTCondor job history: the schedd's history file, `condor_history -long` / `-json` output
and `Schedd.history()` answers, read as one `HistoryJob` per job that left the queue.

Formats, recognised from the text (`detect_history_format`):
- the schedd's history file (`HISTORY`; rotated as `history.<YYYYMMDDTHHMMSS>`): old-syntax
  ads, each followed by a banner line `*** Offset = ... ClusterId = ... ProcId = ... Owner =
  ... CompletionDate = ...`. Text after the last banner is an ad cut while it was being
  written (the schedd appends an ad, then its banner): skipped as truncated. A banner that
  names a type (`*** EPOCH Offset = ...`: the epoch history, one record per run) is not a
  finished job: skipped and counted;
- `condor_history -long`: the same ads separated by blank lines (newest first);
- `condor_history -json` (a list of objects) and `-jsonl` (an object a line).
(HTCondor's own test of condor_history, `src/condor_tests/test_condor_history.py`, writes
history files the same way: each ad then its banner, typed banners for epoch records,
rotated copies named `<file>.<YYYYMMDDTHHMMSS>`, and attribute lines as `Name=value`, which
are read here by classad2 as any ad written otherwise is.)
Files may be gzip-compressed. They are read in chunks (a busy pool's history is gigabytes), in
one pass, holding no more than the ad being framed: an ad past `bounds.MAX_AD` (or a line past
`bounds.MAX_ATTRIBUTE`, or JSON nested past what can be decoded) is skipped naming the limit,
and the read goes on after it. Only the attributes read here are read (`history_attributes`):
when each is a plain literal (a number, a string, true or false) as HTCondor writes them, they
are read as such, without building a ClassAd (`_plain_values`: most of the cost of a read was
classad2's); any other ad (an expression, an escaped string, an attribute written otherwise, a
required one missing) is parsed whole by classad2, so that what an expression references is
there and an error names its line.

Each ad is read by `gridfair.classads.views.job_view` (ids, status, submit time, requests and
the submitter, exactly as the daemon reads a queued job) and then for the history's own
figures: first start (`JobStartDate`), last start (`JobCurrentStartDate`), end
(`CompletionDate`, or `EnteredCurrentStatus` for a job removed without completing), the last
run's slot (`LastRemoteHost`) and the slot's power if the ad recorded it at the match
(`MachineAttr<power>0`, the pool's `SYSTEM_JOB_MACHINE_ATTRS`), starts (`NumJobStarts`),
the wall time of all runs (`RemoteWallClockTime`) and GPUs (`RequestGpus`). An ad that cannot
be read, or whose times run backwards (started before it was submitted, ended before it
started), is a `SkippedAd` naming the file, line and why: never a job with wrong times.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

from gridfair.ad_views import JobStatus, SkippedAd
from gridfair.classads.bounds import (
    MAX_AD,
    SHORT_VALUE,
    check_ad_text,
    check_json_ad,
    open_regular,
)
from gridfair.classads.framing import Framed, json_objects, text_pieces, too_big
from gridfair.classads.reader import (
    AdFormat,
    SourcedAd,
    old_syntax_ads,
    parse_one,
    skip_reason,
)
from gridfair.classads.views import (
    DEFAULT_POWER_SOURCES,
    JOB_VIEW_ATTRIBUTES,
    AdValues,
    job_view,
    skipped_ad,
)
from gridfair.errors import InputError

#: What a job's history adds to what `job_view` reads.
HISTORY_ONLY_ATTRIBUTES = (
    "GlobalJobId", "JobStartDate", "CompletionDate", "EnteredCurrentStatus", "LastRemoteHost",
    "NumJobStarts", "RemoteWallClockTime", "LastRemoteWallClockTime", "RequestGpus",
    "MachineAttrCpus0",
)
#: Where the file names its format: the text looked at to tell which it is.
HEAD = 64 << 10


class HistoryFormat(StrEnum):
    FILE = "file"  # the schedd's history file: ads followed by *** banners
    LONG = "long"  # condor_history -long: ads separated by blank lines
    JSON = "json"  # condor_history -json / -jsonl


def machine_attributes(power_sources: Sequence[tuple[str, float]]) -> tuple[str, ...]:
    """The job attributes that record a slot's power at the match (`MachineAttr<X>0`)."""
    return tuple(f"MachineAttr{name}0" for name, _ in power_sources)


def history_attributes(
    power_sources: Sequence[tuple[str, float]] = DEFAULT_POWER_SOURCES,
) -> tuple[str, ...]:
    """Every attribute read of a history ad (a `Schedd.history()` projection)."""
    return (*JOB_VIEW_ATTRIBUTES, *HISTORY_ONLY_ATTRIBUTES, *machine_attributes(power_sources))


@dataclass(frozen=True, slots=True)
class HistoryJob:
    """A job as the history records it. Times are epoch seconds; None when never set."""

    id: str  # ClusterId.ProcId
    global_id: str | None  # schedd#cluster.proc#qdate: the same job in two files
    user: str  # the authenticated submitter, as `job_view` reads it
    group: str | None  # the accounting group the job names (trusted only if the pool says)
    status: JobStatus
    qdate: float
    first_start: float | None
    last_start: float | None
    end: float | None  # CompletionDate, else EnteredCurrentStatus (removed)
    last_run: float | None  # seconds of the last run (end - last start)
    wall_time: float  # seconds of all runs, evicted ones included
    starts: int
    slot: str | None  # LastRemoteHost: the slot of the last run
    slot_power: float | None  # MFlops of that slot at the match (MachineAttr<power>0)
    slot_cpus: float | None  # its cpus at the match (MachineAttrCpus0)
    cpus: float
    memory: float
    gpus: float
    source: str
    line: int | None


# ------------------------------------------------------------------------ sources
def history_files(path: str | Path) -> list[Path]:
    """The files of a history: the file itself, or a directory's `history` and its rotated
    copies `history.*`, oldest first (rotation stamps sort by time; `history` is newest)."""
    path = Path(path)
    if not path.is_dir():
        return [path]
    rotated = sorted(item for item in path.glob("history.*") if item.is_file())
    current = [path / "history"] if (path / "history").is_file() else []
    files = rotated + current
    if not files:
        raise InputError("no history files in the directory (expected history, "
                         "history.<date>)", source=str(path))
    return files


def detect_history_format(head: str) -> HistoryFormat | None:
    """The history format `head` (a file's first characters) is in, or None if it does not
    look like job history: JSON objects, or old-syntax job ads with or without banners."""
    stripped = head.lstrip()
    if stripped[:1] in ("[", "{"):
        return HistoryFormat.JSON if '"ClusterId"' in head or '"QDate"' in head else None
    if not re.search(r"^(?:ClusterId|QDate)\s*=", head, re.M | re.I):
        return None
    return HistoryFormat.FILE if re.search(r"^\*\*\*", head, re.M) else HistoryFormat.LONG


def looks_like_history(path: Path) -> bool:
    """Whether the file (or directory) at `path` holds HTCondor job history."""
    try:
        files = history_files(path)
        with _open(files[0]) as stream:
            head = _decode(stream.read(HEAD))
    except (InputError, OSError):
        return False
    return detect_history_format(head) is not None


def read_history(paths: Iterable[str | Path],
                 power_sources: Sequence[tuple[str, float]] = DEFAULT_POWER_SOURCES,
                 ) -> Iterator[HistoryJob | SkippedAd]:
    """Every job of the history files (a directory: its files, `history_files`), in file
    order; unusable ads as SkippedAds. A file that is not job history is an InputError."""
    for path in paths:
        for file in history_files(path):
            yield from _read_file(file, power_sources)


def history_of_ads(ads: Iterable[Any], source: str,
                   power_sources: Sequence[tuple[str, float]] = DEFAULT_POWER_SOURCES,
                   ) -> Iterator[HistoryJob | SkippedAd]:
    """The jobs of ads already parsed (`Schedd.history()`'s answer)."""
    for index, ad in enumerate(ads, start=1):
        yield _job_or_skip(SourcedAd(ad, source, index, None), power_sources)


# ------------------------------------------------------------------------ reading
def _open(path: Path) -> IO[bytes]:
    stream = open_regular(path)
    try:
        if stream.peek(2)[:2] == b"\x1f\x8b":
            return gzip.open(stream)  # type: ignore[return-value]
        return stream
    except OSError as error:
        stream.close()
        raise InputError(f"cannot read: {error.strerror}", source=str(path)) from None


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n")


def _read_file(path: Path, power_sources: Sequence[tuple[str, float]],
               ) -> Iterator[HistoryJob | SkippedAd]:
    source = str(path)
    with _open(path) as stream:
        try:
            first = stream.read(HEAD)
        except (OSError, EOFError, gzip.BadGzipFile) as error:
            raise InputError(f"cannot read: {error}", source=source) from None
        if not first.strip():
            raise InputError("empty: no job ads in it", source=source)
        history_format = detect_history_format(_decode(first))
        if history_format is None:
            raise InputError("not HTCondor job history (no ClusterId or QDate in its first "
                             "ads: expected the schedd's history file, condor_history -long "
                             "or -json)", source=source)
        framer = _FRAMERS[history_format]
        syntax = AdFormat.JSON if history_format is HistoryFormat.JSON else AdFormat.OLD
        for framed in framer(text_pieces(stream, source, first, strict=False)):
            if framed.problem is not None:
                yield SkippedAd(source, framed.index, None, framed.problem)
                continue
            try:
                sourced = _parse(framed, syntax, source, power_sources)
            except InputError as error:
                yield SkippedAd(source, framed.index, None, skip_reason(error))
                continue
            yield _job_or_skip(sourced, power_sources)


def _parse(framed: Framed, syntax: AdFormat, source: str,
           power_sources: Sequence[tuple[str, float]]) -> SourcedAd:
    """The ad of `framed`: its values of the attributes read here, when each is a plain
    literal (`_plain_values`); else the whole ad, parsed by classad2 (an expression may read
    any other attribute, and the whole ad's errors name the line)."""
    payload = framed.payload
    if syntax is AdFormat.JSON:
        wanted = _wanted_names(power_sources)
        plain = {name: value for name, value in payload.items()
                 if name.lower() in wanted and value is not None}
        if all(type(value) in _PLAIN_TYPES and not (
                type(value) is str and value.startswith("/Expr(")) for value in plain.values()):
            check_json_ad(plain, source, framed.index)  # the values read, as the bindings'
            return SourcedAd(plain, source, framed.index, None)
        return parse_one(payload, syntax, source, framed.index, framed.line)
    if len(payload) > SHORT_VALUE:
        check_ad_text(payload, source, framed.index, framed.line, by_line=True)
    if "\ufffd" in payload:
        raise InputError("not UTF-8 text (undecodable bytes)", source=source,
                         line=framed.line, ad=f"#{framed.index}")
    plain = _plain_values(_assignments(payload, _exact_names(power_sources)))
    if plain is not None and plain.keys() >= _REQUIRED:
        return SourcedAd(plain, source, framed.index, framed.line, payload)
    return parse_one(payload, syntax, source, framed.index, framed.line)


#: Python types of plain ClassAd literals (as `json` loads them, or `_plain_values` reads).
_PLAIN_TYPES = (int, float, str, bool)
#: Without these the short read defers to classad2, whose error names what is wrong.
_REQUIRED = frozenset(("ClusterId", "ProcId", "QDate", "JobStatus"))
_INTEGER = re.compile(r"-?\d+")
_REAL = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def _plain_values(lines: list[tuple[str, str]]) -> dict[str, Any] | None:
    """Attribute -> value of `Name = value` lines whose values are all plain literals
    (integers, reals, strings without escapes, true, false; undefined is left out), the last
    line of a name winning as in classad2; None if any value is something else. The same
    values classad2 gives such lines (`test_the_short_parse_reads_each_job_as_the_daemon_does`
    compares them on a real history), without building a ClassAd: that was most of a read."""
    values: dict[str, Any] = {}
    for name, text in lines:
        if text[:1] == '"':
            if text[-1:] != '"' or "\\" in text or '"' in text[1:-1]:
                return None
            values[name] = text[1:-1]
        elif _INTEGER.fullmatch(text):
            values[name] = int(text)
        elif _REAL.fullmatch(text):
            values[name] = float(text)
        elif text in ("true", "false"):
            values[name] = text == "true"
        elif text == "undefined":
            values.pop(name, None)
        else:
            return None
    return values


@lru_cache(maxsize=8)
def _wanted_names(power_sources: tuple[tuple[str, float], ...]) -> frozenset[str]:
    return frozenset(name.lower() for name in history_attributes(power_sources))


@lru_cache(maxsize=8)
def _exact_names(power_sources: tuple[tuple[str, float], ...]) -> frozenset[str]:
    return frozenset(history_attributes(power_sources))


def _assignments(ad: str, names: frozenset[str]) -> list[tuple[str, str]]:
    """(name, value text) of the lines of `ad` that set an attribute of `names`, as HTCondor
    writes them (`Name = value`, the name in its own case), in order. A line written
    otherwise is not seen: a required attribute not seen, or a value with blanks after it,
    sends the ad to classad2."""
    found = []
    for line in ad.split("\n"):
        name, _, value = line.partition(" = ")
        if name in names:
            found.append((name, value))
    return found


# ------------------------------------------------------------------------ framing
# Each framer reads the text once, piece by piece, and keeps no more than the ad it is
# framing, and an ad past `MAX_AD` keeps only its size and lines until it ends, then is
# skipped as too big: `condor_history -long` as the ad reader frames old syntax
# (`old_syntax_ads`), `-json` as it frames JSON (`json_objects`), and the history file's ads
# and banners here, whose pieces are joined once, when the ad ends.


def _complete_lines(chunks: Iterable[str]) -> Iterator[str]:
    """The text in pieces that end at a line's end (the last may not), except a line longer
    than `MAX_AD`, which comes in pieces of about that (its ad is too big anyway)."""
    rest: list[str] = []  # the start of a line that has not ended yet
    size = 0
    for chunk in chunks:
        cut = chunk.rfind("\n") + 1
        if cut:
            rest.append(chunk[:cut] if cut < len(chunk) else chunk)
            yield "".join(rest)
            rest, size = ([chunk[cut:]], len(chunk) - cut) if cut < len(chunk) else ([], 0)
        else:
            rest.append(chunk)
            size += len(chunk)
            if size > MAX_AD:
                yield "".join(rest)
                rest, size = [], 0
    if rest:
        yield "".join(rest)


class _Pending:
    """The ad being framed: its pieces of text, its size and the lines it holds; past
    `MAX_AD`, its size and lines only."""

    __slots__ = ("pieces", "size", "lines")

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.size = self.lines = 0

    def add(self, text: str) -> None:
        if not text:
            return
        self.size += len(text)
        self.lines += text.count("\n")
        if self.size <= MAX_AD:
            self.pieces.append(text)
        else:
            self.pieces.clear()

    def blank(self) -> bool:
        return self.size <= MAX_AD and all(piece.isspace() for piece in self.pieces)

    def take(self, index: int, line: int) -> Framed:
        """The ad framed (an ad too big, as a problem), its first line after `line`; then
        nothing is pending."""
        if self.size > MAX_AD:
            framed = Framed(None, index, line, too_big(self.size))
        else:
            text = "".join(self.pieces)
            framed = Framed(text, index, line + _leading_lines(text))
        self.pieces.clear()
        self.size = self.lines = 0
        return framed


def _history_file_ads(chunks: Iterable[str]) -> Iterator[Framed]:
    """Ads each followed by its banner; what follows the last banner was cut short."""
    pending, line, index = _Pending(), 1, 0  # the ad read so far, and the line it starts on
    mid_line = False  # the last piece ended inside a line (one longer than an ad)
    for text in _complete_lines(chunks):
        start = 0
        for banner_start, banner_end in _banners(text, mid_line):
            pending.add(text[start:banner_start])
            index += 1
            words = text[banner_start:banner_end].split(None, 2)
            kind = words[1] if len(words) > 1 and words[1] != "Offset" else None
            lines = pending.lines
            if pending.blank():
                pending.take(index, line)
                yield Framed(None, index, line, "a *** banner with no ad before it")
            elif kind is not None:
                framed = pending.take(index, line)
                yield Framed(None, index, framed.line,
                              f"a {kind} record (job epoch history), not a finished job")
            else:
                yield pending.take(index, line)
            line += lines + 1
            start = banner_end
        pending.add(text[start:])
        mid_line = not text.endswith("\n")
    if not pending.blank():
        framed = pending.take(index + 1, line)
        yield framed._replace(payload=None, problem="truncated: no *** banner after the last "
                                                    "ad (cut while being written?)")


def _banners(text: str, mid_line: bool) -> Iterator[tuple[int, int]]:
    """(start, end) of each banner line of `text` (a line that opens with `***`; `text`
    ends at a line's end, and starts at a line's start unless `mid_line`), found with
    `str.find`."""
    at = 0 if text.startswith("***") and not mid_line else _next_banner(text, 0)
    while at is not None:
        end = text.find("\n", at) + 1 or len(text)
        yield at, end
        at = _next_banner(text, end - 1)


def _next_banner(text: str, after: int) -> int | None:
    found = text.find("\n***", after)
    return None if found < 0 else found + 1


def _leading_lines(text: str) -> int:
    """How many blank lines `text` opens with (an ad's first line is after them)."""
    return len(text) - len(text.lstrip("\n")) if text[:1] == "\n" else 0


_FRAMERS = {HistoryFormat.FILE: _history_file_ads, HistoryFormat.LONG: old_syntax_ads,
            HistoryFormat.JSON: json_objects}


# ------------------------------------------------------------------------ jobs
def _job_or_skip(sourced: SourcedAd, power_sources: Sequence[tuple[str, float]],
                 ) -> HistoryJob | SkippedAd:
    try:
        return history_job(sourced, power_sources)
    except InputError as error:
        return skipped_ad(sourced, error)


def history_job(sourced: SourcedAd,
                power_sources: Sequence[tuple[str, float]] = DEFAULT_POWER_SOURCES,
                ) -> HistoryJob:
    """The job of one history ad; an InputError (naming the ad and attribute) if it cannot be
    read or its times run backwards."""
    job = job_view(sourced)
    values = AdValues(sourced, job.id)

    def moment(attribute: str) -> float | None:
        value = values.optional_number(attribute)
        return value if value else None  # HTCondor writes 0 for "never"

    first_start = moment("JobStartDate")
    last_start = job.start_time or None
    end, end_name = moment("CompletionDate"), "CompletionDate"
    if end is None and job.status is not JobStatus.COMPLETED:
        end, end_name = moment("EnteredCurrentStatus"), "EnteredCurrentStatus"
    _in_order(values, ("QDate", job.qdate), ("JobStartDate", first_start),
              ("JobCurrentStartDate", last_start), (end_name, end))
    # A job held, then removed, stopped running before it left: its last run's own time.
    last_run = values.optional_number("LastRemoteWallClockTime") if (
        job.status is not JobStatus.COMPLETED) else None
    if last_run is None and last_start is not None and end is not None:
        last_run = end - last_start
    power = None
    for (_, factor), attribute in zip(power_sources, machine_attributes(power_sources),
                                      strict=True):
        recorded = values.optional_number(attribute, positive=True)
        if recorded is not None:
            power = recorded * factor
            break
    return HistoryJob(
        id=job.id, global_id=values.text("GlobalJobId"), user=job.user, group=job.group,
        status=job.status,
        qdate=job.qdate, first_start=first_start, last_start=last_start, end=end,
        last_run=last_run, wall_time=values.number("RemoteWallClockTime", 0.0),
        starts=int(values.number("NumJobStarts", 0.0)), slot=values.text("LastRemoteHost"),
        slot_power=power, slot_cpus=values.optional_number("MachineAttrCpus0", positive=True),
        cpus=job.request_cpus, memory=job.request_memory,
        gpus=values.number("RequestGpus", 0.0), source=sourced.source, line=sourced.line)


def _in_order(values: AdValues, *moments: tuple[str, float | None]) -> None:
    """Times that are set must not run backwards; an InputError names the two attributes."""
    known = [(name, moment) for name, moment in moments if moment is not None]
    for (before, earlier), (after, later) in zip(known, known[1:], strict=False):
        if later < earlier:
            raise values.error(f"times run backwards: {after} {later:.0f} is before "
                               f"{before} {earlier:.0f}", after)
