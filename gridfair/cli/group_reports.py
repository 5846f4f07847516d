"""The admin commands' views of an accounting group from the daemon's store: `explain GROUP`
and `history --group GROUP` (the rows the daemon records each cycle under the hdrf order with
a tree, `HdrfOrder.group_rows`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gridfair.cli.output import clock, format_cell

GROUP_HISTORY_COLUMNS = (
    ("cycle", "Cycle", "d"), ("when", "Time", ""), ("group", "Group", ""),
    ("guaranteed_share", "Guaranteed", ".3f"), ("dominant_share", "Dominant share", ".3f"),
    ("dominant_resource", "Of", ""), ("hdrf_share", "H-DRF share", ".3f"),
    ("users", "Users", "d"),
)


def _amounts(amounts: Mapping[str, float]) -> str:
    return " ".join(f"{name}={value:g}" for name, value in amounts.items()) or "none"


def _group_line(row: Mapping[str, Any]) -> str:
    return (f"guaranteed {format_cell(row['guaranteed_share'], '.3f')} of the pool (quota "
            f"{_amounts(row['quota'])}, weight {format_cell(row['weight'], '.3f')}), holds "
            f"{format_cell(row['dominant_share'], '.3f')} (of {row['dominant_resource']}), "
            f"H-DRF share {format_cell(row['hdrf_share'], '.3f')}; surplus "
            f"{'accepted' if row['accept_surplus'] else 'not accepted'}, in use: "
            f"{_amounts(row['surplus_in_use'])}")


def group_text(report: Mapping[str, Any],
               decision_lines: Callable[[Sequence[Mapping[str, Any]]], list[str]]) -> str:
    """`explain GROUP` as text; `decision_lines` renders the decisions as for a user."""
    row = report["row"]
    lines = [f"accounting group {report['group']} (level {row['level']}) as of cycle "
             f"{report['cycle']} ({clock(report['time'], report['sim_start'])}, "
             f"{report['policy']}):", f"  {_group_line(row)}"]
    if report["subgroups"]:
        lines.append("Its subgroups:")
        lines += [f"  {sub['group']}: {_group_line(sub)}" for sub in report["subgroups"]]
    lines.append(f"Its own users ({len(report['users'])}):")
    lines += [f"  {user['user']}: {user['running']} running, {user['idle']} idle, dominant "
              f"share {format_cell(user['dominant_share'], '.3f')}"
              for user in report["users"]] or ["  none in the pool"]
    lines.append("Recent decisions naming it:")
    lines += decision_lines(report["decisions"])
    return "\n".join(lines)
