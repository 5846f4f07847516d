"""Grid models: gridfair's own TOML grid files (format in sim_grids/README.md).

A grid is a list of machines (name, owner, MFlops, cpus, memory, background load), expanded
from `[[machines]]` entries with a `count`, plus the workloads the file defines by name.
Other model formats (iSPD `.imsx`) are read by their own modules into the same `Grid`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gridfair.core.pool import Node
from gridfair.errors import InputError

MACHINE_KEYS = {"name", "owner", "mflops", "cpus", "memory", "load", "count"}


@dataclass(frozen=True)
class MachineSpec:
    name: str
    owner: str | None
    mflops: float
    cpus: float = 1.0
    memory: float = 0.0
    load: float = 0.0
    gpus: float = 0.0

    def node(self) -> Node:
        return Node(self.name, self.owner, self.mflops, self.cpus, self.memory, self.load,
                    gpus=self.gpus)


@dataclass(frozen=True)
class Grid:
    name: str
    machines: tuple[MachineSpec, ...]
    workloads: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)  # other top-level tables
    source: str = ""

    def nodes(self) -> list[Node]:
        return [machine.node() for machine in self.machines]

    def owners(self) -> list[str]:
        """Owners in order of first appearance."""
        return list(dict.fromkeys(m.owner for m in self.machines if m.owner is not None))

    def provided_power(self) -> dict[str, float]:
        provided: dict[str, float] = {}
        for machine in self.machines:
            if machine.owner is not None:
                provided[machine.owner] = provided.get(machine.owner, 0.0) + machine.mflops
        return provided

    def mean_power(self) -> float:
        """Mean MFlops of one cpu over all cpus: the grid's ideal machine (Def. 5, `grid`)."""
        cpus = sum(m.cpus for m in self.machines)
        return math.fsum(m.mflops for m in self.machines) / cpus


def _number(table: Mapping[str, Any], key: str, where: str, source: str, default=None) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(f"{key} must be a number, got {value!r}", source=source, ad=where,
                         attribute=key)
    return float(value)


def read_toml_grid(path: str | Path) -> Grid:
    """Read a gridfair TOML grid file (`gridfair.sim.grid_loader.load_grid` reads any grid)."""
    path = Path(path)
    source = str(path)
    from gridfair.tomlfile import read_toml  # a grid file's reader only: a task list needs none

    document = read_toml(path, "grid file")
    entries = document.get("machines")
    if not isinstance(entries, list) or not entries:
        raise InputError("a grid needs at least one [[machines]] entry", source=source,
                         attribute="machines")
    machines: list[MachineSpec] = []
    seen: set[str] = set()
    for position, entry in enumerate(entries, start=1):
        where = f"[[machines]] #{position}"
        unknown = set(entry) - MACHINE_KEYS
        if unknown:
            raise InputError(f"unknown key(s) {', '.join(sorted(unknown))}; expected "
                             f"{', '.join(sorted(MACHINE_KEYS))}", source=source, ad=where)
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise InputError("name must be a non-empty string", source=source, ad=where,
                             attribute="name")
        mflops = _number(entry, "mflops", where, source)
        cpus = _number(entry, "cpus", where, source, 1)
        memory = _number(entry, "memory", where, source, 0)
        load = _number(entry, "load", where, source, 0)
        count = entry.get("count", 1)
        if mflops <= 0:
            raise InputError(f"power must be positive, got {mflops:g}", source=source, ad=where,
                             attribute="mflops")
        if cpus <= 0:
            raise InputError(f"cpus must be positive, got {cpus:g}", source=source, ad=where,
                             attribute="cpus")
        if not 0 <= load < 1:
            raise InputError(f"load must be in [0, 1), got {load:g}", source=source, ad=where,
                             attribute="load")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise InputError(f"count must be a whole number >= 1, got {count!r}",
                             source=source, ad=where, attribute="count")
        owner = entry.get("owner")
        if owner is not None and not isinstance(owner, str):
            raise InputError("owner must be a string", source=source, ad=where,
                             attribute="owner")
        for copy in range(1, count + 1):
            machine_name = f"{name}-{copy}" if count > 1 else name
            if machine_name in seen:
                raise InputError(f"duplicate machine name {machine_name!r}", source=source,
                                 ad=where, attribute="name")
            seen.add(machine_name)
            machines.append(MachineSpec(machine_name, owner, mflops, cpus, memory, load))
    grid_table = document.get("grid", {})
    workloads = document.get("workloads", {})
    settings = {k: v for k, v in document.items() if k not in ("grid", "machines", "workloads")}
    return Grid(
        name=str(grid_table.get("name", path.stem)),
        machines=tuple(machines),
        workloads=workloads,
        settings=settings,
        source=source,
    )
