"""The compiled core: the simulator's hot modules built with mypyc when a wheel is built.

Everything else about the package is in pyproject.toml. A wheel (`pip install .`, `pip wheel
.`) compiles the modules in `COMPILED` where a C compiler is present (mypy, which compiles
them, is a build requirement), and is plain Python otherwise: each extension is optional, so
a machine with no compiler still installs. The .py sources ship beside the compiled modules, and
`GRIDFAIR_PURE_PYTHON=1` at run time loads them instead (`gridfair/pure_python.py`).

Not compiled: editable installs (`pip install -e .`, the developers' venv), whose sources must
take effect as they are edited, and any build with `GRIDFAIR_COMPILE=0`.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

from setuptools import setup

#: The modules compiled, as paths: the event loop, the pool, the negotiator, the order
#: stages' incremental structures, the decaying orders (SDRF, HTCondor's priority and its group
#: quotas, a group's SDRF) with their base, and the owner-share family (HOSEP, OSEP, reclaim)
#: with theirs, each family together: an interpreted subclass of a compiled `DecayingOrder` lost
#: its overrides.
#: Their classes that interpreted code subclasses are marked
#: `mypyc_attr(allow_interpreted_subclasses=True)`.
COMPILED = [
    "gridfair/core/pool_parts.py",
    "gridfair/core/pool.py",
    "gridfair/core/negotiator.py",
    "gridfair/sim/engine.py",
    "gridfair/policies/ranking.py",
    "gridfair/policies/live_tree.py",
    "gridfair/policies/authors_ties.py",
    "gridfair/policies/drf.py",
    "gridfair/policies/decaying_order.py",
    "gridfair/policies/sdrf.py",
    "gridfair/policies/condor_priority.py",
    "gridfair/policies/group_orders.py",
    "gridfair/policies/group_quotas.py",
    "gridfair/policies/hosep_rule.py",
    "gridfair/policies/owner_share.py",
    "gridfair/policies/hosep.py",
    "gridfair/policies/osep.py",
    "gridfair/policies/reclaim.py",
    "gridfair/sim/task_stream.py",
    "gridfair/sim/workloads/taskcsv.py",
    "gridfair/sim/workloads/repeat.py",
    "gridfair/sim/metrics.py",
]


#: Every build in a directory of its own: one in build/ would ship what an earlier build left
#: there (a module since dropped from `COMPILED`, compiled from older sources).
BUILD_BASE = tempfile.mkdtemp(prefix="gridfair-build-")
atexit.register(shutil.rmtree, BUILD_BASE, ignore_errors=True)


def compiling() -> bool:
    """Whether this build compiles: not when asked not to, nor for an editable install."""
    return os.environ.get("GRIDFAIR_COMPILE", "1") != "0" and "editable_wheel" not in sys.argv


def compiled_extensions() -> list:
    """mypyc's extensions for `COMPILED`, each optional; none when not compiling."""
    if not compiling():
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:  # a build without mypy (--no-build-isolation in a bare venv)
        return []
    # The bindings have no type stubs; the modules they import are checked, not compiled.
    options = ["--ignore-missing-imports", "--follow-imports=silent"]
    extensions = mypycify([*COMPILED, *options], opt_level="3",
                          target_dir=os.path.join(BUILD_BASE, "mypyc"))
    for extension in extensions:
        extension.optional = True  # no compiler: the plain-Python package, not a failure
    return extensions


setup(ext_modules=compiled_extensions(), options={"build": {"build_base": BUILD_BASE}})
