"""The `gridfair` command: one module per subcommand, each adding itself to the group of
`gridfair.cli.group`, which imports a subcommand's module only when it runs.

Errors a user can act on (`GridfairError`) print one line and exit 2; a traceback is only
ever shown for a bug.
"""

from __future__ import annotations

import os
import sys

from gridfair.cli.group import cli

#: Set by a command once its outputs are written and every file it opened is closed.
_nothing_left_to_close = False


def nothing_left_to_close() -> None:
    """A command's last word (`simulate` without --db): every file it wrote is closed and it
    holds nothing that needs tearing down. `main` then ends the process at once, without the
    interpreter freeing the run's objects one by one (10-15 % of a short simulation's CPU)."""
    global _nothing_left_to_close
    _nothing_left_to_close = True


def main() -> None:
    """The `gridfair` program (not `cli`, which tests call in process)."""
    try:
        cli()
    except SystemExit as stop:
        if stop.code in (None, 0) and _nothing_left_to_close:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except OSError:  # a closed pipe: the interpreter's own exit reports it
                raise stop from None
            os._exit(0)
        raise
