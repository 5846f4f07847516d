"""The `gridfair` command group. Each subcommand module adds its command to `cli`;
`gridfair.cli.main` imports them, so the group itself imports none of them (no ring)."""

from __future__ import annotations

import sys

import click

from gridfair import __version__
from gridfair.errors import GridfairError


class GridfairGroup(click.Group):
    """Turns input and configuration errors into one line on stderr and exit code 2."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except GridfairError as error:
            click.echo(f"gridfair: error: {error}", err=True)
            sys.exit(2)


@click.group(cls=GridfairGroup)
@click.version_option(__version__, prog_name="gridfair")
def cli() -> None:
    """Fair-share negotiation for grids whose users own the machines."""
