"""`gridfair sweep`: a grid of run parameters, run on Dask, stored in SQLite as runs finish."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gridfair.cli.group import cli
from gridfair.cli.progress import runs_progress
from gridfair.errors import InputError
from gridfair.experiments.compare import check_one_allocation_rule
from gridfair.experiments.runner import (
    DEFAULT_CONNECT_TIMEOUT,
    dask_client,
    run_in_process,
    run_on_dask,
)
from gridfair.experiments.runs import RunOutcome, RunSpec
from gridfair.experiments.spec import load_sweep
from gridfair.experiments.store import ResultsStore


@cli.command()
@click.argument("spec_file", metavar="SPEC.toml", type=click.Path(dir_okay=False))
@click.option("--workers", type=int, default=None,
              help="Worker processes of the local Dask cluster (default: one per core).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="A running Dask scheduler (tcp://host:8786) to run on instead.")
@click.option("--in-process", is_flag=True,
              help="Run one after another in this process, without Dask.")
@click.option("--connect-timeout", type=float, default=DEFAULT_CONNECT_TIMEOUT,
              show_default=True, help="Seconds to wait for --scheduler before giving up.")
@click.option("--db", "db_path", type=click.Path(dir_okay=False), default=None,
              help="Results DB (default: the sweep file's name with .db, here).")
@click.option("--resume", is_flag=True,
              help="Continue a sweep in an existing DB: finished runs are not run again.")
@click.option("--quiet", "-q", is_flag=True,
              help="No progress (a bar on a terminal, else a line per finished run).")
def sweep(spec_file, workers, scheduler, in_process, connect_timeout, db_path, resume,
          quiet) -> None:
    """Run every combination of SPEC.toml's parameters and store each run's metrics.

    Exit status 1 when some runs failed (each is stored with its error; --resume tries them
    again), 2 on bad input.
    """
    if sum(option is not None and option is not False
           for option in (workers, scheduler, in_process)) > 1:
        raise click.UsageError("give at most one of --workers, --scheduler, --in-process")
    plan = load_sweep(spec_file)
    db_path = Path(db_path or Path(spec_file).with_suffix(".db").name)
    with ResultsStore(db_path) as store:
        stored = store.count()
        if stored and not resume:
            raise InputError(f"the results DB already holds {stored} runs: pass --resume to "
                             "continue that sweep, or give another --db", source=str(db_path))
        # Positions come from the sweep file, so results read back in its order however the
        # runs finished; failed runs are tried again on resume.
        positions = {spec.key: position for position, spec in enumerate(plan.runs)}
        done = store.done_keys()
        todo = [spec for spec in plan.runs if spec.key not in done]
        skipped = len(plan.runs) - len(todo)
        failures = 0
        with runs_progress("sweep", len(todo), quiet) as advance:

            def record(spec: RunSpec, outcome: RunOutcome) -> None:
                nonlocal failures
                store.record(positions[spec.key], spec, outcome)
                failures += not outcome.ok
                advance(spec.describe(), outcome.ok)

            if in_process:
                run_in_process(todo, record)
            elif todo:
                with dask_client(workers=workers, scheduler=scheduler,
                                 connect_timeout=connect_timeout) as client:
                    run_on_dask(client, todo, record)
        click.echo(f"sweep {plan.name}: {len(plan.runs)} runs, {len(todo) - failures} done now, "
                   f"{skipped} already done, {failures} failed; results in {db_path}")
        failed = store.failures()
        check_one_allocation_rule(store.results())
        for spec, error in failed[:5]:
            last_line = error.strip().splitlines()[-1] if error.strip() else "?"
            click.echo(f"  failed: {spec.describe()}: {last_line}", err=True)
    if failed:
        # Every other run is stored; the exit status tells scripts that some are not.
        sys.exit(1)

