"""java.util.PriorityQueue's binary heap, move for move, for a simulator that must run
same-time events in the order Java's queue gives them (iSPD's event list, `ispd_events`).

A java.util.PriorityQueue is a binary min-heap in an array, and it is not stable: entries of
equal keys come out in an order fixed by where each was inserted and by the sifts every offer,
poll and removal made since, not in insertion order. This class makes OpenJDK's moves
(`offer`: siftUp from the end; `poll`: the last entry sifted down from the root; `remove`:
removeAt, the last entry sifted down from the hole and, if it stayed there, up) on two Python
lists, so that the same offers, polls and removals with the same keys leave the same array and
return the same entries, ties included. A child replaces its parent only if strictly smaller,
and the right child is taken only if strictly smaller than the left, as in OpenJDK's
PriorityQueue (`tests/test_java_heap.py` holds orders derived by hand from it and checked
against OpenJDK 17). Keys are floats compared with Python's operators, which order the finite
times the event list holds as Double.compareTo does.
"""

from __future__ import annotations

from typing import Generic, TypeVar

Item = TypeVar("Item")


class JavaPriorityQueue(Generic[Item]):
    """Items ordered by a float key, equal keys as java.util.PriorityQueue orders them."""

    __slots__ = ("_keys", "_items")

    def __init__(self) -> None:
        self._keys: list[float] = []
        self._items: list[Item] = []

    def __len__(self) -> int:
        return len(self._keys)

    def offer(self, key: float, item: Item) -> None:
        self._keys.append(key)
        self._items.append(item)
        self._sift_up(len(self._keys) - 1, key, item)

    def peek_key(self) -> float:
        return self._keys[0]

    def poll(self) -> tuple[float, Item]:
        """The entry at the root; the last entry is sifted down from there."""
        keys, items = self._keys, self._items
        key, item = keys[0], items[0]
        last_key, last = keys.pop(), items.pop()
        if keys:
            self._sift_down(0, last_key, last)
        return key, item

    def remove(self, item: Item) -> bool:
        """Remove `item` (found by identity, first in array order, as `remove(Object)` finds
        an object that does not override equals); whether it was there."""
        for index, held in enumerate(self._items):
            if held is item:
                self._remove_at(index)
                return True
        return False

    def _remove_at(self, index: int) -> None:
        keys, items = self._keys, self._items
        moved_key, moved = keys.pop(), items.pop()
        if index == len(keys):
            return  # it was the last entry
        self._sift_down(index, moved_key, moved)
        if items[index] is moved:
            self._sift_up(index, moved_key, moved)

    def _sift_up(self, index: int, key: float, item: Item) -> None:
        keys, items = self._keys, self._items
        while index > 0:
            parent = (index - 1) >> 1
            if key >= keys[parent]:
                break
            keys[index], items[index] = keys[parent], items[parent]
            index = parent
        keys[index], items[index] = key, item

    def _sift_down(self, index: int, key: float, item: Item) -> None:
        keys, items = self._keys, self._items
        size = len(keys)
        half = size >> 1
        while index < half:
            child = 2 * index + 1
            child_key = keys[child]
            right = child + 1
            if right < size and child_key > keys[right]:
                child, child_key = right, keys[right]
            if key <= child_key:
                break
            keys[index], items[index] = child_key, items[child]
            index = child
        keys[index], items[index] = key, item
