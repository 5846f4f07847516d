"""iSPD iconic models (`.imsx`) as gridfair grids, with the loads they define.

Format notes: ../shared/data/ispd/README.md (iSPD's DTD `iSPD.dtd`). What is read:
- `<machine id power load owner>`: a machine of `power` MFlops in all, `load` (0..1) taken by
  background work, owned by `owner`; `<characteristic><process number=N/>` gives it N cores
  (each core runs a task at power/N). A machine with a `<master>` child is a scheduler: it holds
  the queue and sends tasks to its `<slave id>`s (global icon ids); it runs no task itself, and
  its power is not part of anyone's share (as in iSPD's OSEP/HOSEP, which count slaves only).
- `<cluster id nodes power owner bandwidth latency>`: `nodes` machines of `power` each.
- `<link bandwidth latency load><connect origination destination/>` and `<internet>`: the
  network. With transfer delays on (off by default), a task's input (`cmsz`/communication size,
  Mbit) crosses every hop from its master to the machine, each taking
  latency + size / (bandwidth x (1 - load)) seconds (iSPD's `CS_Link`), plus the cluster's own
  switch for a cluster node. Routes are the fewest hops, ties by link order in the file.
- `<owner id>`: declared users (an owner of no machine provides nothing).
- `<load>`: the model's workload, `--workload model` (or its kind: `node`, `random`, `trace`):
  - `<node owner tasks id_master>` per-user loads: `tasks` tasks of `owner`, computation and
    communication uniform in [minimum, maximum], arriving at Exp(mean 5 s) times (iSPD's
    `PerNodeTaskBuilder`);
  - `<random tasks time_arrival>`: tasks dealt to the masters in turn, each of its master's
    owner, arriving at Exp(mean `time_arrival`) times, sizes from iSPD's two-stage uniform
    (minimum..average with `probability`, else average..maximum);
  - `<trace file_path tasks format="iSPD">`: a `.wmsx` trace, relative to the model's folder.
  Draws come from the run's seed, so a run is repeatable (iSPD seeds from the wall clock).
All masters feed one pool: gridfair negotiates over every slave of every master together.
Positions, icon ids other than global ones, energy, costs and `<file_system>` are ignored.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gridfair.core.pool import Node, Task
from gridfair.errors import InputError
from gridfair.sim.grid import Grid, MachineSpec
from gridfair.sim.workloads.common import count, grid_scenario
from gridfair.sim.workloads.ispd_trace import (
    TraceTask,
    read_wmsx,
    scan_xml,
    trace_tasks,
    xml_number,
    xml_text,
)
from gridfair.sim.workloads.registry import GRID_WORKLOADS, Scenario

# Which elements may appear inside which; anything else is reported with its line.
_CHILDREN: dict[str | None, frozenset[str]] = {
    None: frozenset({"system"}),
    "system": frozenset({"owner", "machine", "link", "cluster", "internet", "load",
                         "file_system"}),
    "machine": frozenset({"master", "position", "icon_id", "characteristic"}),
    "master": frozenset({"slave"}),
    "characteristic": frozenset({"process", "memory", "hard_disk", "cost"}),
    "cluster": frozenset({"position", "icon_id", "characteristic"}),
    "link": frozenset({"connect", "position", "icon_id"}),
    "internet": frozenset({"position", "icon_id"}),
    "load": frozenset({"trace", "random", "node", "dag"}),
    "random": frozenset({"size"}),
    "node": frozenset({"size"}),
    "file_system": frozenset({"file"}),
    "file": frozenset({"slave"}),
}
_LEAVES = frozenset({"owner", "position", "icon_id", "slave", "process", "memory", "hard_disk",
                     "cost", "connect", "trace", "size", "dag"})

#: iSPD's per-node loads arrive at Exp(mean 5 s) times (PerNodeTaskBuilder.taskCreationTime).
NODE_LOAD_MEAN_ARRIVAL = 5.0


@dataclass(slots=True)
class _Element:
    tag: str
    attributes: dict[str, str]
    line: int
    children: list[_Element] = field(default_factory=list)

    def child(self, tag: str) -> _Element | None:
        return next((c for c in self.children if c.tag == tag), None)

    def all(self, tag: str) -> list[_Element]:
        return [c for c in self.children if c.tag == tag]


def _parse_tree(path: Path) -> _Element:
    source = str(path)
    stack: list[_Element] = []
    roots: list[_Element] = []

    def on_start(tag: str, attributes: dict[str, str], line: int, parent: str | None) -> None:
        allowed = _CHILDREN.get(parent, frozenset())
        if tag not in allowed:
            if tag not in _CHILDREN and tag not in _LEAVES:
                raise InputError(f"unknown element <{tag}>", source=source, line=line)
            where = f"inside <{parent}>" if parent else "at the top"
            raise InputError(f"element <{tag}> is not allowed {where}", source=source,
                             line=line)
        element = _Element(tag, attributes, line)
        (stack[-1].children if stack else roots).append(element)
        stack.append(element)

    def on_end(tag: str) -> None:
        stack.pop()

    scan_xml(path, on_start, on_end)
    if not roots:
        raise InputError("empty model", source=source)
    return roots[0]


@dataclass(frozen=True, slots=True)
class SizeRange:
    """iSPD's two-stage uniform: [minimum, split) with `probability`, else [split, maximum]."""

    minimum: float
    split: float
    maximum: float
    probability: float

    def draw(self, rng: random.Random) -> float:
        if rng.random() <= self.probability:
            low, high = self.minimum, self.split
        else:
            low, high = self.split, self.maximum
        return low + rng.random() * (high - low)


@dataclass(frozen=True, slots=True)
class NodeLoad:
    """`<node>`: one user's tasks, sent through one master."""

    application: str
    owner: str
    master: str
    tasks: int
    computing: SizeRange
    communication: SizeRange
    line: int


@dataclass(frozen=True, slots=True)
class RandomLoad:
    """`<random>`: tasks dealt to every master in turn."""

    tasks: int
    mean_arrival: float
    computing: SizeRange
    communication: SizeRange
    line: int


@dataclass(frozen=True, slots=True)
class TraceLoad:
    """`<trace>`: an iSPD trace file."""

    path: Path
    tasks: int  # 0: all of them
    kind: str
    line: int


@dataclass(frozen=True, slots=True)
class Master:
    name: str
    owner: str
    scheduler: str
    slaves: tuple[int, ...]  # global icon ids
    icon: int
    line: int


@dataclass(frozen=True, slots=True)
class Hop:
    """One element a transfer crosses (a link, an internet cloud, a cluster's switch)."""

    name: str
    latency: float
    bandwidth: float  # Mbit/s, background load already taken off
    line: int


class TransferPaths:
    """Per machine, the hops from its master: delay(size) = sum(latency) + size x sum(1/bw)."""

    def __init__(self, source: str, routes: Sequence[tuple[Hop, ...] | None],
                 machine_names: Sequence[str]) -> None:
        self.source = source
        self.routes = list(routes)
        self.machine_names = list(machine_names)

    def delay_function(self, sizes: Sequence[float]) -> Callable[[Task, Node], float]:
        """A task's transfer time to a node, for tasks whose input sizes are `sizes` (Mbit,
        indexed by `Task.source_index`) on the model's machines (indexed by `Node.index`)."""
        latency: list[float] = []
        per_mbit: list[float] = []
        for name, route in zip(self.machine_names, self.routes, strict=True):
            if route is None:
                raise InputError(f"no route of links from a master to machine {name!r}: "
                                 "cannot compute its transfer delays", source=self.source)
            for hop in route:
                if hop.bandwidth <= 0:
                    raise InputError(f"{hop.name} has no bandwidth left (bandwidth x (1 - load)"
                                     " = 0): transfers over it never end", source=self.source,
                                     line=hop.line)
            latency.append(math.fsum(hop.latency for hop in route))
            per_mbit.append(math.fsum(1.0 / hop.bandwidth for hop in route))
        sizes = list(sizes)

        def delay(task: Task, node: Node) -> float:
            index = node.index
            return latency[index] + sizes[task.source_index] * per_mbit[index]

        return delay


@dataclass
class IspdModel:
    """Everything of an `.imsx` file the simulator uses."""

    source: str
    declared_owners: list[str]
    machines: list[MachineSpec]
    masters: dict[str, Master]
    loads: list[NodeLoad | RandomLoad | TraceLoad]
    paths: TransferPaths
    ignored: dict[str, int]  # what of the model was left out, by reason

    @property
    def load_kind(self) -> str | None:
        if not self.loads:
            return None
        return {NodeLoad: "node", RandomLoad: "random", TraceLoad: "trace"}[type(self.loads[0])]


def _positive(value: float, tag: str, name: str, source: str, line: int) -> float:
    if not value > 0:
        raise InputError(f"<{tag}> attribute {name!r} must be positive, got {value:g}",
                         source=source, line=line)
    return value


def _count(element: _Element, name: str, source: str) -> int:
    value = xml_number(element.attributes, name, element.tag, source, element.line)
    if value < 0 or value != int(value):
        raise InputError(f"<{element.tag}> attribute {name!r} must be a whole number >= 0, "
                         f"got {value:g}", source=source, line=element.line)
    return int(value)


def _load_fraction(element: _Element, source: str) -> float:
    load = xml_number(element.attributes, "load", element.tag, source, element.line, 0.0)
    if not 0 <= load < 1:
        raise InputError(f"<{element.tag}> load must be in [0, 1), got {load:g}",
                         source=source, line=element.line)
    return load


def _icon(element: _Element, source: str) -> int:
    icon = element.child("icon_id")
    if icon is None:
        raise InputError(f"<{element.tag} id={element.attributes.get('id')!r}> has no "
                         "<icon_id global=...>", source=source, line=element.line)
    return int(xml_number(icon.attributes, "global", "icon_id", source, icon.line))


def _hop(element: _Element, source: str, *, with_load: bool = True) -> Hop:
    attributes = element.attributes
    bandwidth = xml_number(attributes, "bandwidth", element.tag, source, element.line)
    latency = xml_number(attributes, "latency", element.tag, source, element.line, 0.0)
    load = _load_fraction(element, source) if with_load else 0.0
    name = f"<{element.tag} id={attributes.get('id', '?')!r}>"
    return Hop(name, latency, bandwidth * (1.0 - load), element.line)


def _size_ranges(element: _Element, source: str, *, two_stage: bool
                 ) -> tuple[SizeRange, SizeRange]:
    ranges: dict[str, SizeRange] = {}
    for size in element.all("size"):
        kind = xml_text(size.attributes, "type", "size", source, size.line)
        if kind not in ("computing", "communication"):
            raise InputError(f"<size> type must be computing or communication, got {kind!r}",
                             source=source, line=size.line)
        low = xml_number(size.attributes, "minimum", "size", source, size.line)
        high = xml_number(size.attributes, "maximum", "size", source, size.line)
        if two_stage:
            split = xml_number(size.attributes, "average", "size", source, size.line)
            probability = xml_number(size.attributes, "probability", "size", source, size.line)
        else:  # iSPD's per-node sizes: min..max uniform, as a two-stage split at the middle
            split, probability = (low + high) / 2, 0.5
        if not 0 <= low <= split <= high:
            raise InputError(f"<size type={kind!r}> needs 0 <= minimum <= average <= maximum",
                             source=source, line=size.line)
        ranges[kind] = SizeRange(low, split, high, probability)
    for kind in ("computing", "communication"):
        if kind not in ranges:
            raise InputError(f"<{element.tag}> lacks <size type={kind!r}>", source=source,
                             line=element.line)
    if ranges["computing"].maximum <= 0:
        raise InputError(f"<{element.tag}> tasks have no computation (maximum 0)",
                         source=source, line=element.line)
    return ranges["computing"], ranges["communication"]


def _routes(masters: Mapping[str, Master], edges: Mapping[int, list[tuple[int, Hop]]],
            through: Mapping[int, Hop], machine_icons: Sequence[int],
            cluster_hops: Sequence[Hop | None]) -> list[tuple[Hop, ...] | None]:
    """Fewest-hop route from each machine's (first) master to it, by breadth-first search."""
    routes: list[tuple[Hop, ...] | None] = [None] * len(machine_icons)
    by_icon: dict[int, list[int]] = {}
    for index, icon in enumerate(machine_icons):
        by_icon.setdefault(icon, []).append(index)
    for master in masters.values():
        wanted = {slave for slave in master.slaves if slave in by_icon}
        found: dict[int, tuple[Hop, ...]] = {master.icon: ()}
        queue = deque([master.icon])
        while queue and not wanted <= found.keys():
            here = queue.popleft()
            for there, link in edges.get(here, ()):
                if there in found:
                    continue
                path = found[here] + (link,)
                if there in through:
                    path += (through[there],)
                found[there] = path
                queue.append(there)
        for slave in sorted(wanted):
            if slave not in found:
                continue
            for index in by_icon[slave]:
                if routes[index] is None:
                    switch = cluster_hops[index]
                    routes[index] = found[slave] + ((switch,) if switch else ())
    return routes


def read_imsx(path: str | Path) -> IspdModel:
    """Parse an iSPD model; errors name the line and element."""
    path = Path(path)
    source = str(path)
    root = _parse_tree(path)
    declared: list[str] = []
    machines: list[MachineSpec] = []
    machine_icons: list[int] = []
    cluster_hops: list[Hop | None] = []
    masters: dict[str, Master] = {}
    icons: dict[int, _Element] = {}
    edges: dict[int, list[tuple[int, Hop]]] = {}
    through: dict[int, Hop] = {}
    names: set[str] = set()
    links: list[_Element] = []
    cluster_heads: list[Master] = []

    def claim(element: _Element, name: str) -> None:
        if name in names:
            raise InputError(f"duplicate id {name!r}", source=source, line=element.line)
        names.add(name)

    for element in root.children:
        tag, attributes, line = element.tag, element.attributes, element.line
        if tag == "owner":
            declared.append(xml_text(attributes, "id", tag, source, line))
        elif tag == "machine":
            name = xml_text(attributes, "id", tag, source, line)
            claim(element, name)
            power = xml_number(attributes, "power", tag, source, line)
            owner = xml_text(attributes, "owner", tag, source, line)
            load = _load_fraction(element, source)
            icon = _icon(element, source)
            icons[icon] = element
            master = element.child("master")
            if master is not None:
                slaves = tuple(int(xml_number(slave.attributes, "id", "slave", source,
                                              slave.line)) for slave in master.all("slave"))
                masters[name] = Master(name, owner, master.attributes.get("scheduler", "---"),
                                       slaves, icon, master.line)
                continue
            _positive(power, tag, "power", source, line)
            cores = 1.0
            characteristic = element.child("characteristic")
            process = characteristic.child("process") if characteristic is not None else None
            if process is not None:
                cores = _positive(xml_number(process.attributes, "number", "process", source,
                                             process.line, 1.0),
                                  "process", "number", source, process.line)
            machines.append(MachineSpec(name, owner, power, cores, 0.0, load))
            machine_icons.append(icon)
            cluster_hops.append(None)
        elif tag == "cluster":
            name = xml_text(attributes, "id", tag, source, line)
            claim(element, name)
            nodes = _count(element, "nodes", source)
            if nodes < 1:
                raise InputError("<cluster> needs nodes >= 1", source=source, line=line)
            power = _positive(xml_number(attributes, "power", tag, source, line), tag,
                              "power", source, line)
            owner = xml_text(attributes, "owner", tag, source, line)
            icon = _icon(element, source)
            icons[icon] = element
            switch = _hop(element, source, with_load=False)
            if attributes.get("master", "true") == "true":  # the DTD's default
                # Its head schedules its own nodes (and may be a load's id_master).
                cluster_heads.append(Master(name, owner, attributes.get("scheduler", "---"),
                                            (icon,), icon, line))
            for number in range(nodes):
                machines.append(MachineSpec(f"{name}.{number}", owner, power))
                machine_icons.append(icon)
                cluster_hops.append(switch)
        elif tag == "internet":
            claim(element, xml_text(attributes, "id", tag, source, line))
            icon = _icon(element, source)
            icons[icon] = element
            through[icon] = _hop(element, source)
        elif tag == "link":
            claim(element, xml_text(attributes, "id", tag, source, line))
            links.append(element)
    # Master machines first: a machine's transfer route starts at the first master that
    # lists it, and a cluster's head only routes what no master machine reaches.
    masters.update((head.name, head) for head in cluster_heads)
    for element in links:
        connect = element.child("connect")
        if connect is None:
            raise InputError("<link> has no <connect origination destination>", source=source,
                             line=element.line)
        ends = [int(xml_number(connect.attributes, end, "connect", source, connect.line))
                for end in ("origination", "destination")]
        for end in ends:
            if end not in icons:
                raise InputError(f"<connect> names icon {end}, which no machine, cluster or "
                                 "internet has", source=source, line=connect.line)
        edges.setdefault(ends[0], []).append((ends[1], _hop(element, source)))
    ignored: dict[str, int] = {}
    for master in masters.values():
        dangling = [slave for slave in master.slaves
                    if slave not in icons or icons[slave].tag not in ("machine", "cluster")]
        # iSPD's own examples list stale slave ids (of deleted icons, or of links); iSPD
        # ignores them, and so does gridfair, counting them.
        count(ignored, "slave id of a master naming no machine or cluster", len(dangling))
    if not machines:
        raise InputError("the model has no machine that runs tasks (every machine is a "
                         "master)", source=source)
    machine_names = [machine.name for machine in machines]
    paths = TransferPaths(source, _routes(masters, edges, through, machine_icons, cluster_hops),
                          machine_names)
    load = root.child("load")
    loads = _read_loads(load, masters, path, source) if load is not None else []
    return IspdModel(source, declared, machines, masters, loads, paths, ignored)


def _read_loads(load: _Element, masters: Mapping[str, Master], path: Path, source: str
                ) -> list[NodeLoad | RandomLoad | TraceLoad]:
    kinds = {child.tag for child in load.children}
    if len(kinds) > 1:
        raise InputError(f"<load> mixes {', '.join(sorted(kinds))}: a model has one kind of "
                         "load", source=source, line=load.line)
    loads: list[NodeLoad | RandomLoad | TraceLoad] = []
    for element in load.children:
        tag, attributes, line = element.tag, element.attributes, element.line
        if tag == "dag":
            raise InputError("<dag> loads (task graphs) are not supported", source=source,
                             line=line)
        if tag == "node":
            master = xml_text(attributes, "id_master", tag, source, line)
            computing, communication = _size_ranges(element, source, two_stage=False)
            loads.append(NodeLoad(attributes.get("application", "app0"),
                                  xml_text(attributes, "owner", tag, source, line), master,
                                  _count(element, "tasks", source), computing, communication,
                                  line))
        elif tag == "random":
            if not masters:
                raise InputError("a <random> load needs a master machine to deal tasks from",
                                 source=source, line=line)
            computing, communication = _size_ranges(element, source, two_stage=True)
            mean = xml_number(attributes, "time_arrival", tag, source, line)
            if mean < 0:
                raise InputError("time_arrival must be >= 0", source=source, line=line)
            loads.append(RandomLoad(_count(element, "tasks", source), mean, computing,
                                    communication, line))
        else:  # trace
            kind = attributes.get("format", "iSPD")
            if kind != "iSPD":
                raise InputError(f"trace format {kind!r} is not read from a model; give the "
                                 "trace file itself with --workload", source=source, line=line)
            trace_path = Path(xml_text(attributes, "file_path", tag, source, line))
            if not trace_path.is_absolute():
                trace_path = path.parent / trace_path
            loads.append(TraceLoad(trace_path, _count(element, "tasks", source)
                                   if "tasks" in attributes else 0, kind, line))
    return loads


def model_tasks(model: IspdModel, seed: int) -> tuple[list[TraceTask], dict[str, int]]:
    """The tasks of the model's load (drawn from `seed`), and what its traces skipped."""
    rng = random.Random(seed)
    records: list[TraceTask] = []
    skipped: dict[str, int] = {}
    masters = list(model.masters.values())
    per_user: dict[str, int] = {}
    for load in model.loads:
        if isinstance(load, TraceLoad):
            trace = read_wmsx(load.path)
            records.extend(trace.tasks[:load.tasks] if load.tasks else trace.tasks)
            for reason, number in trace.skipped.items():
                count(skipped, reason, number)
            continue
        if isinstance(load, NodeLoad) and load.master not in model.masters:
            # iSPD makes no task for a per-node load whose master does not exist (its own
            # examples have one); so does gridfair, counting them.
            count(skipped, "task of a <node> load whose id_master names no master",
                  load.tasks)
            continue
        for number in range(load.tasks):
            if isinstance(load, NodeLoad):
                user, mean = load.owner, NODE_LOAD_MEAN_ARRIVAL
            else:  # dealt to the masters in turn, as iSPD's GlobalWorkloadGenerator does
                user, mean = masters[number % len(masters)].owner, load.mean_arrival
            # iSPD's draw order: communication, computation, then the arrival time.
            communication = load.communication.draw(rng)
            computing = load.computing.draw(rng)
            arrival = -mean * math.log(1.0 - rng.random())
            index = per_user.get(user, 0)
            per_user[user] = index + 1
            if computing <= 0:
                count(skipped, "generated task with no computation")
                continue
            records.append(TraceTask(f"{user}.{index}", user, arrival, computing,
                                     communication, -1, load.line))
    return records, skipped


def model_scenario(grid: Grid, name: str, options: Mapping[str, Any]) -> Scenario:
    """`--workload model` (or `node`/`random`/`trace`): the model's own load."""
    model: IspdModel = grid.settings["ispd"]
    records, skipped = model_tasks(model, int(options.get("seed", 1)))
    if options.get("limit"):
        records = records[:options["limit"]]
    skipped.update(model.ignored)
    return grid_scenario(Path(model.source), grid, options,
                         users=[record.user for record in records],
                         build=lambda user_of: trace_tasks(records, user_of),
                         skipped=skipped, default_user_map="names")


def load_imsx(path: str | Path) -> Grid:
    """An iSPD model as a grid; its load is the workload `model` (and `node`/`random`/`trace`)."""
    model = read_imsx(path)
    workloads: dict[str, Mapping[str, Any]] = {}
    if model.load_kind is not None:
        workloads = {"model": {"kind": "ispd-load"}, model.load_kind: {"kind": "ispd-load"}}
    return Grid(
        name=Path(path).stem,
        machines=tuple(model.machines),
        workloads=workloads,
        settings={"ispd": model, "transfer_paths": model.paths},
        source=model.source,
    )


GRID_WORKLOADS["ispd-load"] = model_scenario
