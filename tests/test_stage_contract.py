"""The stage contract, over every registered stage (`policies/registry.py`): its decisions name
it, their templates render with their figures, its state survives export and import, and its
runs are deterministic. And the proof that a stage is added in one place: an ordering stage
defined in this file alone runs through `simulate`, `compare`, the daemon and `explain`.
"""

from __future__ import annotations

import json
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from gridfair.core.pool import CPUS, Node, Pool, UserState
from gridfair.core.stages import Decision, OrderPolicy, Stateful, decode_options, option
from gridfair.errors import ConfigError
from gridfair.policies import registry
from gridfair.policies.ranking import UserRanking
from gridfair.sim.deadlines import deadline_job
from gridfair.sim.scenario import Scenario, run_scenario


def contended_scenario() -> Scenario:
    """Four owners' two-cpu machines of unequal power, taken first by a user who owns none;
    then the owners' jobs arrive: every stage has something to order, preempt and admit.
    Jobs have deadlines and run times, which the deadline stages need."""
    nodes = [Node(f"m{i}", owner, power, cpus=2.0)
             for i, (owner, power) in enumerate((("a", 400.0), ("b", 200.0), ("c", 200.0),
                                                 ("d", 100.0)))]
    jobs = [("x", 0.0, 1, 300.0, 4.0)] * 8 + [
        (user, 10.0 + 5.0 * step, 1 + step % 2, 120.0 + 30.0 * step, 2.0 + step % 3)
        for step, user in enumerate("abcdabcdab")]
    tasks = [deadline_job(f"{user}.{index}", user, submit, cpus, run_time, factor, 2,
                          source_index=index)
             for index, (user, submit, cpus, run_time, factor) in enumerate(jobs)]
    return Scenario(nodes, tasks)


def one_of_each() -> list[tuple[str, str, str]]:
    """(role, stage name, a composition that runs it) for every registered stage: a stage
    that no composition runs is a failure here."""
    runs = []
    for role, table in (("order", registry.ORDERS), ("preempt", registry.PREEMPTS),
                        ("admit", registry.ADMITS)):
        for name in table:
            composition = next(
                (policy for policy, parts in registry.COMPOSITIONS.items()
                 if parts[("order", "preempt", "admit").index(role)] == name), None)
            runs.append((role, name, composition))
    return runs


EVERY_STAGE = one_of_each()
IDS = [f"{role}:{name}" for role, name, _ in EVERY_STAGE]
#: The stages whose state outlives a cycle (the daemon saves it between cycles) as levels
#: per user (`state_name`); group-fair's window memory has its own test
#: (tests/test_groups_preempt.py).
STATEFUL = [(role, name, policy) for role, name, policy in EVERY_STAGE
            if policy is not None
            and isinstance(stage := getattr(registry.build_stages(policy), role), Stateful)
            and hasattr(stage, "state_name")]


def run(policy: str) -> tuple[Any, Any]:
    return run_scenario(contended_scenario(), policy=policy, keep_decisions=True)


def placeholders(template: str) -> set[str]:
    return {field.split(".")[0].split("[")[0]
            for _, field, _, _ in string.Formatter().parse(template) if field}


def check_decision(decision: Decision, names: set[str]) -> None:
    assert decision.policy in names, decision
    assert placeholders(decision.template) <= set(decision.figures), decision
    assert decision.reason  # renders: every figure formats with its spec


@pytest.mark.parametrize(("role", "name", "policy"), EVERY_STAGE, ids=IDS)
def test_decisions_name_their_stage_and_render_with_their_figures(role, name, policy) -> None:
    assert policy is not None, f"{role} stage {name} is in no composition"
    result, negotiator = run(policy)
    stages = [stage for stage in (negotiator.order, negotiator.preempt, negotiator.admit)
              if stage is not None]
    names = {stage.name for stage in stages}
    assert name in names
    assert result.decisions, f"{policy} decided nothing on a contended pool"
    for decision in [*result.decisions, *negotiator.declined]:
        check_decision(decision, names)
    # Every allocation carries the order's `why`.
    assert any(decision.policy == name for decision in result.decisions) or role != "order"


@pytest.mark.parametrize(("role", "name", "policy"), EVERY_STAGE, ids=IDS)
def test_runs_are_deterministic(role, name, policy) -> None:
    def trace(policy: str) -> list[tuple]:
        result, _ = run(policy)
        return ([(d.kind, d.task.id, d.node.name if d.node else None, d.policy, d.reason)
                 for d in result.decisions]
                + [(task.id, task.state, task.start_time, task.finish_time)
                   for task in result.tasks])

    assert trace(policy) == trace(policy)


def restored(stage: Stateful, state: Mapping[str, Any], policy: str) -> dict[str, Any]:
    """`state` imported into a fresh stage of the same policy on an empty pool, exported at
    the same time."""
    fresh = getattr(registry.build_stages(policy), stage_role(stage, policy))
    Pool().listen(fresh)
    fresh.import_state(json.loads(json.dumps(state)), source="test")
    return fresh.export_state(state["time"])


def stage_role(stage: Any, policy: str) -> str:
    return next(role for role in ("order", "preempt", "admit")
                if type(getattr(registry.build_stages(policy), role)) is type(stage))


@pytest.mark.parametrize(("role", "name", "policy"), STATEFUL,
                         ids=[f"{role}:{name}" for role, name, _ in STATEFUL])
def test_state_survives_export_and_import(role, name, policy) -> None:
    result, negotiator = run(policy)
    stage = getattr(negotiator, role)
    now = max(task.finish_time or 0.0 for task in result.tasks)
    state = stage.export_state(now)
    levels = state[stage.state_name]
    assert any(any(value > 0 for value in level) for level in levels.values())
    again = restored(stage, state, policy)
    # A user back at a newcomer's level is forgotten; every other keeps its level.
    assert again[stage.state_name].items() <= levels.items()
    assert {key: value for key, value in again.items() if key != stage.state_name} == {
        key: value for key, value in state.items() if key != stage.state_name}
    assert restored(stage, again, policy) == again


def test_options_are_decoded_once_with_errors_naming_the_option() -> None:
    options = registry.ORDERS["sdrf"].Options
    assert decode_options(options, {"delta": 0.5}).delta == 0.5
    assert decode_options(options, {}).sdrf_priority == "eq5"
    with pytest.raises(ConfigError, match="policy option delta: expected a number, got 'x'"):
        registry.build_stages("sdrf", options={"delta": "x"})
    unread, read = registry.unread_options("hosep", options={"delta": 0.5})
    assert unread == ["delta"] and read == ["absolute_power_diff", "groups", "hosep_test"]


# ----------------------------------------------------------- a stage in one file
@dataclass(frozen=True)
class FewestOptions:
    fewest_bias: float = option(0.0, "cpus counted against the first user seen")


class FewestRunningOrder(OrderPolicy):
    """The waiting user running fewest cpus first (ties: the first seen): a stage that
    exists in this test file alone."""

    name = "fewest"
    Options = FewestOptions

    @classmethod
    def from_options(cls, options: FewestOptions) -> FewestRunningOrder:
        return cls(options.fewest_bias)

    def __init__(self, bias: float = 0.0) -> None:
        self.bias = bias

    def attach(self, pool: Pool) -> None:
        self.ranking = UserRanking()

    def user_changed(self, user: UserState, now: float) -> None:
        held = user.usage[CPUS] + (self.bias if user.index == 0 else 0.0)
        self.ranking.update(user, held if user.active else None)

    def first(self, now: float) -> UserState | None:
        return self.ranking.first()

    def why(self, user: UserState, now: float) -> tuple[str, Mapping[str, Any]]:
        return ("free slot to {user}: fewest cpus running ({cpus:g})",
                {"user": user.name, "cpus": user.usage[CPUS]})

    def key_figures(self, user: UserState, now: float) -> Mapping[str, float]:
        return {"cpus_running": user.usage[CPUS]}


@pytest.fixture
def fewest(monkeypatch):
    """The new stage, named in the registry's tables (what adding it to the product is). The
    commands that list the compositions in their options are loaded first, so that the stage
    leaves no trace in them once the test is over."""
    import gridfair.cli.shares  # noqa: F401
    import gridfair.cli.simulate  # noqa: F401

    monkeypatch.setitem(registry.ORDERS, "fewest", FewestRunningOrder)
    monkeypatch.setitem(registry.COMPOSITIONS, "fewest", ("fewest", None, None))


def test_a_stage_defined_in_one_file_passes_the_contract(fewest) -> None:
    result, negotiator = run("fewest")
    assert isinstance(negotiator.order, FewestRunningOrder)
    assert {d.policy for d in result.decisions} == {"fewest"}
    for decision in result.decisions:
        check_decision(decision, {"fewest"})


def test_a_stage_defined_in_one_file_runs_in_simulate_and_compare(fewest, gridfair_cli):
    out = gridfair_cli("simulate", "hosep-table1", "--order", "fewest", "-w", "low",
                       "--format", "json")
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["policy"] == "order=fewest"
    out = gridfair_cli("compare", "hosep-table1", "--policies", "fewest,hosep", "-w", "low",
                       "--format", "json", "-q")
    assert out.exit_code == 0, out.output
    summary = json.loads(out.output)["results"][0]["summary"]
    assert [row["policy"] for row in summary] == ["fewest", "hosep"]


def test_a_stage_defined_in_one_file_runs_in_the_daemon_and_explain(
        fewest, tmp_path, gridfair_cli) -> None:
    from test_daemon import files_config, make_daemon, rows

    raw = files_config(tmp_path, policy={"name": "fewest", "options": {"fewest_bias": 2}})
    assert make_daemon(tmp_path, raw, max_cycles=2).run() == 0
    decided = rows(tmp_path, "select user, policy, reason from decisions")
    assert decided and all(policy == "fewest" for _, policy, _ in decided)
    user = decided[0][0]
    out = gridfair_cli("explain", user, "--db", str(tmp_path / "state.db"), "--format", "json")
    assert out.exit_code == 0, out.output
    explained = json.loads(out.output)
    assert explained["policy_figures"]["cpus_running"] >= 0
    assert any(d["policy"] == "fewest" and d["reason"].startswith("free slot to ")
               for d in explained["decisions"])


def test_every_option_declared_a_flag_is_a_flag_of_simulate() -> None:
    from gridfair.cli.simulate import OPTION_FLAGS, simulate

    assert OPTION_FLAGS
    assert set(OPTION_FLAGS) <= {param.name for param in simulate.params}
