"""The `gridfair` command: one module per subcommand, each adding itself to the group of
`gridfair.cli.group`, which imports a subcommand's module only when it runs.

Errors a user can act on (`GridfairError`) print one line and exit 2; a traceback is only
ever shown for a bug.
"""

from __future__ import annotations

from gridfair.cli.group import cli


def main() -> None:
    cli()
