"""The daemon as an administrator meets it on the first day, through the CLI: what it says
about a pool it cannot use (exit status, the WARNING lines) and what its store then holds and
the admin commands show; one clock, labelled, on every backend."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from gridfair.cli import cli

POOL = Path(__file__).parent / "data" / "daemon" / "pool"
#: A log line: the wall clock in UTC, said so (Z).
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ gridfair (INFO|WARNING|ERROR) (.*)$")


def config(tmp_path: Path, backend: str, **extra: str) -> Path:
    path = tmp_path / "gridfair.toml"
    body = {"files": '[backend.files]\ndirectory = "pool"\nactions = "actions.jsonl"\n',
            "sim": '[backend.sim]\nstep = 120\n'}[backend]
    path.write_text('[daemon]\nstore = "state.db"\ninterval = 0.01\n'
                    '[safety]\nmax_snapshot_age = 1e9\nmin_runtime = 0\n'
                    f'[backend]\nkind = "{backend}"\n{body}'
                    + "".join(f"{line}\n" for line in extra.values()))
    return path


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


def logged(result) -> list[tuple[str, str]]:
    """(level, message) of each log line the command wrote on stderr; every line is one."""
    lines = result.stderr.splitlines()
    matches = [LOG_LINE.match(line) for line in lines]
    assert all(matches), lines
    return [(match.group(1), match.group(2)) for match in matches]


def cycles(tmp_path: Path) -> list[dict]:
    with sqlite3.connect(tmp_path / "state.db") as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute("select * from cycles order by id")]


def test_once_on_a_missing_directory_fails_the_cycle_and_exits_1(tmp_path):
    result = run("daemon", "--config", str(config(tmp_path, "files")), "--once")
    assert result.exit_code == 1
    # One cycle, failed, and no promise of a next one: --once has none.
    [(level, message)] = logged(result)
    assert level == "WARNING"
    assert message.startswith(f"cycle 1 failed: {tmp_path / 'pool'}: no such file or "
                              "directory (")
    assert [c["outcome"] for c in cycles(tmp_path)] == ["failed"]


def test_a_pool_whose_every_ad_is_bad_is_a_failed_cycle_with_each_ad_named(tmp_path):
    shutil.copytree(POOL, tmp_path / "pool")
    for dump in (tmp_path / "pool").glob("*.status"):
        dump.write_text(re.sub(r'(?m)^GridOwner = .*$', "GridOwner = 7", dump.read_text()))
    result = run("daemon", "--config", str(config(tmp_path, "files")), "--once")
    assert result.exit_code == 1
    lines = logged(result)
    first = (f"{tmp_path / 'pool' / 'basic4slot.status'} ad #1 slot1@ingwe.cs.wisc.edu: "
             "line 157, attribute GridOwner: not a string: 7")
    # Each skipped ad at WARNING with file, the attribute's own line, attribute and why; past
    # five, one line counts the rest; then the failed cycle, naming the first.
    assert lines[0] == ("WARNING", f"cycle 1: ad skipped: {first}")
    assert [level for level, _ in lines] == ["WARNING"] * 7
    assert all(message.startswith("cycle 1: ad skipped: ") for _, message in lines[:5])
    assert lines[5] == ("WARNING", "cycle 1: 4 more ads skipped, 9 in all (`gridfair shares "
                                   f"--db {tmp_path / 'state.db'}` lists them)")
    assert lines[6][1].startswith(f"cycle 1 failed: no usable machine ad in {tmp_path / 'pool'} "
                                  f"(9 skipped; the first: {first})")
    # The store keeps the failure and every skipped ad with its cycle...
    [cycle] = cycles(tmp_path)
    assert cycle["outcome"] == "failed" and cycle["error"].startswith("no usable machine ad")
    skipped = json.loads(cycle["skipped"])
    assert len(skipped) == 9 and skipped[0]["reason"] == ("line 157, attribute GridOwner: not "
                                                          "a string: 7")
    # ... and the admin commands show them, where the store used to have "no finished cycle".
    db = str(tmp_path / "state.db")
    shares = run("shares", "--db", db)
    assert shares.exit_code == 0
    text = shares.output.splitlines()
    assert text[1].startswith("No cycle has recorded shares yet; the latest: cycle 1 failed: "
                              "no usable machine ad")
    assert "Skipped ads (9):" in text and f"  {first}" in text
    for command in ("history", "actions"):
        output = run(command, "--db", db).output
        assert "What went wrong in these cycles:" in output
        assert f"  cycle 1: ad skipped: {first}" in output.splitlines()


def test_an_attribute_set_twice_is_a_warning_each_cycle_and_in_the_store(tmp_path):
    shutil.copytree(POOL, tmp_path / "pool")
    status = tmp_path / "pool" / "basic4slot.status"
    status.write_text(status.read_text().replace("\n\n", "\n", 1))  # two ads run together
    result = run("daemon", "--config", str(config(tmp_path, "files")), "--cycles", "2")
    assert result.exit_code == 0
    warned = [message for level, message in logged(result) if level == "WARNING"]
    expected = (f": ad warning: {status} ad #1 slot2@ingwe.cs.wisc.edu: line 159, attribute "
                "Activity: also set on line 1, and ")
    assert [message.startswith(f"cycle {n}{expected}") for n, message in enumerate(warned, 1)
            ] == [True, True]
    assert all(len(json.loads(c["warnings"])) == 1 for c in cycles(tmp_path))
    shares = run("shares", "--db", str(tmp_path / "state.db")).output
    assert "Warnings (1):" in shares and "Number of users: 2" in shares
    assert "the last value is used, as HTCondor's own parser does" in shares


def test_one_clock_sim_times_are_simulated_and_files_times_are_utc(tmp_path):
    sim, files = tmp_path / "sim", tmp_path / "files"
    sim.mkdir()
    shutil.copytree(POOL, files / "pool")
    assert run("daemon", "--config", str(config(sim, "sim")), "--cycles", "3").exit_code == 0
    assert run("daemon", "--config", str(config(files, "files")), "--cycles", "2").exit_code == 0
    wall = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
    for directory, label in ((sim, re.compile(r"t\+\d+ s")), (files, wall)):
        db = str(directory / "state.db")
        shares = run("shares", "--db", db).output.splitlines()[0]
        history = run("history", "--db", db).output.splitlines()[2]
        actions = run("actions", "--db", db).output.splitlines()[2]
        explain = run("explain", "bt@cs.wisc.edu" if directory == files else "User2",
                      "--db", db).output.splitlines()[0]
        for line in (shares, history, actions, explain):
            assert label.search(line), line
            assert directory == files or not wall.search(line), line  # never a wall clock
    # The simulated clock starts at t+0 s and steps 120 s a cycle.
    assert run("shares", "--db", str(sim / "state.db")).output.startswith("Shares at t+240 s ")


def test_actions_show_the_cycle_that_planned_and_the_cycle_of_the_last_change(tmp_path):
    (tmp_path / "sim").mkdir()
    assert run("daemon", "--config", str(config(tmp_path / "sim", "sim")), "--cycles",
               "3").exit_code == 0
    lines = run("actions", "--db", str(tmp_path / "sim" / "state.db")).output.splitlines()
    assert lines[0].split()[:8] == ["Planned", "in", "cycle", "Planned", "at", "State",
                                    "since", "cycle"]
    # Planned in cycle 1 at t+0 s, seen running on its slot in cycle 2.
    assert lines[2].split()[:6] == ["1", "t+0", "s", "2", "allocate", "2.0"]
    assert lines[2].split()[-2:] == ["landed", "1"]


def test_show_lists_the_actions_held_back_with_their_rule(tmp_path):
    # The demo's own config (`make run`), its store moved here.
    demo = (Path(__file__).parent.parent / "configs" / "sim.toml").read_text()
    (tmp_path / "sim.toml").write_text(demo.replace('store = "../gridfair.db"',
                                                    'store = "state.db"'))
    result = run("daemon", "--config", str(tmp_path / "sim.toml"), "--cycles", "3", "--show")
    assert result.exit_code == 0
    out = result.stdout.splitlines()
    # Cycle 2 vacates two jobs for User1 and holds the third back (carried out in cycle 3).
    cycle_2 = out[out.index("Actions of cycle 2:"):out.index("Actions of cycle 3:")]
    at = cycle_2.index("Held back by the safety rules (1):")
    assert cycle_2[at + 1] == ("  vacate 2.4 (User2) on user4-slow-1 for 1.2 (User1): "
                               "max_vacates_per_cycle: 2 already this cycle")
    assert "  vacate 2.4 (User2) on user4-slow-1: confirmed" in out[out.index(
        "Actions of cycle 3:"):]
    assert "Actions of earlier cycles that changed state (2):" in out
    assert "  allocate 1.0 (User1) on user4-slow-3: landed (planned in cycle 2)" in out
