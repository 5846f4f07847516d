"""What was built from the ads of the last read, kept for the next one.

A steady pool changes ~1 % of its ads between two daemon cycles; re-reading a dump should cost
what changed. The `files` backend keeps, per dump, the `Machine` or `Job` view built from each
ad's text (`reader.reread`): an unchanged ad gives the same view object again.
"""

from __future__ import annotations

from typing import Generic, TypeVar

Key = TypeVar("Key")
Value = TypeVar("Value")


class RotatingMemo(Generic[Key, Value]):
    """A mapping that keeps only what the last read used: `rotate()` after each read drops the
    entries that read did not look up or store, so it never holds more than two reads' worth."""

    __slots__ = ("_previous", "_current")

    def __init__(self) -> None:
        self._previous: dict[Key, Value] = {}
        self._current: dict[Key, Value] = {}

    def get(self, key: Key) -> Value | None:
        # Most look-ups of a read find what the last read stored: moved across in one step,
        # which also lets the last read's copy of the key go as soon as it is used.
        value = self._previous.pop(key, None)
        if value is not None:
            self._current[key] = value
            return value
        return self._current.get(key)

    def put(self, key: Key, value: Value) -> None:
        self._current[key] = value

    def rotate(self) -> None:
        self._previous, self._current = self._current, {}
