"""The pure-Python path of a compiled install (`GRIDFAIR_PURE_PYTHON=1`).

A wheel built with a C compiler holds the simulator's hot modules twice: compiled by mypyc
(`setup.py`) and as the .py sources they were compiled from. Python imports an extension
module before a source of the same name, so the compiled ones run by default; with this
finder first on `sys.meta_path` every gridfair module is loaded from its .py instead, as an
install without a compiler would run it. Both give the same outputs byte for byte (CI runs
the golden and agreement tests on both). `gridfair/__init__.py` installs it when the
environment sets `GRIDFAIR_PURE_PYTHON` (to anything but "" or "0").
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType


class SourcesFirst(MetaPathFinder):
    """Finds a gridfair module's .py source before any compiled module beside it."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if path is None or not fullname.startswith("gridfair."):
            return None
        name = fullname.rpartition(".")[2]
        for folder in path:
            source = os.path.join(folder, name + ".py")
            if os.path.isfile(source):
                return importlib.util.spec_from_file_location(fullname, source)
        return None  # a package or not gridfair's: the usual finders


def install() -> None:
    """Put `SourcesFirst` ahead of the usual finders (once)."""
    if not any(isinstance(finder, SourcesFirst) for finder in sys.meta_path):
        sys.meta_path.insert(0, SourcesFirst())


def compiled(module: ModuleType) -> bool:
    """Whether `module` was loaded from a compiled extension rather than its source."""
    return not (module.__file__ or "").endswith(".py")
