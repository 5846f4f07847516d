"""`gridfair grid show GRID`: the machines of a grid, its owners and each owner's share;
`gridfair grid list`: the grids embedded in the package, usable by name wherever a grid file is.
"""

from __future__ import annotations

import math
from typing import Any

import click

from gridfair.cli.group import cli
from gridfair.cli.output import FORMATS, render_table, to_csv, to_json
from gridfair.sim.grid import Grid
from gridfair.sim.grid_loader import embedded_grids, load_grid
from gridfair.sim.workloads.common import describe_skipped

MACHINE_COLUMNS = (
    ("name", "Machine", ""),
    ("owner", "Owner", ""),
    ("mflops", "MFlops", ".0f"),
    ("cpus", "Cpus", "g"),
    ("load", "Load", ".0%"),
)
OWNER_COLUMNS = (
    ("owner", "Owner", ""),
    ("machines", "Machines", "d"),
    ("cpus", "Cpus", "g"),
    ("mflops", "MFlops", ".0f"),
    ("share", "Share of power", ".2%"),
)
EMBEDDED_COLUMNS = (
    ("name", "Name", ""),
    ("machines", "Machines", "d"),
    ("owners", "Owners", "d"),
    ("workloads", "Workloads", ""),
    ("file", "File", ""),
)


def owner_rows(grid: Grid) -> list[dict[str, Any]]:
    """One row per owner (order of first appearance), then `(nobody)` for unowned machines."""
    total = math.fsum(machine.mflops for machine in grid.machines)
    rows: dict[str | None, dict[str, Any]] = {}
    for machine in grid.machines:
        row = rows.setdefault(machine.owner, {"owner": machine.owner or "(nobody)",
                                              "machines": 0, "cpus": 0.0, "mflops": 0.0})
        row["machines"] += 1
        row["cpus"] += machine.cpus
        row["mflops"] += machine.mflops
    ordered = [row for owner, row in rows.items() if owner is not None]
    ordered += [rows[None]] if None in rows else []
    for row in ordered:
        row["share"] = row["mflops"] / total if total else 0.0
    return ordered


def grid_notes(grid: Grid) -> dict[str, Any]:
    """What else the grid file defines: its workloads and, for iSPD models, masters and load."""
    notes: dict[str, Any] = {"workloads": sorted(grid.workloads)}
    model = grid.settings.get("ispd")
    if model is not None:
        notes["masters"] = {name: master.scheduler for name, master in model.masters.items()}
        notes["load"] = model.load_kind
        notes["declared_owners"] = model.declared_owners
        notes["ignored"] = model.ignored
    return notes


@cli.group()
def grid() -> None:
    """Inspect grids: gridfair TOML grids, iSPD .imsx models, and the embedded ones."""


@grid.command(name="list")
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="table",
              show_default=True)
def list_grids(output_format: str) -> None:
    """The grids embedded in gridfair: give NAME wherever a grid file is expected."""
    rows = []
    for name, path in embedded_grids().items():
        loaded = load_grid(path)
        rows.append({"name": name, "machines": len(loaded.machines),
                     "owners": len(loaded.owners()),
                     "workloads": ", ".join(sorted(loaded.workloads)), "file": str(path)})
    if output_format == "json":
        click.echo(to_json(rows))
    elif output_format == "csv":
        click.echo(to_csv(rows), nl=False)
    else:
        click.echo(render_table(EMBEDDED_COLUMNS, rows))


@grid.command()
@click.argument("path", metavar="GRID", type=click.Path(dir_okay=False))
@click.option("--machines/--no-machines", default=True, show_default=True,
              help="List every machine (a model may have hundreds).")
@click.option("--format", "output_format", type=click.Choice(FORMATS), default="table",
              show_default=True)
def show(path: str, machines: bool, output_format: str) -> None:
    """The machines of GRID (a file or an embedded grid's name), its owners and each owner's
    share of the grid's power."""
    loaded = load_grid(path)
    machine_rows = [{"name": m.name, "owner": m.owner, "mflops": m.mflops, "cpus": m.cpus,
                     "load": m.load} for m in loaded.machines]
    owners = owner_rows(loaded)
    notes = grid_notes(loaded)
    if output_format == "json":
        click.echo(to_json({"grid": loaded.name, "source": loaded.source,
                            "machines": machine_rows if machines else None,
                            "owners": owners, **notes}))
        return
    if output_format == "csv":
        click.echo(to_csv(machine_rows if machines else owners), nl=False)
        return
    total_cpus = sum(m.cpus for m in loaded.machines)
    total_power = math.fsum(m.mflops for m in loaded.machines)
    click.echo(f"{loaded.name}: {len(loaded.machines)} machines, {total_cpus:g} cpus, "
               f"{total_power:.0f} MFlops ({loaded.source})")
    if machines:
        click.echo(render_table(MACHINE_COLUMNS, machine_rows))
        click.echo("")
    click.echo(render_table(OWNER_COLUMNS, owners))
    if notes["workloads"]:
        click.echo(f"workloads: {', '.join(notes['workloads'])}")
    if "masters" in notes:
        masters = ", ".join(f"{name} ({scheduler})"
                            for name, scheduler in notes["masters"].items())
        click.echo(f"masters (schedule, run nothing): {masters or 'none'}")
        if notes["ignored"]:
            click.echo(f"ignored: {describe_skipped(notes['ignored'])}")
