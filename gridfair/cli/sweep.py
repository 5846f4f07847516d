"""`gridfair sweep`: a grid of run parameters, run on Dask or as jobs on an HTCondor pool,
stored in SQLite as runs finish."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gridfair.cli.group import cli
from gridfair.cli.progress import runs_progress
from gridfair.errors import InputError
from gridfair.experiments.compare import check_one_allocation_rule
from gridfair.experiments.htcondor_runner import JobEnvironment, PoolTarget, run_on_htcondor
from gridfair.experiments.runner import (
    DEFAULT_CONNECT_TIMEOUT,
    OutcomeSink,
    dask_client,
    run_in_process,
    run_on_dask,
)
from gridfair.experiments.runs import RunOutcome, RunSpec
from gridfair.experiments.spec import load_sweep
from gridfair.experiments.store import ResultsStore

#: The Python that makes a job's venv from --wheels, unless --job-python names another.
DEFAULT_JOB_PYTHON = "/usr/bin/python3"


@cli.command()
@click.argument("spec_file", metavar="SPEC.toml", type=click.Path(dir_okay=False))
@click.option("--workers", type=int, default=None,
              help="Worker processes of the local Dask cluster (default: one per core).")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="A running Dask scheduler (tcp://host:8786) to run on instead.")
@click.option("--in-process", is_flag=True,
              help="Run one after another in this process, without Dask.")
@click.option("--on", "backend", type=click.Choice(["dask", "htcondor"]), default="dask",
              show_default=True,
              help="Where runs go: Dask, or one job each on an HTCondor pool (its schedd).")
@click.option("--pool", "collector", default=None, metavar="HOST[:PORT]",
              help="--on htcondor: the pool's collector (default: HTCondor's configuration).")
@click.option("--schedd", default=None, metavar="NAME",
              help="--on htcondor: the schedd to submit to (default: the local one).")
@click.option("--job-python", default=None, metavar="PATH",
              help="--on htcondor: Python on the execute nodes: with gridfair installed, or "
                   "with --wheels the one that makes each job's venv [default: "
                   "/usr/bin/python3 with --wheels].")
@click.option("--wheels", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="--on htcondor: wheels of gridfair and its dependencies, sent with each job, "
                   "which installs them in a venv of its own (no network needed).")
@click.option("--request-memory", type=click.IntRange(min=1), default=None, metavar="MB",
              help="--on htcondor: memory each job asks for (default: HTCondor's).")
@click.option("--connect-timeout", type=float, default=DEFAULT_CONNECT_TIMEOUT,
              show_default=True, help="Seconds to wait for --scheduler before giving up.")
@click.option("--db", "db_path", type=click.Path(dir_okay=False), default=None,
              help="Results DB (default: the sweep file's name with .db, here).")
@click.option("--resume", is_flag=True,
              help="Continue a sweep in an existing DB: finished runs are not run again.")
@click.option("--quiet", "-q", is_flag=True,
              help="No progress (a bar on a terminal, else a line per finished run).")
def sweep(spec_file, workers, scheduler, in_process, backend, collector, schedd, job_python,
          wheels, request_memory, connect_timeout, db_path, resume, quiet) -> None:
    """Run every combination of SPEC.toml's parameters and store each run's metrics.

    Exit status 1 when some runs failed (each is stored with its error; --resume tries them
    again), 2 on bad input. With --on htcondor, the jobs of a command that was stopped go on
    in the queue, and --resume gathers them.
    """
    if sum(option is not None and option is not False
           for option in (workers, scheduler, in_process)) > 1:
        raise click.UsageError("give at most one of --workers, --scheduler, --in-process")
    target = _pool_target(backend, workers, scheduler, in_process, collector, schedd,
                          job_python, wheels, request_memory)
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
            elif target is not None and todo:
                _run_on_pool(todo, record, db_path, target, quiet)
            elif todo and target is None:
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



def _pool_target(backend: str, workers: int | None, scheduler: str | None, in_process: bool,
                 collector: str | None, schedd: str | None, job_python: str | None,
                 wheels: str | None, request_memory: int | None) -> PoolTarget | None:
    """Where --on htcondor sends the runs (None for the other backends); usage errors for
    options of the other kind."""
    pool_options = {"--pool": collector, "--schedd": schedd, "--job-python": job_python,
                    "--wheels": wheels, "--request-memory": request_memory}
    if backend != "htcondor":
        given = [name for name, value in pool_options.items() if value is not None]
        if given:
            raise click.UsageError(f"{', '.join(given)} only go with --on htcondor")
        return None
    if workers is not None or scheduler is not None or in_process:
        raise click.UsageError("--on htcondor runs on the pool: no --workers, --scheduler "
                               "or --in-process")
    if job_python is None and wheels is None:
        raise click.UsageError("--on htcondor needs --job-python (a Python with gridfair on "
                               "the execute nodes) or --wheels (wheels each job installs)")
    return PoolTarget(JobEnvironment(job_python or DEFAULT_JOB_PYTHON,
                                     Path(wheels) if wheels else None),
                      collector=collector, schedd=schedd, request_memory=request_memory)


def _run_on_pool(todo: list[RunSpec], record: OutcomeSink, db_path: Path, target: PoolTarget,
                 quiet: bool) -> None:
    def status(line: str) -> None:
        if not quiet:
            click.echo(f"gridfair sweep: jobs: {line}", err=True)

    try:
        run_on_htcondor(todo, record, db_path.with_suffix(".htcondor"), target, status)
    except KeyboardInterrupt:
        click.echo("gridfair sweep: stopped; the jobs already queued go on, and "
                   "`gridfair sweep --resume` gathers their results", err=True)
        raise
