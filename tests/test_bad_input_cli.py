"""One rule for bad input, everywhere: a file that cannot be read, is not text, or holds
nothing is one line on stderr naming it and exit 2, never a traceback; and, over random
corruptions of a real ads file, `gridfair shares` either names every ad it skipped (exit 0) or
says in one line why it cannot show the pool (exit 2)."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gridfair.cli import cli

POOL = Path(__file__).parent / "data" / "daemon" / "pool"
SLOTS = (POOL / "basic4slot.status").read_bytes()
OTHER_SLOTS = (POOL / "partitionable.status").read_bytes()
JOBS = POOL / "jobs.queue"


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def assert_one_line_error(result, names: str) -> None:
    """Exit 2, nothing on stdout, one line on stderr naming `names`, no traceback."""
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("gridfair: error: ") and names in line, line


#: Each command given a file where it expects one, as `{}`.
COMMANDS = {
    "ads": ["shares", "--machines", "{}", "--jobs", str(JOBS)],
    "jobs": ["shares", "--machines", str(POOL / "basic4slot.status"), "--jobs", "{}"],
    "grid": ["grid", "show", "{}"],
    "task file": ["simulate", "--workload", "{}.csv", "--capacity", "4", "--policy", "sdrf"],
    "swf": ["simulate", "--workload", "{}.swf", "--capacity", "4", "--policy", "sdrf"],
    "ispd trace": ["simulate", "--workload", "{}.wmsx", "--capacity", "4", "--policy", "sdrf"],
    "sweep": ["sweep", "{}"],
    "store": ["shares", "--db", "{}"],
    "results": ["plot", "{}", "--kind", "wait-reduction", "--out", "{}.png"],
    "config": ["daemon", "--config", "{}", "--once"],
}
CONTENTS = {
    "binary": b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 8,
    "not utf-8": b"A = 1\n\xff\xfe\n",
    "nul": b"A = 1\n\x00\x00\n",
    "blank": b"\n\n  \n",
    "missing": None,
}


@pytest.mark.parametrize("content", CONTENTS)
@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_it_cannot_use_is_one_line_naming_it(tmp_path, monkeypatch, command, content):
    monkeypatch.chdir(tmp_path)  # nothing a command might create lands in the repository
    path = tmp_path / "input"
    args = [arg.replace("{}", str(path)) for arg in COMMANDS[command]]
    named = next(arg for arg in args if arg.startswith(str(path)))
    if CONTENTS[content] is not None:
        Path(named).write_bytes(CONTENTS[content])
    result = run(*args)
    assert_one_line_error(result, named)


def test_an_empty_store_or_results_file_is_not_made_one(tmp_path):
    for args in (["shares", "--db"], ["plot", "--kind", "wait-reduction", "--out", "x.png"]):
        path = tmp_path / "empty.db"
        path.write_bytes(b"")
        result = run(*args[:1], str(path), *args[1:]) if args[0] == "plot" else \
            run(*args, str(path))
        assert_one_line_error(result, str(path))
        assert path.read_bytes() == b""  # read, not written


# ------------------------------------------------------- random corruptions of real ads
def _lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")


def _apply(data: bytes, corruption: tuple) -> bytes:
    kind, first, second = corruption
    if kind == "truncate":
        return data[:first % (len(data) + 1)]
    if kind == "flip":
        position = first % max(len(data), 1)
        return data[:position] + bytes([second % 256]) + data[position + 1:]
    if kind == "repeat":  # a line set again elsewhere: an attribute set twice
        lines = _lines(data)
        line = lines[first % len(lines)]
        lines.insert(second % (len(lines) + 1), line)
        return b"\n".join(lines)
    if kind == "join":  # two ads with no blank line between them
        separators = [match.start() for match in re.finditer(rb"\n\n", data)]
        if not separators:
            return data
        at = separators[first % len(separators)]
        return data[:at] + data[at + 1:]
    return data.rstrip(b"\n") + b"\n" + OTHER_SLOTS  # "append": another dump, run together


CORRUPTION = st.tuples(st.sampled_from(["truncate", "flip", "repeat", "join", "append"]),
                       st.integers(0, 10**6), st.integers(0, 10**6))


def _ad_blocks(text: str) -> int:
    """How many ads the file holds, framed as old-syntax dumps are (blank-line runs)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return sum(1 for block in re.split(r"\n(?:[ \t\r]*\n)+", text) if block.strip())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(CORRUPTION, min_size=1, max_size=4))
def test_corrupted_real_ads_are_each_named_or_refused_in_one_line(corruptions):
    data = SLOTS
    for corruption in corruptions:
        data = _apply(data, corruption)
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "slots.status"
        path.write_bytes(data)
        result = run("shares", "--machines", str(path), "--jobs", str(JOBS), "--now",
                     "1417808400", "--format", "json")
        assert result.exception is None or isinstance(result.exception, SystemExit), \
            result.exception
        assert "Traceback" not in result.output
        if result.exit_code == 2:
            assert_one_line_error(result, "")
            return
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)
        named = [item for item in report["skipped"] if item["source"] == str(path)]
        # Every ad of the file is a slot used or a skipped ad named with its index.
        # Bytes that are not UTF-8 skip only their ad: the framing does not depend on them.
        text = data.decode("utf-8", errors="surrogateescape")
        if not text.lstrip().startswith(("[", "/")):  # old syntax, as the real dump is
            assert report["slots"] + len(named) == _ad_blocks(text)
        assert all(item["index"] >= 1 and item["reason"] for item in named)
