"""The package's layers: nothing imports from a layer above it, and there are no import rings.

From the bottom: the core (pool, negotiator, stage interfaces, decisions, errors, the ClassAd-free
model); policies and the ClassAd layer on it; the simulator and the daemon; experiments; the CLI
(and every `__main__` module, an entry point) on top. Every import counts, also one inside a
function: a deferred import still ties the two modules together.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "gridfair"

#: Bottom first: (layer name, module prefixes). A module is in the layer of its longest prefix.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("gridfair", "gridfair.core", "gridfair.errors", "gridfair.ad_views",
              "gridfair.tomlfile")),
    ("policies, classads", ("gridfair.policies", "gridfair.classads")),
    ("sim, daemon", ("gridfair.sim", "gridfair.daemon")),
    ("experiments", ("gridfair.experiments",)),
    ("cli", ("gridfair.cli",)),
)
TOP = len(LAYERS) - 1

#: A module's source, by dotted name.
Sources = Mapping[str, str]
#: What each module imports: module -> {imported module: line of the first import}.
Graph = dict[str, dict[str, int]]


def package_sources(package: Path = PACKAGE) -> dict[str, str]:
    sources = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        sources[".".join(parts)] = path.read_text(encoding="utf-8")
    return sources


def import_graph(sources: Sources) -> Graph:
    """Imports of gridfair modules; `from gridfair.sim import ispd` imports gridfair.sim.ispd."""
    graph: Graph = {}
    for module, text in sources.items():
        package = module if _is_package(module, sources) else module.rpartition(".")[0]
        targets: dict[str, int] = {}
        for node in ast.walk(ast.parse(text, filename=module)):
            names: Iterable[str] = ()
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in sources else base
                         for alias in node.names]
            for name in names:
                if name.split(".")[0] == "gridfair" and name != module:
                    targets.setdefault(name, node.lineno)
        graph[module] = targets
    return graph


def _is_package(module: str, sources: Sources) -> bool:
    return any(other.startswith(module + ".") for other in sources)


def layer_of(module: str) -> int | None:
    if module.split(".")[-1] == "__main__":
        return TOP
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (
                    best is None or len(prefix) > best[0]):
                best = (len(prefix), index)
    return best[1] if best else None


def layer_violations(graph: Graph) -> list[str]:
    """Every import of a module from a layer above the importer's."""
    found = []
    for module, targets in sorted(graph.items()):
        for target, line in sorted(targets.items()):
            here, there = layer_of(module), layer_of(target)
            if here is not None and there is not None and there > here:
                found.append(f"{module}:{line} imports {target} "
                             f"({LAYERS[here][0]} -> {LAYERS[there][0]})")
    return found


def import_rings(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    rings: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in graph.get(module, {}):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                rings.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(rings)


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    return package_sources()


def test_every_module_is_in_a_layer(sources):
    assert [module for module in sources if layer_of(module) is None] == []


def test_nothing_imports_from_a_layer_above(sources):
    assert layer_violations(import_graph(sources)) == []


def test_there_are_no_import_rings(sources):
    assert import_rings(import_graph(sources)) == []


def test_the_layers_are_where_the_issue_puts_them():
    assert layer_of("gridfair.core.stages") == 0
    assert layer_of("gridfair.errors") == 0
    assert layer_of("gridfair.policies.hosep") == layer_of("gridfair.classads.views") == 1
    assert layer_of("gridfair.sim.engine") == layer_of("gridfair.daemon.cycle") == 2
    assert layer_of("gridfair.experiments.runner") == 3
    assert layer_of("gridfair.cli.simulate") == layer_of("gridfair.daemon.__main__") == TOP


# The three inversions of main at cd176a7 (issue 14), each put back as the import it was.
INVERSIONS = {
    "stage interfaces outside the core": (
        "gridfair.core.negotiator", "from gridfair.policies.base import Decision",
        "gridfair.policies.base"),
    "the daemon's reports reading the CLI": (
        "gridfair.daemon.reports", "from gridfair.cli.shares import SharesReport",
        "gridfair.cli.shares"),
    "scenario and workload readers in a ring": (
        # google then; scenario now imports a file's reader when it reads one (issue 50)
        "gridfair.sim.workloads.hosep",
        "from gridfair.sim.scenario import FORMAT_BY_SUFFIX, WORKLOAD_FORMATS, Scenario",
        "gridfair.sim.scenario"),
}


@pytest.mark.parametrize("name", sorted(INVERSIONS))
def test_the_check_fails_on_each_inversion_of_cd176a7(sources, name):
    module, statement, imported = INVERSIONS[name]
    inverted = dict(sources)
    inverted.setdefault(imported, "")  # gridfair.policies.base no longer exists
    inverted[module] += f"\n{statement}\n"
    graph = import_graph(inverted)
    failures = layer_violations(graph) + [" -> ".join(ring) for ring in import_rings(graph)]
    assert failures, name
    assert all(module in failure for failure in failures)


def test_a_deferred_import_counts(sources):
    inverted = dict(sources)
    inverted["gridfair.core.pool"] += "\ndef late():\n    from gridfair.cli import main\n"
    [violation] = layer_violations(import_graph(inverted))
    assert violation.startswith("gridfair.core.pool:")
    assert violation.endswith("imports gridfair.cli (core -> cli)")


def imports_of_the_tests(sources: Sources) -> list[str]:
    """Modules of the package that import the tests or their harness (`tests.*`)."""
    found = []
    for module, text in sources.items():
        for node in ast.walk(ast.parse(text, filename=module)):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{module}: imports {name}" for name in names
                      if name == "tests" or name.startswith("tests.")]
    return found


def test_the_package_never_imports_its_tests_or_their_harness(sources):
    """The live harness (PersonalPool, HaPair) is the tests' (tests/live/harness), not the
    product's: the wheel does not ship it, so nothing in gridfair may import it."""
    assert imports_of_the_tests(sources) == []
    assert not (PACKAGE / "daemon" / "backends" / "personal_pool.py").exists()
    leaking = dict(sources)
    leaking["gridfair.daemon.cycle"] += "\nfrom tests.live.harness.personal_pool import JobSpec\n"
    assert imports_of_the_tests(leaking) == [
        "gridfair.daemon.cycle: imports tests.live.harness.personal_pool"]
