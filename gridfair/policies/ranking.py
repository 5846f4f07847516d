"""A set of users kept sorted by a key that changes only on their own events.

Re-keying one user is a binary search plus a move of the entries after it in one flat list;
the first user is O(1). Pools have a few to a few thousand users, where a flat list re-keys
2-3 times faster than a `SortedList` (at 20,000 users it is 1.8 times slower; see
docs/results/performance.md). Ties between equal keys are broken by the user's index (order of first
appearance in the pool), so an ordering never depends on dict or hash order.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterator
from operator import attrgetter, itemgetter
from typing import Any

from gridfair.core.pool import UserState


class UserRanking:
    """Users sorted by key, then by `UserState.index`."""

    __slots__ = ("_sorted", "_entries")

    def __init__(self) -> None:
        # (key, user index, user): the index is unique, so a comparison never reaches the user.
        self._sorted: list[tuple[Any, int, UserState]] = []
        self._entries: dict[int, tuple[Any, int, UserState]] = {}

    def update(self, user: UserState, key: Any | None) -> None:
        """Place `user` at `key`, or take it out when `key` is None."""
        entries = self._entries
        old = entries.get(user.index)
        if old is not None:
            if key is not None and old[0] == key:
                return
            ranked = self._sorted
            del ranked[bisect_left(ranked, old)]
            del entries[user.index]
        if key is not None:
            entry = (key, user.index, user)
            insort(self._sorted, entry)
            entries[user.index] = entry

    def first(self) -> UserState | None:
        return self._sorted[0][2] if self._sorted else None

    def key_of(self, user: UserState) -> Any | None:
        entry = self._entries.get(user.index)
        return entry[0] if entry is not None else None

    def __iter__(self) -> Iterator[UserState]:
        return map(itemgetter(2), self._sorted)

    def __len__(self) -> int:
        return len(self._sorted)

    def __contains__(self, user: UserState) -> bool:
        return user.index in self._entries


class _Ranked:
    """A user's place in a `PairRanking`: its key's class and value, and its index."""

    __slots__ = ("rank", "value", "index", "user")

    def __init__(self, rank: int, value: float, index: int, user: UserState) -> None:
        self.rank = rank
        self.value = value
        self.index = index
        self.user = user

    def before(self, other: _Ranked) -> bool:
        """Whether (rank, value, index) < other's, as tuples compare (the first field that
        differs by == decides)."""
        if self.rank != other.rank:
            return self.rank < other.rank
        if self.value != other.value:
            return self.value < other.value
        return self.index < other.index


class PairRanking:
    """`UserRanking` for keys that are (class, value) pairs, in the same order, each user's
    place a native entry compared field by field: compiled, a re-key compares machine
    numbers, not tuples of tuples (the DRF family re-keys a user on every start and stop)."""

    __slots__ = ("_sorted", "_places")

    def __init__(self) -> None:
        self._sorted: list[_Ranked] = []
        self._places: dict[int, _Ranked] = {}

    def update(self, user: UserState, key: tuple[int, float] | None) -> None:
        """Place `user` at `key`, or take it out when `key` is None."""
        places = self._places
        old = places.get(user.index)
        if old is not None:
            if key is not None and old.rank == key[0] and old.value == key[1]:
                return
            del self._sorted[self._position(old)]
            del places[user.index]
        if key is not None:
            entry = _Ranked(key[0], key[1], user.index, user)
            self._sorted.insert(self._position(entry), entry)
            places[user.index] = entry

    def _position(self, entry: _Ranked) -> int:
        """Where `entry` goes (or is): the first place whose entry is not before it."""
        ranked = self._sorted
        low, high = 0, len(ranked)
        while low < high:
            middle = (low + high) // 2
            if ranked[middle].before(entry):
                low = middle + 1
            else:
                high = middle
        return low

    def first(self) -> UserState | None:
        return self._sorted[0].user if self._sorted else None

    def key_of(self, user: UserState) -> tuple[int, float] | None:
        entry = self._places.get(user.index)
        return (entry.rank, entry.value) if entry is not None else None

    def __iter__(self) -> Iterator[UserState]:
        return map(attrgetter("user"), self._sorted)

    def __len__(self) -> int:
        return len(self._sorted)

    def __contains__(self, user: UserState) -> bool:
        return user.index in self._places


class RunningTasks:
    """Each user's running tasks, sorted by a victim key fixed for the task's run.

    Ties are broken by `Task.seq` (submission order). Kept current from the pool's
    `task_started` / `task_stopped` events. With `owner`, the tasks are kept by what it
    names for a task's user instead (its accounting group, `group_preempt`).
    """

    __slots__ = ("_by_user", "_key", "_owner")

    def __init__(self, key, owner=None) -> None:  # key: Callable[[Task], Any]
        # Flat sorted lists, as in UserRanking: a user runs at most as many tasks as the pool
        # has slots. Entries are (key, seq, task); seq is unique, so tasks are never compared.
        self._by_user: dict[str, list] = {}
        self._key = key
        self._owner = owner  # Callable[[str], str] | None

    def started(self, task) -> None:
        user = task.user if self._owner is None else self._owner(task.user)
        tasks = self._by_user.get(user)
        if tasks is None:
            tasks = self._by_user[user] = []
        insort(tasks, (self._key(task), task.seq, task))

    def stopped(self, task, node) -> None:
        # The key must be computed as it was at start: keys read only fields that do not
        # change during a run, and the node is passed because the pool has cleared task.node.
        tasks = self._by_user[task.user if self._owner is None else self._owner(task.user)]
        position = bisect_left(tasks, (self._key(task, node), task.seq, task))
        if position == len(tasks) or tasks[position][2] is not task:
            raise ValueError(f"{task!r} is not among its user's running tasks")
        del tasks[position]

    def of(self, user: str) -> Iterator:
        """The user's running tasks, best victim first."""
        tasks = self._by_user.get(user)
        return map(itemgetter(2), tasks) if tasks else iter(())
