"""Rendering of command results: plain-text tables, JSON and CSV, the same for every command.

Tables are plain text with fixed column widths (no terminal-dependent layout), so output is
byte-for-byte the same for the same inputs. JSON writes NaN as null.

Every string shown may have come from an ad a pool user wrote, so output is data, never
terminal control or a spreadsheet formula:
- table cells and every text report (`shown_all` over the report before its lines are made)
  have their control, bidi and unencodable characters escaped (`gridfair.text.shown`);
- JSON is ASCII: `json` writes every such character as a four-hex-digit `\\u` escape;
- CSV cells are escaped as table cells, and a text cell a spreadsheet would run as a formula
  (one that starts with `=`, `+`, `-`, `@`, a tab or a carriage return) gets a leading `'`,
  the OWASP rule (CSV injection): the cell shows as text. Numbers are written as numbers.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from gridfair.text import shown

FORMATS = ("table", "json", "csv")


def clean(value: Any) -> Any:
    """JSON-safe: NaN and infinities become None, recursively."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, Mapping):
        return {key: clean(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [clean(item) for item in value]
    return value


def to_json(data: Any) -> str:
    # ensure_ascii (the default, said here because output safety rests on it): controls,
    # bidi characters and lone surrogates come out as \\u escapes of four hex digits.
    return json.dumps(clean(data), indent=2, sort_keys=False, ensure_ascii=True)


#: First characters that make a spreadsheet read a cell as a formula (OWASP, CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell that is data: text escaped (`shown`) and, when a spreadsheet would run it
    as a formula, prefixed with `'`; other values as they are."""
    if not isinstance(value, str):
        return value
    return ("'" if value.startswith(FORMULA_STARTS) else "") + shown(value)


def to_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    if not rows:
        return ""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: csv_cell(value) for key, value in clean(dict(row)).items()})
    return buffer.getvalue()


def clock(seconds: float | None, sim_start: float | None = None) -> str | None:
    """A time as every command shows it: UTC wall time, said so, or, on a simulated clock
    that started at `sim_start`, the simulated seconds since: `t+1234 s`."""
    if seconds is None:
        return None
    if sim_start is not None:
        return f"t+{seconds - sim_start:.0f} s"
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


#: How a number whose scale is not fixed (a policy's own figures in `explain`) is printed:
#: four significant digits, but a big one whole (241800, not 2.418e+05). Every command prints
#: MFlops, cpus and counts whole and without thousands separators (867040, not 867,040), so a
#: figure reads the same in every table, line and CSV (docs/reference.md, "Numbers").
FIGURE = "figure"


def format_cell(value: Any, spec: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if spec == FIGURE:
        spec = ".0f" if isinstance(value, float) and abs(value) >= 1e4 else ".4g"
    return format(value, spec) if spec else shown(str(value))


def render_table(
    columns: Sequence[tuple[str, str, str]],
    rows: Sequence[Mapping[str, Any]],
    *,
    footer: Sequence[Mapping[str, Any]] = (),
) -> str:
    """A text table. `columns` are (key, heading, format spec); text columns align left."""
    cells = [[format_cell(row.get(key), spec) for key, _, spec in columns]
             for row in list(rows) + list(footer)]
    widths = [max([len(heading)] + [len(line[i]) for line in cells])
              for i, (_, heading, _) in enumerate(columns)]
    numeric = [bool(spec) for _, _, spec in columns]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            value.rjust(width) if is_number else value.ljust(width)
            for value, width, is_number in zip(values, widths, numeric, strict=True)
        ).rstrip()

    rule = "  ".join("-" * width for width in widths)
    out = [line([heading for _, heading, _ in columns]), rule]
    out += [line(values) for values in cells[: len(rows)]]
    if footer:
        out.append(rule)
        out += [line(values) for values in cells[len(rows):]]
    return "\n".join(out)
