"""Usage errors, from click or from gridfair, are one line on stderr and exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

#: The command as installed (`python -m gridfair` would name itself so in the messages).
GRIDFAIR = str(Path(sys.executable).with_name("gridfair"))


@pytest.mark.parametrize(("args", "line"), [
    (["nosuch"], "gridfair: error: No such command 'nosuch'. (see 'gridfair --help')"),
    (["daemon"], "gridfair: error: give --config FILE or --knobs (one of them) (see 'gridfair "
     "daemon --help')"),
    (["shares", "--format", "x"], "gridfair: error: Invalid value for '--format': 'x' is not "
     "one of 'table', 'json', 'csv'. (see 'gridfair shares --help')"),
    (["history", "--nosuch"], "gridfair: error: No such option '--nosuch'. (see 'gridfair "
     "history --help')"),
    (["simulate", "hosep-table1", "--workload", "low"], "gridfair: error: give --policy NAME, "
     "or --order (with --preempt/--admit) (see 'gridfair simulate --help')"),
])
def test_a_usage_error_is_one_line_and_exit_2(args, line):
    # Run as a user runs it: click's own standalone handling would print four lines.
    result = subprocess.run([GRIDFAIR, *args], capture_output=True,
                            text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", line + "\n")


def test_help_and_version_still_exit_0():
    for args in (["--help"], ["--version"], ["shares", "--help"]):
        result = subprocess.run([GRIDFAIR, *args], capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0 and result.stdout and not result.stderr, args
