"""Progress of long commands, on stderr: a bar on a terminal, plain lines otherwise (a log
file, a pipe, a batch job), so that a run of many minutes is never silent.

- Runs (`sweep`, `compare`): one line per finished run, saying which and how it ended.
- A simulation (`simulate`): one line at each tenth of its tasks, once it has run
  `SHOW_AFTER` seconds (a short run shows nothing).

stdout keeps only the command's result, the same byte for byte whatever the progress said.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

#: Seconds a simulation runs before it shows progress (a short one would only flicker).
SHOW_AFTER = 2.0
#: Off a terminal, a simulation writes a line each time this fraction more of its tasks is done.
LINE_EVERY = 0.1

#: `advance(what, ok)`: one more run finished, described by `what`; ok: it did not fail.
Advance = Callable[[str, bool], None]


def on_terminal() -> bool:
    return sys.stderr.isatty()


@contextmanager
def runs_progress(command: str, total: int, quiet: bool = False,
                  clock: Callable[[], float] = time.monotonic) -> Iterator[Advance]:
    """Progress over `total` runs of `command`; yields `advance`."""
    if quiet or not total:
        yield lambda what, ok: None
    elif on_terminal():
        with _bar("runs", total) as step:
            yield lambda what, ok: step(1)
    else:
        started, done = clock(), 0

        def advance(what: str, ok: bool) -> None:
            nonlocal done
            done += 1
            click.echo(f"gridfair {command}: run {done}/{total} {'done' if ok else 'FAILED'} "
                       f"({what}), {clock() - started:.0f} s", err=True)

        yield advance


def tasks_progress(quiet: bool = False, clock: Callable[[], float] = time.monotonic,
                   show_after: float = SHOW_AFTER) -> Callable[[int, int], None] | None:
    """`update(done, total)` for a simulation's tasks, or None when quiet."""
    return None if quiet else _TaskProgress(clock, show_after)


class _TaskProgress:
    """A simulation's progress: a bar on a terminal, else a line at each `LINE_EVERY`."""

    def __init__(self, clock: Callable[[], float], show_after: float) -> None:
        self.clock = clock
        self.started = clock()
        self.show_after = show_after
        self.bar = None
        self.lines = 0  # the `LINE_EVERY` steps written

    def __call__(self, done: int, total: int) -> None:
        if not total or self.clock() - self.started < self.show_after:
            return
        if not on_terminal():
            steps = int(done / total / LINE_EVERY)
            if steps > self.lines:
                self.lines = steps
                click.echo(f"gridfair simulate: {done}/{total} tasks done ({done / total:.0%}),"
                           f" {self.clock() - self.started:.0f} s", err=True)
        elif self.bar is not None or done < total:
            if self.bar is None:
                self.bar = _TaskBar(total)
            self.bar.update(done)


class _TaskBar:
    """A rich bar over a simulation's tasks, gone when it is full."""

    def __init__(self, total: int) -> None:
        from rich.console import Console
        from rich.progress import Progress

        self.progress = Progress(console=Console(stderr=True), transient=True)
        self.progress.start()
        self.task = self.progress.add_task("simulating", total=total)
        self.total = total

    def update(self, done: int) -> None:
        self.progress.update(self.task, completed=done)
        if done >= self.total:
            self.progress.stop()


@contextmanager
def _bar(label: str, total: int) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr; yields `step(n)`."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    with Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TimeRemainingColumn(), console=Console(stderr=True),
                  transient=True) as progress:
        task = progress.add_task(label, total=total)
        yield lambda steps: progress.advance(task, steps)
