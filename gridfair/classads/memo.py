"""What was built from the ads of the last read, kept for the next one.

A steady pool changes ~1 % of its ads between two daemon cycles; re-reading a dump should cost
what changed. The reader keeps parsed ads by their text, and the views keep the `Machine` or
`Job` built from each parsed ad (the reader hands out the same ad object for the same text).
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
        value = self._current.get(key)
        if value is None:
            value = self._previous.get(key)
            if value is not None:
                self._current[key] = value
        return value

    def put(self, key: Key, value: Value) -> None:
        self._current[key] = value

    def rotate(self) -> None:
        self._previous, self._current = self._current, {}
