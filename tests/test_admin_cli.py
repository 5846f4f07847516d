"""The admin commands over the daemon's store: shares (from the store), explain, history,
actions; in every format; and while a daemon process is writing the store."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gridfair.cli import admin as _admin_commands  # noqa: F401 - registers the commands
from gridfair.cli import cli
from gridfair.cli import daemon as _daemon_command  # noqa: F401
from gridfair.cli import shares as _shares_command  # noqa: F401
from gridfair.cli.shares import shares_from_store
from gridfair.daemon.config import validate
from gridfair.daemon.service import Daemon

POOL = Path(__file__).resolve().parent / "data" / "daemon" / "pool"
BT, BB = "bt@cs.wisc.edu", "bbockelm@users.opensciencegrid.org"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    """A store after three cycles on the test pool (files backend)."""
    directory = tmp_path_factory.mktemp("admin")
    shutil.copytree(POOL, directory / "pool", copy_function=shutil.copy)
    raw = {"daemon": {"interval": 0.02, "store": "state.db"},
           "backend": {"kind": "files",
                       "files": {"directory": "pool", "actions": "actions.jsonl"}},
           "safety": {"max_snapshot_age": 3600.0, "max_vacates_per_cycle": 1},
           # The slots named below are this placement's choices.
           "policy": {"placement": "fastest"}}
    Daemon(validate(raw, base=directory), max_cycles=3).run()
    with sqlite3.connect(directory / "state.db") as db:
        outcomes = db.execute("select outcome, error from cycles").fetchall()
    assert outcomes == [("ok", None)] * 3
    return directory / "state.db"


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_shares_from_store_uses_the_shares_table(store):
    text = shares_from_store(store)
    lines = text.splitlines()
    assert lines[0].startswith("Shares at ") and "daemon cycle 3" in lines[0]
    assert lines[1].split()[:2] == ["User", "Name"]
    assert any(line.startswith(BB) for line in lines)
    assert any("Number of users: 2" in line for line in lines)
    report = json.loads(shares_from_store(store, "json"))
    assert {row["user"] for row in report["users"]} == {BT, BB}
    # Four static slots and one partitionable slot (its four dynamic slots are shares of it).
    assert report["totals"]["nodes_provided"] == 5
    csv_lines = shares_from_store(store, "csv").splitlines()
    assert csv_lines[0].startswith("user,provided_mflops,allocated_mflops,power_diff")


def test_shares_command_reads_the_store(store):
    text = invoke("shares", "--db", str(store))
    # Cycle 1 gave every free CPU to bbockelm and vacated once; the dumps never change, so
    # later cycles see those allocations in flight and decide nothing new.
    assert "Decisions of cycle 3: none" in text
    assert "Number of users: 2" in text
    assert json.loads(invoke("shares", "--db", str(store), "--format", "json"))["users"]
    assert invoke("shares", "--db", str(store), "--format", "csv").startswith("user,")


def test_daemon_show_prints_shares_and_actions(tmp_path):
    shutil.copytree(POOL, tmp_path / "pool", copy_function=shutil.copy)
    (tmp_path / "c.toml").write_text(
        '[daemon]\nstore = "state.db"\n[backend]\nkind = "files"\n[backend.files]\n'
        'directory = "pool"\nactions = "a.jsonl"\n[safety]\nmax_snapshot_age = 3600\n')
    result = CliRunner().invoke(cli, ["daemon", "--config", str(tmp_path / "c.toml"),
                                      "--once", "--show"])
    assert result.exit_code == 0, result.output
    assert "Decisions of cycle 1 (10, [state] of the action carried out):" in result.output
    assert "Actions of cycle 1:" in result.output
    # A job in a dynamic slot is vacated from its partitionable slot, which the job that
    # replaces it is steered to.
    assert "  vacate 3.0 (bt@cs.wisc.edu) on slot1@ingwe2.cs.wisc.edu: confirmed" in \
        result.output


def test_explain_user_gives_position_figures_and_decisions(store):
    text = invoke("explain", BT, "--db", str(store))
    assert text.startswith(f"{BT} as of cycle 3")
    assert "PowerDiff inf" in text  # provides nothing, uses power
    assert "max_vacates_per_cycle" in text  # the hold-back of the second vacate
    assert "vacate 3." in text and "[confirmed]" in text
    data = json.loads(invoke("explain", BT, "--db", str(store), "--format", "json"))
    # Six running in the dumps; one of them vacated in cycle 1 and one in cycle 2 (the
    # cool-down spares the job vacated, not the rest of its user's), each for an allocation
    # still in flight (the dumps never change), whose slot the later cycles hold for its job.
    assert data["shares"]["running"] == 4
    assert data["decisions"] and all("reason" in d for d in data["decisions"])
    assert invoke("explain", BT, "--db", str(store), "--format", "csv").startswith("cycle,")


def test_explain_job_shows_events_decisions_and_journal(store):
    text = invoke("explain", "15.0", "--db", str(store))
    assert text.startswith(f"job 15.0: idle ({BB})")
    assert "cycle 1" in text and "submitted" in text
    assert "allocate on slot3@ingwe.cs.wisc.edu: confirmed after 1 attempt(s)" in text
    assert "free machine to " + BB in text


def test_explain_says_why_an_idle_job_waits(store):
    """The job a held-back vacate would have made room for: the vacate and the rule that held
    it back, under the job (not only under the victim's user), its allocation in flight, and
    its user's standing."""
    text = invoke("explain", "15.7", "--db", str(store))
    waits = text.partition("Why it waits:\n")[2].splitlines()
    assert waits[0] == ("  allocated to slot1@ingwe2.cs.wisc.edu: confirmed, HTCondor starts "
                        "it there at its next negotiation (or the allocation is withdrawn "
                        "after safety.landing_timeout)")
    assert waits[1] == (f"  cycle 1: a vacate of 3.1 ({BT}) on slot1@ingwe2.cs.wisc.edu to "
                        "make room for it was held back: max_vacates_per_cycle: 1 already "
                        "this cycle (lifted the next cycle)")
    assert waits[2].startswith(f"  its user {BB} is position 1 of 2 in the order ")
    assert "Why it waits" not in invoke("explain", "3.1", "--db", str(store))  # running


@pytest.mark.parametrize(("rule", "lifted"), [
    ("preempt_cooldown: 3.1 was preempted 100 s ago (cool-down 1800 s)",
     " (lifted at 2014-12-05 20:08:20 UTC)"),
    ("min_runtime: 3.1 has run 60 s (minimum 600 s)", " (lifted at 2014-12-05 19:49:00 UTC)"),
    ("in_flight: 3.1 was allocated to slot1@x and has not started yet", ""),
])
def test_a_held_back_vacate_says_when_its_rule_stops_holding(rule, lifted):
    from gridfair.cli.admin import _lifted

    assert _lifted({"rule": rule, "now": 1417808400.0, "sim_start": None}) == lifted


def test_explain_unknown_name_is_exit_2(store):
    result = CliRunner().invoke(cli, ["explain", "nobody", "--db", str(store)])
    assert result.exit_code == 2
    assert result.output.startswith("gridfair: error: no user or job named 'nobody' in the "
                                    "store; the store knows ")
    assert result.output.count("\n") == 1


def test_explain_takes_a_user_as_typed_and_suggests_the_closest(store):
    """`bt` or `BT` for bt@cs.wisc.edu (one user alone has that name before the @); a
    misspelt name is told the closest ones."""
    assert invoke("explain", "bt", "--db", str(store)).startswith(f"{BT} as of cycle 3")
    assert invoke("explain", "BT", "--db", str(store)).startswith(f"{BT} as of cycle 3")
    result = CliRunner().invoke(cli, ["explain", "bbockelm@users.osg.org", "--db", str(store)])
    assert result.exit_code == 2
    assert f"did you mean '{BB}'?" in result.output


def test_history_filters_and_formats(store):
    text = invoke("history", "--db", str(store), "--user", BB)
    assert len(text.strip().splitlines()) == 2 + 3  # heading, rule, one row per cycle
    rows = json.loads(invoke("history", "--db", str(store), "--format", "json"))
    assert {row["user"] for row in rows} == {BT, BB}
    assert {row["cycle"] for row in rows} == {1, 2, 3}
    assert invoke("history", "--db", str(store), "--since", "0s", "--format", "csv").startswith(
        "cycle,time,user")


def test_history_plot_when_matplotlib_is_there(store, tmp_path):
    pytest.importorskip("matplotlib")
    invoke("history", "--db", str(store), "--plot", str(tmp_path / "shares.png"))
    assert (tmp_path / "shares.png").read_bytes()[:4] == b"\x89PNG"


def test_actions_by_state_and_format(store):
    text = invoke("actions", "--db", str(store), "--state", "confirmed")
    assert "vacate" in text and "allocate" in text
    rows = json.loads(invoke("actions", "--db", str(store), "--format", "json"))
    assert {row["state"] for row in rows} == {"confirmed"}
    # Six allocations to free slots, and two vacates with their allocations: the second
    # vacate was held back by max_vacates_per_cycle in cycle 1 and carried out in cycle 2 (a
    # cool-down spares the job just vacated, never its user's other jobs: issue 43).
    assert sorted(row["kind"] for row in rows) == ["allocate"] * 8 + ["vacate"] * 2
    assert invoke("actions", "--db", str(store), "--state", "failed") == \
        "no actions in that range\n"


@pytest.mark.parametrize(("args", "message"), [
    (["actions", "--since", "yesterday"], "--since 'yesterday'"),
    (["history", "--since", "3 weeks"], "--since '3 weeks'"),
])
def test_bad_since_is_exit_2(store, args, message):
    result = CliRunner().invoke(cli, [*args, "--db", str(store)])
    assert result.exit_code == 2 and message in result.output


def test_missing_store_is_exit_2(tmp_path):
    result = CliRunner().invoke(cli, ["actions", "--db", str(tmp_path / "none.db")])
    assert result.exit_code == 2
    assert result.output.startswith("gridfair: error: store ")


def test_reading_while_a_daemon_writes(tmp_path):
    config = tmp_path / "gridfair.toml"
    config.write_text('[daemon]\ninterval = 0.02\nstore = "state.db"\nmax_cycles = 400\n'
                      '[backend]\nkind = "sim"\n[backend.sim]\nstep = 120\n'
                      '[safety]\nmin_runtime = 0\npreempt_cooldown = 0\n')
    daemon = subprocess.Popen(
        [sys.executable, "-m", "gridfair.daemon", "--config", str(config)], cwd=tmp_path,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={k: v for k, v in os.environ.items() if k != "GRIDFAIR_FAULT"},
    )
    store = tmp_path / "state.db"
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if store.exists() and _cycles(store) >= 2:
                break
            time.sleep(0.05)
        first = _cycles(store)
        reads = 0
        until = time.monotonic() + 2.0
        while time.monotonic() < until:
            assert "Number of users: 4" in shares_from_store(store)
            assert invoke("explain", "User2", "--db", str(store)).startswith("User2 as of")
            json.loads(invoke("actions", "--db", str(store), "--format", "json"))
            reads += 1
        assert _cycles(store) > first  # the daemon kept committing cycles meanwhile
        assert reads >= 3
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=20)
    assert daemon.returncode == 0, err
    assert "Traceback" not in err


def _cycles(store: Path) -> int:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        try:
            return db.execute("select count(*) from cycles where outcome = 'ok'").fetchone()[0]
        except sqlite3.OperationalError:
            return 0


def test_history_plot_without_matplotlib_is_a_one_line_error(store, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    result = CliRunner().invoke(cli, ["history", "--db", str(store), "--plot",
                                      str(tmp_path / "x.png")])
    assert result.exit_code == 2
    assert result.output == ("gridfair: error: gridfair history needs the experiments extra "
                             "(matplotlib is not installed): pip install "
                             "'gridfair[experiments]'\n")


# ------------------------------------------------------------ finding the store
def write_daemon_config(directory: Path, store: Path) -> Path:
    config = directory / "gridfair.toml"
    config.write_text(f'[daemon]\nstore = "{store}"\n[backend]\nkind = "sim"\n')
    return config


@pytest.mark.parametrize("command", [("explain", BT), ("history",), ("actions",), ("shares",),
                                     ("shadow",)])
def test_every_admin_command_finds_the_store_from_the_daemons_config(store, tmp_path,
                                                                      command):
    config = write_daemon_config(tmp_path, store)
    by_config = CliRunner().invoke(cli, [*command, "--config", str(config), "--format",
                                         "json"])
    by_db = CliRunner().invoke(cli, [*command, "--db", str(store), "--format", "json"])
    assert by_config.exit_code == by_db.exit_code, by_config.output
    assert by_config.output == by_db.output


def test_without_db_or_config_the_error_says_where_it_looked(tmp_path, monkeypatch):
    from gridfair.cli import store_option

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GRIDFAIR_DB", raising=False)
    monkeypatch.delenv("GRIDFAIR_CONFIG", raising=False)
    monkeypatch.setattr(store_option, "INSTALLED_CONFIG", tmp_path / "etc" / "htcondor.toml")
    result = CliRunner().invoke(cli, ["actions"])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert ("store gridfair.db (the current directory): no such file, no "
            f"{tmp_path}/etc/htcondor.toml, and no GRIDFAIR_STORE in HTCondor's configuration; "
            "give --config FILE") in result.output


def test_without_db_or_config_the_installed_daemons_config_is_read(store, tmp_path,
                                                                   monkeypatch):
    from gridfair.cli import store_option

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GRIDFAIR_DB", raising=False)
    monkeypatch.delenv("GRIDFAIR_CONFIG", raising=False)
    (tmp_path / "etc").mkdir()
    installed = write_daemon_config(tmp_path / "etc", store)
    monkeypatch.setattr(store_option, "INSTALLED_CONFIG", installed)
    assert invoke("actions", "--format", "json") == invoke("actions", "--db", str(store),
                                                           "--format", "json")


def test_a_store_this_account_cannot_read_says_whose_it_is(store, tmp_path):
    locked = tmp_path / "state.db"
    shutil.copy(store, locked)
    locked.chmod(0)
    if os.access(locked, os.R_OK):  # root reads anything: asked as another account
        as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                     sys.executable]
        runnable = subprocess.run([*as_nobody, "-c", "import gridfair"], capture_output=True,
                                  text=True, timeout=60)
        if runnable.returncode != 0:  # a Python under root's home (pyenv), a 0700 checkout
            pytest.skip(f"nobody cannot run gridfair with this Python ({sys.executable}): "
                        f"{runnable.stderr.strip()[:200]}")
        done = subprocess.run([*as_nobody, "-m", "gridfair", "actions", "--db", str(locked)],
                              capture_output=True, text=True, timeout=60)
        output = done.stderr
        assert done.returncode == 2, output
    else:
        result = CliRunner().invoke(cli, ["actions", "--db", str(locked)])
        assert result.exit_code == 2
        output = result.output
    assert "not readable by this account" in output and "sudo -u gridfair" in output


def test_db_and_config_together_are_a_usage_error(store, tmp_path):
    config = write_daemon_config(tmp_path, store)
    result = CliRunner().invoke(cli, ["history", "--db", str(store), "--config", str(config)])
    assert result.exit_code == 2 and "give one" in result.output


def test_without_db_or_config_a_daemon_condor_master_runs_is_found_by_its_knob(store,
                                                                                tmp_path):
    """The store of a daemon run by condor_master: GRIDFAIR_STORE in HTCondor's configuration
    (read by the real bindings, in a process of its own)."""
    from gridfair.cli.store_option import INSTALLED_CONFIG

    if INSTALLED_CONFIG.exists():
        pytest.skip(f"{INSTALLED_CONFIG} exists here: it comes before the knob")
    condor_config = tmp_path / "condor_config"
    condor_config.write_text(f"GRIDFAIR_STORE = {store}\n")
    environment = {key: value for key, value in os.environ.items()
                   if key not in ("GRIDFAIR_DB", "GRIDFAIR_CONFIG")}
    done = subprocess.run([sys.executable, "-m", "gridfair", "actions", "--format", "json"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**environment, "CONDOR_CONFIG": str(condor_config)})
    assert done.returncode == 0, done.stderr
    assert done.stdout == invoke("actions", "--db", str(store), "--format", "json")
