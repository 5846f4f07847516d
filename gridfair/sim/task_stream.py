"""Tasks handed on in a fixed order as they end, so a streamed run's outputs are a kept run's.

A streamed simulation (`Simulation(keep_tasks=False)`) hands each task over when it ends, in
the order tasks end; a kept run's outputs follow a fixed order instead (arrival order for the
metrics and the database, the input's order for `--tasks-out`). `InOrder` holds a task until
every task before it in that order has been handed on, then hands it on.

Keys are dense from 0: a task's arrival number (`Task.seq`, which a fresh pool gives in arrival
order) or its place in the input (`Task.source_index`, which every reader numbers from 0).
Memory is the tasks held: those that ended while an earlier task was still queued or running.
Worst case, one task queued from the start to the end holds every later one (as many as a kept
run holds); usually it is the spread of the running and queued tasks. At `close`, whatever is
still held (keys that never came) is handed on in key order.
"""

from __future__ import annotations

from collections.abc import Callable

from gridfair.core.pool import Task


def arrival_key(task: Task) -> int:
    """The task's arrival number in a fresh pool."""
    return task.seq


def input_key(task: Task) -> int:
    """The task's place in its workload's input; arrival order for readers that number none."""
    return task.source_index if task.source_index >= 0 else task.seq


class InOrder:
    """Hands tasks to `sink` in the order of `key` (dense from 0), whatever order they come in."""

    def __init__(self, key: Callable[[Task], int], sink: Callable[[Task], None]) -> None:
        self.key = key
        self.sink = sink
        self.next = 0
        self.held: dict[int, Task] = {}
        self.most_held = 0  # the buffer's high-water mark, for the figures

    def add(self, task: Task) -> None:
        position = self.key(task)
        if position != self.next:
            self.held[position] = task
            if len(self.held) > self.most_held:
                self.most_held = len(self.held)
            return
        self.sink(task)
        self.next += 1
        held = self.held
        while held:
            following = held.pop(self.next, None)
            if following is None:
                break
            self.sink(following)
            self.next += 1

    def close(self) -> None:
        for position in sorted(self.held):
            self.sink(self.held.pop(position))
