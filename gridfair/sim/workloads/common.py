"""What every grid-based workload reader shares: mapping the workload's users to the grid's
owners, and turning tasks into a `Scenario` (skipped counts, transfer delays).

A workload's user either runs as one of the grid's owners (and is entitled to that owner's
share) or runs as itself, an account that provides nothing. `--user-map` chooses how:
- `names`: a user whose name is an owner's is that owner; the others provide nothing;
- `busiest`: the k users with the most tasks become the grid's k owners, in the grid's order of
  owners (ties: first to appear in the workload);
- `round-robin`: users in order of first appearance take the owners in turn, so every user runs
  as some owner;
- a CSV file of `workload_user,owner` lines (`#` comments; an empty owner: provides nothing).
`--unmapped keep` (default) runs the other users under their own names; `drop` leaves their
tasks out, counted as skipped.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gridfair.core.pool import Task
from gridfair.errors import InputError
from gridfair.sim.grid import Grid
from gridfair.sim.workloads.registry import Scenario

USER_MAPS = ("names", "busiest", "round-robin")
UNMAPPED = ("keep", "drop")
#: The choices of `--swf-status` and `--swf-procs` (`swf_grid`), here so that the command line
#: names them without loading the SWF reader.
SWF_STATUSES = ("any", "completed")
SWF_PROCS = ("one", "cpus")

#: Builds the tasks for a user mapping: (user -> account or None) -> (tasks, input Mbit each);
#: the tasks a list, or a sized iterable in submit order read as they are taken.
TaskBuilder = Callable[[Mapping[str, str | None]], tuple[Iterable[Task], list[float]]]


def count(skipped: dict[str, int], reason: str, number: int = 1) -> None:
    """Add to the count of items skipped for `reason`."""
    if number:
        skipped[reason] = skipped.get(reason, 0) + number


def _read_map_file(path: Path) -> dict[str, str | None]:
    source = str(path)
    mapping: dict[str, str | None] = {}
    try:
        with open(path, newline="", encoding="utf-8") as stream:
            for number, row in enumerate(csv.reader(stream), start=1):
                if not row or not row[0].strip() or row[0].lstrip().startswith("#"):
                    continue
                if len(row) != 2:
                    raise InputError(f"expected 2 columns (workload_user,owner), got {len(row)}",
                                     source=source, line=number)
                mapping[row[0].strip()] = row[1].strip() or None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read user map: {error}", source=source) from None
    return mapping


def map_users(
    users: Iterable[str] | Mapping[str, int],
    owners: Sequence[str],
    mode: str,
    *,
    unmapped: str = "keep",
    source: str | None = None,
) -> dict[str, str | None]:
    """Each distinct user of `users` (one entry per task, or each user's task count) -> the
    account it runs as, or None for a user whose tasks are dropped."""
    if unmapped not in UNMAPPED:
        raise InputError(f"--unmapped must be one of {', '.join(UNMAPPED)}, got {unmapped!r}")
    tasks_per_user = Counter(users)
    distinct = list(tasks_per_user)  # order of first appearance
    owner_set = set(owners)
    chosen: dict[str, str | None]
    if mode == "names":
        chosen = {user: user for user in distinct if user in owner_set}
    elif mode == "busiest":
        ranked = sorted(distinct, key=lambda user: -tasks_per_user[user])  # stable on ties
        chosen = dict(zip(ranked, owners, strict=False))
    elif mode == "round-robin":
        if not owners:
            raise InputError("--user-map round-robin needs a grid with owners")
        chosen = {user: owners[i % len(owners)] for i, user in enumerate(distinct)}
    else:
        path = Path(mode)
        if not path.exists():
            raise InputError(f"--user-map must be one of {', '.join(USER_MAPS)} or a CSV file; "
                             f"no such file {mode!r}")
        listed = _read_map_file(path)
        for owner in listed.values():
            if owner is not None and owner not in owner_set:
                raise InputError(f"{owner!r} owns no machine of the grid (owners: "
                                 f"{', '.join(owners)})", source=str(path))
        chosen = {user: listed[user] or user for user in distinct if user in listed}
    mapping: dict[str, str | None] = {}
    for user in distinct:
        if user in chosen:
            mapping[user] = chosen[user]
        elif unmapped == "drop":
            mapping[user] = None
        else:
            if user in owner_set:
                raise InputError(f"workload user {user!r} is not mapped to an owner but has "
                                 "an owner's name; give --user-map names or a map file",
                                 source=source)
            mapping[user] = user
    if owners and not any(account in owner_set for account in mapping.values()):
        shown = ", ".join(distinct[:5]) + (", ..." if len(distinct) > 5 else "")
        raise InputError(
            f"none of the workload's {len(distinct)} users ({shown}) owns a machine of the grid "
            f"(owners: {', '.join(owners)}); map them with --user-map busiest, round-robin or "
            "a CSV file", source=source)
    return mapping


def grid_scenario(
    path: Path,
    grid: Grid | None,
    options: Mapping[str, Any],
    *,
    users: Iterable[str] | Mapping[str, int],
    build: TaskBuilder,
    skipped: Mapping[str, int],
    default_user_map: str,
) -> Scenario:
    """A scenario of a workload's tasks on `grid`'s machines, users mapped to its owners
    (`users`: each task's user, or each user's task count)."""
    source = str(path)
    if grid is None:
        raise InputError("this workload runs on a grid: give GRID (a .toml grid or an iSPD "
                         ".imsx model)", source=source)
    if not users:
        raise InputError("the workload has no tasks"
                         + (f" (skipped: {describe_skipped(skipped)})" if skipped else ""),
                         source=source)
    unmapped = options.get("unmapped") or "keep"
    tasks_per_user = Counter(users)
    mapping = map_users(tasks_per_user, grid.owners(),
                        options.get("user_map") or default_user_map, unmapped=unmapped,
                        source=source)
    tasks, sizes = build(mapping)
    all_skipped = dict(skipped)
    count(all_skipped, "task of a user mapped to no owner (--unmapped drop)",
          sum(number for user, number in tasks_per_user.items() if mapping[user] is None))
    if not tasks:
        raise InputError("the workload has no tasks to simulate"
                         + (f" (skipped: {describe_skipped(all_skipped)})" if all_skipped
                            else ""), source=source)
    return Scenario(grid.nodes(), tasks, skipped=all_skipped,
                    transfer_delay=transfer_for(grid, sizes, options))


def transfer_for(grid: Grid, sizes: Sequence[float], options: Mapping[str, Any]):
    """The transfer delay function when `options["transfer"]` asks for one, else None."""
    if not options.get("transfer"):
        return None
    paths = grid.settings.get("transfer_paths")
    if paths is None:
        raise InputError("transfer delays need a grid with links (an iSPD .imsx model)",
                         source=grid.source)
    return paths.delay_function(sizes)


def describe_skipped(skipped: Mapping[str, int]) -> str:
    return "; ".join(f"{number} {reason}" for reason, number in skipped.items())
