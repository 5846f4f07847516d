"""Writes docs/reference.md from the one source the code has for each thing: the commands and
options from click, the config keys from `gridfair.daemon.config.SCHEMA`, the metrics from the
daemon's Prometheus registry, the output columns from each command's column table and the terms
from `gridfair.cli.terms.TERMS`. tests/test_docs_reference.py checks the page is up to date.

    .venv/bin/python docs/gen_reference.py > docs/reference.md
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gridfair.cli.group import COMMANDS, cli  # noqa: E402
from gridfair.cli.terms import TERMS  # noqa: E402
from gridfair.daemon.config import REQUIRED, SCHEMA  # noqa: E402

#: (command, module, the module's column table, what the table is).
COLUMN_TABLES = (
    ("shares", "gridfair.cli.shares", "SHARE_COLUMNS", "per user"),
    ("history", "gridfair.cli.admin", "HISTORY_COLUMNS", "per user and cycle"),
    ("history --group", "gridfair.cli.group_reports", "GROUP_HISTORY_COLUMNS",
     "per accounting group and cycle"),
    ("actions", "gridfair.cli.admin", "ACTION_COLUMNS", "per action"),
    ("shadow", "gridfair.cli.shadow", "USER_COLUMNS", "per user"),
    ("simulate", "gridfair.cli.simulate", "USER_COLUMNS", "per user"),
    ("compare", "gridfair.cli.compare", "USER_COLUMNS", "per user, policy and workload"),
    ("compare", "gridfair.cli.compare", "SUMMARY_COLUMNS", "per run (policy and workload)"),
    ("grid show", "gridfair.cli.grid", "OWNER_COLUMNS", "per owner"),
    ("grid show --machines", "gridfair.cli.grid", "MACHINE_COLUMNS", "per machine"),
    ("grid list", "gridfair.cli.grid", "EMBEDDED_COLUMNS", "per embedded grid"),
)

TOML_TYPES = {float: "number", int: "integer", str: "string", bool: "boolean", dict: "table"}

#: A column's format spec, as a reader sees it.
PRINTED = {"": "as is", "d": "a whole number", "g": "as short as exact (2, 0.5)",
           ".0f": "whole, no thousands separators", ".1f": "one decimal", ".3f": "three decimals",
           "+.3f": "signed, three decimals", ".0%": "percent, whole", ".1%": "percent, one "
           "decimal", ".2%": "percent, two decimals"}

STATIC = """\
## Exit codes and signals

| code | when |
|---|---|
| 0 | done; `daemon` stopped by SIGTERM or after its `--cycles` |
| 1 | `daemon --once`: the cycle failed; `simulate --check`: the records broke a rule |
| 2 | a usage, input, config or store error: one line `gridfair: error: ...` naming it |
| 130 | SIGINT (Ctrl-C): `daemon` stops after its step; `simulate` removes its `--tasks-out` |

The daemon (`gridfair daemon`, `python -m gridfair.daemon`) on SIGHUP reopens its log file
(`configs/gridfair.logrotate`) and reads its config again: a valid one is taken from the next
cycle on; one that fails to load, or changes what only a restart can (`daemon.store`,
`daemon.incremental`, `daemon.max_cycles`, the `backend` sections, `metrics`), is refused
with an ERROR line and the daemon goes on with the one it runs.

## Finding the daemon's store

`explain`, `history`, `actions`, `shadow` (and `shares --db/--config`) read the store
`--db FILE` (`$GRIDFAIR_DB`) names, or the one of the daemon's config `--config FILE`
(`$GRIDFAIR_CONFIG`, its `daemon.store`). With neither: `./gridfair.db` if it exists (the demo
daemon's, `make run`), else the store of `/etc/gridfair/htcondor.toml` (the installed daemon's,
`configs/gridfair-daemon.service`), else `GRIDFAIR_STORE` in HTCondor's configuration (a daemon
`condor_master` runs, `docs/condor-daemon.md`); else the error says where it looked.

## Numbers

One kind of figure is printed one way in every table and line: MFlops, cpus, counts and
simulated seconds (waits, makespan) whole, without thousands separators (`867040`); shares,
PowerDiff and Jain's index with three decimals; percentages as the column says (CSV and JSON
keep every figure as computed). A policy's own figures in `explain` (priorities, commitments)
have four significant digits, a big one printed whole (`241800`, not `2.418e+05`). Sums of
floats are exactly rounded (`math.fsum`), so every figure is the same on every supported
Python.
"""


def cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def commands() -> list[str]:
    lines = ["## Commands", "",
             "Every command takes `--help`, which says the same as this section.", ""]
    context = click.Context(cli, info_name="gridfair")
    for name in sorted(COMMANDS):
        command = cli.get_command(context, name)
        assert command is not None, name
        lines += list(_command(command, f"gridfair {name}", context))
    return lines


def _command(command: click.Command, path: str, parent: click.Context) -> Iterable[str]:
    context = click.Context(command, info_name=path.rpartition(" ")[2], parent=parent)
    arguments = " ".join(param.make_metavar(context) if hasattr(param, "make_metavar") else ""
                         for param in command.params if isinstance(param, click.Argument))
    yield f"### `{path}{' ' + arguments if arguments else ''}`"
    yield ""
    yield cell(command.help or "")
    yield ""
    records = [param.get_help_record(context) for param in command.get_params(context)
               if isinstance(param, click.Option)]
    if records:
        yield "| option | what |"
        yield "|---|---|"
        for flags, help_text in filter(None, records):
            yield f"| `{cell(flags)}` | {cell(help_text)} |"
        yield ""
    if isinstance(command, click.Group):
        for name in sorted(command.list_commands(context)):
            yield from _command(command.get_command(context, name), f"{path} {name}", context)


def config_keys() -> list[str]:
    lines = ["## Daemon configuration (TOML)", "",
             "Every key, with its type, default and meaning; an unknown key, a wrong type or a "
             "value out of range is refused at load naming the key. Relative paths are "
             "resolved against the config file's directory. Examples: `configs/sim.toml`, "
             "`configs/files.toml`, `configs/htcondor.toml`.", ""]
    for section, keys in SCHEMA.items():
        lines += [f"### `[{section}]`", "", "| key | type | default | allowed | meaning |",
                  "|---|---|---|---|---|"]
        for name, key in keys.items():
            default = ("required" if key.default is REQUIRED else
                       f"`{json.dumps(key.default)}`")
            allowed = (", ".join(key.choices) if key.choices else
                       f">= {key.minimum:g}" if key.minimum is not None else
                       "a path" if key.path else "")
            lines.append(f"| `{name}` | {TOML_TYPES[key.kind]} | {default} | {allowed} | "
                         f"{cell(key.help)} |")
        lines.append("")
    return lines


def metrics() -> list[str]:
    """The metrics as the daemon's registry exports them, each used once so its labels show."""
    from gridfair.daemon.metrics import PrometheusMetrics

    # A real registry, on a port of its own; user labels on, so the per-user series show.
    exported = PrometheusMetrics("127.0.0.1", 0, user_labels=True)
    try:
        exported.cycle("ok", 0.1)
        exported.decision("allocate")
        exported.action("vacate", "planned")
        exported.error("snapshot")
        exported.settled(1, 0)
        exported.users([("user", 0.0, 0.0)])
        families = sorted(exported.registry.collect(), key=lambda family: family.name)
    finally:
        exported.close()
    lines = ["## Metrics (Prometheus)", "",
             "Served at `http://[metrics] address:port/metrics` when `[metrics] enabled`.", "",
             "| metric | type | labels | meaning |", "|---|---|---|---|"]
    for family in families:
        labels = sorted({label for sample in family.samples for label in sample.labels
                         if label != "le"})
        suffix = "_total" if family.type == "counter" else ""
        lines.append(f"| `{family.name}{suffix}` | {family.type} | "
                     f"{', '.join(labels) or '-'} | {cell(family.documentation)} |")
    return [*lines, ""]


def columns() -> list[str]:
    lines = ["## Output columns", "",
             "The table's heading, the key of the same figure in `--format json` and `csv`, "
             "and how the table prints it.", ""]
    for command, module, table, what in COLUMN_TABLES:
        rows: Sequence = getattr(importlib.import_module(module), table)
        lines += [f"### `{command}`: {what}", "", "| heading | key | printed |", "|---|---|---|"]
        for key, heading, spec in rows:
            shown = " ".join(heading) if isinstance(heading, tuple) else heading
            lines.append(f"| {shown} | `{key}` | {PRINTED.get(spec, spec)} |")
        lines.append("")
    return lines


def terms() -> list[str]:
    lines = ["## Terms", "", "The words of the output, as each command's `--help` ends with "
             "them (`docs/terms.md` holds the same).", "", "| term | meaning |", "|---|---|"]
    lines += [f"| {name} | {cell(meaning)} |" for name, meaning in TERMS.items()]
    return [*lines, ""]


def render() -> str:
    head = ["# Reference", "",
            "Generated by `docs/gen_reference.py` from the code (click's commands, the config "
            "schema, the metrics registry, the column tables, the terms); do not edit by hand. "
            "The guide is `docs/index.md`.", ""]
    body = head + commands() + config_keys() + metrics() + columns() + terms()
    return "\n".join(body) + "\n" + STATIC


if __name__ == "__main__":
    sys.stdout.write(render())
