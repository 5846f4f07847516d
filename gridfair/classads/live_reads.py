"""One-off reads of a live pool for a replay, through the `htcondor2` bindings: the slot ads
of the collector and the job history of every schedd it lists. Read-only, and the whole
answer at once (the daemon's `htcondor` backend is what reads a pool cycle after cycle).

A pool that cannot be reached is an InputError naming it: the address is the user's input.
The schedds are asked side by side (`ask_side_by_side`, which the daemon's `htcondor` backend
uses too): one that hangs costs its wait once, not once a schedd.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from gridfair.classads.reader import SourcedAd
from gridfair.errors import InputError

Asked = TypeVar("Asked")
Answer = TypeVar("Answer")

#: What a replay reads of a slot ad, beyond the owner and power attributes.
SLOT_ATTRIBUTES = ("Name", "Cpus", "Memory", "GPUs", "State", "Activity", "SlotType",
                   "PartitionableSlot", "DynamicSlot", "TotalSlotCpus", "TotalSlotMemory",
                   "TotalSlotGPUs")


def _bindings() -> Any:
    import htcondor2  # the bindings take a while to load: only a live read needs them

    return htcondor2


def _collector(pool: str | None) -> Any:
    htcondor2 = _bindings()
    try:
        return htcondor2.Collector(pool)
    except (htcondor2.HTCondorException, OSError, RuntimeError, ValueError) as error:
        raise InputError(f"collector {pool or 'COLLECTOR_HOST'}: {error}") from None


def ask_side_by_side(asked: Sequence[Asked], ask: Callable[[Asked], Answer], timeout: float,
                     errors: tuple[type[BaseException], ...],
                     ) -> list[tuple[Answer | None, str | None]]:
    """(`ask(item)`, None) for each item that answered, (None, why) for each other, in the
    items' order. Every item is asked at once, in a daemon thread of its own, and all are
    waited for at most `timeout` seconds together: `why` is "query failed: ERROR" for one of
    `errors`, "no answer within N s" for one still asking then (its thread is left to end on
    its own: a hung daemon must not keep the process from exiting). Any other exception is
    raised here, after every item has answered or the time is up."""
    outcomes: list[tuple[bool, Any] | None] = [None] * len(asked)

    def run(position: int, item: Asked) -> None:
        try:
            outcomes[position] = (True, ask(item))
        except BaseException as error:  # noqa: BLE001 - handed to the caller, below
            outcomes[position] = (False, error)

    threads = [threading.Thread(target=run, args=(position, item), daemon=True,
                                name=f"ask-{position}")
               for position, item in enumerate(asked)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    answers: list[tuple[Answer | None, str | None]] = []
    for thread, outcome in zip(threads, outcomes, strict=True):
        if outcome is None or thread.is_alive():
            answers.append((None, f"no answer within {timeout:g} s"))
        elif outcome[0]:
            answers.append((outcome[1], None))
        elif isinstance(outcome[1], errors):
            answers.append((None, f"query failed: {outcome[1]}"))
        else:
            raise outcome[1]
    return answers


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
                   attributes: Sequence[str]) -> Iterator[tuple[str, list[Any]]]:
    """(source, ads) of every schedd the collector lists: its history ads that satisfy
    `constraint`, newest first, read until `stop_when` holds (`Schedd.history(since=...)`)."""
    htcondor2 = _bindings()
    errors = (htcondor2.HTCondorException, OSError, RuntimeError, ValueError)
    try:
        locations = _collector(pool).locateAll(htcondor2.DaemonType.Schedd)
    except errors as error:
        raise InputError(f"collector {pool or 'COLLECTOR_HOST'}: cannot list its schedds: "
                         f"{error}") from None
    if not locations:
        raise InputError(f"collector {pool or 'COLLECTOR_HOST'} lists no schedd")
    for location in locations:
        source = f"schedd {location.get('Name', '?')}"
        try:
            ads = htcondor2.Schedd(location).history(constraint, list(attributes),
                                                     since=stop_when)
        except errors as error:
            raise InputError(f"cannot read its history: {error}", source=source) from None
        yield source, list(ads)
