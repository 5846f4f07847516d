"""The `gridfair` command: one module per subcommand, registered here.

Errors a user can act on (`GridfairError`) print one line and exit 2; a traceback is only
ever shown for a bug.
"""

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


def _register() -> None:
    # Each subcommand lives in its own module; importing it here adds it to `cli`.
    from gridfair.cli import (  # noqa: F401
        admin,
        compare,
        daemon,
        grid,
        plot,
        shares,
        simulate,
        sweep,
    )


def main() -> None:
    _register()
    cli()
