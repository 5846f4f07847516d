"""`python -m gridfair.daemon --config FILE`: the daemon command alone (as systemd runs it)."""

from __future__ import annotations

import sys

from gridfair.cli import daemon as _daemon_command  # noqa: F401 - registers `daemon`
from gridfair.cli.group import cli

cli.main(args=["daemon", *sys.argv[1:]], prog_name="gridfair")
