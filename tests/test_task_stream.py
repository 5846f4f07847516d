"""`gridfair simulate` streams its tasks out as they end (issue 13, part 1): records written,
metrics added, the task let go. The outputs must be what the kept path gives; the golden
digests of `tests/test_sim_golden.py` hold the JSON output and `--tasks-out` files, this file
the order buffer, the database rows, the tasks let go and the errors before a run."""

from __future__ import annotations

import gc
import random
import sqlite3
from pathlib import Path

from gridfair.core.pool import DONE, Task
from gridfair.sim.grid_loader import embedded_grids
from gridfair.sim.metrics import run_summary, user_metrics
from gridfair.sim.results_db import save_run
from gridfair.sim.scenario import build_scenario, run_scenario, run_streamed, simulation_of
from gridfair.sim.task_stream import InOrder, arrival_key
from tests.conftest import TEST_DATA

MODEL = str(embedded_grids()["multi-owner-hosep"])
GOOGLE_SLICE = str(TEST_DATA / "google" / "rows420001-426000.part-00000-of-00500.csv.gz")
KTH_SLICE = str(TEST_DATA / "swf" / "KTH-SP2-1996-2.1-cln.head300.swf")


def test_in_order_hands_tasks_on_in_key_order_whatever_order_they_end_in() -> None:
    tasks = [Task(f"t{n}", "u", 0.0) for n in range(50)]
    for seq, task in enumerate(tasks):
        task.seq = seq
    ended = tasks[:]
    random.Random(4).shuffle(ended)
    handed: list[Task] = []
    order = InOrder(arrival_key, handed.append)
    for task in ended[:-1]:
        order.add(task)
    # Everything after the one task still running waits for it.
    assert handed == tasks[:tasks.index(ended[-1])]
    order.add(ended[-1])
    assert handed == tasks and not order.held
    # Keys that never come: the rest is handed on, in key order, at close.
    gappy: list[Task] = []
    order = InOrder(arrival_key, gappy.append)
    for task in (tasks[3], tasks[1], tasks[2]):
        order.add(task)
    assert gappy == []
    order.close()
    assert gappy == [tasks[1], tasks[2], tasks[3]]


def _rows(path: Path) -> dict[str, list[tuple]]:
    with sqlite3.connect(path) as db:
        tables = {}
        for table in ("runs", "users", "tasks"):
            columns = [row[1] for row in db.execute(f"pragma table_info({table})")]
            kept = [column for column in columns if column != "wall_seconds"]
            tables[table] = [kept] + db.execute(
                f"select {', '.join(kept)} from {table} order by rowid").fetchall()
    return tables


def test_db_rows_of_a_streamed_run_are_those_of_the_kept_path(gridfair_cli, tmp_path):
    for args in ((MODEL, "-w", GOOGLE_SLICE, "-p", "sdrf"),
                 (MODEL, "-w", KTH_SLICE, "-p", "hosep", "--user-map", "round-robin",
                  "--compress", "20")):
        streamed = tmp_path / f"streamed{len(args)}.db"
        result = gridfair_cli("simulate", *args, "-q", "--db", str(streamed))
        assert result.exit_code == 0, result.output
        # The kept path, as `simulate` wrote it before it streamed.
        options = ({"user_map": "round-robin", "compress": 20.0} if "--compress" in args
                   else {})
        scenario = build_scenario(MODEL, args[2], options=options)
        kept_result, negotiator = run_scenario(scenario, policy=args[4])
        users = user_metrics(kept_result)
        kept = tmp_path / f"kept{len(args)}.db"
        save_run(kept, description={
            "grid": MODEL, "workload": args[2], "policy": negotiator.stages,
            "allocation": negotiator.allocation, "seed": 1, "checkpointing": False,
            "interval": None, "vacate_delay": 0.0, "arrivals": "batch",
            "satisfaction_base": "grid", "options": options},
            summary=run_summary(kept_result, users), users=users, tasks=kept_result.tasks)
        streamed_rows, kept_rows = _rows(streamed), _rows(kept)
        assert len(streamed_rows["tasks"]) == len(kept_result.tasks) + 1
        assert streamed_rows["tasks"] == kept_rows["tasks"]
        assert streamed_rows["users"] == kept_rows["users"]
        # The options recorded are the CLI's own; every figure of the run row is the same.
        run_rows = [dict(zip(rows["runs"][0], rows["runs"][1], strict=True))
                    for rows in (streamed_rows, kept_rows)]
        figures = [column for column in kept_rows["runs"][0] if column != "options"]
        assert [run_rows[0][c] for c in figures] == [run_rows[1][c] for c in figures]


def _live_tasks(state: int | None = None) -> int:
    gc.collect()
    return sum(1 for item in gc.get_objects()
               if isinstance(item, Task) and (state is None or item.state == state))


def test_a_streamed_run_lets_each_task_go_when_it_ends() -> None:
    before = _live_tasks()
    # A trace whose jobs arrive over days: most have not arrived when the first ones end.
    scenario = build_scenario(MODEL, KTH_SLICE,
                              options={"user_map": "round-robin", "compress": 20.0})
    total = len(scenario.tasks)
    handed: list[int] = []
    ended_but_alive: list[int] = []

    def watch(task: Task) -> None:
        handed.append(1)
        if len(handed) % 25 == 0:
            ended_but_alive.append(_live_tasks(DONE))

    simulation = simulation_of(scenario, policy="hosep", keep_tasks=False)
    result = run_streamed(simulation, [watch])
    assert len(handed) == total and result.tasks == []
    # A few linger a while (a vacated run's stale completion event, a queue entry deleted
    # lazily); a run that kept them would have 25, 50, 75, ... here.
    assert len(ended_but_alive) == total // 25 and max(ended_but_alive) <= 5
    assert _live_tasks() - before == 0


def test_an_unwritable_output_is_refused_before_the_run(gridfair_cli, tmp_path):
    missing = tmp_path / "no" / "such" / "dir"
    for option in ("--tasks-out", "--db"):
        result = gridfair_cli("simulate", MODEL, "-w", GOOGLE_SLICE, "-p", "hosep", "-q",
                              option, str(missing / "out"))
        assert result.exit_code == 2, result.output
        assert str(missing / "out") in result.output
        assert "makespan" not in result.output  # nothing was simulated or reported
