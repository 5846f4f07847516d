"""`gridfair daemon`: the negotiator as a service (see gridfair/daemon/ and docs/daemon.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from gridfair.cli.group import cli
from gridfair.daemon.config import load_config


@cli.command("daemon")
@click.option("--config", "config_path", required=True, type=click.Path(path_type=Path),
              help="TOML configuration (examples in configs/).")
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
def daemon(config_path: Path, check: bool, once: bool, dry_run: bool, shadow: bool,
           cycles: int | None, show: bool) -> None:
    """Negotiate every `interval` seconds: read the pool, decide, journal, act.

    SIGTERM stops it (exit 0), SIGINT too (exit 130); SIGHUP reopens the log file and reads
    the config again (a bad one is refused, logged, and the daemon goes on)."""
    from gridfair.daemon import service
    from gridfair.daemon.cycle import CycleReport

    config = load_config(config_path)
    if check:
        click.echo(f"{config_path}: ok: {service.check(config)}")
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
                             on_cycle=show_cycle if show else None, config_path=config_path)
    sys.exit(running.run_once() if once else running.run())
