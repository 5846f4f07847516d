"""Comparing runs: metrics aggregated over seeds (or any parameter left out of the grouping).

The spread reported beside each mean is the sample standard deviation (n - 1) over the runs of
a group, 0 for a single run; the minimum and maximum are kept too. Runs where a metric is
undefined (a user with no completed task has no satisfaction) are left out of that metric's
figures, and `n` says how many runs each figure is over.

Groups, users and policies keep the order in which they first appear in the results, which is
the order the runs were listed in: output does not depend on the order runs finished in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

from gridfair.errors import InputError
from gridfair.experiments.runs import RunOutcome, RunSpec

#: Results as the runner returns them and the store reads them back: each run with its outcome.
Results = Sequence[tuple[RunSpec, RunOutcome]]

#: Fields of the per-user and summary rows that identify rather than measure.
IDENTITY_FIELDS = frozenset({"user", "provided_mflops", "provided_share"})


@dataclass(frozen=True)
class Spread:
    mean: float
    std: float
    min: float
    max: float
    n: int

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def spread(values: Iterable[float]) -> Spread:
    """Mean, sample standard deviation, minimum and maximum of the defined values."""
    defined = [float(value) for value in values
               if value is not None and not math.isnan(value)]
    if not defined:
        return Spread(math.nan, math.nan, math.nan, math.nan, 0)
    mean = math.fsum(defined) / len(defined)
    std = (math.sqrt(math.fsum((value - mean) ** 2 for value in defined) / (len(defined) - 1))
           if len(defined) > 1 else 0.0)
    return Spread(mean, std, min(defined), max(defined), len(defined))


def parse_seeds(text: str) -> list[int]:
    """Seeds from "1-5", "1,3,7" or "1-3,10": in the order given, each once."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise InputError(f"bad seed range {part!r}: expected N, N-M or a comma list of "
                             "those") from None
        if last < first:
            raise InputError(f"empty seed range {part!r}: {last} < {first}")
        seeds += [seed for seed in range(first, last + 1) if seed not in seeds]
    return seeds


def _numeric(row: Mapping[str, object]) -> dict[str, float]:
    return {name: value for name, value in row.items()
            if name not in IDENTITY_FIELDS and isinstance(value, int | float)
            and not isinstance(value, bool)}


def _group_key(spec: RunSpec, group_by: Sequence[str]) -> tuple:
    return tuple(spec.get(name) for name in group_by)


def aggregate_users(results: Results, group_by: Sequence[str]) -> list[dict[str, object]]:
    """One row per group and user: the group's parameters, the user, its provided share, and
    a `Spread` per metric over the group's runs. Failed runs are left out."""
    cells: dict[tuple, dict[str, object]] = {}
    values: dict[tuple, dict[str, list[float]]] = {}
    for spec, outcome in results:
        if not outcome.ok:
            continue
        group = _group_key(spec, group_by)
        for user in outcome.users:
            key = (*group, user["user"])
            if key not in cells:
                cells[key] = {**dict(zip(group_by, group, strict=True)), "user": user["user"],
                              "provided_share": user.get("provided_share")}
                values[key] = {}
            for name, value in _numeric(user).items():
                values[key].setdefault(name, []).append(value)
    return [{**cells[key], **{name: spread(series) for name, series in values[key].items()}}
            for key in cells]


def aggregate_summaries(results: Results, group_by: Sequence[str]) -> list[dict[str, object]]:
    """One row per group: its parameters, and a `Spread` per run-wide metric."""
    cells: dict[tuple, dict[str, list[float]]] = {}
    for spec, outcome in results:
        if not outcome.ok:
            continue
        group = _group_key(spec, group_by)
        for name, value in _numeric(outcome.summary).items():
            cells.setdefault(group, {}).setdefault(name, []).append(value)
    # The group's parameters win over a metric of the same name.
    return [{**{name: spread(series) for name, series in metrics.items()},
             **dict(zip(group_by, group, strict=True))}
            for group, metrics in cells.items()]


def comparison_specs(
    grid: str | None,
    policies: Sequence[str],
    workloads: Sequence[str],
    seeds: Sequence[int],
    params: Mapping[str, object],
) -> list[RunSpec]:
    """The runs of a comparison: every workload x policy x seed, workloads outermost."""
    if not policies:
        raise InputError("no policies to compare")
    if not workloads:
        raise InputError("no workload given")
    return [RunSpec.make({**params, "grid": grid, "workload": workload, "policy": policy,
                          "seed": seed})
            for workload in workloads for policy in policies for seed in seeds]


def check_one_allocation_rule(results: Results) -> None:
    """Refuse runs that compare orders under different allocation rules without being asked
    to: when no run names its rule, each takes its workload's or its order's own, and DRF
    backfilling against SDRF stopping measures the rule, not the order."""
    if any(spec.get("allocation") is not None for spec, _ in results):
        return  # the rule was chosen (or swept) on purpose
    rules = {outcome.stages: outcome.allocation for _, outcome in results
             if outcome.ok and outcome.allocation}
    if len(set(rules.values())) > 1:
        used = ", ".join(f"{stages}: {rule}" for stages, rule in rules.items())
        raise InputError(f"the runs use different allocation rules ({used}); give "
                         "allocation=stop or allocation=backfill to compare like with like")
