"""Output is data: a name a pool user writes in an ad reaches the administrator's terminal,
spreadsheet, plot and log as text, never as an escape sequence, a formula or mathtext.

The test pool's two users are renamed as a user could name an accounting group or a schedd
could name a user: one with a terminal escape (set the window title), BEL, a bidi override and
a C1 control, starting with `=` (a spreadsheet formula); the other mathtext that does not
parse (`$\\frac{$`). A name starting with `_` (which matplotlib leaves out of a legend) is
drawn in the test of `plot_text`."""

from __future__ import annotations

import gzip
import json
import logging
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from gridfair.cli import admin as _admin_commands  # noqa: F401 - registers the commands
from gridfair.cli import cli
from gridfair.cli import daemon as _daemon_command  # noqa: F401
from gridfair.cli import shares as _shares_command  # noqa: F401
from gridfair.cli.output import render_table, to_csv, to_json
from gridfair.daemon.config import validate
from gridfair.daemon.service import Daemon, setup_logging
from gridfair.text import shown

POOL = Path(__file__).resolve().parent / "data" / "daemon" / "pool"
FORMULA = "=1+2\x1b]0;owned\x07\u202eevil\x9b"
MATH = "$\\frac{$"
FORMULA_SHOWN = "=1+2\\x1b]0;owned\\x07\\u202eevil\\x9b"
RENAMES = {"bbockelm@users.opensciencegrid.org": FORMULA, "bt@cs.wisc.edu": MATH}


def data_only(text: str) -> bool:
    """No control, bidi or unencodable character in `text` but its line ends."""
    return all(shown(line) == line for line in text.split("\n"))


def hostile_pool(directory: Path) -> Path:
    pool = directory / "pool"
    shutil.copytree(POOL, pool, copy_function=shutil.copy)
    for path in pool.iterdir():
        text = path.read_text(encoding="utf-8")
        for name, hostile in RENAMES.items():
            text = text.replace(f'"{name}"', f'"{hostile}"')
        path.write_text(text, encoding="utf-8")
    return pool


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """The store and log of a daemon's two cycles on the hostile pool (files backend), with
    a slot ad it skips (its name is in the log)."""
    directory = tmp_path_factory.mktemp("hostile")
    pool = hostile_pool(directory)
    with (pool / "basic4slot.status").open("a", encoding="utf-8") as out:
        out.write(f'\nMyType = "Machine"\nName = "{FORMULA}"\nCpus = "many"\n')
    config = validate({"daemon": {"interval": 0.02, "store": "state.db", "log_file": "d.log"},
                       "backend": {"kind": "files",
                                   "files": {"directory": "pool", "actions": "a.jsonl"}},
                       "safety": {"max_snapshot_age": 3600.0, "max_vacates_per_cycle": 1}},
                      base=directory)
    setup_logging(config)
    try:
        Daemon(config, max_cycles=2).run()
    finally:
        logger = logging.getLogger("gridfair")
        for handler in logger.handlers:
            handler.close()
        logger.handlers.clear()
        logger.propagate = True
    with sqlite3.connect(directory / "state.db") as db:
        assert db.execute("select outcome from cycles").fetchall() == [("ok",)] * 2
    return directory / "state.db"


def test_shown_escapes_every_control_and_keeps_the_rest() -> None:
    assert shown("alice@pool") == "alice@pool"
    assert shown("a\x1b[2J\r\n\t\x00\x7f\x85\u202e\u2066\u2028\ud800é") == (
        "a\\x1b[2J\\r\\n\\t\\x00\\x7f\\x85\\u202e\\u2066\\u2028\\ud800é")


def test_writers_never_fail_on_odd_but_valid_text() -> None:
    """A lone surrogate (valid in a Python string, not encodable) is written as an escape by
    every writer."""
    rows = [{"user": "a\ud800b", "n": 1}]
    for text in (render_table([("user", "User", ""), ("n", "N", "d")], rows), to_csv(rows),
                 to_json(rows)):
        text.encode("utf-8")
        assert data_only(text)
    assert json.loads(to_json(rows))[0]["user"] == "a\ud800b"  # JSON keeps the data exact


def test_csv_cells_a_spreadsheet_would_run_are_text() -> None:
    starts = ["=SUM(A1)", "+1", "-1+2", "@cmd", "\tx", "\rx"]
    text = to_csv([{"user": start, "power_diff": -0.5} for start in starts])
    assert text.splitlines() == ["user,power_diff", "'=SUM(A1),-0.5", "'+1,-0.5", "'-1+2,-0.5",
                                 "'@cmd,-0.5", "'\\tx,-0.5", "'\\rx,-0.5"]


def test_shares_of_ad_files_in_every_format(tmp_path) -> None:
    pool = hostile_pool(tmp_path)
    table = invoke("shares", "--machines", str(pool))
    assert data_only(table) and f"\n{FORMULA_SHOWN}  " in table
    csv_text = invoke("shares", "--machines", str(pool), "--format", "csv")
    assert data_only(csv_text) and f"\n'{FORMULA_SHOWN}," in csv_text
    report = json.loads(invoke("shares", "--machines", str(pool), "--format", "json"))
    assert {row["user"] for row in report["users"]} == {FORMULA, MATH}


def test_the_daemons_log_and_show(store, tmp_path) -> None:
    log = (store.parent / "d.log").read_text(encoding="utf-8")
    assert FORMULA_SHOWN in log and data_only(log)
    hostile_pool(tmp_path)
    (tmp_path / "c.toml").write_text(
        '[daemon]\nstore = "state.db"\n[backend]\nkind = "files"\n[backend.files]\n'
        'directory = "pool"\nactions = "a.jsonl"\n[safety]\nmax_snapshot_age = 3600\n')
    shown_text = invoke("daemon", "--config", str(tmp_path / "c.toml"), "--once", "--show")
    assert f"vacate 3.0 ({MATH}) on" in shown_text and FORMULA_SHOWN in shown_text
    assert data_only(shown_text)


@pytest.mark.parametrize("command", [("shares",), ("explain", FORMULA), ("explain", MATH),
                                     ("explain", "15.0"), ("history",), ("actions",)])
def test_admin_commands_in_every_format(store, command) -> None:
    table = invoke(*command, "--db", str(store))
    assert FORMULA_SHOWN in table and data_only(table)
    csv_text = invoke(*command, "--db", str(store), "--format", "csv")
    assert data_only(csv_text) and f",{FORMULA}" not in csv_text
    assert FORMULA in invoke(*command, "--db", str(store), "--format", "json").encode(
        "ascii").decode("unicode_escape")


def test_history_plot_draws_names_as_text(store, tmp_path) -> None:
    pytest.importorskip("matplotlib")
    invoke("history", "--db", str(store), "--plot", str(tmp_path / "shares.png"))
    assert (tmp_path / "shares.png").read_bytes()[:4] == b"\x89PNG"


def test_plot_labels_are_never_mathtext_nor_hidden() -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from gridfair.experiments.plots import plot_text

    figure = Figure()
    axes = figure.subplots()
    for name in (MATH, "_hidden", FORMULA):
        axes.plot([0, 1], [0, 1], label=plot_text(name))
    legend = axes.legend()
    figure.canvas.draw()  # mathtext is parsed when drawn
    assert [text.get_text() for text in legend.get_texts()] == [
        "\\$\\frac{\\$", " _hidden", FORMULA_SHOWN]


def test_shadow_report_and_plot(tmp_path) -> None:
    hostile_pool(tmp_path)
    daemon = Daemon(validate({"daemon": {"store": "state.db"},
                              "backend": {"kind": "files",
                                          "files": {"directory": "pool", "actions": "a.jsonl"}},
                              "safety": {"max_snapshot_age": 3600.0}}, base=tmp_path),
                    shadow=True)
    try:
        for _ in range(2):
            daemon.tick()
            daemon.skip_until = 0.0
    finally:
        daemon.close()
    db = str(tmp_path / "state.db")
    text = invoke("shadow", "--db", db)
    assert FORMULA_SHOWN in text and data_only(text)
    report = json.loads(invoke("shadow", "--db", db, "--format", "json"))
    assert FORMULA in {row["user"] for row in report["users"]}
    pytest.importorskip("matplotlib")
    invoke("shadow", "--db", db, "--plot", str(tmp_path / "shadow.png"))
    assert (tmp_path / "shadow.png").read_bytes()[:4] == b"\x89PNG"


def test_compare_of_a_history_in_every_format(tmp_path) -> None:
    """A replay names the history's users: the guest here is a submitter named with both
    names above (a formula, terminal escapes and mathtext)."""
    history_dir = POOL.parent.parent / "condor_history"
    text = gzip.decompress((history_dir / "history.gz").read_bytes()).decode()
    (tmp_path / "history").write_text(text.replace('"guest@gridfair.test"', f'"{FORMULA}{MATH}"'),
                                      encoding="utf-8")
    args = ["compare", "--workload", str(tmp_path / "history"), "--machines",
            str(history_dir / "slots.long"), "--policies", "hosep", "--param", "interval=2",
            "--quiet"]
    table = invoke(*args, "--plot", str(tmp_path / "compare.png"))
    assert FORMULA_SHOWN in table and data_only(table)
    csv_text = invoke(*args, "--format", "csv")
    assert f",'{FORMULA_SHOWN}" in csv_text and data_only(csv_text)
    assert (tmp_path / "compare.png").read_bytes()[:4] == b"\x89PNG"
