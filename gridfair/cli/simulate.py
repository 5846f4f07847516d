"""`gridfair simulate`: run a policy on a simulated grid and report per-user fairness."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gridfair.cli import cli
from gridfair.cli.output import FORMATS, render_table, to_csv, to_json
from gridfair.policies.registry import policy_names
from gridfair.sim.deadline_metrics import deadline_summary
from gridfair.sim.metrics import SATISFACTION_BASES, run_summary, user_metrics
from gridfair.sim.scenario import build_scenario, run_scenario
from gridfair.sim.workloads import taskcsv  # noqa: F401  (registers the 7-column task lists)

USER_COLUMNS = (
    ("user", "User", ""),
    ("provided_share", "Provided", ".2%"),
    ("satisfaction", "Satisfaction %", ".1f"),
    ("mean_wait", "Mean wait s", ".1f"),
    ("p95_wait", "P95 wait s", ".1f"),
    ("completed", "Completed", "d"),
    ("submitted", "Submitted", "d"),
    ("preempted", "Preempted", "d"),
)


@cli.command()
@click.argument("grid", required=False, type=click.Path(dir_okay=False))
@click.option("--workload", "-w", required=True,
              help="A workload the grid defines (low, medium, high) or a workload file.")
@click.option("--workload-format", default=None, help="Override the format the file name implies.")
@click.option("--policy", "-p", type=click.Choice(policy_names()), default=None,
              help="A named composition of stages.")
@click.option("--order", default=None, help="Order stage (who gets the next free slot).")
@click.option("--preempt", default=None, help="Preemption stage, or 'none'.")
@click.option("--admit", default=None, help="Admission stage, or 'none'.")
@click.option("--checkpoint/--no-checkpoint", default=False,
              help="Vacated tasks keep their work (default: they start over).")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--interval", type=float, default=None,
              help="Negotiate every N simulated seconds (default: on every arrival/completion).")
@click.option("--vacate-delay", type=float, default=0.0, show_default=True,
              help="Seconds a vacated node needs before its new task starts.")
@click.option("--absolute-power-diff", is_flag=True,
              help="HOSEP: compare omega with |PowerDiff| (Eq. 6) instead of PowerDiff (Fig. 2).")
@click.option("--satisfaction-base", type=click.Choice(SATISFACTION_BASES), default="grid",
              show_default=True, help="Def. 5's ideal machine: the grid's mean or the user's own.")
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="table",
              show_default=True)
@click.option("--tasks-out", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write every task with its simulated times (in the workload's own format).")
@click.option("--capacity-ratio", type=float, default=None,
              help="Task list: the pool's capacity per resource is R x the trace's mean total "
                   "usage (default 1).")
@click.option("--equal-shares", is_flag=True,
              help="Task list: equal entitlements (default: each user's mean usage).")
@click.option("--delta", type=float, default=None,
              help="SDRF: commitment discount per second, in (0, 1) (default 1 - 1e-6).")
@click.option("--capacity", type=int, default=None,
              help="SWF trace: the machine's processors (default: the trace's MaxProcs).")
@click.option("--deadlines", default=None,
              help="SWF trace: deadline type (Fixed1x, Fixed2x, Jockey1x2x, Jockey2x4x, "
                   "90loose, Aria1x3x, Aria2x4x), seeded by --seed.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def simulate(grid, workload, workload_format, policy, order, preempt, admit, checkpoint, seed,
             interval, vacate_delay, absolute_power_diff, satisfaction_base, output_format,
             tasks_out, capacity_ratio, equal_shares, delta, capacity, deadlines, quiet) -> None:
    """Simulate GRID under a policy and report per-user satisfaction, waits and preemptions."""
    if policy is None and order is None:
        raise click.UsageError("give --policy NAME, or --order (with --preempt/--admit)")
    policy_options = {"absolute_power_diff": absolute_power_diff, "delta": delta}
    scenario = build_scenario(grid, workload, seed=seed, workload_format_name=workload_format,
                              options={"capacity_ratio": capacity_ratio,
                                       "equal_shares": equal_shares,
                                       "capacity": capacity, "deadlines": deadlines})
    for reason, count in scenario.skipped.items():
        click.echo(f"gridfair: warning: skipped {count}: {reason}", err=True)
    progress = None if quiet or not sys.stderr.isatty() else _progress_bar()
    result, negotiator = run_scenario(
        scenario, policy=policy, order=order, preempt=preempt, admit=admit,
        policy_options=policy_options, checkpointing=checkpoint, interval=interval,
        vacate_delay=vacate_delay, progress=progress,
    )
    if tasks_out:
        scenario.task_writer(result.tasks, Path(tasks_out))
    users = user_metrics(result, satisfaction_base)
    summary = run_summary(result, users)
    deadlines_in_play = any(task.deadline is not None for task in result.tasks)
    deadline_figures = deadline_summary(result) if deadlines_in_play else None
    if output_format == "json":
        click.echo(to_json({
            "policy": negotiator.stages,
            "workload": workload,
            "seed": seed,
            "checkpointing": checkpoint,
            "satisfaction_base": satisfaction_base,
            "users": [user.as_dict() for user in users],
            "summary": _deterministic({
                **summary.as_dict(),
                **(deadline_figures.as_dict() if deadline_figures is not None else {})}),
        }))
    elif output_format == "csv":
        click.echo(to_csv([user.as_dict() for user in users]), nl=False)
    else:
        click.echo(f"{negotiator.stages}  workload={workload}  seed={seed}  "
                   f"checkpointing={'on' if checkpoint else 'off'}  "
                   f"satisfaction base={satisfaction_base}")
        click.echo(render_table(USER_COLUMNS, [user.as_dict() for user in users]))
        click.echo(
            f"makespan {summary.makespan:.0f} s  utilization {summary.utilization:.1%}  "
            f"vacates {summary.vacates}  completed {summary.completed}/{summary.tasks}  "
            f"Jain(satisfaction) {summary.jain_satisfaction:.3f}  "
            f"({summary.events} events, {summary.wall_seconds:.2f} s wall)"
        )
        if deadline_figures is not None:
            click.echo(
                f"deadlines met {deadline_figures.deadlines_met}/{deadline_figures.jobs}  "
                f"missed {deadline_figures.deadlines_missed}  "
                f"dropped {deadline_figures.jobs_dropped}  "
                f"killed {deadline_figures.jobs_killed}  "
                f"Jain(60 s) {deadline_figures.jain_index:.3f}  "
                f"Jain(run) {deadline_figures.jain_index_run:.3f}  "
                f"useful utilization {deadline_figures.useful_utilization:.1%}"
            )


def _deterministic(summary: dict) -> dict:
    """JSON output is byte-for-byte repeatable: wall time goes to stderr-only table output."""
    summary = dict(summary)
    summary.pop("wall_seconds", None)
    return summary


def _progress_bar():
    from rich.progress import Progress

    progress = Progress(transient=True)
    task_id = None

    def update(done: int, total: int) -> None:
        nonlocal task_id
        if task_id is None:
            progress.start()
            task_id = progress.add_task("simulating", total=total)
        progress.update(task_id, completed=done)
        if done >= total:
            progress.stop()

    return update
