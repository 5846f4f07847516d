"""The HOSEP paper's finding (Fig. 4) on the embedded Table 1 grid.

Fig. 4 (grid-mean satisfaction, as iSPD computes it): under OSEP, User1's satisfaction is about
User2's and barely above User4's; under HOSEP, User1 is always the most satisfied (about 80 %)
and the others follow the power they provide.
"""

from __future__ import annotations

import pytest

from gridfair.sim.engine_options import EngineOptions
from gridfair.sim.grid_loader import embedded_grids
from gridfair.sim.metrics import user_metrics
from gridfair.sim.scenario import build_scenario, run_scenario

TABLE1 = str(embedded_grids()["hosep-table1"])
WORKLOADS = ("low", "medium", "high")
SEEDS = (1, 2, 3)
USERS = ("User1", "User2", "User3", "User4")


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


def table1_runs(checkpointing: bool, **options) -> list[dict[str, float]]:
    """Satisfaction of the 15 Table 1 runs (seeds 1-5 x low/medium/high)."""
    return [satisfaction_of(workload, seed, checkpointing, **options)
            for workload in WORKLOADS for seed in range(1, 6)]


def satisfaction_of(workload: str, seed: int, checkpointing: bool, **options) -> dict[str, float]:
    return run_of(workload, seed, checkpointing, **options)[0]


def run_of(workload: str, seed: int, checkpointing: bool, *, arrivals: str = "batch",
           preempt: str = "hosep", status_refresh: float | None = None,
           same_instant: str = "ordered", **policy_options) -> tuple[dict[str, float], int]:
    """Per-user satisfaction (base `grid`) and the run's vacates."""
    scenario = build_scenario(TABLE1, workload, seed=seed)
    result, _ = run_scenario(scenario, order="hosep", preempt=preempt,
                             policy_options=policy_options, checkpointing=checkpointing,
                             engine=EngineOptions(arrivals=arrivals, status_refresh=status_refresh,
                                                  same_instant=same_instant))
    assert all(task.finish_time is not None for task in result.tasks)
    return {row.user: row.satisfaction for row in user_metrics(result, "grid")}, result.vacates


def ranking(run: dict[str, float]) -> list[str]:
    return sorted(run, key=run.get, reverse=True)


@pytest.mark.parametrize("checkpointing", [False, True])
def test_batch_negotiation_leaves_user1_out_of_the_top_two(checkpointing):
    # The finding (docs/results/owner-share.md): under periodic batch negotiation, Fig. 2's
    # rule gives User1, arriving to a full grid, the victims' least powerful machines; User2
    # leads.
    runs = table1_runs(checkpointing)
    assert all("User1" not in ranking(run)[:2] for run in runs), runs
    assert all(ranking(run)[0] == "User2" for run in runs), runs


@pytest.mark.parametrize("checkpointing", [False, True])
def test_the_published_simulators_semantics_reproduce_fig4s_ranking(checkpointing):
    # Paper 004, Fig. 4: "User1 is always the most satisfied (about 80 %) and the others'
    # satisfaction follows the power they provide". Fig. 2's test in submit order. (iSPD 2014
    # itself, on these tasks, gives User1 and User2 the top two in all 15 runs but Users 2-4
    # in power order in 11: its test in its event list is held run by run below.)
    runs = table1_runs(checkpointing, arrivals="sequential", hosep_test="fig2")
    top_two = sum(set(ranking(run)[:2]) == {"User1", "User2"} for run in runs)
    assert top_two >= 14, runs
    others_by_power = sum(
        [user for user in ranking(run) if user != "User1"] == ["User2", "User3", "User4"]
        for run in runs)
    assert others_by_power >= 14, runs


@pytest.mark.parametrize("refresh, in_band", [
    # Without iSPD's status refresh User1 averages 68.6 % (iSPD 2014 test) over the 15 runs,
    # below the 70-90 % band around the paper's 'about 80 %' (iSPD 2014 on the same tasks:
    # 80.7-84.6 % by workload); with it, 80.5 % (docs/results/owner-share.md).
    (None, False), (15.0, True)])
def test_user1_is_about_80_percent_with_ispds_status_refresh(refresh, in_band):
    runs = table1_runs(False, arrivals="sequential", hosep_test="ispd2014",
                       status_refresh=refresh)
    mean = sum(run["User1"] for run in runs) / len(runs)
    assert (70.0 <= mean <= 90.0) is in_band, mean


# iSPD 2014 (github gspd-unesp/ispd 196cdf6, HOSEP, 15 s status refresh) on the tasks of
# each Table 1 run, User1-User4 (`bench/fig4.py --ispd`, 2026-11-26; its
# Metricas.getSatisfacaoDesempenho, which truncates each task's satisfaction to a whole
# percent before the mean, so it is at most a point under the untruncated mean).
ISPD2014 = {
    ("low", 1): (90.9, 93.5, 44.9, 40.4), ("low", 2): (84.0, 99.9, 38.8, 39.6),
    ("low", 3): (63.6, 81.2, 41.3, 50.9), ("low", 4): (83.4, 103.7, 47.0, 46.1),
    ("low", 5): (89.5, 101.9, 49.4, 35.7), ("medium", 1): (78.6, 98.3, 47.6, 37.5),
    ("medium", 2): (91.1, 101.7, 39.3, 35.8), ("medium", 3): (78.9, 97.2, 45.8, 35.4),
    ("medium", 4): (85.3, 97.1, 45.9, 42.8), ("medium", 5): (88.9, 105.1, 47.6, 42.7),
    ("high", 1): (63.5, 82.9, 45.0, 54.8), ("high", 2): (87.0, 105.0, 36.6, 38.8),
    ("high", 3): (80.1, 105.2, 42.6, 33.9), ("high", 4): (86.3, 103.1, 44.7, 40.5),
    ("high", 5): (86.7, 109.8, 41.3, 35.0),
}


def test_ispds_event_list_gives_every_user_ispd_2014s_satisfaction_on_every_run():
    # Issue 27: within 8 points per user of iSPD 2014 on the same tasks. With iSPD's test,
    # status refresh and event list, every run is within iSPD's truncation (under 1.1 points,
    # never below it); in submit order the means were 12-20 points over for User2.
    for (workload, seed), ispd in ISPD2014.items():
        run, _ = run_of(workload, seed, False, arrivals="sequential", hosep_test="ispd2014",
                        status_refresh=15.0, same_instant="ispd2014")
        gaps = [run[user] - expected for user, expected in zip(USERS, ispd, strict=True)]
        assert all(0.0 <= gap < 1.1 for gap in gaps), (workload, seed, run, ispd)


@pytest.mark.parametrize("checkpointing", [False, True])
def test_owner_reclaim_keeps_user1_first_under_batch_negotiation(checkpointing):
    reclaim = [run_of(workload, seed, checkpointing, preempt="reclaim")
               for workload in WORKLOADS for seed in range(1, 6)]
    hosep = [run_of(workload, seed, checkpointing)
             for workload in WORKLOADS for seed in range(1, 6)]
    assert all(ranking(run)[0] == "User1" for run, _ in reclaim), reclaim
    assert sum(vacates for _, vacates in reclaim) <= sum(vacates for _, vacates in hosep)


@pytest.mark.parametrize("checkpointing", [False, True])
def test_owner_reclaim_orders_satisfaction_by_provided_power(checkpointing):
    # The target: User1 > User2 > User3 > User4 in at least 13 of 15 (measured: 15).
    runs = table1_runs(checkpointing, preempt="reclaim")
    in_order = sum(ranking(run) == ["User1", "User2", "User3", "User4"] for run in runs)
    assert in_order >= 13, runs
