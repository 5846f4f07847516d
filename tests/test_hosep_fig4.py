"""The HOSEP paper's finding (Fig. 4) on the embedded Table 1 grid.

Fig. 4 (grid-mean satisfaction, as iSPD computes it): under OSEP, User1's satisfaction is about
User2's and barely above User4's; under HOSEP, User1 is always the most satisfied (about 80 %)
and the others follow the power they provide.
"""

from __future__ import annotations

import pytest

from gridfair.sim.grid_loader import embedded_grids
from gridfair.sim.metrics import user_metrics
from gridfair.sim.scenario import build_scenario, run_scenario

TABLE1 = str(embedded_grids()["hosep-table1"])
WORKLOADS = ("low", "medium", "high")
SEEDS = (1, 2, 3)


def satisfaction(policy: str, workload: str, seed: int, checkpointing: bool = False,
                 base: str = "grid") -> dict[str, float]:
    scenario = build_scenario(TABLE1, workload, seed=seed)
    result, _ = run_scenario(scenario, policy=policy, checkpointing=checkpointing)
    assert all(task.finish_time is not None for task in result.tasks)
    return {row.user: row.satisfaction for row in user_metrics(result, base)}


@pytest.mark.parametrize("checkpointing", [False, True])
@pytest.mark.parametrize("workload", WORKLOADS)
def test_user1_is_more_satisfied_under_hosep_than_osep(workload, checkpointing):
    for seed in SEEDS:
        hosep = satisfaction("hosep", workload, seed, checkpointing)
        osep = satisfaction("osep", workload, seed, checkpointing)
        assert hosep["User1"] > osep["User1"], (seed, hosep, osep)


@pytest.mark.xfail(strict=True, reason=(
    "does not reproduce: under Fig. 2's rule User1 arrives to a full grid and is given the "
    "victims' least powerful machines (Def. 3, 3.3 ii), so its tasks run on 29,750-54,760 "
    "MFlops nodes; User2, served first at time 0, is the most satisfied, and User1 is third "
    "or fourth (figures in docs/reproductions.md)"))
@pytest.mark.parametrize("workload", WORKLOADS)
def test_user1_and_user2_are_the_two_most_satisfied_under_hosep(workload):
    hosep = satisfaction("hosep", workload, 1)
    top_two = sorted(hosep, key=hosep.get, reverse=True)[:2]
    assert set(top_two) == {"User1", "User2"}, hosep
