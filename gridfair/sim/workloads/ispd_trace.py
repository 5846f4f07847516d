"""iSPD traces (`.wmsx`) and the line-aware XML scanner the iSPD readers share.

A trace is `<system><trace><format kind=.../><task id arr sts cpsz cmsz usr/>...</trace></system>`
(notes in ../shared/data/ispd/README.md). iSPD's own reader splits lines on quotes and needs a
fixed attribute order; this one parses the XML, so any order and layout is read, and a bad
element or attribute is reported with its line.

Each task becomes one single-cpu `Task` of `cpsz` MFlop arriving at `arr`; `cmsz` (Mbit, -1 or
absent: none) is its input, sent over the model's links when transfer delays are on. Tasks with
no computation (cpsz <= 0) cannot be simulated and are skipped, counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple
from xml.parsers import expat

from gridfair.core.pool import Task
from gridfair.errors import InputError
from gridfair.sim.grid import Grid
from gridfair.sim.workloads.common import count, grid_scenario
from gridfair.sim.workloads.registry import WORKLOAD_FORMATS, Scenario

#: Called for each start tag: (tag, attributes, line, parent tag or None).
StartHandler = Callable[[str, dict[str, str], int, str | None], None]


def scan_xml(path: Path, on_start: StartHandler, on_end: Callable[[str], None] | None = None
             ) -> None:
    """Stream `path` through expat, calling `on_start` with each element's line number.

    External DTDs (`<!DOCTYPE system SYSTEM "iSPD.dtd">`) are not fetched: the readers check
    structure themselves, with messages that name the line. The declared encoding (iSPD writes
    ISO-8859-1) is honoured because expat reads the bytes.
    """
    source = str(path)
    parser = expat.ParserCreate()
    stack: list[str] = []

    def start(tag: str, attributes: dict[str, str]) -> None:
        on_start(tag, attributes, parser.CurrentLineNumber, stack[-1] if stack else None)
        stack.append(tag)

    def end(tag: str) -> None:
        stack.pop()
        if on_end is not None:
            on_end(tag)

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        with open(path, "rb") as stream:
            parser.ParseFile(stream)
    except FileNotFoundError:
        raise InputError("no such file", source=source) from None
    except OSError as error:
        raise InputError(f"cannot read: {error}", source=source) from None
    except expat.ExpatError as error:
        raise InputError(f"not well-formed XML: {expat.ErrorString(error.code)}",
                         source=source, line=error.lineno) from None


def xml_number(attributes: Mapping[str, str], name: str, tag: str, source: str, line: int,
               default: float | None = None) -> float:
    """A numeric attribute, or an error naming the element, its line and the attribute."""
    text = attributes.get(name)
    if text is None:
        if default is None:
            raise InputError(f"<{tag}> lacks attribute {name!r}", source=source, line=line)
        return default
    try:
        return float(text)
    except ValueError:
        raise InputError(f"<{tag}> attribute {name!r} is not a number: {text!r}",
                         source=source, line=line) from None


def xml_text(attributes: Mapping[str, str], name: str, tag: str, source: str, line: int) -> str:
    """A required text attribute, or an error naming the element, its line and the attribute."""
    text = attributes.get(name)
    if text is None or not text.strip():
        raise InputError(f"<{tag}> lacks attribute {name!r}", source=source, line=line)
    return text.strip()


class TraceTask(NamedTuple):
    """One `<task>` of a trace (a named tuple: made a few times faster than a frozen
    dataclass, which sets each field through `object.__setattr__`; a trace has thousands)."""

    id: str
    user: str
    arrival: float  # s
    work: float  # MFlop
    communication: float  # Mbit sent to the machine before it runs (0: none)
    status: int  # SWF/GWF status copied by the converters (1 = completed); -1 unknown
    line: int


@dataclass
class WmsxTrace:
    tasks: list[TraceTask]
    kind: str  # <format kind=...>: iSPD, SWF or GWF (where the tasks came from)
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> count


# Where each element may appear (parent tag), for messages about unknown elements.
_WMSX_PARENTS = {"system": None, "trace": "system", "format": "trace", "task": "trace"}


def read_wmsx(path: str | Path) -> WmsxTrace:
    """Every task of an iSPD trace, in file order."""
    path = Path(path)
    source = str(path)
    trace = WmsxTrace(tasks=[], kind="iSPD")
    seen_ids: set[str] = set()

    def on_start(tag: str, attributes: dict[str, str], line: int, parent: str | None) -> None:
        if tag not in _WMSX_PARENTS:
            raise InputError(f"unknown element <{tag}> (an iSPD trace has "
                             "<system><trace><format/><task/>...)", source=source, line=line)
        expected = _WMSX_PARENTS[tag]
        if parent != expected:
            where = f"inside <{expected}>" if expected else "at the top"
            raise InputError(f"<{tag}> must be {where}", source=source, line=line)
        if tag == "format":
            trace.kind = xml_text(attributes, "kind", tag, source, line)
        elif tag == "task":
            task_id = xml_text(attributes, "id", tag, source, line)
            if task_id in seen_ids:
                raise InputError(f"duplicate task id {task_id!r}", source=source, line=line)
            seen_ids.add(task_id)
            work = xml_number(attributes, "cpsz", tag, source, line)
            if work <= 0:
                count(trace.skipped, "task with no computation (cpsz <= 0)")
                return
            arrival = xml_number(attributes, "arr", tag, source, line)
            if arrival < 0:
                raise InputError(f"arrival time is negative: {arrival:g}", source=source,
                                 line=line)
            communication = xml_number(attributes, "cmsz", tag, source, line, default=0.0)
            trace.tasks.append(TraceTask(
                id=task_id,
                user=xml_text(attributes, "usr", tag, source, line),
                arrival=arrival,
                work=work,
                communication=max(communication, 0.0),
                status=int(xml_number(attributes, "sts", tag, source, line, default=-1)),
                line=line,
            ))

    scan_xml(path, on_start)
    return trace


def trace_tasks(records: Sequence[TraceTask], user_of: Mapping[str, str | None]
                ) -> tuple[list[Task], list[float]]:
    """The simulator's tasks and their input sizes (Mbit, by `source_index`).

    `user_of` maps each trace user to the account it runs as; a user mapped to None is left
    out (the caller counts those).
    """
    tasks: list[Task] = []
    sizes: list[float] = []
    for record in records:
        user = user_of[record.user]
        if user is None:
            continue
        tasks.append(Task(record.id, user, record.arrival, work=record.work,
                          source_index=len(tasks)))
        sizes.append(record.communication)
    return tasks, sizes


def wmsx_scenario(path: Path, grid: Grid | None, options: Mapping[str, Any]) -> Scenario:
    """The `.wmsx` workload reader: the trace's tasks (the first `limit`) on the grid."""
    trace = read_wmsx(path)
    records = trace.tasks[:options["limit"]] if options.get("limit") else trace.tasks
    return grid_scenario(
        path, grid, options,
        users=[record.user for record in records],
        build=lambda user_of: trace_tasks(records, user_of),
        skipped=trace.skipped,
        default_user_map="names",
    )


WORKLOAD_FORMATS["wmsx"] = wmsx_scenario
