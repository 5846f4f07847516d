"""The HOSEP paper's synthetic workloads (paper 004, section 4), generated from a seed.

Every user submits the same mix: the workload's `mix` counts small, medium and large tasks over
all users, split equally among them (low demand: 24/12/4 in all, so 6/3/1 per user of four).
A task's size is its run time on the grid's best machine, drawn uniformly (in minutes) from its
class's range, and becomes work in MFlop at that machine's power. The users in `late_users`
submit at `late_submit_time`, after the others have filled the grid at time 0.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from gridfair.core.pool import Task
from gridfair.errors import InputError
from gridfair.sim.grid import Grid

SIZE_CLASSES = ("small", "medium", "large")


def hosep_workload(grid: Grid, name: str, seed: int = 1) -> list[Task]:
    """The tasks of the grid's synthetic workload `name` (e.g. low, medium, high)."""
    spec = grid.workloads.get(name)
    if spec is None:
        known = ", ".join(sorted(grid.workloads)) or "none"
        raise InputError(f"no workload {name!r} in the grid (known: {known})",
                         source=grid.source, attribute="workloads")
    if spec.get("kind") != "hosep-synthetic":
        raise InputError(f"workload {name!r} has kind {spec.get('kind')!r}, expected "
                         "'hosep-synthetic'", source=grid.source, attribute=f"workloads.{name}")
    settings: Mapping[str, Any] = grid.settings.get("synthetic", {})
    users = list(settings.get("users") or grid.owners())
    late_users = set(settings.get("late_users", []))
    late_time = float(settings.get("late_submit_time", 60))
    ranges = settings.get("size_minutes", {})
    mix = spec.get("mix", {})
    per_user = {}
    for size_class in SIZE_CLASSES:
        count = mix.get(size_class, 0)
        if count % len(users):
            raise InputError(f"{size_class} = {count} does not split equally among "
                             f"{len(users)} users", source=grid.source,
                             attribute=f"workloads.{name}.mix")
        if count and size_class not in ranges:
            raise InputError(f"no size range for {size_class} tasks", source=grid.source,
                             attribute="synthetic.size_minutes")
        per_user[size_class] = count // len(users)
    best_power = max(machine.mflops / machine.cpus for machine in grid.machines)
    rng = random.Random(seed)
    tasks: list[Task] = []
    for user in users:
        submit_time = late_time if user in late_users else 0.0
        number = 0
        for size_class in SIZE_CLASSES:
            low, high = ranges.get(size_class, (0, 0))
            for _ in range(per_user[size_class]):
                minutes = rng.uniform(low, high)
                tasks.append(Task(f"{user}.{number}", user, submit_time,
                                  work=minutes * 60.0 * best_power, source_index=len(tasks)))
                number += 1
    return tasks
