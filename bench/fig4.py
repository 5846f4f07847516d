"""Benchmark: the HOSEP paper's Fig. 4 on its Table 1 grid, under both simulator semantics, and
the owner-reclaim rule (issue 11).

The 15 Table 1 runs (seeds 1-5 x low/medium/high workloads of the embedded `hosep-table1`
grid), with checkpointing off and on, for
- HOSEP under batch negotiation (the daemon's way; `--arrivals batch`),
- HOSEP under the published simulator's semantics (`--arrivals sequential`) with iSPD 2014's
  preemption test (`--hosep-test ispd2014`): alone, with iSPD's 15 s status refresh
  (`--status-refresh 15`), and with that refresh and iSPD's own event list for the events of
  one instant (`--same-instant ispd2014`; the only change from the line before); and with
  Fig. 2's test (`fig2`),
- the owner-reclaim rule (`--policy reclaim`) under batch negotiation.
Prints every run's satisfaction (base `grid`, as iSPD computes it) and vacates, then the
issue's targets per configuration: in how many runs User1 and User2 are the two most
satisfied, User1 first, the exact power order User1 > User2 > User3 > User4, Users 2-4 in
power order, User1's mean satisfaction, and the total vacates. Last, the 4-owner iSPD model
with the KTH trace (`../shared/data/ispd/multi_owner`, skipped when absent): Spearman's rank
correlation between provided share and satisfaction, HOSEP and reclaim under batch.

`--ispd CLASSPATH` also runs iSPD 2014 (github gspd-unesp/ispd 196cdf6, the HOSEP paper's
code) on the same tasks: gridfair writes each run's tasks (`--tasks-out`), `ispd_inputs.py`
turns them into an iSPD trace and a model of the Table 1 grid, and the class `Fig4Driver` on
CLASSPATH (a driver of your own beside iSPD's classes, outside the project: for each model
file given, it runs iSPD's sequential simulation and prints one line, the file then
`User=satisfaction` pairs from `Metricas.getSatisfacaoDesempenho`) gives each user's
satisfaction there. Prints each user's mean per workload beside gridfair's sequential
configurations, and the largest gap (target: 8 points).

    .venv/bin/python bench/fig4.py [--ispd CLASSPATH] [--json]

`--json` prints {"runs": [{"semantics", "preempt", "workload", "seed", "checkpoint",
"satisfaction": {user: %}, "vacates"}, ...], "summary": [...], "kth_top4": [...]}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

from ispd_inputs import star_model, tasks_of, write_wmsx

from gridfair.sim.engine_options import EngineOptions
from gridfair.sim.grid_loader import embedded_grids, load_grid
from gridfair.sim.metrics import user_metrics
from gridfair.sim.scenario import build_scenario, run_scenario
from gridfair.sim.workloads.registry import write_tasks

TABLE1 = str(embedded_grids()["hosep-table1"])
WORKLOADS = ("low", "medium", "high")
SEEDS = range(1, 6)
POWER_ORDER = ["User1", "User2", "User3", "User4"]
MULTI_OWNER = Path(__file__).resolve().parent.parent.parent / "shared/data/ispd/multi_owner"
#: iSPD 2014's HOSEP refreshes its machines' status every 15 s (`HOSEP.getTempoAtualizar`).
ISPD_REFRESH = 15.0
#: (label, semantics, preempt stage, HOSEP preemption test or None, status refresh or None,
#: same-instant order of the sequential semantics)
CONFIGURATIONS = (
    ("hosep batch", "batch", "hosep", None, None, "ordered"),
    ("hosep sequential ispd2014", "sequential", "hosep", "ispd2014", None, "ordered"),
    ("hosep seq. ispd2014 15 s", "sequential", "hosep", "ispd2014", ISPD_REFRESH, "ordered"),
    ("hosep seq. ispd2014 15 s heap", "sequential", "hosep", "ispd2014", ISPD_REFRESH,
     "ispd2014"),
    ("hosep sequential fig2", "sequential", "hosep", "fig2", None, "ordered"),
    ("reclaim batch", "batch", "reclaim", None, None, "ordered"),
)
USERS = ("User1", "User2", "User3", "User4")
ISPD_TARGET_POINTS = 8.0


def run(grid: str, workload: str, seed: int, semantics: str, preempt: str, test: str | None,
        checkpoint: bool, refresh: float | None = None, same_instant: str = "ordered"
        ) -> tuple[dict[str, float], dict[str, float], int]:
    """Satisfaction and provided share per user, and the run's vacates."""
    scenario = build_scenario(grid, workload, seed=seed)
    result, _ = run_scenario(scenario, order="hosep", preempt=preempt,
                             checkpointing=checkpoint,
                             policy_options={"hosep_test": test} if test else None,
                             engine=EngineOptions(arrivals=semantics, status_refresh=refresh,
                                                  same_instant=same_instant))
    rows = user_metrics(result, "grid")
    return ({row.user: row.satisfaction for row in rows},
            {row.user: row.provided_share for row in rows}, result.vacates)


def ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties sharing their mean rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    result = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            result[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return result


def spearman(first: list[float], second: list[float]) -> float:
    """Spearman's rank correlation (Pearson's on the ranks, so ties are handled)."""
    a, b = ranks(first), ranks(second)
    mean_a, mean_b = sum(a) / len(a), sum(b) / len(b)
    covariance = sum((x - mean_a) * (y - mean_b) for x, y in zip(a, b, strict=True))
    spread = (sum((x - mean_a) ** 2 for x in a) * sum((y - mean_b) ** 2 for y in b)) ** 0.5
    return covariance / spread if spread else 0.0


def summarise(label: str, checkpoint: bool, runs: list[dict]) -> dict:
    orders = [sorted(r["satisfaction"], key=r["satisfaction"].get, reverse=True) for r in runs]
    return {
        "configuration": label,
        "checkpoint": checkpoint,
        "runs": len(runs),
        "user1_user2_top_two": sum(set(order[:2]) == {"User1", "User2"} for order in orders),
        "user1_first": sum(order[0] == "User1" for order in orders),
        "power_order": sum(order == POWER_ORDER for order in orders),
        "users_2_4_by_power": sum([u for u in order if u != "User1"] == POWER_ORDER[1:]
                                  for order in orders),
        "user1_mean": sum(r["satisfaction"]["User1"] for r in runs) / len(runs),
        "vacates": sum(r["vacates"] for r in runs),
    }


def ispd_satisfaction(classpath: str, folder: Path) -> dict[tuple[str, int], dict[str, float]]:
    """iSPD 2014's satisfaction per user on the tasks gridfair gives each Table 1 run (the
    tasks do not depend on the policy: gridfair writes them as its workload made them)."""
    grid = load_grid("hosep-table1")
    models = {}
    for workload in WORKLOADS:
        for seed in SEEDS:
            tasks_out = folder / f"{workload}{seed}.csv"
            scenario = build_scenario(TABLE1, workload, seed=seed)
            write_tasks(scenario.task_writer, scenario.tasks, tasks_out)
            tasks = tasks_of(tasks_out)
            trace = folder / f"{workload}{seed}.wmsx"
            write_wmsx(tasks, trace)
            model = folder / f"{workload}{seed}.imsx"
            model.write_text(star_model(grid, trace, len(tasks)), encoding="iso-8859-1")
            models[str(model)] = (workload, seed)
    output = subprocess.run(["java", "-Djava.awt.headless=true", "-cp", classpath, "Fig4Driver",
                             *models], check=True, capture_output=True, text=True).stdout
    satisfaction = {}
    for line in output.splitlines():
        path, *pairs = line.split()
        if path in models:
            satisfaction[models[path]] = {user: float(value) for user, value in
                                          (pair.split("=") for pair in pairs)}
    return satisfaction


def side_by_side(runs: list[dict], ispd: dict[tuple[str, int], dict[str, float]]) -> list[dict]:
    """Per configuration of the sequential semantics (checkpointing off) and workload, each
    user's mean satisfaction here and in iSPD 2014, and the largest gap."""
    rows = []
    for label, semantics, *_ in CONFIGURATIONS:
        if semantics != "sequential":
            continue
        for workload in WORKLOADS:
            ours = [r for r in runs if r["configuration"] == label and not r["checkpoint"]
                    and r["workload"] == workload]
            means = {user: sum(r["satisfaction"][user] for r in ours) / len(ours)
                     for user in USERS}
            theirs = {user: sum(ispd[workload, seed][user] for seed in SEEDS) / len(SEEDS)
                      for user in USERS}
            rows.append({"configuration": label, "workload": workload,
                         "gridfair": {u: round(means[u], 1) for u in USERS},
                         "ispd2014": {u: round(theirs[u], 1) for u in USERS},
                         "largest_gap": round(max(abs(means[u] - theirs[u]) for u in USERS),
                                              1)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the runs as JSON")
    parser.add_argument("--ispd", metavar="CLASSPATH", default=None,
                        help="iSPD 2014's classes and jars and a Fig4Driver class")
    args = parser.parse_args()
    runs, summary = [], []
    for label, semantics, preempt, test, refresh, same_instant in CONFIGURATIONS:
        for checkpoint in (False, True):
            these = []
            for workload in WORKLOADS:
                for seed in SEEDS:
                    satisfaction, _, vacates = run(TABLE1, workload, seed, semantics, preempt,
                                                   test, checkpoint, refresh, same_instant)
                    these.append({
                        "configuration": label,
                        "semantics": semantics,
                        "preempt": preempt if test is None else f"{preempt}:{test}",
                        "workload": workload, "seed": seed, "checkpoint": checkpoint,
                        "satisfaction": {user: round(value, 2)
                                         for user, value in sorted(satisfaction.items())},
                        "vacates": vacates,
                    })
            runs += these
            summary.append(summarise(label, checkpoint, these))
    kth = []
    grid, workload = MULTI_OWNER / "multi_owner_HOSEP.imsx", MULTI_OWNER / "kth_top4_400.wmsx"
    if grid.exists() and workload.exists():
        for preempt in ("hosep", "reclaim"):
            satisfaction, share, vacates = run(str(grid), str(workload), 1, "batch", preempt,
                                               None, False)
            users = sorted(satisfaction)
            kth.append({"preempt": preempt, "semantics": "batch", "vacates": vacates,
                        "spearman_share_satisfaction": round(spearman(
                            [share[u] for u in users], [satisfaction[u] for u in users]), 3),
                        "satisfaction": {u: round(satisfaction[u], 2) for u in users},
                        "provided_share": {u: round(share[u], 4) for u in users}})
    against = []
    if args.ispd:
        with tempfile.TemporaryDirectory(prefix="gridfair-fig4-") as folder:
            against = side_by_side(runs, ispd_satisfaction(args.ispd, Path(folder)))
    if args.json:
        print(json.dumps({"runs": runs, "summary": summary, "kth_top4": kth,
                          "ispd2014": against}, indent=1))
        return
    print(f"load average {os.getloadavg()[0]:.2f} (figures are deterministic; load only slows)")
    print("configuration                 workload seed ckpt  User1  User2  User3  User4 vacates")
    for r in runs:
        s = r["satisfaction"]
        print(f"{r['configuration']:<29} {r['workload']:<8} {r['seed']:>4} "
              f"{'on' if r['checkpoint'] else 'off':<4} {s['User1']:6.1f} {s['User2']:6.1f} "
              f"{s['User3']:6.1f} {s['User4']:6.1f} {r['vacates']:7d}")
    print("\nconfiguration                 ckpt  U1+U2 top2  U1 first  1>2>3>4  2>3>4  "
          "U1 mean %  vacates")
    for row in summary:
        print(f"{row['configuration']:<29} {'on' if row['checkpoint'] else 'off':<4} "
              f"{row['user1_user2_top_two']:>7}/15 {row['user1_first']:>6}/15 "
              f"{row['power_order']:>5}/15 {row['users_2_4_by_power']:>3}/15 "
              f"{row['user1_mean']:9.1f} {row['vacates']:8d}")
    if not kth:
        print(f"\n4-owner iSPD model: skipped, {MULTI_OWNER} is absent")
    for row in kth:
        print(f"\n4-owner iSPD model + kth_top4_400, {row['preempt']} (batch): Spearman(share, "
              f"satisfaction) {row['spearman_share_satisfaction']:+.3f}, vacates "
              f"{row['vacates']}, satisfaction {row['satisfaction']}")
    if against:
        print(f"\nmean satisfaction per user, gridfair / iSPD 2014 on the same tasks "
              f"(checkpointing off; target: within {ISPD_TARGET_POINTS:g} points)")
        for row in against:
            pairs = "  ".join(f"{u} {row['gridfair'][u]:5.1f}/{row['ispd2014'][u]:5.1f}"
                              for u in USERS)
            print(f"{row['configuration']:<29} {row['workload']:<7} {pairs}  largest gap "
                  f"{row['largest_gap']:4.1f}")


if __name__ == "__main__":
    main()
