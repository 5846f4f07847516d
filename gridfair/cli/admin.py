"""Admin commands over the daemon's store: `explain`, `history`, `actions`. They open the
store read-only and are safe while the daemon runs. `--format table|json|csv` everywhere.

Times are UTC wall time, said so, or `t+N s` of a simulation (the `sim` backend), never a
simulated time shown as a wall clock (`gridfair.cli.output.clock`). A table of cycles is
followed by what went wrong in them: cycles that failed, ads skipped and warnings about ads.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from gridfair.cli.group import cli
from gridfair.cli.group_reports import GROUP_HISTORY_COLUMNS, group_text
from gridfair.cli.output import FIGURE, FORMATS, clock, format_cell, render_table, to_csv, to_json
from gridfair.cli.store_option import store_options
from gridfair.cli.terms import WithTerms
from gridfair.daemon import reports
from gridfair.daemon.store import ACTION_STATES, open_readonly
from gridfair.errors import GridfairError
from gridfair.text import shown_all


def format_option(function):
    return click.option("--format", "output_format", type=click.Choice(FORMATS),
                        default="table", show_default=True)(function)


def emit(rows: Sequence[Mapping[str, Any]], columns: Sequence[tuple[str, str, str]],
         output_format: str, *, empty: str, notes: Sequence[str] = ()) -> None:
    """The rows as a table (then `notes`, what went wrong in their cycles), JSON or CSV."""
    if output_format == "json":
        click.echo(to_json(list(rows)))
    elif output_format == "csv":
        click.echo(to_csv(rows), nl=False)
    else:
        click.echo(render_table(columns, rows) if rows else empty)
        if notes:
            click.echo("\nWhat went wrong in these cycles:\n"
                       + "\n".join(f"  {note}" for note in shown_all(notes)))


def cycle_actions_text(db_path: Path, cycle: int) -> str:
    """The actions one cycle planned, those planned earlier whose state it changed, and the
    preemptions its safety rules held back with the rule, as lines (for `gridfair daemon
    --show`)."""
    db = open_readonly(db_path)
    rows = reports.actions(db, None, None)
    planned = [row for row in rows if row["planned_cycle"] == cycle]
    changed = [row for row in rows if row["cycle"] == cycle and row["planned_cycle"] != cycle]
    lines = [f"Actions of cycle {cycle}:" if planned else f"Actions of cycle {cycle}: none"]
    lines += _action_lines(planned)
    if changed:
        lines.append(f"Actions of earlier cycles that changed state ({len(changed)}):")
        lines += _action_lines(changed)
    held = shown_all(reports.held_back(db, cycle))
    if held:
        lines.append(f"Held back by the safety rules ({len(held)}):")
        lines += [f"  {line}" for line in held]
    return "\n".join(lines)


def _action_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = shown_all(rows)
    return [f"  {row['kind']} {row['job']} ({row['user']}) on {row['machine']}: "
            f"{row['state']}" + (f" (planned in cycle {row['planned_cycle']})"
                                 if row["planned_cycle"] != row["cycle"] else "")
            + (f" - {row['error']}" if row["error"] else "") for row in rows]


# --------------------------------------------------------------------- explain
@cli.command(cls=WithTerms, terms=("PowerDiff", "omega", "Dominant share", "MFlops"))
@click.argument("name")
@store_options
@click.option("--last", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many recent decisions, events and actions to show.")
@format_option
def explain(name: str, db_path: Path, last: int, output_format: str) -> None:
    """Why USER is where it is, or what happened to JOB (cluster.proc), and why; or where
    accounting GROUP stands (under the hdrf order with a tree).

    USER as the store names it (`User1`, `user3@example.org`), or as a user types it: the
    part before `@`, in any case, when it names one user alone."""
    db = open_readonly(db_path)
    report = reports.explain(db, resolve_name(db, name), last)
    if output_format == "json":
        click.echo(to_json(report))
    elif output_format == "csv":
        click.echo(to_csv([{k: v for k, v in d.items() if k != "figures"}
                           for d in report["decisions"]]), nl=False)
    elif "user" in report:
        click.echo(_user_text(shown_all(report)))
    elif "group" in report:
        click.echo(group_text(shown_all(report), _decision_lines))
    else:
        waiting = why_waiting(db, report, last) if _idle(report) else []
        click.echo(_job_text(shown_all(report), shown_all(waiting)))


def resolve_name(db: Any, name: str) -> str:
    """`name` as the store has it: itself if it names a user or job there; else the one user
    whose name, or whose name before `@`, it is in any case (`user3` for
    `user3@example.org`). Else a ReportError with the closest names, if any."""
    users = [row[0] for row in db.execute("select name from users union select distinct user "
                                          "from usage")]
    if name in users or "." in name and name.replace(".", "", 1).isdigit() \
            or reports.is_group(db, name):
        return name
    typed = name.casefold()
    matches = [user for user in users
               if typed in (user.casefold(), user.partition("@")[0].casefold())]
    if len(matches) == 1:
        return matches[0]
    close = matches or difflib.get_close_matches(name, users, n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else (
        f"; the store knows {len(users)} user(s): `gridfair shares` lists them" if users
        else "")
    raise reports.ReportError(f"no user or job named {name!r} in the store{hint}")


def _decision_lines(decisions: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = []
    for d in decisions:
        outcome = f" [{d['action_state']}]" if d["action_state"] else (
            " [not carried out]" if d["kind"] in ("vacate", "allocate") else "")
        lines.append(f"  cycle {d['cycle']} ({clock(d['time'], d['sim_start'])}): "
                     f"{d['kind']} {d['job']}"
                     f"{' on ' + d['machine'] if d['machine'] else ''}{outcome}")
        lines.append(f"    {d['policy']}: {d['reason']}")
    return lines or ["  none recorded"]


def _user_text(report: Mapping[str, Any]) -> str:
    shares = report["shares"]
    lines = [f"{report['user']} as of cycle {report['cycle']} "
             f"({clock(report['time'], report['sim_start'])}, "
             f"{report['policy']}):"]
    if shares is None:
        lines.append("  not in the pool at the latest cycle")
        last_seen = report["last_seen"]
        if last_seen is not None:
            lines.append(f"  last in the pool at cycle {last_seen['cycle']} "
                         f"({clock(last_seen['time'], last_seen['sim_start'])})")
        if report["record_pruned"]:
            lines.append("  its user record is pruned (not seen for retention.users days); "
                         "`gridfair history --user` shows its usage samples")
    else:
        lines += [
            f"  position {report['position']} of {report['users']} in the order the policy "
            "serves users",
            f"  provides {format_cell(shares['provided_mflops'], '.0f')} MFlops "
            f"({shares['nodes_provided']} slots), uses "
            f"{format_cell(shares['allocated_mflops'], '.0f')} MFlops "
            f"({shares['nodes_used']} slots): PowerDiff "
            f"{format_cell(shares['power_diff'], '+.3f')}, dominant share "
            f"{format_cell(shares['dominant_share'], '.3f')}",
            f"  jobs: {shares['running']} running, {shares['idle']} idle"
            + (f" ({shares['in_flight']} of them allocated, in flight)"
               if shares.get("in_flight") else ""),
        ]
        figures = report["policy_figures"] or {}
        if figures:
            lines.append("  policy figures: " + ", ".join(
                f"{key} {format_cell(value, FIGURE) if isinstance(value, float) else value}"
                for key, value in figures.items()))
    if report["charged_as"]:
        lines.append("  charged for the jobs of: " + "; ".join(
            f"{charge['identity']} ({charge['rule']})" for charge in report["charged_as"]))
    if report["last_preempted"] is not None:
        lines.append("  last preempted at "
                     f"{clock(report['last_preempted'], report['sim_start'])}")
    if report["backoff"]:
        lines.append(f"  landing backoff: {report['backoff']}")
    if report["held_back"]:
        lines.append("Preemptions involving it that safety rules held back:")
        lines += [f"  cycle {h['cycle']}: {h['rule']}" for h in report["held_back"]]
    lines.append("Recent decisions about it:")
    lines += _decision_lines(report["decisions"])
    return "\n".join(lines)


def _idle(report: Mapping[str, Any]) -> bool:
    return bool(report["now"]) and report["now"]["status"] == "idle"


def why_waiting(db: Any, report: Mapping[str, Any], last: int) -> list[str]:
    """Why an idle job waits, from the store: an allocation of it in flight, the vacates the
    safety rules held back that would have made room for it, and where its user stands in
    the order the policy serves users."""
    job, user = report["job"], report["now"]["user"]
    lines = [f"  allocated to {action['machine']}: {action['state']}, HTCondor starts it "
             "there at its next negotiation (or the allocation is withdrawn after "
             "safety.landing_timeout)"
             for action in report["actions"] or []
             if action["kind"] == "allocate" and action["state"] in ("planned", "issued",
                                                                      "confirmed")]
    lines += [f"  cycle {held['cycle']}: a vacate of {held['victim']} ({held['victim_user']}) "
              f"on {held['machine']} to make room for it was held back: {held['rule']}"
              + _lifted(held) for held in reports.held_back_for(db, job, last)]
    if not lines:
        lines.append("  no allocation and no held-back vacate for it in the recent cycles: no "
                     "free slot its request fits, and no vacate the policy would make for it")
    try:
        standing = reports.explain(db, user, 1)
    except reports.ReportError:  # its user not recorded (yet)
        return lines
    if standing.get("shares"):
        shares = standing["shares"]
        lines.append(f"  its user {user} is position {standing['position']} of "
                     f"{standing['users']} in the order {standing['policy']} serves users "
                     f"(PowerDiff {format_cell(shares['power_diff'], '+.3f')}; "
                     f"{shares['running']} running, {shares['idle']} idle)")
    return lines


#: A time-bound safety rule's words (`gridfair.daemon.safety`): how long it has held, and for
#: how long it holds.
TIME_BOUND = re.compile(r"(?:has run|was preempted) (\d+) s(?: ago)? \((?:minimum|cool-down) "
                        r"(\d+) s\)")


def _lifted(held: Mapping[str, Any]) -> str:
    """When a held-back vacate's rule stops holding: a time for a time-bound rule (minimum
    run, cool-down), the next cycle for the per-cycle limit."""
    bound = TIME_BOUND.search(held["rule"])
    if bound is not None:
        until = held["now"] + int(bound.group(2)) - int(bound.group(1))
        return f" (lifted at {clock(until, held['sim_start'])})"
    if held["rule"].startswith("max_vacates_per_cycle"):
        return " (lifted the next cycle)"
    return ""


def _job_text(report: Mapping[str, Any], waiting: Sequence[str] = ()) -> str:
    now = report["now"]
    lines = [f"job {report['job']}: " + (
        f"{now['status']} ({now['user']})"
        + (f" on {now['machine']}" if now["machine"] else "")
        + f" since {clock(now['since'], now['sim_start'])}" if now
        else "no longer in the pool")]
    charge = report["charge"]
    if charge is not None:
        lines.append(f"Charged to {charge['owner']} as {charge['identity']}: {charge['rule']}")
    lines.append("Seen by the daemon:")
    lines += [f"  cycle {e['cycle']} ({clock(e['time'], e['sim_start'])}): {e['event']}"
              + (f" on {e['machine']}" if e["machine"] else "") for e in report["events"]]
    lines.append("Decisions:")
    lines += _decision_lines(report["decisions"])
    lines.append("Actions:")
    for action in report["actions"] or []:
        lines.append(f"  {action['kind']} on {action['machine']}: {action['state']} "
                     f"after {action['attempts']} attempt(s)"
                     + (f" - {action['error']}" if action["error"] else ""))
        lines += [f"    cycle {entry['cycle']}: {entry['state']}"
                  + (f" ({entry['note']})" if entry["note"] else "") for entry in action["log"]]
    if not report["actions"]:
        lines.append("  none")
    if report["backoff"]:
        lines.append(f"Landing backoff: {report['backoff']}")
    if waiting:
        lines.append("Why it waits:")
        lines += waiting
    return "\n".join(lines)


# --------------------------------------------------------------------- history
HISTORY_COLUMNS = (
    ("cycle", "Cycle", "d"), ("when", "Time", ""), ("user", "User", ""),
    ("provided_mflops", "Provided MFlops", ".0f"), ("allocated_mflops", "Allocated MFlops",
                                                    ".0f"),
    ("power_diff", "PowerDiff", "+.3f"), ("dominant_share", "Dominant share", ".3f"),
    ("running", "Running", "d"), ("idle", "Idle", "d"), ("in_flight", "In Flight", "d"),
)


@cli.command(cls=WithTerms, terms=("Provided", "Allocated", "PowerDiff", "Dominant share",
                                   "MFlops"))
@store_options
@click.option("--user", default=None, help="Only this user.")
@click.option("--group", default=None, help="An accounting group's shares instead (under the "
              "hdrf order with a tree).")
@click.option("--since", default=None, help="Epoch seconds, ISO time (UTC), or 2h / 30m / 1d "
              "before the latest cycle.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path),
              default=None, help="Also draw PowerDiff over time to this PNG (needs matplotlib).")
@format_option
def history(db_path: Path, user: str | None, group: str | None, since: str | None,
            plot_path: Path | None, output_format: str) -> None:
    """Per-user usage and shares over the daemon's cycles."""
    db = open_readonly(db_path)
    if group is not None:
        if user is not None or plot_path is not None:
            raise click.UsageError("--group shows a group's shares: give no --user or --plot")
        rows = reports.group_history(db, group, since)
        for row in rows:
            row["when"] = clock(row["time"], row["sim_start"])
        emit(rows, GROUP_HISTORY_COLUMNS, output_format, empty="no cycle recorded the group "
             "in that range", notes=_notes(db, [row["cycle"] for row in rows]))
        return
    rows = reports.history(db, user, since)
    for row in rows:
        row["when"] = clock(row["time"], row["sim_start"])
    if plot_path is not None:
        plot_history(rows, plot_path)
    emit(rows, HISTORY_COLUMNS, output_format, empty="no usage recorded in that range",
         notes=_notes(db, [row["cycle"] for row in rows]))


def _notes(db: Any, cycles: Sequence[int | None]) -> list[str]:
    """What went wrong from the first of `cycles` (the rows shown) to the latest cycle:
    with no row, in every cycle."""
    return reports.cycle_notes(db, min(filter(None, cycles), default=None))


def plot_history(rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    """PowerDiff per user over time. matplotlib comes with the `experiments` extra; without
    it the command says so (`gridfair.cli.group`)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    from gridfair.experiments.plots import plot_text

    figure, axes = pyplot.subplots(figsize=(8, 4))
    start = min((row["time"] for row in rows), default=0.0)
    first = min(rows, key=lambda row: row["time"]) if rows else {"sim_start": None}
    for user in dict.fromkeys(row["user"] for row in rows):
        points = [(row["time"] - start, row["power_diff"]) for row in rows
                  if row["user"] == user and row["power_diff"] not in (None, float("inf"))]
        axes.plot([t for t, _ in points], [p for _, p in points], label=plot_text(user))
    axes.axhline(0.0, color="grey", linewidth=0.5)
    axes.set_xlabel(f"seconds after {clock(start, first['sim_start'])}")
    axes.set_ylabel("PowerDiff")
    axes.legend(loc="best", fontsize="small")
    try:
        figure.savefig(path)
    except OSError as error:
        raise GridfairError(f"--plot {path}: {error.strerror}") from None
    finally:
        pyplot.close(figure)


# --------------------------------------------------------------------- actions
#: The cycle that planned an action and the cycle of its last change of state are apart: an
#: action planned in cycle 3 may be confirmed in 3 and found landed in 5.
ACTION_COLUMNS = (
    ("planned_cycle", "Planned in cycle", "d"), ("when", "Planned at", ""),
    ("cycle", "State since cycle", "d"), ("kind", "Kind", ""), ("job", "Job", ""),
    ("user", "User", ""), ("machine", "Slot", ""), ("state", "State", ""),
    ("attempts", "Tries", "d"), ("error", "Why not", ""),
)


@cli.command()
@store_options
@click.option("--since", default=None, help="Epoch seconds, ISO time (UTC), or 2h / 30m / 1d "
              "before the latest cycle.")
@click.option("--state", type=click.Choice(ACTION_STATES), default=None,
              help="Only actions in this state.")
@format_option
def actions(db_path: Path, since: str | None, state: str | None, output_format: str) -> None:
    """The daemon's action journal: what it planned, issued, confirmed, failed, abandoned."""
    db = open_readonly(db_path)
    rows = reports.actions(db, since, state)
    for row in rows:
        row["when"] = clock(row["planned_at"], row["sim_start"])
    emit(rows, ACTION_COLUMNS, output_format, empty="no actions in that range",
         notes=_notes(db, [cycle for row in rows for cycle in (row["planned_cycle"],
                                                                row["cycle"])]))
