"""`gridfair compare`: the same grid and workloads under several policies, side by side."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from gridfair.cli.group import cli
from gridfair.cli.output import FORMATS, render_table, to_csv, to_json
from gridfair.cli.progress import runs_progress
from gridfair.cli.terms import WithTerms
from gridfair.errors import InputError
from gridfair.experiments.compare import (
    Results,
    Spread,
    aggregate_summaries,
    aggregate_users,
    check_one_allocation_rule,
    comparison_specs,
    parse_seeds,
)
from gridfair.experiments.runner import run_in_process
from gridfair.experiments.runs import RECORDED, RunOutcome, RunSpec
from gridfair.sim.metrics import SATISFACTION_BASES

SPREAD_NOTE = "mean ± sample standard deviation (n - 1) over seeds"

# (metric, heading, format) of the per-user and the run-wide tables.
USER_COLUMNS = (
    ("satisfaction", "Satisfaction %", ".1f"),
    ("mean_wait", "Mean wait s", ".0f"),
    ("p95_wait", "P95 wait s", ".0f"),
    ("completed", "Completed", ".1f"),
    ("preempted", "Preempted", ".1f"),
)
SUMMARY_COLUMNS = (
    ("makespan", "Makespan s", ".0f"),
    ("utilization", "Utilization", ".1%"),
    ("vacates", "Vacates", ".1f"),
    ("jain_satisfaction", "Jain(sat)", ".3f"),
    ("mean_wait", "Mean wait s", ".0f"),
    ("completed", "Completed", ".1f"),
    ("share_error", "Share error", ".3f"),
)


def parse_param(text: str) -> tuple[str, Any]:
    """NAME=VALUE, VALUE read as a TOML value (0.9, true, "x"), or else as a bare string;
    the name and the value are checked with the run's other parameters."""
    name, equals, raw = text.partition("=")
    name = name.strip().replace("-", "_")
    if not equals or not name:
        raise InputError(f"--param wants NAME=VALUE, got {text!r}")
    try:
        value = tomllib.loads(f"value = {raw}")["value"]
    except tomllib.TOMLDecodeError:
        value = raw
    return name, value


@cli.command(cls=WithTerms, terms=(
    "Provided", "Satisfaction %", "Mean wait s, P95 wait s", "Completed, Submitted, Preempted",
    "makespan", "utilization", "vacates", "Jain(satisfaction)", "Share error", "MFlops"))
@click.argument("grid", required=False, type=click.Path(dir_okay=False))
@click.option("--policies", "-p", required=True,
              help="Comma-separated policy names, e.g. osep,hosep.")
@click.option("--workload", "-w", "workloads", required=True, multiple=True,
              help="A workload the grid defines, or a workload file (repeatable).")
@click.option("--seeds", default="1", show_default=True, help="Seeds: N, N-M or a comma list.")
@click.option("--checkpoint/--no-checkpoint", default=False,
              help="Vacated tasks keep their work (default: they start over).")
@click.option("--satisfaction-base", type=click.Choice(SATISFACTION_BASES), default="grid",
              show_default=True, help="Def. 5's ideal machine: the grid's mean or the user's own.")
@click.option("--machines", type=click.Path(dir_okay=False), default=None,
              help="The grid is a pool's slots: a condor_status -long or -json dump.")
@click.option("--pool", default=None, metavar="HOST[:PORT]",
              help="A live pool's collector: its slots are the grid unless --machines.")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE",
              help="Any other run parameter (delta=0.999999, capacity_ratio=0.8, ...).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, writable=True),
              default=None, help="Also draw per-user satisfaction bars (.png or .svg).")
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="table",
              show_default=True)
@click.option("--quiet", "-q", is_flag=True,
              help="No progress (a bar on a terminal, else a line per finished run).")
def compare(grid, policies, workloads, seeds, checkpoint, satisfaction_base, machines, pool,
            params, plot_path, output_format, quiet) -> None:
    """Run GRID's workloads under each policy and seed; report the metrics side by side.

    GRID is a grid file or an embedded grid's name (`gridfair grid list`). A pool's HTCondor
    history (with --machines or --pool for its slots) is also reported as it happened, in
    the row `as-it-happened`, beside the policies replayed on it."""
    policy_list = [name.strip() for name in policies.split(",") if name.strip()]
    extra = dict(parse_param(text) for text in params)
    extra.update(checkpointing=checkpoint, satisfaction_base=satisfaction_base)
    extra.update({name: value for name, value in (("machines", machines), ("pool", pool))
                  if value is not None})
    if RECORDED not in policy_list and any(
            _is_history(workload, extra.get("workload_format")) for workload in workloads):
        policy_list.insert(0, RECORDED)
    seed_list = parse_seeds(seeds)
    specs = comparison_specs(grid, policy_list, list(workloads), seed_list, extra)
    results: list[tuple[RunSpec, RunOutcome]] = []
    with runs_progress("compare", len(specs), quiet) as advance:

        def record(spec: RunSpec, outcome: RunOutcome) -> None:
            results.append((spec, outcome))
            advance(spec.describe(), outcome.ok)

        run_in_process(specs, record)
    failed = [(spec, outcome) for spec, outcome in results if not outcome.ok]
    if failed:
        spec, outcome = failed[0]
        raise InputError(f"{len(failed)} of {len(results)} runs failed; first: "
                         f"{spec.describe()}: {outcome.error.strip().splitlines()[-1]}")
    check_one_allocation_rule(results)
    header = {"grid": grid, "policies": policy_list, "workloads": list(workloads),
              "seeds": seed_list, "checkpointing": checkpoint,
              "satisfaction_base": satisfaction_base, "params": extra,
              "allocation": ",".join(sorted({outcome.allocation for _, outcome in results})),
              "spread": SPREAD_NOTE}
    if output_format == "json":
        click.echo(to_json({**header, "results": _by_workload(results)}))
    elif output_format == "csv":
        click.echo(to_csv(_long_rows(results)), nl=False)
    else:
        click.echo(_tables(header, results, seeds))
    if plot_path:
        from gridfair.experiments.plots import history_panels, satisfaction_bars

        if any(outcome.series for _, outcome in results):
            history_panels(results, Path(plot_path))
        else:
            satisfaction_bars(results, Path(plot_path))


def _grid_label(header: Mapping[str, Any]) -> str:
    """The grid as given: its name or file, else where its slots were read."""
    params = header["params"]
    if header["grid"]:
        return str(header["grid"])
    if params.get("machines"):
        return f"slots of {params['machines']}"
    return f"slots of pool {params['pool']}" if params.get("pool") else "none"


def _is_history(workload: str, format_name: str | None) -> bool:
    """Whether `workload` is a file of a recorded workload (an HTCondor job history)."""
    from gridfair.sim.scenario import workload_format
    from gridfair.sim.workloads.condor_history import FORMAT

    path = Path(workload)
    if not path.exists():
        return False
    try:
        return workload_format(path, format_name) == FORMAT
    except InputError:
        return False


def _plain(row: Mapping[str, Any]) -> dict[str, Any]:
    return {name: value.as_dict() if isinstance(value, Spread) else value
            for name, value in row.items()}


def _by_workload(results: Results) -> list[dict[str, Any]]:
    users = aggregate_users(results, ("workload", "policy"))
    summaries = aggregate_summaries(results, ("workload", "policy"))
    return [{"workload": workload,
             "users": [_plain(row) for row in _user_order(users, workload)],
             "summary": [_plain(row) for row in summaries if row["workload"] == workload]}
            for workload in dict.fromkeys(row["workload"] for row in summaries)]


def _user_order(rows: Sequence[Mapping[str, Any]], workload: str) -> list[Mapping[str, Any]]:
    """A workload's user rows, grouped by user (policies side by side), users in order."""
    rows = [row for row in rows if row["workload"] == workload]
    place = {user: index for index, user in enumerate(dict.fromkeys(row["user"] for row in rows))}
    return sorted(rows, key=lambda row: place[row["user"]])


def _long_rows(results: Results) -> list[dict[str, Any]]:
    """One CSV row per workload, policy, user (empty for run-wide metrics) and metric."""
    out = []
    for block in _by_workload(results):
        for row in block["users"] + block["summary"]:
            for name, value in row.items():
                if isinstance(value, dict):
                    out.append({"workload": block["workload"], "policy": row["policy"],
                                "user": row.get("user", ""), "metric": name, **value})
    return out


def _spread_cell(value: Spread | None, spec: str) -> str | None:
    if value is None or value.n == 0:
        return None
    return f"{format(value.mean, spec)} ± {format(value.std, spec)}"


def _tables(header: Mapping[str, Any], results: Results, seeds_text: str) -> str:
    users = aggregate_users(results, ("workload", "policy"))
    summaries = aggregate_summaries(results, ("workload", "policy"))
    lines = [f"compare  grid={_grid_label(header)}  seeds={seeds_text} "
             f"({len(header['seeds'])} per cell)  "
             f"checkpointing={'on' if header['checkpointing'] else 'off'}  "
             f"satisfaction base={header['satisfaction_base']}",
             f"figures: {SPREAD_NOTE}"]
    # Cells are pre-formatted "mean ± std" strings; the ">" spec right-aligns them as numbers.
    user_columns = [("user", "User", ""), ("policy", "Policy", ""),
                    ("provided_share", "Provided", ".2%")]
    user_columns += [(name, heading, ">") for name, heading, _ in USER_COLUMNS]
    summary_columns = [("policy", "Policy", "")]
    summary_columns += [(name, heading, ">") for name, heading, _ in SUMMARY_COLUMNS
                        if any(row.get(name) is not None for row in summaries)]
    for workload in dict.fromkeys(row["workload"] for row in summaries):
        user_rows = [{"user": row["user"], "policy": row["policy"],
                      "provided_share": row["provided_share"],
                      **{name: _spread_cell(row.get(name), spec)
                         for name, _, spec in USER_COLUMNS}}
                     for row in _user_order(users, workload)]
        summary_rows = [{"policy": row["policy"],
                         **{name: _spread_cell(row.get(name), spec)
                            for name, _, spec in SUMMARY_COLUMNS}}
                        for row in summaries if row["workload"] == workload]
        lines += ["", f"workload {workload}", render_table(user_columns, user_rows), "",
                  render_table(summary_columns, summary_rows)]
    return "\n".join(lines)
