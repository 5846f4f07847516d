"""A scenario: the nodes and tasks of one simulation, built from a grid and a workload.

The workload is either a name the grid file defines (the HOSEP paper's synthetic sets), or a
file read by the reader of its format (`gridfair.sim.workloads.registry`), imported when a run
reads that format: a run loads its own reader only. A pool's history (`condor_history`, whose
ClassAd layer a task list or a trace has no use for) is imported when the workload is a
pool's, or is no other reader's. Some
workloads define the pool themselves (a task trace with `--capacity-ratio`, an SWF trace with
`--capacity`); then no grid is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence, Sized
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import Pool, PoolListener, Task
from gridfair.errors import InputError
from gridfair.policies.registry import build_stages
from gridfair.sim.engine import Simulation, SimulationResult
from gridfair.sim.engine_options import DEFAULT_ENGINE, EngineOptions
from gridfair.sim.grid import Grid
from gridfair.sim.grid_loader import load_grid
from gridfair.sim.records import RunRecorder
from gridfair.sim.workloads.registry import (
    FORMAT_BY_SUFFIX,
    FORMAT_SNIFFERS,
    GRID_WORKLOADS,
    READER_MODULES,
    WORKLOAD_FORMATS,
    Scenario,
    reader,
)

if TYPE_CHECKING:  # the slot views, loaded only with a pool's slots (`_pool_grid`)
    from gridfair.ad_views import SkippedAd


def hosep_scenario(grid: Grid, name: str, options: Mapping[str, Any]) -> Scenario:
    """The HOSEP paper's synthetic workload `name` of `grid` (the default grid workload)."""
    from gridfair.sim.workloads.hosep import hosep_workload  # with a grid's workload only

    return Scenario(grid.nodes(), hosep_workload(grid, name, int(options.get("seed", 1))))


GRID_WORKLOADS["hosep-synthetic"] = hosep_scenario


def _register_history() -> str:
    """Registers a pool's history as a workload format (its reader loads the ClassAd layer, so
    it is imported only when wanted); returns the format's name."""
    from gridfair.sim.workloads import condor_history

    return condor_history.FORMAT


def workload_format(path: Path, override: str | None) -> str:
    if override and override not in READER_MODULES:
        _register_history()
    if override:
        if override not in READER_MODULES and override not in WORKLOAD_FORMATS:
            known = ", ".join(sorted({*READER_MODULES, *WORKLOAD_FORMATS}))
            raise InputError(f"unknown workload format {override!r} (known: {known})")
        return override
    name = path.name.lower()
    for suffix, format_name in sorted(FORMAT_BY_SUFFIX.items(), key=lambda kv: -len(kv[0])):
        if name.endswith(suffix):
            return format_name
    _register_history()
    for format_name, recognises in FORMAT_SNIFFERS.items():
        if recognises(path):
            return format_name
    known = ", ".join(sorted(FORMAT_BY_SUFFIX)) or "none"
    content = ", ".join(sorted(FORMAT_SNIFFERS)) or "none"
    raise InputError(f"cannot tell the workload format from the file name (known endings: "
                     f"{known}) or its content (known: {content}); give --workload-format",
                     source=str(path))


class _ReadOptions(Mapping[str, Any]):
    """The options handed to a workload reader, remembering which it looked at."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self._options = dict(options)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return self._options[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._options)

    def __len__(self) -> int:
        return len(self._options)

    def given_but_unread(self) -> list[str]:
        """Options given a value (not None or False) that the reader never looked at."""
        return sorted(key for key, value in self._options.items()
                      if value is not None and value is not False and key != "seed"
                      and key not in self.read)


def build_scenario(
    grid_path: str | None,
    workload: str | None,
    *,
    seed: int = 1,
    workload_format_name: str | None = None,
    options: Mapping[str, Any] | None = None,
    strict_options: bool = False,
) -> Scenario:
    """The scenario of `workload` (on `grid_path`, if given). With `strict_options`, an option
    given (not None or False) that the workload's reader never reads is an error, so a user
    who asks for `--capacity` on a workload that has no use for it is told so.

    The grid is GRID (`grid_path`), else the pool's slots (`options["machines"]`, a slot
    dump, or the collector of `options["pool"]`). No `workload` with a pool: the pool's own
    job history, read from its schedds."""
    read_options = _ReadOptions({"seed": seed, **(options or {})})
    grid, unusable_slots = (load_grid(grid_path), []) if grid_path else _pool_grid(
        read_options)
    if workload is None:
        if read_options.get("pool") is None:
            raise InputError("give a workload (--workload), or --pool HOST to replay the "
                             "pool's own job history")
        scenario = WORKLOAD_FORMATS[_register_history()](None, grid, read_options)
        described = "a pool's live history"
    elif grid is not None and workload in grid.workloads:
        kind = grid.workloads[workload].get("kind")
        builder = GRID_WORKLOADS.get(kind, GRID_WORKLOADS["hosep-synthetic"])
        scenario = builder(grid, workload, read_options)
        described = f"workload {workload!r} of the grid"
    else:
        path = Path(workload)
        if not path.exists():
            if grid is not None:
                known = ", ".join(sorted(grid.workloads)) or "none"
                raise InputError(f"workload {workload!r} is neither a workload of the grid "
                                 f"(known: {known}) nor a file")
            raise InputError(f"no such workload file {workload!r}")
        if not (path.is_file() or path.is_dir()):  # a FIFO would block the read for ever
            raise InputError("not a regular file (a FIFO, device or socket): give a file",
                             source=workload)
        format_name = workload_format(path, workload_format_name)
        scenario = reader(format_name)(path, grid, read_options)
        described = f"a {format_name} workload" + (" on a grid" if grid is not None else "")
    if unusable_slots:
        first = unusable_slots[0]
        scenario.skipped = {f"slot ad the daemon would not read (first: {first.source} ad "
                            f"#{first.index}: {first.reason})": len(unusable_slots),
                            **scenario.skipped}
    if strict_options:
        unused = read_options.given_but_unread()
        if unused:
            names = ", ".join("--" + key.replace("_", "-") for key in unused)
            raise InputError(f"{names} does not apply to {described}")
    return scenario


def _pool_grid(options: _ReadOptions) -> tuple[Grid | None, list[SkippedAd]]:
    """The grid of the pool's slots, if the options name them, and the slot ads it left out."""
    if options.get("machines") is None and options.get("pool") is None:
        return None, []
    # Only a pool's slots need the ClassAd layer: a grid file or a task list does not load it.
    from gridfair.classads.views import AdConfig
    from gridfair.sim.pool_grid import read_pool_grid

    config = AdConfig.with_attributes(options.get("owner_attr"), options.get("power_attr"))
    return read_pool_grid(options.get("machines"), options.get("pool"), config)


def simulation_of(
    scenario: Scenario,
    *,
    policy: str | None = None,
    order: str | None = None,
    preempt: str | None = None,
    admit: str | None = None,
    policy_options: Mapping[str, Any] | None = None,
    checkpointing: bool = False,
    engine: EngineOptions = DEFAULT_ENGINE,
    keep_decisions: bool = False,
    progress: Callable[[int, int], None] | None = None,
    recorder: RunRecorder | None = None,
    allocation: str | None = None,
    keep_tasks: bool = True,
    on_task_done: Callable[[Task], None] | None = None,
    listeners: Sequence[PoolListener] = (),
    placement: str | None = None,
) -> Simulation:
    """The stages, the pool and the simulation of `scenario`, ready to run; `recorder` keeps
    the run's records (runs and allocation snapshots) for the checks of `records`.
    `allocation` is the allocation rule; None takes the workload's, then the order's paper's.
    `keep_tasks=False` streams each task out to `on_task_done` when it ends (`engine`), and
    takes the tasks out of the scenario, so that nothing else holds a task that has ended.
    `listeners` (a curve of shares) hear the pool's events, as the recorder does.
    `engine` says how the simulator runs (`EngineOptions`); `placement` names the placement
    (`core.placement.PLACEMENTS`; None: `fastest`)."""
    tasks = scenario.tasks
    if engine.sequential and isinstance(tasks, Sized) and not isinstance(tasks, Sequence):
        tasks = list(tasks)  # a file's tasks read as taken (taskcsv): that loop indexes them
    if not keep_tasks:
        scenario.tasks = []
    stages = build_stages(
        policy, order=order, preempt=preempt, admit=admit,
        options={**scenario.policy_options, **(policy_options or {})}, placement=placement,
    )
    matcher = scenario.matcher
    pool = Pool(task_key=stages.order.task_key, checkpointing=checkpointing,
                exact_accounting=stages.order.exact_accounting, matcher=matcher)
    negotiator = Negotiator(pool, stages.order, stages.preempt, stages.admit,
                            explain=keep_decisions,
                            allocation=allocation if allocation is not None else
                            scenario.allocation, placement=stages.placement)
    for node in scenario.nodes:
        pool.add_node(node)
    if isinstance(matcher, PoolListener):
        pool.listen(matcher)
    for listener in (*listeners, *([recorder] if recorder is not None else [])):
        pool.listen(listener)
    return Simulation(negotiator, tasks, engine, keep_decisions=keep_decisions,
                      progress=progress, transfer_delay=scenario.transfer_delay,
                      on_cycle=recorder.after_cycle if recorder is not None else None,
                      keep_tasks=keep_tasks, on_task_done=on_task_done)


def run_scenario(scenario: Scenario, **options: Any) -> tuple[SimulationResult, Negotiator]:
    """Run `scenario` to the end (`simulation_of` takes the options)."""
    simulation = simulation_of(scenario, **options)
    return simulation.run(), simulation.negotiator


def run_streamed(simulation: Simulation,
                 outputs: Sequence[Callable[[Task], None]]) -> SimulationResult:
    """Run `simulation`, handing every task to each of `outputs`: as it ends, in a streamed
    run (`keep_tasks=False`); all at the end, in arrival order, in a run that keeps them."""

    def hand_on(task: Task) -> None:
        for output in outputs:
            output(task)

    if not simulation.keep_tasks:
        # One output is called as it is: an interpreted call less for every task.
        simulation.on_task_done = outputs[0] if len(outputs) == 1 else hand_on
    result = simulation.run()
    for task in result.tasks:
        hand_on(task)
    return result
