"""`gridfair simulate`: run a policy on a simulated grid and report per-user fairness."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import click

from gridfair.cli import nothing_left_to_close
from gridfair.cli.group import cli
from gridfair.cli.output import FORMATS, render_table, to_csv, to_json
from gridfair.cli.progress import tasks_progress
from gridfair.cli.terms import WithTerms
from gridfair.core.pool import Task
from gridfair.core.stages import ALLOCATION_RULES
from gridfair.policies.drf import FORMS
from gridfair.policies.hosep_rule import PREEMPTION_TESTS  # not hosep: its stages
from gridfair.policies.registry import (
    placement_names,
    policy_names,
    unread_options,
)
from gridfair.sim.engine_options import (
    ARRIVALS,
    SAME_INSTANT_ORDERS,
    Arrivals,
    EngineOptions,
    SameInstant,
)
from gridfair.sim.measured import MeasuredRun
from gridfair.sim.metrics import SATISFACTION_BASES
from gridfair.sim.records import RunRecorder, check_conservation, owner_share_violations
from gridfair.sim.scenario import build_scenario
from gridfair.sim.workloads.common import SWF_PROCS, SWF_STATUSES, UNMAPPED
from gridfair.text import shown

USER_COLUMNS = (
    ("user", "User", ""),
    ("provided_share", "Provided", ".2%"),
    ("satisfaction", "Satisfaction %", ".1f"),
    ("mean_wait", "Mean wait s", ".0f"),
    ("p95_wait", "P95 wait s", ".0f"),
    ("completed", "Completed", "d"),
    ("submitted", "Submitted", "d"),
    ("preempted", "Preempted", "d"),
)


#: The policy options simulate takes as flags (`--absolute-power-diff`, ...): those the
#: stages declare so (`core.stages.option(flag=True)`). Named here rather than read off every
#: stage, which would import every policy at start-up; tests/test_startup.py checks they agree.
OPTION_FLAGS = ("form", "delta", "slot_weight", "absolute_power_diff", "hosep_test")


@cli.command(cls=WithTerms, terms=(
    "Provided", "Satisfaction %", "Mean wait s, P95 wait s", "Completed, Submitted, Preempted",
    "makespan", "utilization", "vacates", "Jain(satisfaction)", "PowerDiff", "omega",
    "MFlops"))
@click.argument("grid", required=False, type=click.Path(dir_okay=False))
@click.option("--workload", "-w", default=None,
              help="A workload the grid defines (low, medium, high) or a workload file "
                   "(an HTCondor history: a history file or directory, condor_history "
                   "-long or -json). Without it, --pool replays the pool's own history.")
@click.option("--workload-format", default=None,
              help="Override the format the file's name or content implies "
                   "(e.g. condor-history).")
@click.option("--machines", type=click.Path(dir_okay=False), default=None,
              help="The grid is a pool's slots: a condor_status -long or -json dump, read as "
                   "the daemon reads slots (instead of GRID).")
@click.option("--pool", default=None, metavar="HOST[:PORT]",
              help="A live pool's collector: its slots are the grid (unless --machines), and "
                   "without --workload its schedds' history is the workload.")
@click.option("--since", default=None,
              help="HTCondor history: jobs submitted from then (epoch, ISO date, or 7d ago).")
@click.option("--until", default=None,
              help="HTCondor history: jobs submitted before then (epoch, ISO date, or 1d ago).")
@click.option("--uid-domain", default=None,
              help="HTCondor history: the pool's UID_DOMAIN; its users are named as owners "
                   "(default '*': any domain, a history being the pool's own schedds').")
@click.option("--submitter-map", type=click.Path(dir_okay=False), default=None,
              help="HTCondor history: a file of 'identity owner' lines, as the daemon's.")
@click.option("--trust-accounting-groups", is_flag=True,
              help="HTCondor history: charge jobs to the accounting group they name, as a "
                   "daemon with trust_accounting_groups does (the pool validates groups).")
@click.option("--owner-attr", default=None,
              help="--machines/--pool: the slot attribute naming the owner (GridOwner).")
@click.option("--power-attr", default=None,
              help="--machines/--pool: the slot attribute giving MFlops (default: MFlops, "
                   "else KFlops / 1000, else Mips).")
@click.option("--policy", "-p", type=click.Choice(policy_names()), default=None,
              help="A named composition of stages.")
@click.option("--order", default=None, help="Order stage (who gets the next free slot).")
@click.option("--preempt", default=None, help="Preemption stage, or 'none'.")
@click.option("--admit", default=None, help="Admission stage, or 'none'.")
@click.option("--checkpoint/--no-checkpoint", default=False,
              help="Vacated tasks keep their work (default: they start over).")
@click.option("--allocation", type=click.Choice(ALLOCATION_RULES), default=None,
              help="When the first user's next task fits no free node: stop allocating until "
                   "the next event (SDRF's Algorithm 1) or backfill (skip it and go on). "
                   "Default: stop for task lists, else the order's paper rule (stop for SDRF, "
                   "backfill for the others).")
@click.option("--placement", type=click.Choice(placement_names()), default=None,
              help="Which free node a task starts on: fastest (most MFlops a cpu), condor "
                   "(HTCondor's default pre-job rank: best fit on cpus, then memory), align "
                   "(Tetris), shape (DRFH's best fit), most-allocated or balanced (Kubernetes). "
                   "Default: fastest. docs/placement.md says when to choose which.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--interval", type=float, default=None,
              help="Negotiate every N simulated seconds (default: on every arrival/completion).")
@click.option("--vacate-delay", type=float, default=0.0, show_default=True,
              help="Seconds a vacated node needs before its new task starts.")
@click.option("--claim-worklife", type=float, default=None,
              help="Reuse a finished task's claim for its user's next task, with no "
                   "negotiation, for this many seconds (HTCondor's CLAIM_WORKLIFE, 1200 by "
                   "default in a pool; negative: forever). Default: no reuse.")
@click.option("--arrivals", type=click.Choice(ARRIVALS), default=Arrivals.BATCH.value,
              show_default=True,
              help="batch: negotiate once per instant on all it brought (the daemon's way); "
                   "sequential: reproduce the published simulator (iSPD): arrivals one at a "
                   "time, one decision per negotiation event.")
@click.option("--status-refresh", type=click.FloatRange(min=0, min_open=True), default=None,
              metavar="SECONDS",
              help="Sequential arrivals: iSPD's periodic machine status (its HOSEP: 15): a "
                   "machine given a task is neither free nor a victim until the second status "
                   "refresh after.")
@click.option("--same-instant", type=click.Choice(SAME_INSTANT_ORDERS),
              default=SameInstant.ORDERED.value,
              show_default=True,
              help="Sequential arrivals: the order of events of one instant. ordered: "
                   "completions and chained negotiations, then arrivals in submit order; "
                   "ispd2014: iSPD 2014's event list (a Java binary heap keyed by time alone, "
                   "every hop of a task or message an event).")
@click.option("--groups", "groups_file", type=click.Path(dir_okay=False), default=None,
              help="H-DRF (hdrf): the accounting group tree, the [groups] table of this TOML "
                   "file (a gridfair config or the grid file; docs/groups.md); under OSEP, "
                   "HOSEP and reclaim, a machine owned by a group of it is its users'.")
@click.option("--absolute-power-diff", is_flag=True,
              help="HOSEP: compare omega with |PowerDiff| (Eq. 6) instead of PowerDiff (Fig. 2).")
@click.option("--hosep-test", type=click.Choice(PREEMPTION_TESTS), default=None,
              help="HOSEP's preemption test: Fig. 2's with the Phi guard (fig2, default) or "
                   "iSPD 2014's (victim after >= receiver after, or victim after > 0; among "
                   "equally powerful victims, the first machine).")
@click.option("--slot-weight", default=None, metavar="EXPR",
              help="HTCondor priority (condor): a job's weight in its user's usage, as "
                   "HTCondor's SLOT_WEIGHT (default Cpus), linear in Cpus, Memory and GPUs, "
                   "e.g. 'Cpus + 10 * GPUs'.")
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
@click.option("--form", type=click.Choice(FORMS), default=None,
              help="DRF, weighted DRF and SDRF: the equations as the papers print them "
                   "(paper, default) or as the SDRF authors' simulator computes them (authors: "
                   "per-resource weights and entitlements from the task list, their exact fit "
                   "test and running-sum usage, SDRF's tie-break by the commitment's rate of "
                   "change).")
@click.option("--delta", type=float, default=None,
              help="SDRF: commitment discount per second, in (0, 1) (default 1 - 1e-6).")
@click.option("--capacity", type=int, default=None,
              help="SWF trace: the machine's processors (default: the trace's MaxProcs).")
@click.option("--deadlines", default=None,
              help="SWF trace: deadline type (Fixed1x, Fixed2x, Jockey1x2x, Jockey2x4x, "
                   "90loose, Aria1x3x, Aria2x4x), seeded by --seed.")
@click.option("--user-map", default=None,
              help="Grid workloads: names, busiest, round-robin, or a CSV of user,owner lines "
                   "(default: names for named users, busiest for SWF and Google).")
@click.option("--unmapped", type=click.Choice(UNMAPPED), default=None,
              help="Grid workloads: users mapped to no owner run as themselves (keep, default) "
                   "or are left out (drop).")
@click.option("--compress", type=float, default=None,
              help="SWF on a grid: divide inter-arrival times by this factor.")
@click.option("--reference-power", type=float, default=None,
              help="SWF on a grid: MFlops that turn run time into work (default: the grid's "
                   "mean power per cpu).")
@click.option("--min-run-time", type=float, default=None,
              help="SWF on a grid: skip jobs shorter than this many seconds.")
@click.option("--swf-status", type=click.Choice(SWF_STATUSES), default=None,
              help="SWF on a grid: jobs of any status (default) or completed ones only.")
@click.option("--swf-procs", type=click.Choice(SWF_PROCS), default=None,
              help="SWF on a grid: one single-cpu task per job (default) or its processors.")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Grid workloads: only the first N usable tasks.")
@click.option("--transfer", is_flag=True,
              help="iSPD models: tasks wait for their input to cross the links to the machine.")
@click.option("--google-failed", is_flag=True,
              help="Google shards: keep task runs that end in FAIL as well as FINISH.")
@click.option("--check", is_flag=True,
              help="Check the run's records: conservation, and the OSEP/HOSEP rule after every "
                   "cycle; problems are printed and exit 1.")
@click.option("--db", "db_path", type=click.Path(dir_okay=False), default=None,
              help="Append the run, its per-user results and per-task records to this SQLite "
                   "file.")
@click.option("--quiet", "-q", is_flag=True,
              help="No progress (a bar on a terminal, else a line at each tenth of the tasks, "
              "once a run takes over 2 s).")
def simulate(grid, workload, workload_format, policy, order, preempt, admit, checkpoint,
             allocation, placement, seed, interval, vacate_delay, claim_worklife, arrivals,
             status_refresh, same_instant, satisfaction_base, output_format, tasks_out,
             capacity_ratio, equal_shares, capacity, deadlines, check, db_path, quiet,
             groups_file, **grid_workload_options) -> None:
    """Simulate GRID under a policy and report per-user satisfaction, waits and preemptions.

    GRID is a grid file or an embedded grid's name (`gridfair grid list`)."""
    if policy is None and order is None:
        raise click.UsageError("give --policy NAME, or --order (with --preempt/--admit)")
    if workload is None and grid_workload_options["pool"] is None:
        raise click.UsageError("give --workload, or --pool HOST to replay the pool's history")
    policy_options = {name: grid_workload_options.pop(name) for name in OPTION_FLAGS}
    if groups_file is not None:
        # Only --groups loads the group tree's readers (and the ClassAd layer): not start-up.
        from gridfair.cli.group_tree import groups_section

        policy_options["groups"] = groups_section(Path(groups_file))
    _refuse_unread({name: value for name, value in policy_options.items()
                    if value not in (None, False)}, policy, order, preempt, admit)
    workload_options = {"capacity_ratio": capacity_ratio, **grid_workload_options,
                        "equal_shares": equal_shares, "capacity": capacity,
                        "deadlines": deadlines}
    scenario = build_scenario(grid, workload, seed=seed, workload_format_name=workload_format,
                              strict_options=True,
                              options=workload_options)
    for reason, count in scenario.skipped.items():
        click.echo(f"gridfair: warning: skipped {count}: {shown(reason)}", err=True)
    for note, count in scenario.notes.items():
        click.echo(f"gridfair: note: {count} {shown(note)}", err=True)
    engine = EngineOptions(arrivals=arrivals, interval=interval, vacate_delay=vacate_delay,
                           status_refresh=status_refresh, claim_worklife=claim_worklife,
                           same_instant=same_instant)
    recorder = RunRecorder() if check else None
    # The checks need every task at the end (the run keeps them rather than streaming them).
    run = MeasuredRun(
        scenario, engine=engine, satisfaction_base=satisfaction_base, keep_tasks=check,
        policy=policy, order=order, preempt=preempt, admit=admit,
        policy_options=policy_options, checkpointing=checkpoint,
        progress=tasks_progress(quiet), recorder=recorder, allocation=allocation,
        placement=placement,
    )
    negotiator = run.negotiator
    # Opened before the run: an unwritable file is an error before any work is done.
    task_file = scenario.task_writer(Path(tasks_out)) if tasks_out else None
    run_writer = _run_writer(db_path, description={
        "grid": grid, "workload": workload, "policy": negotiator.stages,
        "allocation": negotiator.allocation, "seed": seed,
        "checkpointing": checkpoint, "interval": interval, "vacate_delay": vacate_delay,
        "claim_worklife": claim_worklife,
        "arrivals": arrivals, "satisfaction_base": satisfaction_base,
        "options": {key: value for key, value in {
            **workload_options, **policy_options, "status_refresh": status_refresh,
            "placement": placement,
            "same_instant": same_instant if same_instant != SameInstant.ORDERED else None}.items()
                    if value not in (None, False)},
    }) if db_path else None
    outputs: list[Callable[[Task], None]] = []
    if task_file is not None:
        outputs.append(task_file.write)
    if run_writer is not None:
        outputs.append(run_writer.add)
    try:
        measures = run.run(outputs)
        if task_file is not None:
            task_file.close()
        result, users, summary = measures.result, measures.users, measures.summary
        if run_writer is not None:
            run_writer.finish(summary, users)
    except BaseException:
        if run_writer is not None:
            run_writer.discard()
        if task_file is not None:
            task_file.discard()
            click.echo(f"gridfair: the run did not finish: {tasks_out} removed (it would hold "
                       "only part of the tasks)", err=True)
        raise
    deadline_figures = measures.deadlines
    if output_format == "json":
        click.echo(to_json({
            "policy": negotiator.stages,
            "allocation": negotiator.allocation,
            # Named only when chosen: outputs recorded before placements stay byte for byte.
            **({"placement": placement} if placement is not None else {}),
            "workload": workload,
            "seed": seed,
            "checkpointing": checkpoint,
            "arrivals": arrivals,
            **({"status_refresh": status_refresh} if status_refresh is not None else {}),
            **({"same_instant": same_instant} if same_instant != SameInstant.ORDERED else {}),
            "satisfaction_base": satisfaction_base,
            "users": [user.as_dict() for user in users],
            "summary": _deterministic({
                **summary.as_dict(),
                **(deadline_figures.as_dict() if deadline_figures is not None else {})}),
        }))
    elif output_format == "csv":
        click.echo(to_csv([user.as_dict() for user in users]), nl=False)
    else:
        click.echo(f"{negotiator.stages}  allocation={negotiator.allocation}  "
                   + (f"placement={placement}  " if placement is not None else "")
                   + f"workload={workload or 'history of pool ' + grid_workload_options['pool']}"
                   f"  seed={seed}  "
                   f"checkpointing={'on' if checkpoint else 'off'}  arrivals={arrivals}  "
                   + (f"status refresh={status_refresh:g} s  " if status_refresh else "")
                   + (f"same instant={same_instant}  "
                      if same_instant != SameInstant.ORDERED else "")
                   + f"satisfaction base={satisfaction_base}")
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
    if recorder is not None:
        problems = run_problems(result, recorder, negotiator)
        for problem in problems:
            click.echo(f"gridfair: check: {shown(problem)}", err=True)
        if problems:
            sys.exit(1)
    if run_writer is None:  # the task file is closed; the store's connection is not
        nothing_left_to_close()


def _refuse_unread(given: dict, policy: str | None, order: str | None, preempt: str | None,
                   admit: str | None) -> None:
    """A policy option no chosen stage reads (`--delta` under HOSEP) is a usage error, as the
    daemon's config refuses it, not an option silently ignored."""
    unread, read = unread_options(policy, order=order, preempt=preempt, admit=admit,
                                  options=given)
    if unread:
        overridden = order or preempt or admit
        chosen = f"policy {policy}" if policy and not overridden else "the chosen stages"
        flags = [f"--{name.replace('_', '-')}" for name in read if name in OPTION_FLAGS]
        reads = f"it reads {', '.join(flags)}" if flags else "it reads none of these options"
        raise click.UsageError(f"--{unread[0].replace('_', '-')}: {chosen} does not read it "
                               f"({reads})")


def _run_writer(db_path: str, description: dict):
    # Imported here: the store pulls sqlite_utils (and numpy, when installed), which a run
    # without --db does not need (issue 27: start-up).
    from gridfair.sim.results_db import RunWriter

    return RunWriter(db_path, description=description)


def run_problems(result, recorder: RunRecorder, negotiator) -> list[str]:
    """What `--check` finds wrong in the run's records (an empty list: nothing)."""
    problems = check_conservation(result, recorder)
    preempt = negotiator.preempt
    if preempt is not None and preempt.owner_share_rule is not None:
        violations = owner_share_violations(recorder, preempt.owner_share_rule,
                                            absolute=preempt.absolute)
        problems += [f"t={v.time:g}: {v.message}" for v in violations[:5]]
        if len(violations) > 5:
            problems.append(f"and {len(violations) - 5} more {preempt.name} rule violations")
    return problems


def _deterministic(summary: dict) -> dict:
    """JSON output is byte-for-byte repeatable: wall time goes to stderr-only table output."""
    summary = dict(summary)
    summary.pop("wall_seconds", None)
    return summary

