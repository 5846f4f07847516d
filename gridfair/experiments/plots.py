"""The papers' figures, drawn with matplotlib from results (a comparison, or a results DB).

Kinds:
- `satisfaction` (HOSEP paper, Fig. 4): per-user satisfaction bars, one bar per policy, one
  panel per workload (columns) and checkpointing / satisfaction base (rows); error bars are the
  sample standard deviation over seeds.
- `wait-reduction` (SDRF paper, Fig. 4): reduction of the users' mean waiting time of a policy
  (SDRF) against a baseline (weighted DRF) at the same load and seed, one line per `delta`,
  over the capacity ratio.
- `completed-ratio` (SDRF paper, Fig. 5): per user, completed over submitted tasks under the
  baseline (x) and the policy (y), one bubble per user (area growing with the log of its
  submitted tasks), the line y = x; for one `delta` and one capacity ratio.
- `justice` (Justice paper): Jain's index and the share of deadlines met, by policy, one panel
  per workload (trace) and one group of bars per deadline type.
- `allocation` (DMFA-SRQ paper, Figs. 5-8): minimum dominant share, sum of dominant shares and
  CPU and memory utilization, by policy, one group of bars per number of users; error bars are
  the sample standard deviation over the draws (seeds).

Figures are drawn on `matplotlib.figure.Figure` objects and rendered by Agg (PNG) or the SVG
backend, never through pyplot's global state: no display is needed and nothing is left open.
The output format follows the file's ending (.png or .svg); SVG output carries no date and a
fixed hash salt, so the same results give the same bytes.

Names from the data (users, policies, workloads) are drawn through `plot_text`: as they are,
never as mathtext (a user named `$\\frac{$` would fail the drawing) and never hidden from a
legend (matplotlib leaves out labels that start with `_`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.figure import Figure

from gridfair.errors import InputError
from gridfair.experiments.compare import Results, aggregate_summaries, aggregate_users, spread
from gridfair.experiments.runs import PARAMETERS, POLICY, RunOutcome, RunSpec
from gridfair.text import shown

PLOT_SUFFIXES = (".png", ".svg")
DPI = 100


def plot_text(name: Any) -> str:
    """A name from the data as plot text: escaped (`shown`), `$` literal (no mathtext), and a
    leading `_` kept in legends (a space before it)."""
    text = shown(str(name)).replace("$", r"\$")
    return " " + text if text.startswith("_") else text


def _save(figure: Figure, out: str | Path) -> None:
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in PLOT_SUFFIXES:
        raise InputError(f"plot file must end in {' or '.join(PLOT_SUFFIXES)}", source=str(out))
    figure.tight_layout()
    if suffix == ".svg":
        with matplotlib.rc_context({"svg.hashsalt": "gridfair"}):
            figure.savefig(out, format="svg", metadata={"Date": None})
    else:
        figure.savefig(out, format="png", dpi=DPI)  # rendered by Agg


def _ok(results: Results) -> list[tuple[RunSpec, RunOutcome]]:
    ok = [(spec, outcome) for spec, outcome in results if outcome.ok]
    if not ok:
        raise InputError("no successful runs to plot")
    return ok


def _distinct(results: Results, name: str) -> list[Any]:
    """The values a parameter takes, in order of first appearance."""
    return list(dict.fromkeys(spec.get(name) for spec, _ in results))


def _grouped_bars(ax: Any, rows: Sequence[Mapping[str, Any]], groups: Sequence[Any],
                  group_of: Callable[[Mapping[str, Any]], Any], policies: Sequence[str],
                  metric: str, scale: float = 1.0) -> None:
    """One bar per policy in each group, the mean with the sample std as its error bar."""
    width = 0.8 / len(policies)
    for offset, policy in enumerate(policies):
        by_group = {group_of(row): row.get(metric) for row in rows if row["policy"] == policy}
        figures = [by_group.get(group) for group in groups]
        ax.bar([index + (offset - (len(policies) - 1) / 2) * width
                for index in range(len(groups))],
               [f.mean * scale if f else math.nan for f in figures], width,
               yerr=[f.std * scale if f else 0.0 for f in figures], capsize=3,
               label=plot_text(policy))


def satisfaction_bars(results: Results, out: str | Path) -> None:
    results = _ok(results)
    rows = aggregate_users(results, ("satisfaction_base", "checkpointing", "workload", "policy"))
    workloads = _distinct(results, "workload")
    panels = list(dict.fromkeys((row["satisfaction_base"], row["checkpointing"])
                                for row in rows))
    policies = _distinct(results, "policy")
    figure = Figure(figsize=(4.5 * len(workloads), 3.5 * len(panels)), dpi=DPI)
    axes = figure.subplots(len(panels), len(workloads), squeeze=False, sharey=True)
    for row_index, (base, checkpointing) in enumerate(panels):
        for column, workload in enumerate(workloads):
            ax = axes[row_index][column]
            cell = [row for row in rows if row["satisfaction_base"] == base
                    and row["checkpointing"] == checkpointing and row["workload"] == workload]
            users = list(dict.fromkeys(row["user"] for row in cell))
            _grouped_bars(ax, cell, users, lambda row: row["user"], policies, "satisfaction")
            ax.set_xticks(range(len(users)), list(map(plot_text, users)))
            ax.set_title(f"{plot_text(workload)}, checkpointing {'on' if checkpointing else 'off'}"
                         + (f", base {base}" if len(panels) > 1 else ""), fontsize=10)
            if column == 0:
                ax.set_ylabel("satisfaction %")
            ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend()
    _save(figure, out)


def history_panels(results: Results, out: str | Path) -> None:
    """A pool's history as it happened beside the policies replayed on it (one workload, the
    first seed): each user's mean wait by policy, the share error over time by policy, and
    one panel per policy of each user's share of the grid's power over time."""
    runs = [(spec, outcome) for spec, outcome in _ok(results) if outcome.series]
    if not runs:
        raise InputError("no run of a recorded workload (an HTCondor history) to plot")
    workload = runs[0][0].get("workload")
    first: dict[str, RunOutcome] = {}
    for spec, outcome in runs:
        if spec.get("workload") == workload:
            first.setdefault(spec.get("policy"), outcome)
    policies = list(first)
    rows = aggregate_users([(spec, outcome) for spec, outcome in runs
                            if spec.get("workload") == workload], ("policy",))
    users = list(dict.fromkeys(row["user"] for row in rows))
    panels = 2 + len(policies)
    columns = 2
    figure = Figure(figsize=(11, 3.4 * math.ceil(panels / columns)), dpi=DPI)
    axes = figure.subplots(math.ceil(panels / columns), columns, squeeze=False).flatten()
    waits = axes[0]
    _grouped_bars(waits, rows, users, lambda row: row["user"], policies, "mean_wait")
    waits.set_xticks(range(len(users)), list(map(plot_text, users)), fontsize=8)
    waits.set_ylabel("mean wait s")
    waits.set_title(f"{plot_text(Path(str(workload)).name)}: mean wait by user", fontsize=10)
    waits.legend(fontsize=8)
    errors = axes[1]
    longest = max(outcome.series["times"][-1] for outcome in first.values())
    scale, unit = next((scale, unit) for scale, unit, up_to in _TIME_UNITS if longest < up_to)
    # The first (as it happened) drawn wide under the others: equal curves stay visible.
    for order, (policy, outcome) in enumerate(first.items()):
        series = outcome.series
        errors.step([time / scale for time in series["times"]], series["share_error"],
                    where="post", linewidth=4 if order == 0 else 1.5,
                    alpha=0.5 if order == 0 else 1.0,
                    label=f"{plot_text(policy)} (mean {series['mean_share_error']:.3f})")
    errors.set_ylabel("share error")
    errors.set_xlabel(f"{unit} from the first submission")
    errors.set_title("power owed to waiting owners, over the grid's power", fontsize=10)
    errors.legend(fontsize=8)
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (policy, outcome) in zip(axes[2:], first.items(), strict=False):
        series = outcome.series
        for index, user in enumerate(users):
            color = colors[index % len(colors)]
            if user in series["shares"]:
                ax.step([time / scale for time in series["times"]], series["shares"][user],
                        where="post", color=color, label=plot_text(user))
            if series["provided"].get(user):
                ax.axhline(series["provided"][user], color=color, linestyle=":",
                           linewidth=1)
        ax.set_title(f"{plot_text(policy)}: share of the grid's power (dotted: provided)",
                     fontsize=10)
        ax.set_ylim(0, 1)
        ax.set_xlabel(f"{unit} from the first submission")
        ax.legend(fontsize=7)
    for ax in axes:
        ax.grid(alpha=0.3)
    for ax in axes[panels:]:
        ax.set_visible(False)
    _save(figure, out)


def shadow_shares(report: Mapping[str, Any], out: str | Path) -> None:
    """A shadow report's shares over time: each user's share of the pool's power as the pool
    ran (solid) and after gridfair's decisions (dashed), and the share error of each."""
    series = report["series"]
    start = series["times"][0]
    times = [time - start for time in series["times"]]
    scale, unit = next((scale, unit) for scale, unit, up_to in _TIME_UNITS
                       if (times[-1] if times else 0.0) < up_to)
    times = [time / scale for time in times]
    figure = Figure(figsize=(9, 7), dpi=DPI)
    shares, errors = figure.subplots(2, 1, sharex=True)
    colors = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    for index, user in enumerate(series["pool"]["shares"]):
        color = colors[index % len(colors)]
        shares.step(times, series["pool"]["shares"][user], where="post", color=color,
                    label=plot_text(f"{user} (pool)"))
        shares.step(times, series["gridfair"]["shares"][user], where="post", color=color,
                    linestyle="--", label=plot_text(f"{user} (gridfair)"))
    shares.set_ylabel("share of the pool's power")
    shares.set_ylim(0, 1)
    shares.set_title(f"shadow: {report['cycles']} cycles, policy {plot_text(report['policy'])}",
                     fontsize=10)
    shares.legend(fontsize=7, ncols=2)
    for side, style in (("pool", "-"), ("gridfair", "--")):
        errors.step(times, series[side]["share_error"], where="post", linestyle=style,
                    label=f"{side} (mean {report['share_error'][side]:.3f})")
    errors.set_ylabel("share error")
    errors.set_xlabel(f"{unit} from the first cycle")
    errors.legend(fontsize=8)
    for ax in (shares, errors):
        ax.grid(alpha=0.3)
    _save(figure, out)


#: (seconds per unit, unit, used for spans shorter than) for the time axes.
_TIME_UNITS = ((1.0, "seconds", 600.0), (60.0, "minutes", 6 * 3600.0),
               (3600.0, "hours", 4 * 86400.0), (86400.0, "days", math.inf))


def _context(spec: RunSpec) -> tuple:
    """What a run and its baseline share: every parameter but the policy and its options."""
    return tuple((name, value) for name, value in sorted(spec.params.items())
                 if name != "policy" and PARAMETERS[name].target != POLICY)


def _paired(results: Results, policy: str, baseline: str
            ) -> list[tuple[RunSpec, RunOutcome, RunOutcome]]:
    """Each run of `policy` with the `baseline` run of the same context."""
    baselines = {_context(spec): outcome for spec, outcome in results
                 if spec.get("policy") == baseline}
    pairs = [(spec, outcome, baselines[_context(spec)]) for spec, outcome in results
             if spec.get("policy") == policy and _context(spec) in baselines]
    if not pairs:
        raise InputError(f"no run of {policy!r} has a run of {baseline!r} with the same other "
                         "parameters to compare with")
    return pairs


def user_wait_reduction(outcome: RunOutcome, baseline: RunOutcome) -> float:
    """Percent by which the users' mean waiting time falls against the baseline: the mean over
    users of each user's mean wait, compared between the two runs (users without a defined
    wait in both runs are left out)."""
    waits = {user["user"]: user["mean_wait"] for user in outcome.users}
    pairs = [(waits[user["user"]], user["mean_wait"]) for user in baseline.users
             if user["user"] in waits and not math.isnan(user["mean_wait"])
             and not math.isnan(waits[user["user"]])]
    base = math.fsum(base_wait for _, base_wait in pairs)
    if not pairs or base == 0:
        return math.nan
    return 100.0 * (1.0 - math.fsum(wait for wait, _ in pairs) / base)


def _variant(spec: RunSpec) -> str:
    """The policy's options other than delta, and the allocation rule when given (e.g.
    "allocation=backfill"), to tell lines apart."""
    return ", ".join(f"{name}={value}" for name, value in sorted(spec.params.items())
                     if (PARAMETERS[name].target == POLICY and name != "delta")
                     or name == "allocation")


def wait_reduction_rows(results: Results, policy: str, baseline: str) -> list[dict[str, Any]]:
    """Mean (and spread over seeds and workloads) of the wait reduction per policy variant,
    delta and load."""
    cells: dict[tuple, list[float]] = {}
    for spec, outcome, base in _paired(_ok(results), policy, baseline):
        key = (_variant(spec), spec.get("delta"), spec.get("capacity_ratio"))
        cells.setdefault(key, []).append(user_wait_reduction(outcome, base))
    return [{"variant": variant, "delta": delta, "capacity_ratio": ratio,
             "reduction": spread(values)}
            for (variant, delta, ratio), values in sorted(cells.items(), key=_cell_order)]


def _cell_order(item: tuple) -> tuple:
    """By variant, then delta and load, a missing delta or load (the policy's default) last."""
    (variant, delta, ratio), _ = item
    return variant, delta is None, delta or 0.0, ratio is None, ratio or 0.0


def delta_label(delta: float | None) -> str:
    """1 - 10^-k for the paper's deltas, the number otherwise."""
    if delta is None:
        return "default delta"
    if 0 < delta < 1:
        exponent = -math.log10(1 - delta)
        if abs(exponent - round(exponent)) < 1e-6:
            return f"1 - 1e-{round(exponent)}"
    return f"{delta:g}"


def wait_reduction_lines(results: Results, out: str | Path, *, policy: str = "sdrf",
                         baseline: str = "wdrf") -> None:
    rows = wait_reduction_rows(results, policy, baseline)
    # A colour per delta (from a sequential map: deltas are ordered), a line style per variant.
    deltas = list(dict.fromkeys(row["delta"] for row in rows))
    variants = list(dict.fromkeys(row["variant"] for row in rows))
    colours = matplotlib.colormaps["viridis"]
    styles = ("-", "--", ":", "-.")
    figure = Figure(figsize=(9, 4.5), dpi=DPI)
    ax = figure.subplots()
    for variant, delta in dict.fromkeys((row["variant"], row["delta"]) for row in rows):
        line = [row for row in rows if (row["variant"], row["delta"]) == (variant, delta)]
        ax.plot([row["capacity_ratio"] for row in line],
                [row["reduction"].mean for row in line], marker="o",
                color=colours(deltas.index(delta) / max(len(deltas) - 1, 1)),
                linestyle=styles[variants.index(variant) % len(styles)],
                label=delta_label(delta) + (f", {variant}" if variant else ""))
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xlabel("capacity ratio r (capacity / mean usage of the trace)")
    ax.set_ylabel(f"mean wait reduction vs {baseline} (%)")
    ax.set_title(f"{policy} vs {baseline}: users' mean waiting time")
    ax.grid(alpha=0.3)
    ax.legend(title="delta", fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    _save(figure, out)


def completed_ratio_points(results: Results, policy: str, baseline: str, *,
                           delta: float | None, capacity_ratio: float | None
                           ) -> list[dict[str, Any]]:
    """Per user: completed over submitted tasks under the baseline and the policy, for the
    first run of the policy at that delta and load. Completed means by the run's `horizon`
    (the trace's end) when the runs had one, as in the paper; else by the end of the run."""
    pairs = [(spec, outcome, base) for spec, outcome, base in _paired(_ok(results), policy,
                                                                      baseline)
             if (delta is None or _close(spec.get("delta"), delta))
             and (capacity_ratio is None or _close(spec.get("capacity_ratio"), capacity_ratio))]
    if not pairs:
        raise InputError(f"no {policy!r} run at delta={delta} and capacity_ratio="
                         f"{capacity_ratio} with a matching {baseline!r} run")
    _, outcome, base = pairs[0]
    metric = "completed_by_horizon" if "completed_by_horizon" in base.summary else "completed"
    policy_users = {user["user"]: user for user in outcome.users}
    return [{"user": user["user"], "submitted": user["submitted"],
             "baseline": user[metric] / user["submitted"],
             "policy": policy_users[user["user"]][metric] / user["submitted"]}
            for user in base.users if user["submitted"] and user["user"] in policy_users]


def _close(value: float | None, wanted: float) -> bool:
    return value is not None and math.isclose(value, wanted, rel_tol=1e-12, abs_tol=1e-15)


def completed_ratio_bubbles(results: Results, out: str | Path, *, policy: str = "sdrf",
                            baseline: str = "wdrf", delta: float | None = None,
                            capacity_ratio: float | None = None) -> None:
    points = completed_ratio_points(results, policy, baseline, delta=delta,
                                    capacity_ratio=capacity_ratio)
    above = sum(1 for point in points if point["policy"] > point["baseline"])
    below = sum(1 for point in points if point["policy"] < point["baseline"])
    figure = Figure(figsize=(6, 6), dpi=DPI)
    ax = figure.subplots()
    ax.scatter([point["baseline"] for point in points], [point["policy"] for point in points],
               s=[20 * (1 + math.log10(point["submitted"])) ** 2 for point in points],
               alpha=0.5, edgecolors="black", linewidths=0.5)
    ax.plot([0, 1], [0, 1], color="black", linewidth=0.8)
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel(f"completed ratio under {baseline}")
    ax.set_ylabel(f"completed ratio under {policy}")
    where = ", ".join(part for part in (
        f"delta {delta_label(delta)}" if delta is not None else "",
        f"r = {capacity_ratio:g}" if capacity_ratio is not None else "") if part)
    ax.set_title(f"{above} users above y = x, {below} below" + (f" ({where})" if where else ""),
                 fontsize=10)
    ax.grid(alpha=0.3)
    _save(figure, out)


#: Run-wide metrics of the Justice figure: (summary field, axis label, scale to percent).
JUSTICE_METRICS = (("jain_index", "Jain's index (allocation / demand)", 1.0),
                   ("deadlines_met_fraction", "deadlines met (%)", 100.0))


def justice_bars(results: Results, out: str | Path) -> None:
    results = _ok(results)
    rows = aggregate_summaries(results, ("workload", "deadlines", "policy"))
    missing = [name for name, _, _ in JUSTICE_METRICS if not any(name in row for row in rows)]
    if missing:
        raise InputError(f"the runs have no {', '.join(missing)} metric: run the Justice "
                         "sweep with a workload that has deadlines")
    workloads = _distinct(results, "workload")
    deadline_types = _distinct(results, "deadlines")
    policies = _distinct(results, "policy")
    figure = Figure(figsize=(max(6.0, 0.35 * len(deadline_types) * len(policies)) * len(workloads),
                             7), dpi=DPI)
    axes = figure.subplots(len(JUSTICE_METRICS), len(workloads), squeeze=False, sharey="row")
    for column, workload in enumerate(workloads):
        cell = [row for row in rows if row["workload"] == workload]
        for row_index, (name, label, scale) in enumerate(JUSTICE_METRICS):
            ax = axes[row_index][column]
            _grouped_bars(ax, cell, deadline_types, lambda row: row["deadlines"], policies,
                          name, scale)
            ax.set_xticks(range(len(deadline_types)), [str(kind) for kind in deadline_types],
                          fontsize=8)
            if row_index == 0:
                ax.set_title(plot_text(Path(str(workload)).name.split(".")[0]), fontsize=10)
            if column == 0:
                ax.set_ylabel(label)
            ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    _save(figure, out)


#: Run-wide metrics of the allocation figure: (summary field, axis label).
ALLOCATION_METRICS = (("min_dominant_share", "min_i x_i / w_i"),
                      ("sum_dominant_shares", "sum_i x_i"),
                      ("utilization_cpu", "CPU utilization"),
                      ("utilization_memory", "memory utilization"))


def allocation_bars(results: Results, out: str | Path) -> None:
    results = [(spec, outcome) for spec, outcome in _ok(results)
               if "min_dominant_share" in outcome.summary]
    if not results:
        raise InputError("no allocation experiment runs (experiment = \"allocation\") to plot")
    rows = aggregate_summaries(results, ("users", "policy"))
    groups = sorted(dict.fromkeys(row["users"] for row in rows))
    policies = _distinct(results, "policy")
    figure = Figure(figsize=(10, 7), dpi=DPI)
    axes = figure.subplots(2, 2, squeeze=False)
    for ax, (metric, label) in zip((ax for row in axes for ax in row), ALLOCATION_METRICS,
                                   strict=True):
        _grouped_bars(ax, rows, groups, lambda row: row["users"], policies, metric)
        ax.set_xticks(range(len(groups)), [f"{users} users" for users in groups])
        ax.set_ylabel(label)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    _save(figure, out)
