"""The `gridfair` command: one module per subcommand, each adding itself to the group of
`gridfair.cli.group`; `main` imports them all.

Errors a user can act on (`GridfairError`) print one line and exit 2; a traceback is only
ever shown for a bug.
"""

from __future__ import annotations

from gridfair.cli.group import cli


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
