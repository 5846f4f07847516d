"""The `gridfair` command group. Each subcommand module adds its command to `cli`;
`gridfair.cli.main` imports them, so the group itself imports none of them (no ring)."""

from __future__ import annotations

import sys

import click

from gridfair import __version__
from gridfair.errors import GridfairError

#: Modules an optional extra installs (pyproject.toml) -> the extra. Commands import them only
#: when they run, so the base install runs every other command.
EXTRA_OF = {"dask": "experiments", "distributed": "experiments", "matplotlib": "experiments"}


class GridfairGroup(click.Group):
    """Turns input and configuration errors, and a missing optional extra, into one line on
    stderr and exit code 2."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except GridfairError as error:
            click.echo(f"gridfair: error: {error}", err=True)
            sys.exit(2)
        except ModuleNotFoundError as error:
            extra = EXTRA_OF.get((error.name or "").partition(".")[0])
            if extra is None:
                raise
            click.echo(f"gridfair: error: gridfair {ctx.invoked_subcommand} needs the {extra} "
                       f"extra ({error.name} is not installed): pip install "
                       f"'gridfair[{extra}]'", err=True)
            sys.exit(2)


@click.group(cls=GridfairGroup)
@click.version_option(__version__, prog_name="gridfair")
def cli() -> None:
    """Fair-share negotiation for grids whose users own the machines."""
