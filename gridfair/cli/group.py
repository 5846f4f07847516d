"""The `gridfair` command group. Each subcommand module adds its command to `cli`; the group
imports a module only when one of its commands runs (or its own `--help` is asked), so
`gridfair --help`, `--version` and `gridfair simulate` start without the store, numpy or the
experiments code (issue 27; `tests/test_startup.py` holds it)."""

from __future__ import annotations

import importlib
import sys

import click

from gridfair import __version__
from gridfair.errors import GridfairError
from gridfair.text import shown

#: Modules an optional extra installs (pyproject.toml) -> the extra. Commands import them only
#: when they run, so the base install runs every other command.
EXTRA_OF = {"dask": "experiments", "distributed": "experiments", "matplotlib": "experiments"}

#: Command -> (the module that defines it, the first paragraph of its help). The group lists
#: commands from here without importing them; a test checks the summaries against the commands.
COMMANDS = {
    "actions": ("gridfair.cli.admin", "The daemon's action journal: what it planned, issued, "
                                      "confirmed, failed, abandoned."),
    "compare": ("gridfair.cli.compare", "Run GRID's workloads under each policy and seed; "
                                        "report the metrics side by side."),
    "daemon": ("gridfair.cli.daemon", "Negotiate every `interval` seconds: read the pool, "
                                      "decide, journal, act."),
    "explain": ("gridfair.cli.admin", "Why USER is where it is, or what happened to JOB "
                                      "(cluster.proc), and why."),
    "grid": ("gridfair.cli.grid", "Inspect grids: gridfair TOML grids, iSPD .imsx models, and "
                                  "the embedded ones."),
    "history": ("gridfair.cli.admin", "Per-user usage and shares over the daemon's cycles."),
    "plot": ("gridfair.cli.plot", "Draw a figure of KIND from the results DB of a sweep."),
    "shadow": ("gridfair.cli.shadow", "Report a shadow daemon's store: share error of the "
                                      "pool as it ran and of gridfair's decisions, gridfair's "
                                      "allocations the pool made anyway, the vacates it would "
                                      "have issued, and the jobs it would have started sooner "
                                      "or later."),
    "shares": ("gridfair.cli.shares", "Per-user shares of a pool's ads and the decisions a "
                                      "policy would take on them now."),
    "simulate": ("gridfair.cli.simulate", "Simulate GRID under a policy and report per-user "
                                          "satisfaction, waits and preemptions."),
    "sweep": ("gridfair.cli.sweep", "Run every combination of SPEC.toml's parameters and "
                                    "store each run's metrics."),
}


class GridfairGroup(click.Group):
    """Loads a subcommand's module when the subcommand is asked for. Turns input and
    configuration errors, a missing optional extra, and click's own usage errors, into one
    line on stderr and exit code 2."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        """As click's, but a usage error is one line (click prints four: usage, a hint, a
        blank line and the error), as every other gridfair error is."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            # Not standalone: click raises its errors here instead of printing them.
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.ClickException as error:
            click.echo(f"gridfair: error: {shown(one_line(error))}", err=True)
            sys.exit(error.exit_code)
        except click.Abort as abort:
            # Ctrl-C (click's Abort from a KeyboardInterrupt): the shell's 128 + SIGINT.
            interrupted = isinstance(abort.__context__, KeyboardInterrupt)
            click.echo("gridfair: interrupted" if interrupted else "Aborted!", err=True)
            sys.exit(130 if interrupted else 1)
        # What click returns here is an exit code (--help, --version: 0) or a command's
        # value (gridfair's return None): what click would exit with.
        sys.exit(code if isinstance(code, int) else 0)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS.keys() | self.commands.keys())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            importlib.import_module(COMMANDS[cmd_name][0])  # its decorators add it to `cli`
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        rows = [(name, click.Command(name, help=COMMANDS[name][1]).get_short_help_str(limit))
                for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except GridfairError as error:
            click.echo(f"gridfair: error: {shown(str(error))}", err=True)
            sys.exit(2)
        except ModuleNotFoundError as error:
            extra = EXTRA_OF.get((error.name or "").partition(".")[0])
            if extra is None:
                raise
            click.echo(f"gridfair: error: gridfair {ctx.invoked_subcommand} needs the {extra} "
                       f"extra ({error.name} is not installed): pip install "
                       f"'gridfair[{extra}]'", err=True)
            sys.exit(2)


def one_line(error: click.ClickException) -> str:
    """A click error in one line, pointing a usage error to the command's --help."""
    message = " ".join(error.format_message().split())
    context = getattr(error, "ctx", None)
    if isinstance(error, click.UsageError) and context is not None:
        message += f" (see '{context.command_path} --help')"
    return message


@click.group(cls=GridfairGroup)
@click.version_option(__version__, prog_name="gridfair")
def cli() -> None:
    """Fair-share negotiation for grids whose users own the machines."""
