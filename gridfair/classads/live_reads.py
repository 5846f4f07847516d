"""One-off reads of a live pool for a replay, through the `htcondor2` bindings: the slot ads
of the collector and the job history of every schedd it lists. Read-only, and the whole
answer at once (the daemon's `htcondor` backend is what reads a pool cycle after cycle).

A pool that cannot be reached is an InputError naming it: the address is the user's input.
Whether daemons answer can be asked side by side (`probe_side_by_side`, which the daemon's
`htcondor` backend uses for its schedds): daemons that hang cost one wait together.
"""

from __future__ import annotations

import os
import signal
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from select import PIPE_BUF
from typing import Any, TypeVar

from gridfair.classads.reader import SourcedAd
from gridfair.errors import InputError

Asked = TypeVar("Asked")
#: Seconds between looks at the probes still running (`probe_side_by_side`).
PROBE_POLL = 0.02

#: What a replay reads of a slot ad, beyond the owner and power attributes.
SLOT_ATTRIBUTES = ("Name", "Cpus", "Memory", "GPUs", "State", "Activity", "SlotType",
                   "PartitionableSlot", "DynamicSlot", "TotalSlotCpus", "TotalSlotMemory",
                   "TotalSlotGPUs")


#: What the bindings read of a schedd's collector ad to reach it (`htcondor2.Schedd` raises
#: KeyError without `CondorVersion`): an ad anyone allowed to advertise a schedd can send.
SCHEDD_LOCATION = ("Name", "MyAddress", "CondorVersion")


def location_problem(location: Any) -> str | None:
    """Why a schedd's collector ad cannot be used to reach it, or None."""
    missing = [name for name in SCHEDD_LOCATION if not isinstance(location.get(name), str)]
    return f"its collector ad has no {', '.join(missing)} (a string)" if missing else None


def _bindings() -> Any:
    import htcondor2  # the bindings take a while to load: only a live read needs them

    return htcondor2


def _collector(pool: str | None) -> Any:
    htcondor2 = _bindings()
    try:
        return htcondor2.Collector(pool)
    except (htcondor2.HTCondorException, OSError, RuntimeError, ValueError) as error:
        raise InputError(f"collector {pool or 'COLLECTOR_HOST'}: {error}") from None


def probe_side_by_side(asked: Sequence[Asked], probe: Callable[[Asked], object],
                       timeout: float) -> list[str | None]:
    """None for each item whose `probe(item)` returned within `timeout` seconds, and why
    for each other ("query failed: ERROR" for an exception, "no answer within N s"), in the
    items' order. Each probe runs in a child process of its own, all at once: the bindings
    hold the GIL for the whole of a query (a thread waiting on a stopped schedd stops every
    other thread for the bindings' 20 s, measured), so only a process can wait on a daemon
    beside another; the children left at the deadline are killed."""
    children: list[tuple[int, int]] = []
    for item in asked:
        readable, writable = os.pipe()
        with warnings.catch_warnings():
            # Python 3.12+ warns of fork in a threaded process: the child runs the probe
            # alone, in the bindings, which no other thread can be inside (they hold the GIL).
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the child: the probe's outcome on the pipe, then out at once
            os.close(readable)
            try:
                probe(item)
                message = b""
            except BaseException as error:  # noqa: BLE001 - its message is the answer
                message = (str(error) or type(error).__name__).encode(errors="replace")
            os.write(writable, message[:PIPE_BUF] or b"\0")
            os._exit(0)
        os.close(writable)
        children.append((pid, readable))
    deadline = time.monotonic() + timeout
    waiting = {pid for pid, _ in children}
    while waiting and time.monotonic() < deadline:
        for pid in list(waiting):
            if os.waitpid(pid, os.WNOHANG)[0]:
                waiting.discard(pid)
        if waiting:
            time.sleep(PROBE_POLL)
    problems: list[str | None] = []
    for pid, readable in children:
        if pid in waiting:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            problems.append(f"no answer within {timeout:g} s")
        else:
            answer = os.read(readable, PIPE_BUF)
            problems.append(None if answer == b"\0" else
                            f"query failed: {answer.decode(errors='replace') or 'no answer'}")
        os.close(readable)
    return problems


def collector_slots(pool: str | None, attributes: Sequence[str]) -> list[SourcedAd]:
    """Every slot ad of the collector at `pool` (None: COLLECTOR_HOST), with `attributes`
    and `SLOT_ATTRIBUTES`."""
    htcondor2 = _bindings()
    source = f"collector {pool or 'COLLECTOR_HOST'}"
    projection = list(dict.fromkeys((*SLOT_ATTRIBUTES, *attributes)))
    try:
        ads = _collector(pool).query(htcondor2.AdType.Startd, "true", projection)
    except (htcondor2.HTCondorException, OSError, RuntimeError, ValueError) as error:
        raise InputError(f"cannot query its slots: {error}", source=source) from None
    return [SourcedAd(ad, source, index, None) for index, ad in enumerate(ads, start=1)]


def schedd_history(pool: str | None, constraint: str, stop_when: str | None,
                   attributes: Sequence[str]) -> Iterator[tuple[str, list[Any], str | None]]:
    """(source, ads, None) of every schedd the collector lists: its history ads that satisfy
    `constraint`, newest first, read until `stop_when` holds (`Schedd.history(since=...)`);
    (source, [], why) for a schedd whose history cannot be read (it hangs, is gone, refuses):
    the others are still read. `InputError` when none can be."""
    htcondor2 = _bindings()
    errors = (htcondor2.HTCondorException, OSError, RuntimeError, ValueError)
    try:
        locations = _collector(pool).locateAll(htcondor2.DaemonType.Schedd)
    except errors as error:
        raise InputError(f"collector {pool or 'COLLECTOR_HOST'}: cannot list its schedds: "
                         f"{error}") from None
    if not locations:
        raise InputError(f"collector {pool or 'COLLECTOR_HOST'} lists no schedd")
    failed: list[str] = []
    for location in locations:
        source = f"schedd {location.get('Name', '?')}"
        problem = location_problem(location)
        if problem is not None:
            failed.append(f"{source}: {problem}")
            yield source, [], f"cannot read its history: {problem}"
            continue
        try:
            ads = list(htcondor2.Schedd(location).history(constraint, list(attributes),
                                                          since=stop_when))
        except errors as error:
            failed.append(f"{source}: {error}")
            yield source, [], f"cannot read its history: {error}"
            continue
        yield source, ads, None
    if len(failed) == len(locations):
        raise InputError("no schedd's history can be read: " + "; ".join(failed))
