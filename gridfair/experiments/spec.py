"""Sweep files: a grid of run parameters in TOML, expanded into the list of runs.

    [sweep]
    name = "sdrf-vs-wdrf"                 # optional; description too
    description = "..."

    [parameters]                          # shared by every run
    workload = "../../../shared/data/google/derived/tasks_parts00000-00001.csv.gz"
    capacity_ratio = { from = 0.5, to = 1.0, step = 0.1 }
    seed = [1, 2, 3]

    [[matrix]]                            # optional: each entry adds its own product
    policy = "wdrf"
    [[matrix]]
    policy = "sdrf"
    delta = [0.9, 0.99, 0.999]

A parameter's value is one value, a list of values, or a range `{ from, to, step }` (`step`
defaults to 1; both ends included). The runs are the product of every parameter's values; with
`[[matrix]]` entries, the union of one product per entry, where an entry's values replace the
shared ones. A run listed twice is run once. Relative grid and workload paths are relative to
the sweep file. Unknown keys, empty lists and empty ranges are errors naming the key.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gridfair.errors import InputError
from gridfair.experiments.runs import PARAMETERS, RunSpec
from gridfair.tomlfile import read_toml

SWEEP_KEYS = {"name", "description"}
TOP_LEVEL_KEYS = {"sweep", "parameters", "matrix"}
RANGE_KEYS = {"from", "to", "step"}


@dataclass(frozen=True)
class Sweep:
    name: str
    description: str
    runs: list[RunSpec]
    source: str


def load_sweep(path: str | Path) -> Sweep:
    path = Path(path)
    source = str(path)
    document = read_toml(path, "sweep file")
    return parse_sweep(document, source=source, base_dir=path.parent)


def parse_sweep(document: Mapping[str, Any], *, source: str = "",
                base_dir: str | Path = "") -> Sweep:
    _check_keys(document, TOP_LEVEL_KEYS, source, "the sweep file")
    header = document.get("sweep", {})
    if not isinstance(header, Mapping):
        raise InputError("[sweep] must be a table", source=source, attribute="sweep")
    _check_keys(header, SWEEP_KEYS, source, "[sweep]")
    shared = _table(document.get("parameters", {}), "parameters", source)
    entries = document.get("matrix", [{}])
    if not isinstance(entries, list) or not entries:
        raise InputError("[[matrix]] must be a non-empty array of tables", source=source,
                         attribute="matrix")
    runs: dict[str, RunSpec] = {}
    for number, entry in enumerate(entries, start=1):
        where = "parameters" if len(entries) == 1 and not entry else f"[[matrix]] #{number}"
        values = {**shared, **_table(entry, where, source)}
        names = list(values)
        axes = [_values(values[name], name, source) for name in names]
        for combination in itertools.product(*axes):
            try:
                spec = RunSpec.make(dict(zip(names, combination, strict=True)), base_dir)
            except InputError as error:
                raise InputError(error.message, source=source, ad=where) from None
            runs.setdefault(spec.key, spec)
    return Sweep(
        name=str(header.get("name", Path(source).stem if source else "sweep")),
        description=str(header.get("description", "")),
        runs=list(runs.values()),
        source=source,
    )


def _check_keys(table: Mapping[str, Any], allowed: set[str], source: str, where: str) -> None:
    unknown = set(table) - allowed
    if unknown:
        raise InputError(f"unknown key(s) {', '.join(sorted(unknown))} in {where}; expected "
                         f"{', '.join(sorted(allowed))}", source=source)


def _table(value: Any, where: str, source: str) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InputError(f"{where} must be a table of parameters", source=source)
    _check_keys(value, set(PARAMETERS), source, where)
    return dict(value)


def _values(value: Any, name: str, source: str) -> list[Any]:
    """The values one parameter takes: a list, a range table, or a single value."""
    if isinstance(value, list):
        if not value:
            raise InputError("empty list of values", source=source, attribute=name)
        return value
    if isinstance(value, Mapping):
        return _range(value, name, source)
    return [value]


def _range(table: Mapping[str, Any], name: str, source: str) -> list[int | float]:
    unknown = set(table) - RANGE_KEYS
    if unknown or "from" not in table or "to" not in table:
        raise InputError(f"a range is {{ from = A, to = B, step = S }} (step optional), got "
                         f"keys {', '.join(sorted(table))}", source=source, attribute=name)
    start, stop, step = table["from"], table["to"], table.get("step", 1)
    for value in (start, stop, step):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(f"range bounds and step must be numbers, got {value!r}",
                             source=source, attribute=name)
    if step <= 0:
        raise InputError(f"range step must be positive, got {step!r}", source=source,
                         attribute=name)
    if stop < start:
        raise InputError(f"empty range: to = {stop!r} is below from = {start!r}",
                         source=source, attribute=name)
    # Count the steps, allowing for float rounding, then compute each value from the start
    # (not by repeated addition), rounded so 0.5 + 2 x 0.1 is 0.7 and not 0.7000000000000001.
    count = int((stop - start) / step + 1e-9) + 1
    if all(isinstance(value, int) for value in (start, stop, step)):
        return [start + index * step for index in range(count)]
    return [round(start + index * step, 12) for index in range(count)]
