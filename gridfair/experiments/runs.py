"""One simulation of an experiment: its parameters, its deterministic key, and its outcome.

A run is described by a flat mapping of named parameters (`PARAMETERS`): what the grid, the
workload and the policy are, and the options each part takes. Parameters left at their default
are not part of the run's identity, so the key of a run stays the same when a new parameter
with a default is added. The key is a hash of the canonical JSON of the other parameters: the
same run gets the same key on every machine and in every process, which is what lets a sweep
resume without redoing finished runs.

`execute` runs one simulation and never raises for a failed run (except on an interrupt): the
error is part of the outcome, so a failing run is recorded and the others go on.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gridfair.core.pool import DONE, Task
from gridfair.core.stages import ALLOCATION_RULES
from gridfair.errors import GridfairError, InputError
from gridfair.experiments.allocation import allocate
from gridfair.experiments.measured import MeasuredRun
from gridfair.policies.registry import every_option, policy_names
from gridfair.sim.engine_options import ARRIVALS, Arrivals, EngineOptions
from gridfair.sim.metrics import SATISFACTION_BASES, RunMetrics
from gridfair.sim.scenario import build_scenario
from gridfair.sim.share_curve import ShareCurve, bin_width
from gridfair.sim.workloads.registry import Scenario

# Workload readers register their formats when imported. A Dask worker imports only this
# module, so it imports the readers the scenario module does not import itself.

# Where a parameter goes: the simulation run itself, the policy's options, the scenario
# builder's options (workload readers), or the metrics.
RUN, POLICY, SCENARIO, METRICS = "run", "policy", "scenario", "metrics"
# What a run is (`experiment`): see `gridfair.experiments.allocation` for the second.
SIMULATION, ALLOCATION = "simulation", "allocation"
#: The "policy" of a recorded workload as it happened (a pool's history): no simulation, the
#: history's own times, reported as a run is.
RECORDED = "as-it-happened"
#: Scenario parameters that name files, resolved as the grid and workload are.
PATH_PARAMETERS = ("machines", "submitter_map")
#: Parameters that may name an input file (a workload may also be a name the grid defines).
FILE_PARAMETERS = ("grid", "workload", *PATH_PARAMETERS)


def run_policies() -> list[str]:
    """What a run's `policy` may be: a named composition, or the history as it happened."""
    return [RECORDED, *policy_names()]


@dataclass(frozen=True)
class Parameter:
    name: str
    target: str
    types: tuple[type, ...]
    default: Any
    help: str
    #: The allowed values, when they are a known set (looked up when checked: other modules
    #: add policies to the registry).
    choices: Callable[[], Sequence[str]] | None = None


def _policy_parameters() -> list[Parameter]:
    """The policy options the stages declare `swept` (`core.stages.option`), as parameters
    whose default (None; False for a flag) leaves the stage's own."""
    parameters = []
    for name, declared in every_option().items():
        if not declared.metadata["swept"]:
            continue
        default = declared.default
        types: tuple[type, ...] = ((bool,) if isinstance(default, bool) else
                                   (int, float) if isinstance(default, int | float) else (str,))
        choices = declared.metadata["choices"]
        parameters.append(Parameter(
            name, POLICY, types, False if types == (bool,) else None, declared.metadata["help"],
            None if choices is None else (lambda choices=choices: choices)))
    return parameters


PARAMETERS: dict[str, Parameter] = {p.name: p for p in (
    Parameter("grid", RUN, (str,), None, "grid file (TOML or iSPD .imsx)"),
    Parameter("workload", RUN, (str,), None, "a workload the grid defines, or a workload file"),
    Parameter("workload_format", RUN, (str,), None, "override the format the file name implies"),
    Parameter("policy", RUN, (str,), None, "a named composition of policy stages, or "
              f"{RECORDED} (a pool's history as it happened)", run_policies),
    Parameter("seed", RUN, (int,), 1, "seed of the synthetic workload and of random choices"),
    Parameter("checkpointing", RUN, (bool,), False, "vacated tasks keep their work"),
    Parameter("interval", RUN, (int, float), None, "negotiate every N simulated seconds"),
    Parameter("vacate_delay", RUN, (int, float), 0.0, "seconds a vacated node needs"),
    Parameter("claim_worklife", RUN, (int, float), None,
              "reuse claims for the user's next task for this long (HTCondor's "
              "CLAIM_WORKLIFE; negative: forever)"),
    Parameter("arrivals", RUN, (str,), Arrivals.BATCH.value,
              "batch, or sequential: the published simulator's event loop", lambda: ARRIVALS),
    Parameter("satisfaction_base", METRICS, (str,), "grid", "Def. 5's ideal machine",
              lambda: SATISFACTION_BASES),
    Parameter("horizon", METRICS, (int, float), None,
              "also count the tasks completed by this time (s), e.g. the trace's end"),
    *_policy_parameters(),
    Parameter("allocation", RUN, (str,), None,
              "allocation rule when the first user's task does not fit: stop (Algorithm 1) or "
              "backfill (default: task lists stop, others take the order's paper rule)",
              lambda: ALLOCATION_RULES),
    Parameter("capacity_ratio", SCENARIO, (int, float), None,
              "task trace: capacity as a multiple of the trace's mean usage"),
    Parameter("equal_shares", SCENARIO, (bool,), False,
              "task trace: equal entitlements instead of each user's mean usage"),
    Parameter("capacity", SCENARIO, (int,), None, "SWF trace: the machine's processors"),
    Parameter("deadlines", SCENARIO, (str,), None, "deadline type of a job trace (Justice)"),
    Parameter("experiment", RUN, (str,), SIMULATION,
              "a simulation over time, or the DMFA-SRQ paper's allocation experiment",
              lambda: (SIMULATION, ALLOCATION)),
    Parameter("users", RUN, (int,), None, "allocation experiment: users drawn from the shard"),
    Parameter("machines", SCENARIO, (str,), None,
              "the grid is a pool's slots: a condor_status -long or -json dump"),
    Parameter("pool", SCENARIO, (str,), None,
              "a live pool's collector: its slots, and its schedds' history"),
    Parameter("since", SCENARIO, (str,), None, "HTCondor history: jobs submitted from then"),
    Parameter("until", SCENARIO, (str,), None, "HTCondor history: jobs submitted before then"),
    Parameter("uid_domain", SCENARIO, (str,), None,
              "HTCondor history: the pool's UID_DOMAIN ('*': any)"),
    Parameter("submitter_map", SCENARIO, (str,), None,
              "HTCondor history: a file of 'identity owner' lines"),
    Parameter("trust_accounting_groups", SCENARIO, (bool,), False,
              "HTCondor history: charge jobs to the accounting group they name"),
    Parameter("owner_attr", SCENARIO, (str,), None, "slot attribute naming the owner"),
    Parameter("power_attr", SCENARIO, (str,), None, "slot attribute giving MFlops"),
)}

REQUIRED = ("workload", "policy")


def check_value(name: str, value: Any) -> Any:
    """The value of parameter `name`, type-checked (ints are accepted for floats)."""
    parameter = PARAMETERS.get(name)
    if parameter is None:
        raise InputError(f"unknown parameter {name!r} (known: {', '.join(sorted(PARAMETERS))})")
    # bool is an int in Python: a flag given as 1, or a seed given as true, is a mistake.
    if isinstance(value, bool) != (bool in parameter.types) or not isinstance(
            value, parameter.types):
        expected = " or ".join(t.__name__ for t in parameter.types)
        raise InputError(f"parameter {name!r} must be {expected}, got {value!r}")
    if float in parameter.types:
        # 1 and 1.0 are the same value and must give the same key.
        value = float(value)
        if not math.isfinite(value):
            raise InputError(f"parameter {name!r} must be finite, got {value!r}")
    if parameter.choices is not None and value not in parameter.choices():
        raise InputError(f"parameter {name!r} must be one of {', '.join(parameter.choices())}, "
                         f"got {value!r}")
    return value


@dataclass(frozen=True)
class RunSpec:
    """One run: its parameters (defaults left out) and where relative paths are resolved."""

    params: Mapping[str, Any]
    #: Directory that relative grid and workload paths are relative to (the sweep file's);
    #: not part of the run's identity, so a moved sweep keeps its keys.
    base_dir: str = field(default="", compare=False)

    @classmethod
    def make(cls, params: Mapping[str, Any], base_dir: str | Path = "") -> RunSpec:
        for name in REQUIRED:
            if params.get(name) is None:
                raise InputError(f"a run needs the parameter {name!r}")
        checked = {}
        for name in sorted(params):
            value = params[name]
            if value is not None or name not in PARAMETERS:
                value = check_value(name, value)
            if value != PARAMETERS[name].default:
                checked[name] = value
        return cls(checked, str(base_dir))

    def get(self, name: str) -> Any:
        return self.params.get(name, PARAMETERS[name].default)

    @property
    def key(self) -> str:
        canonical = json.dumps(self.params, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:20]

    def describe(self) -> str:
        """name=value for each parameter given, the grid (a long path) left out."""
        return " ".join(f"{name}={value}" for name, value in self.params.items()
                        if name != "grid")

    def all_params(self) -> dict[str, Any]:
        """Every parameter, defaults included, in `PARAMETERS` order."""
        return {name: self.get(name) for name in PARAMETERS}

    def _path(self, value: str | None) -> str | None:
        """`value` relative to `base_dir` when that names an existing file; else as given
        (a workload may be a name the grid defines rather than a file)."""
        if value is None or not self.base_dir:
            return value
        candidate = Path(self.base_dir) / value
        return str(candidate) if candidate.exists() else value

    def input_files(self) -> dict[str, str]:
        """parameter -> path of each input file the run reads (what a job must be sent)."""
        files = {}
        for name in FILE_PARAMETERS:
            path = self._path(self.params.get(name))
            if path is not None and Path(path).is_file():
                files[name] = path
        return files

    def _options(self, target: str) -> dict[str, Any]:
        return {name: value for name, value in self.params.items()
                if PARAMETERS[name].target == target}


@dataclass
class RunOutcome:
    """What one run produced: per-user and run-wide metrics, or the error that stopped it."""

    key: str
    ok: bool
    users: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    stages: str = ""
    #: The allocation rule the run used ("" for an allocation experiment, which has none).
    allocation: str = ""
    error: str = ""
    wall_seconds: float = 0.0  # kept apart from `summary`, which is deterministic
    #: The curve of shares over time of a run of a recorded workload
    #: (`gridfair.sim.share_curve.ShareCurve.series`); empty for others, never stored.
    series: dict[str, Any] = field(default_factory=dict)


def execute(spec: RunSpec) -> RunOutcome:
    """Run one simulation (or allocation experiment); a failure (other than an interrupt)
    becomes a failed outcome."""
    started = time.perf_counter()
    try:
        if spec.get("experiment") == ALLOCATION:
            users: list[dict[str, Any]] = []
            summary = allocate(spec.get("policy"), spec._path(spec.get("workload")),
                               spec.get("users"), spec.get("seed"))
            stages, allocation, series = f"allocation {spec.get('policy')}", "", {}
        elif spec.get("policy") == RECORDED:
            users, summary, series = _recorded(spec)
            stages, allocation = RECORDED, ""
        else:
            users, summary, stages, allocation, series = _simulate(spec)
    except GridfairError as error:
        return RunOutcome(spec.key, False, error=f"{type(error).__name__}: {error}",
                          wall_seconds=time.perf_counter() - started)
    except Exception:  # a bug in a policy must not stop the other runs: keep its traceback
        return RunOutcome(spec.key, False, error=traceback.format_exc(),
                          wall_seconds=time.perf_counter() - started)
    return RunOutcome(spec.key, True, users=users, summary=summary, stages=stages,
                      allocation=allocation, wall_seconds=time.perf_counter() - started,
                      series=series)


def _scenario(spec: RunSpec) -> Scenario:
    options = spec._options(SCENARIO)
    for name in PATH_PARAMETERS:
        if name in options:
            options[name] = spec._path(options[name])
    return build_scenario(
        spec._path(spec.get("grid")), spec._path(spec.get("workload")),
        seed=spec.get("seed"), workload_format_name=spec.get("workload_format"),
        options=options,
    )


def _recorded(spec: RunSpec) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Per-user rows, run-wide metrics and curve of a recorded workload as it happened."""
    scenario = _scenario(spec)
    if scenario.recorded is None:
        raise InputError(f"policy {RECORDED} needs a recorded workload (an HTCondor job "
                         f"history), not {spec.get('workload')}")
    tasks, result, curve = scenario.recorded()
    metrics = RunMetrics(scenario.nodes, spec.get("satisfaction_base"))
    for task in tasks:
        metrics.add(task)
    users = metrics.users()
    summary = metrics.summary(result, users).as_dict()
    summary.pop("wall_seconds", None)
    series = curve.series(result.makespan)
    summary["share_error"] = series["mean_share_error"]
    return [user.as_dict() for user in users], summary, series


def curve_width(scenario: Scenario) -> float | None:
    """Seconds a bin of the run's curve of shares (and so its owner-share error) covers: the
    recorded workload's own; for a workload held in memory, a 200th (`bin_width`) of a lower
    bound on the run's span (its submissions' span, or its work over the pool's power, the
    longer), so that every comparison shows the owner-share error policies exist to reduce;
    None for a streamed workload, whose span is not known before it runs."""
    if scenario.curve_width is not None:
        return scenario.curve_width
    tasks = scenario.tasks
    if not isinstance(tasks, list) or not tasks:
        return None
    power = math.fsum(node.power for node in scenario.nodes)
    work = math.fsum(task.work for task in tasks if task.work is not None)
    durations = math.fsum(task.duration * task.cpus for task in tasks
                          if task.duration is not None)
    cpus = sum(node.cpus for node in scenario.nodes)
    submitted = [task.submit_time for task in tasks]
    span = max(max(submitted) - min(submitted), work / power if power else 0.0,
               durations / cpus if cpus else 0.0)
    return bin_width(span)


def _simulate(spec: RunSpec) -> tuple[list[dict[str, Any]], dict[str, Any], str, str,
                                      dict[str, Any]]:
    """Per-user rows, run-wide metrics, policy stages, allocation rule and curve of shares
    (for a recorded workload; else empty) of one simulation."""
    scenario = _scenario(spec)
    width = curve_width(scenario)
    curve = ShareCurve(scenario.nodes, width) if width is not None else None
    engine = EngineOptions(arrivals=spec.get("arrivals"), interval=spec.get("interval"),
                           vacate_delay=spec.get("vacate_delay"),
                           claim_worklife=spec.get("claim_worklife"))
    run = MeasuredRun(
        scenario, engine=engine, satisfaction_base=spec.get("satisfaction_base"),
        policy=spec.get("policy"), policy_options=spec._options(POLICY),
        checkpointing=spec.get("checkpointing"), allocation=spec.get("allocation"),
        listeners=[curve] if curve is not None else [],
    )
    horizon = spec.get("horizon")
    completed_by_horizon: Counter[str] = Counter()

    def count_completed(task: Task) -> None:
        # A simulation runs every task to its end; a trace-driven experiment (the SDRF
        # paper's Fig. 5) counts only what completed within the trace's time span.
        if task.state == DONE and task.finish_time <= horizon:
            completed_by_horizon[task.user] += 1

    measures = run.run(([count_completed] if horizon is not None else []) + (
        [curve.add_task_wait] if curve is not None else []))
    result, users = measures.result, measures.users
    summary = measures.summary.as_dict()
    # Wall time varies from run to run; everything else in the summary is deterministic.
    summary.pop("wall_seconds", None)
    if measures.deadlines is not None:
        # As `simulate` reports them: the deadline figures (Justice) over the run-wide ones.
        summary.update(measures.deadlines.as_dict())
    user_rows = [user.as_dict() for user in users]
    if horizon is not None:
        for user in user_rows:
            user["completed_by_horizon"] = completed_by_horizon[user["user"]]
        summary["completed_by_horizon"] = sum(completed_by_horizon.values())
    series: dict[str, Any] = {}
    if curve is not None:
        series = curve.series(result.makespan)
        summary["share_error"] = series["mean_share_error"]
    return user_rows, summary, run.negotiator.stages, run.negotiator.allocation, series
