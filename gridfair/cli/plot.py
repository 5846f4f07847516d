"""`gridfair plot`: draw one of the papers' figures from a sweep's results DB."""

from __future__ import annotations

import click

from gridfair.cli.group import cli

PLOT_KINDS = ("satisfaction", "wait-reduction", "completed-ratio", "justice", "allocation")


@cli.command()
@click.argument("db_path", metavar="DB", type=click.Path(dir_okay=False))
@click.option("--kind", "-k", type=click.Choice(PLOT_KINDS), required=True,
              help="satisfaction (HOSEP Fig. 4), wait-reduction (SDRF Fig. 4), "
                   "completed-ratio (SDRF Fig. 5), justice (Jain index, deadlines met), "
                   "allocation (DMFA-SRQ Figs. 5-8).")
@click.option("--out", "-o", required=True, type=click.Path(dir_okay=False, writable=True),
              help="Output file, .png or .svg.")
@click.option("--policy", default="sdrf", show_default=True,
              help="wait-reduction, completed-ratio: the policy compared.")
@click.option("--baseline", default="wdrf", show_default=True,
              help="wait-reduction, completed-ratio: what it is compared with.")
@click.option("--delta", type=float, default=None,
              help="completed-ratio: the policy's delta (default: the first in the DB).")
@click.option("--capacity-ratio", type=float, default=None,
              help="completed-ratio: the load (default: the first in the DB).")
def plot(db_path, kind, out, policy, baseline, delta, capacity_ratio) -> None:
    """Draw a figure of KIND from the results DB of a sweep."""
    from gridfair.experiments import plots
    from gridfair.experiments.store import ResultsStore

    with ResultsStore(db_path, create=False) as store:
        results = store.results()
    if kind == "satisfaction":
        plots.satisfaction_bars(results, out)
    elif kind == "wait-reduction":
        plots.wait_reduction_lines(results, out, policy=policy, baseline=baseline)
    elif kind == "completed-ratio":
        plots.completed_ratio_bubbles(results, out, policy=policy, baseline=baseline,
                                      delta=delta, capacity_ratio=capacity_ratio)
    elif kind == "justice":
        plots.justice_bars(results, out)
    else:
        plots.allocation_bars(results, out)
    click.echo(f"wrote {out}")
