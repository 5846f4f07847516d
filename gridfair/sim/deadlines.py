"""Deadline formulations of the Justice paper (paper 002, section III-A), seeded.

A job's deadline is `submit + x * T`, where `T` is its optimal run time (the trace's run time,
with every slot it asks for) and `x >= 1` its expansion factor:

- Fixed1x, Fixed2x: x = 1, x = 2;
- Jockey1x2x, Jockey2x4x: x drawn with equal probability from {1, 2}, {2, 4};
- 90loose: x from {1, 2}, the larger (loose) value with probability 0.9;
- Aria1x3x, Aria2x4x: x uniform in [1, 3], [2, 4].

Factors are drawn from one `random.Random(seed)` in job order, one draw per job (none for the
fixed types), so a trace, a type and a seed always give the same deadlines. Names are matched
without regard to case; an unknown name is an `InputError` listing the known ones.

`deadline_job` builds a job of the Justice model (see `gridfair.policies.justice`) as a `Task`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from gridfair.core.pool import Task
from gridfair.errors import InputError

#: Draws one expansion factor x from the generator.
FactorDraw = Callable[[random.Random], float]


def _fixed(x: float) -> FactorDraw:
    return lambda rng: x


def _either(small: float, large: float, p_large: float) -> FactorDraw:
    return lambda rng: large if rng.random() < p_large else small


def _uniform(low: float, high: float) -> FactorDraw:
    return lambda rng: rng.uniform(low, high)


@dataclass(frozen=True)
class DeadlineType:
    name: str
    description: str
    draw: FactorDraw


DEADLINE_TYPES: dict[str, DeadlineType] = {
    kind.name: kind for kind in (
        DeadlineType("Fixed1x", "x = 1", _fixed(1.0)),
        DeadlineType("Fixed2x", "x = 2", _fixed(2.0)),
        DeadlineType("Jockey1x2x", "x in {1, 2}, equally likely", _either(1.0, 2.0, 0.5)),
        DeadlineType("Jockey2x4x", "x in {2, 4}, equally likely", _either(2.0, 4.0, 0.5)),
        DeadlineType("90loose", "x in {1, 2}, 2 with probability 0.9", _either(1.0, 2.0, 0.9)),
        DeadlineType("Aria1x3x", "x uniform in [1, 3]", _uniform(1.0, 3.0)),
        DeadlineType("Aria2x4x", "x uniform in [2, 4]", _uniform(2.0, 4.0)),
    )
}


def deadline_type(name: str) -> DeadlineType:
    """The formulation called `name` (any case), or an `InputError` naming the known ones."""
    for kind in DEADLINE_TYPES.values():
        if kind.name.lower() == name.lower():
            return kind
    known = ", ".join(DEADLINE_TYPES)
    raise InputError(f"unknown deadline type {name!r} (known: {known})")


def deadline_factors(name: str, count: int, seed: int) -> list[float]:
    """The expansion factors x of `count` jobs, in job order."""
    draw = deadline_type(name).draw
    rng = random.Random(seed)
    return [draw(rng) for _ in range(count)]


def deadline_job(
    job_id: str,
    user: str,
    submit_time: float,
    requested: int,
    run_time: float,
    factor: float | None,
    capacity: int,
    *,
    source_index: int = -1,
) -> Task:
    """A job of the Justice model as a `Task`.

    It asks for `requested` slots and runs `run_time` seconds with all of them; it is given
    at most the capacity (a policy may give it fewer), and runs `run_time x requested / cpus`
    with `cpus` slots (perfect parallelism). Its deadline is `submit + factor x run_time`
    (none when `factor` is None).
    """
    cpus = min(requested, capacity)
    task = Task(job_id, user, submit_time, cpus=cpus, duration=run_time * requested / cpus,
                deadline=None if factor is None else submit_time + factor * run_time,
                source_index=source_index)
    task.requested_cpus = requested
    return task
