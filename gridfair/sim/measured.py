"""One simulation run and its measures, as `simulate`, `compare` and `sweep` take them: the
scenario's simulation built (its negotiator names the stages before it runs, for a run's
description), its tasks streamed as they end into the per-user metrics, in arrival order, and
to the caller's outputs, then the run-wide figures, and the deadline figures where the tasks
have deadlines."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import Task
from gridfair.sim.engine import SimulationResult
from gridfair.sim.engine_options import EngineOptions
from gridfair.sim.metrics import RunMetrics, RunSummary, UserMetrics
from gridfair.sim.scenario import run_streamed, simulation_of
from gridfair.sim.task_stream import InOrder, arrival_key
from gridfair.sim.workloads.registry import Scenario

if TYPE_CHECKING:  # the deadline figures, loaded only for tasks with deadlines (`run`)
    from gridfair.sim.deadline_metrics import DeadlineSummary


@dataclass(frozen=True)
class Measures:
    result: SimulationResult
    users: list[UserMetrics]
    summary: RunSummary
    #: The deadline figures (Justice's), for tasks with deadlines; else None.
    deadlines: DeadlineSummary | None


class MeasuredRun:
    """A scenario's simulation, ready to run and be measured."""

    def __init__(self, scenario: Scenario, *, engine: EngineOptions, satisfaction_base: str,
                 keep_tasks: bool = False, **simulation_options: Any) -> None:
        """`simulation_options` are `simulation_of`'s; the run streams its tasks out as they
        end (each let go once handed on) unless something needs them all at the end: the
        caller (`keep_tasks`), the published simulator's event loop, the deadline figures."""
        self.deadlines_in_play = isinstance(scenario.tasks, list) and any(
            task.deadline is not None for task in scenario.tasks)
        self._metrics = RunMetrics(scenario.nodes, satisfaction_base)
        self.simulation = simulation_of(
            scenario, engine=engine,
            keep_tasks=keep_tasks or engine.sequential or self.deadlines_in_play,
            **simulation_options)

    @property
    def negotiator(self) -> Negotiator:
        return self.simulation.negotiator

    def run(self, outputs: Sequence[Callable[[Task], None]] = ()) -> Measures:
        """Run the simulation, handing each task to the metrics and then to `outputs`."""
        in_arrival_order = InOrder(arrival_key, self._metrics.add)
        result = run_streamed(self.simulation, [in_arrival_order.add, *outputs])
        in_arrival_order.close()
        users = self._metrics.users()
        summary = self._metrics.summary(result, users)
        if not self.deadlines_in_play:
            return Measures(result, users, summary, None)
        from gridfair.sim.deadline_metrics import deadline_summary

        return Measures(result, users, summary, deadline_summary(result))
