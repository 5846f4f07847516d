"""A set of users kept sorted by a key that changes only on their own events.

Re-keying one user costs O(log n); the first user is O(1). Ties between equal keys are
broken by the user's index (order of first appearance in the pool), so an ordering never
depends on dict or hash order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sortedcontainers import SortedList

from gridfair.core.pool import UserState


class UserRanking:
    """Users sorted by key, then by `UserState.index`."""

    __slots__ = ("_sorted", "_entries")

    def __init__(self) -> None:
        self._sorted = SortedList()
        self._entries: dict[int, tuple[Any, int, UserState]] = {}

    def update(self, user: UserState, key: Any | None) -> None:
        """Place `user` at `key`, or take it out when `key` is None."""
        old = self._entries.get(user.index)
        if old is not None:
            if key is not None and old[0] == key:
                return
            self._sorted.remove(old)
            del self._entries[user.index]
        if key is not None:
            entry = (key, user.index, user)
            self._sorted.add(entry)
            self._entries[user.index] = entry

    def first(self) -> UserState | None:
        return self._sorted[0][2] if self._sorted else None

    def key_of(self, user: UserState) -> Any | None:
        entry = self._entries.get(user.index)
        return entry[0] if entry is not None else None

    def __iter__(self) -> Iterator[UserState]:
        return (entry[2] for entry in self._sorted)

    def __len__(self) -> int:
        return len(self._sorted)

    def __contains__(self, user: UserState) -> bool:
        return user.index in self._entries


class RunningTasks:
    """Each user's running tasks, sorted by a victim key fixed for the task's run.

    Ties are broken by `Task.seq` (submission order). Kept current from the pool's
    `task_started` / `task_stopped` events.
    """

    __slots__ = ("_by_user", "_key")

    def __init__(self, key) -> None:  # key: Callable[[Task], Any]
        self._by_user: dict[str, SortedList] = {}
        self._key = key

    def started(self, task) -> None:
        tasks = self._by_user.get(task.user)
        if tasks is None:
            tasks = self._by_user[task.user] = SortedList()
        tasks.add((self._key(task), task.seq, task))

    def stopped(self, task, node) -> None:
        # The key must be computed as it was at start: keys read only fields that do not
        # change during a run, and the node is passed because the pool has cleared task.node.
        self._by_user[task.user].remove((self._key(task, node), task.seq, task))

    def of(self, user: str) -> Iterator:
        """The user's running tasks, best victim first."""
        tasks = self._by_user.get(user)
        return (entry[2] for entry in tasks) if tasks else iter(())
