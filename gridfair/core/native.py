"""mypyc's class marks, for the modules `setup.py` compiles: read by mypyc when it compiles
them, no-ops in plain Python (which then needs no mypy_extensions installed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr
else:
    def mypyc_attr(*_: object, **__: object) -> Callable[[type], type]:
        """`allow_interpreted_subclasses=True` and the like: mypyc's concern, not Python's."""
        return lambda cls: cls

__all__ = ["mypyc_attr"]
