"""`gridfair daemon`: the negotiator as a service (see gridfair/daemon/ and docs/daemon.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gridfair.cli.group import cli
from gridfair.daemon.config import Config, load_config


@cli.command("daemon")
@click.option("--config", "config_path", type=click.Path(path_type=Path),
              help="TOML configuration (examples in configs/).")
@click.option("--knobs", is_flag=True,
              help="Settings from HTCondor's configuration instead (GRIDFAIR_* knobs, "
                   "docs/condor-daemon.md): a daemon condor_master runs.")
@click.option("--check", is_flag=True,
              help="Check the config and read the pool once (no store, no log, no action); "
                   "print one line and exit 0, or the error and exit 2.")
@click.option("--once", is_flag=True, help="Run one cycle and exit (1 if it failed).")
@click.option("--dry-run", is_flag=True, help="Record decisions; carry out none.")
@click.option("--shadow", is_flag=True,
              help="A dry run that also records what the pool did instead, cycle by cycle, "
                   "for `gridfair shadow` to compare with gridfair's decisions.")
@click.option("--cycles", type=click.IntRange(min=1), default=None,
              help="Stop after this many cycles (overrides daemon.max_cycles).")
@click.option("--show", is_flag=True,
              help="After each cycle, print the shares table and the cycle's actions.")
def daemon(config_path: Path | None, knobs: bool, check: bool, once: bool, dry_run: bool,
           shadow: bool, cycles: int | None, show: bool) -> None:
    """Negotiate every `interval` seconds: read the pool, decide, journal, act.

    SIGTERM stops it (exit 0), SIGINT too (exit 130); SIGHUP reopens the log file and reads
    the settings again (a bad one is refused, logged, and the daemon goes on)."""
    from gridfair.daemon import service
    from gridfair.daemon.cycle import CycleReport

    if (config_path is None) == (not knobs):
        raise click.UsageError("give --config FILE or --knobs (one of them)")
    if knobs:
        import htcondor2

        from gridfair.daemon.knobs import read_knobs_logged, reread_knobs

        read, source = reread_knobs, "HTCondor's GRIDFAIR_* knobs"
        config = read_knobs_logged(htcondor2.param)  # no terminal: a bad knob in the log too
    else:
        def read() -> Config:
            return load_config(config_path)

        source = str(config_path)
        config = read()
    if check:
        click.echo(f"{source}: ok: {service.check(config)}")
        return
    service.setup_logging(config)
    store = Path(config["daemon"]["store"])

    def show_cycle(report: CycleReport) -> None:
        from gridfair.cli.admin import cycle_actions_text
        from gridfair.cli.shares import shares_from_store

        if report.outcome != "failed":
            click.echo(shares_from_store(store))
            click.echo(cycle_actions_text(store, report.cycle))
            click.echo()

    running = service.Daemon(config, dry_run=dry_run, shadow=shadow, max_cycles=cycles,
                             on_cycle=show_cycle if show else None, reread=read,
                             source=source)
    sys.exit(running.run_once() if once else running.run())
