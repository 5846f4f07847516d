"""The DMFA-SRQ paper's allocation experiment (papers/001, section 6), as one run of a sweep.

Not a simulation over time: n users drawn at random from a Google `task_events` shard arrive
one after another, each with its demand vector <CPU, memory> and a random share w_i of the
pool (sum w_i = 1), and the final allocation is measured:
- `dmfa-srq`: the dynamic allocation (`DmfaSrq`: Lemma 1 and Eq. 8-10), where allocations
  never shrink as users arrive;
- `wdrf`: static weighted DRF with every user known at once (Eq. 5):
  M = sum w_i / max_j sum_i w_i d_ij, x_i = M w_i.
Metrics (the paper's three objectives): the minimum dominant share min_i x_i / w_i, the sum of
dominant shares sum_i x_i, and each resource's utilization sum_i x_i d_ij / sum_i w_i.

Readings this module takes (the paper does not say): a user's demand is the mean request of
its task submissions in the shard (rows with missing information, and requests of zero CPU or
memory, left out), normalised so its dominant resource is 1; w_i are independent uniform
draws, normalised to sum 1; the arrival order is a random permutation. The draw of users,
shares and order depends only on the seed and the user count, so the two policies of one seed
allocate to the same users.
"""

from __future__ import annotations

import csv
import gzip
import math
import random
from functools import lru_cache
from typing import Any

from gridfair.errors import InputError
from gridfair.policies.dmfa_srq import DmfaSrq, normalised_demand

ALLOCATION_POLICIES = ("dmfa-srq", "wdrf")
RESOURCES = ("cpu", "memory")

# task_events columns (0-based): missing info, event type, user, CPU and memory requests.
_MISSING, _EVENT, _USER, _CPU, _MEMORY = 1, 5, 6, 9, 10
_SUBMIT = "0"


@lru_cache(maxsize=4)  # a worker runs many draws from the same shard: read it once
def user_demands(path: str) -> dict[str, tuple[float, ...]]:
    """Each user's normalised mean <CPU, memory> request over its task submissions."""
    sums: dict[str, list[float]] = {}
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as stream:
            for row in csv.reader(stream):
                if len(row) < 13 or row[_EVENT] != _SUBMIT or row[_MISSING]:
                    continue
                try:
                    cpu, memory = float(row[_CPU]), float(row[_MEMORY])
                except ValueError:
                    continue
                if cpu > 0 and memory > 0:
                    total = sums.setdefault(row[_USER], [0.0, 0.0, 0])
                    total[0] += cpu
                    total[1] += memory
                    total[2] += 1
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read the task_events shard: {error}", source=path) from None
    return {user: tuple(normalised_demand([cpu / count, memory / count]))
            for user, (cpu, memory, count) in sorted(sums.items())}


def allocate(policy: str, path: str, users: int | None, seed: int) -> dict[str, Any]:
    """The run-wide metrics of one draw of `users` users under `policy`."""
    if policy not in ALLOCATION_POLICIES:
        raise InputError(f"the allocation experiment compares {' and '.join(ALLOCATION_POLICIES)}"
                         f", not {policy!r}")
    demands = user_demands(path)
    if users is None or not 1 <= users <= len(demands):
        raise InputError(f"the allocation experiment needs users between 1 and "
                         f"{len(demands)} (the shard's users with requests), got {users!r}",
                         source=path)
    rng = random.Random(seed)
    chosen = rng.sample(list(demands), users)  # in arrival order
    draws = [rng.random() for _ in chosen]
    drawn = math.fsum(draws)
    weights = [draw / drawn for draw in draws]
    vectors = [demands[user] for user in chosen]
    pool = math.fsum(weights)
    if policy == "dmfa-srq":
        dynamic = DmfaSrq()
        for weight, vector in zip(weights, vectors, strict=True):
            dynamic.arrive(weight, vector)
        allocations = dynamic.allocations
    else:
        level = pool / max(math.fsum(w * d[j] for w, d in zip(weights, vectors, strict=True))
                           for j in range(len(RESOURCES)))
        allocations = [level * weight for weight in weights]
    return {
        "min_dominant_share": min(x / w for x, w in zip(allocations, weights, strict=True)
                                  if w > 0),
        "sum_dominant_shares": math.fsum(allocations),
        **{f"utilization_{name}": math.fsum(x * d[j] for x, d in zip(allocations, vectors,
                                                                       strict=True)) / pool
           for j, name in enumerate(RESOURCES)},
    }

