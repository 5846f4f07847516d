"""`gridfair shadow`: what a shadow daemon (`gridfair daemon --shadow`) found, gridfair's
decisions against what the pool did (gridfair/daemon/shadow_report.py has the rules)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gridfair.cli.group import cli
from gridfair.cli.output import clock, render_table, to_json
from gridfair.cli.store_option import store_options
from gridfair.cli.terms import WithTerms
from gridfair.text import shown_all

USER_COLUMNS = (("user", "User", ""), ("provided_mflops", "Provided MFlops", ".0f"),
                ("pool_share", "Pool share", ".1%"), ("gridfair_share", "gridfair share", ".1%"))


@cli.command("shadow", cls=WithTerms, terms=("Share error", "Provided", "MFlops"))
@store_options
@click.option("--since", default=None,
              help="From then: epoch, ISO date/time, or N[smhd] before the latest cycle.")
@click.option("--until", default=None, help="Up to then (the same forms).")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, writable=True),
              default=None, help="Also draw shares over time, pool against gridfair "
                                 "(.png or .svg; needs the experiments extra).")
@click.option("--format", "output_format", type=click.Choice(("table", "json")),
              default="table", show_default=True)
def shadow(db_path: Path, since: str | None, until: str | None, plot_path: str | None,
           output_format: str) -> None:
    """Report a shadow daemon's store: share error of the pool as it ran and of gridfair's
    decisions, gridfair's allocations the pool made anyway, the vacates it would have
    issued, and the jobs it would have started sooner or later."""
    from gridfair.daemon.shadow_report import shadow_report

    report = shadow_report(str(db_path), since, until)
    if output_format == "json":
        click.echo(to_json(report.as_dict()))
    else:
        click.echo(report_text(report.as_dict()))
    if plot_path:
        from gridfair.experiments.plots import shadow_shares

        shadow_shares(report.as_dict(), Path(plot_path))


def report_text(report: dict[str, Any]) -> str:
    """The report as the table output prints it (every string escaped, `shown_all`)."""
    report = shown_all(report)
    errors, allocations = report["share_error"], report["allocations"]
    vacates, starts = report["vacates"], report["starts"]
    decided = allocations["decided"]
    lines = [
        f"Shadow report: {report['cycles']} cycles from "
        f"{clock(report['since'], report['sim_start'])} to "
        f"{clock(report['until'], report['sim_start'])}, every {report['interval']:.1f} s; "
        f"policy {report['policy']}",
        f"Share error (power owed to waiting owners over the pool's, mean over cycles): "
        f"pool as it ran {errors['pool']:.3f}, gridfair's decisions {errors['gridfair']:.3f}",
        f"Allocations gridfair decided (distinct job and slot): {decided}"
        + (f" ({allocations['too_recent']} more in the last two cycles, not judged yet)"
           if allocations["too_recent"] else ""),
        f"  made by the pool anyway (same job, same slot, within two cycles): "
        f"{allocations['made_anyway']}{_percent(allocations['made_anyway'], decided)}",
        f"  the job started on another slot within two cycles: {allocations['other_slot']}",
        f"  not started within two cycles: {allocations['not_started']}",
        f"Vacates gridfair would have issued: {vacates['decided']} (the pool vacated "
        f"{vacates['pool_vacated']} of those jobs itself); held back by the safety rules: "
        f"{vacates['held_back']}",
        f"Starts the pool made: {starts['pool_starts']} (of jobs gridfair never saw waiting: "
        f"{starts['unseen']})",
        f"  gridfair would have started sooner: {starts['sooner']} (by "
        f"{starts['sooner_mean_seconds']:.1f} s on average)",
        f"  at about the same time (within two cycles): {starts['same_time']}",
        f"  later: {starts['later']} (not yet chosen by gridfair after "
        f"{starts['later_waited_mean_seconds']:.1f} s waiting on average)",
        "",
        render_table(USER_COLUMNS, report["users"]),
    ]
    return "\n".join(lines)


def _percent(part: int, whole: int) -> str:
    return f" ({part / whole:.1%})" if whole else ""
