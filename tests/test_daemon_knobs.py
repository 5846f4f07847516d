"""The daemon's settings as HTCondor knobs (gridfair/daemon/knobs.py): each knob gives what
its TOML key gives, a bad knob is one line naming it, the reference table is SCHEMA's, and
`gridfair daemon --knobs` reads them through the real bindings."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from gridfair.daemon.config import SCHEMA, Key, validate
from gridfair.daemon.knobs import KNOBS, MASTER_KNOBS, knob_name, knob_table, read_knobs
from gridfair.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent

#: Non-default values the generic rule below cannot make up (they must name real stages, or
#: hold between keys).
SPECIAL: dict[str, Any] = {
    "daemon.lease": 400.0,
    "policy.name": "reclaim",
    "policy.order": "sdrf",
    "policy.preempt": "none",
    "policy.admit": "reactive",
    "policy.options": {"delta": 0.25},
    "backend.kind": "files",
    # Usage goes from every cycle to hourly to daily: each window no shorter than the last.
    "retention.usage_full": 2.0,
    "retention.usage_hourly": 40.0,
    "retention.usage_daily": 400.0,
}


def other_value(dotted: str, key: Key) -> Any:
    """A valid value of `key` other than its default."""
    if dotted in SPECIAL:
        return SPECIAL[dotted]
    if key.choices:
        return next(choice for choice in reversed(key.choices) if choice != key.default)
    if key.kind is bool:
        return not key.default
    if key.kind in (int, float):
        return key.default + (3 if key.kind is int else 2.5)
    return f"/srv/gridfair/{dotted}" if key.path else f"value of {dotted}"


def knob_text(value: Any) -> str:
    """A value as an administrator writes it in HTCondor's configuration."""
    if isinstance(value, bool):
        return "True" if value else "False"  # HTCondor's spelling
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{name} = {item!r}" for name, item in value.items()) + " }"
    return str(value)


def toml_text(sections: dict[str, dict[str, Any]]) -> str:
    lines = []
    for section, keys in sections.items():
        lines.append(f"[{section}]")
        for name, value in keys.items():
            if isinstance(value, bool):
                lines.append(f"{name} = {str(value).lower()}")
            elif isinstance(value, dict):
                lines.append(f"{name} = {knob_text(value)}")
            else:
                lines.append(f"{name} = {value!r}" if isinstance(value, str) else
                             f"{name} = {value}")
    return "\n".join(lines).replace("'", '"') + "\n"


def test_every_knob_gives_what_its_toml_key_gives(tmp_path: Path) -> None:
    sections = {section: {name: other_value(f"{section}.{name}", key)
                          for name, key in keys.items()} for section, keys in SCHEMA.items()}
    from_toml = validate(tomllib.loads(toml_text(sections)), base=tmp_path)
    knobs = {knob_name(section, name): knob_text(value)
             for section, keys in sections.items() for name, value in keys.items()}
    from_knobs = read_knobs(knobs, base=tmp_path)
    assert from_knobs.sections == from_toml.sections
    defaults = validate({"backend": {"kind": "sim"}}, base=tmp_path).sections
    # Every setting differs from its default, so a knob that is not read shows.
    for section, keys in from_knobs.sections.items():
        for name, value in keys.items():
            assert value != defaults[section][name], f"{section}.{name}"


def test_knob_names_are_one_per_key_and_none_is_the_masters_or_the_pool_configs() -> None:
    assert len(KNOBS) == sum(len(keys) for keys in SCHEMA.values())
    assert knob_name("daemon", "interval") == "GRIDFAIR_INTERVAL"
    assert knob_name("backend.htcondor", "collector") == "GRIDFAIR_HTCONDOR_COLLECTOR"
    assert not set(KNOBS) & set(MASTER_KNOBS)
    for path in (ROOT / "configs").glob("*.config"):
        if path.name == "htcondor-gridfair-daemon.config":
            continue  # the snippet that sets the daemon's knobs
        written = set(re.findall(r"^\s*(?:\w+\.)?(GRIDFAIR_\w+)\s*=", path.read_text(),
                                 re.MULTILINE | re.IGNORECASE))
        assert not {name.upper() for name in written} & set(KNOBS), path.name


def test_an_empty_string_is_two_quotes(tmp_path: Path) -> None:
    """HTCondor drops a knob with no value (the default applies): `""` is the empty string."""
    config = read_knobs({"GRIDFAIR_HTCONDOR_LEASE_KNOB": '""',
                         "GRIDFAIR_HTCONDOR_SLOT_CONSTRAINT": 'GridOwner == "User1"'},
                        base=tmp_path)
    assert config["backend.htcondor"]["lease_knob"] == ""
    assert config["backend.htcondor"]["slot_constraint"] == 'GridOwner == "User1"'


def test_an_htcondor_daemon_needs_no_backend_knob(tmp_path: Path) -> None:
    config = read_knobs({"GRIDFAIR_INTERVAL": "5"}, base=tmp_path)
    assert config.backend == "htcondor"
    assert config["daemon"]["lease"] == 10.0


@pytest.mark.parametrize(("knobs", "message"), [
    ({"GRIDFAIR_INTERVAL": "60s"},
     "HTCondor knob GRIDFAIR_INTERVAL: expected a number (seconds between cycles), got '60s'"),
    ({"GRIDFAIR_SAFETY_MAX_RETRIES": "true"},
     "HTCondor knob GRIDFAIR_SAFETY_MAX_RETRIES: expected an integer (retries of a failed "
     "action), got 'true'"),
    ({"GRIDFAIR_INCREMENTAL": "yes"}, "HTCondor knob GRIDFAIR_INCREMENTAL: expected true/false"),
    ({"GRIDFAIR_INTERVAL": "nan"}, "HTCondor knob GRIDFAIR_INTERVAL: expected a number"),
    ({"GRIDFAIR_LOG_LEVEL": "loud"},
     "HTCondor knob GRIDFAIR_LOG_LEVEL: must be one of debug, info, warning, error, got 'loud'"),
    ({"GRIDFAIR_INTERVAL": "60", "GRIDFAIR_LEASE": "30"},
     "HTCondor knob GRIDFAIR_LEASE: must be longer than GRIDFAIR_INTERVAL (60 s), got 30"),
    ({"GRIDFAIR_POLICY_NAME": "sdrf", "GRIDFAIR_POLICY_OPTIONS": "{ delat = 0.5 }"},
     "HTCondor knob GRIDFAIR_POLICY_OPTIONS, key delat: not an option of the chosen stages"),
    ({"GRIDFAIR_POLICY_OPTIONS": "delta = 0.5"},
     "HTCondor knob GRIDFAIR_POLICY_OPTIONS: expected a table"),
    ({"GRIDFAIR_POLICY_NAME": "nope"}, "HTCondor knobs GRIDFAIR_POLICY_*: "),
    ({"GRIDFAIR_METRICS_PORT": "0"},
     "HTCondor knob GRIDFAIR_METRICS_PORT: must be at least 1, got 0"),
    ({"GRIDFAIR_BACKEND_KIND": "files"},
     "HTCondor knob GRIDFAIR_FILES_DIRECTORY: required by backend 'files'"),
    ({"gridfair_safety_min_runtim": "5"},
     "HTCondor knob gridfair_safety_min_runtim: unknown knob (known: "
     "GRIDFAIR_SAFETY_MAX_VACATES_PER_CYCLE, "),
])
def test_a_bad_knob_is_one_line_naming_it(tmp_path: Path, knobs: dict[str, str],
                                          message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        read_knobs(knobs, base=tmp_path)
    text = str(raised.value)
    assert text.startswith(message), text
    assert "\n" not in text and "config key" not in text


def test_the_docs_reference_table_is_the_schemas() -> None:
    docs = (ROOT / "docs" / "condor-daemon.md").read_text()
    assert knob_table() in docs


def test_the_daemon_reads_its_knobs_through_the_bindings(tmp_path: Path) -> None:
    """`gridfair daemon --knobs --once`: knobs in lower case and with macros, read from the
    HTCondor configuration CONDOR_CONFIG names (a process of its own: loading a configuration
    changes the bindings' settings for the whole process)."""
    (tmp_path / "condor_config").write_text(
        f"GRIDFAIR_DIR = {tmp_path}\n"
        "GRIDFAIR_BACKEND_KIND = sim\n"
        "gridfair_store = $(GRIDFAIR_DIR)/state.db\n"
        "GRIDFAIR_POLICY_NAME = drf\n"
        "GRIDFAIR_SIM_STEP = 30\n")
    environment = {**os.environ, "CONDOR_CONFIG": str(tmp_path / "condor_config")}
    done = subprocess.run([sys.executable, "-m", "gridfair.daemon", "--knobs", "--once"],
                          env=environment, capture_output=True, text=True, check=False,
                          cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(tmp_path / "state.db") as db:
        assert db.execute("select policy, outcome from cycles").fetchall() == [
            ("order:drf", "ok")]
    (tmp_path / "condor_config").write_text(f"GRIDFAIR_SIM_STEP = soon\n"
                                            f"GRIDFAIR_LOG_FILE = {tmp_path}/GridfairLog\n")
    bad = subprocess.run([sys.executable, "-m", "gridfair.daemon", "--knobs", "--once"],
                         env=environment, capture_output=True, text=True, check=False,
                         cwd=tmp_path, timeout=120)
    assert bad.returncode == 2
    line = ("HTCondor knob GRIDFAIR_SIM_STEP: expected a number (simulated seconds per cycle), "
            "got 'soon'")
    assert bad.stderr == f"gridfair: error: {line}\n"
    # The master's daemon has no terminal: the line is in its log too.
    assert (tmp_path / "GridfairLog").read_text().endswith(f" gridfair ERROR {line}\n")


@pytest.mark.parametrize("args", [[], ["--knobs", "--config", "x.toml"]])
def test_the_daemon_takes_a_toml_file_or_knobs(args: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "gridfair.daemon", *args], capture_output=True,
                          text=True, check=False, timeout=60)
    assert done.returncode == 2
    assert done.stderr.startswith("gridfair: error: give --config FILE or --knobs")
    assert done.stderr.count("\n") == 1


def test_reread_knobs_reads_the_configuration_files_again(tmp_path: Path) -> None:
    """The hook for `condor_reconfig` (SIGHUP): a knob edited after the daemon started is
    read, in a process of its own (it reloads the bindings' configuration)."""
    config = tmp_path / "condor_config"
    config.write_text("GRIDFAIR_POLICY_NAME = drf\n")
    script = ("import htcondor2, pathlib, sys\n"
              "from gridfair.daemon.knobs import read_knobs, reread_knobs\n"
              "print(read_knobs(htcondor2.param)['policy']['name'])\n"
              "pathlib.Path(sys.argv[1]).write_text('GRIDFAIR_POLICY_NAME = sdrf\\n')\n"
              "print(reread_knobs()['policy']['name'])\n")
    done = subprocess.run([sys.executable, "-c", script, str(config)], capture_output=True,
                          text=True, check=False, timeout=60, cwd=tmp_path,
                          env={**os.environ, "CONDOR_CONFIG": str(config)})
    assert (done.returncode, done.stdout) == (0, "drf\nsdrf\n"), done.stderr
