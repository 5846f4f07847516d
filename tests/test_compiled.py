"""The compiled core (setup.py) and its pure-Python path: which build of the hot modules runs.

`make test-compiled` builds them into build/compiled, as a wheel installs them (compiled
modules beside their .py sources), and runs the golden and agreement tests there with
GRIDFAIR_EXPECT_COMPILED=1; this file then checks that they did run compiled. Everywhere it
checks that GRIDFAIR_PURE_PYTHON=1 loads the sources of a compiled install instead.
"""

from __future__ import annotations

import ast
import importlib
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import gridfair
from tests.conftest import ROOT


def _setup_compiled() -> list[str]:
    """setup.py's `COMPILED`, as dotted module names (read, not run: running is a build)."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    paths = next(ast.literal_eval(node.value) for node in tree.body
                 if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "COMPILED")
    return [path.removesuffix(".py").replace("/", ".") for path in paths]


COMPILED = _setup_compiled()
BUILT = ROOT / "build" / "compiled"


def _loaded_from(environment: dict[str, str]) -> dict[str, str]:
    """Where a fresh interpreter on the compiled tree loads each compiled module from."""
    code = ("import importlib\n"
            f"for name in {COMPILED!r}:\n"
            "    print(name, importlib.import_module(name).__file__)\n")
    result = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True,
                            check=True, env={**os.environ, "PYTHONPATH": str(BUILT),
                                             **environment})
    return dict(line.split(" ", 1) for line in result.stdout.splitlines())


def _compiler() -> str | None:
    return shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0])


def test_setup_compiles_the_event_loop_the_pool_and_the_order_structures() -> None:
    assert {"gridfair.sim.engine", "gridfair.core.pool", "gridfair.core.pool_parts",
            "gridfair.core.negotiator", "gridfair.policies.live_tree"} <= set(COMPILED)


def test_a_compiled_decaying_order_is_compiled_with_every_order_built_on_it() -> None:
    # An interpreted subclass of the compiled base lost its overrides (HTCondor's priority
    # stayed at its floor): the base is compiled with all its subclasses, or not at all.
    orders = {"gridfair.policies.sdrf", "gridfair.policies.condor_priority",
              "gridfair.policies.group_orders", "gridfair.policies.group_quotas"}
    assert "gridfair.policies.decaying_order" in COMPILED and orders <= set(COMPILED)


def test_a_compiled_owner_share_base_is_compiled_with_every_stage_built_on_it() -> None:
    # As the decaying orders: HOSEP's preemption is built on `OwnerSharePreempt`, OSEP's too,
    # and reclaim on HOSEP's; HOSEP's order is compiled with them.
    family = {"gridfair.policies.hosep_rule", "gridfair.policies.owner_share",
              "gridfair.policies.hosep", "gridfair.policies.osep", "gridfair.policies.reclaim"}
    assert family <= set(COMPILED)


#: The compiled pool of build/compiled for this interpreter (none for another Python version,
#: as .ci/newest-python runs this file, nor where there was no compiler).
BUILT_HERE = (BUILT / "gridfair" / "core" / "pool").with_suffix(
    sysconfig.get_config_var("EXT_SUFFIX")).exists()


@pytest.mark.skipif(not (BUILT_HERE and os.environ.get("GRIDFAIR_EXPECT_COMPILED")),
                    reason="only in make test-compiled, on the build it has just brought up "
                    "to date (a build left from an older setup.py is not this checkout's)")
def test_the_compiled_build_runs_compiled_unless_pure_python_is_asked_for() -> None:
    compiled = _loaded_from({})
    assert all(not path.endswith(".py") for path in compiled.values()), compiled
    pure = _loaded_from({"GRIDFAIR_PURE_PYTHON": "1"})
    assert all(path.endswith(".py") for path in pure.values()), pure
    assert _loaded_from({"GRIDFAIR_PURE_PYTHON": "0"}) == compiled


@pytest.mark.skipif(not os.environ.get("GRIDFAIR_EXPECT_COMPILED"),
                    reason="only in make test-compiled")
def test_this_run_is_the_compiled_one() -> None:
    """make test-compiled's tests ran against the compiled modules, not the checkout's."""
    if _compiler() is None:
        pytest.skip("no C compiler: the build is plain Python")
    assert Path(gridfair.__file__).parent == BUILT / "gridfair"
    for name in COMPILED:
        module = importlib.import_module(name)
        assert not module.__file__.endswith(".py"), module.__file__
