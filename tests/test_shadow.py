"""Shadow mode: a dry run that records the pool against gridfair's decisions, and the report
(`gridfair shadow`) over it. The pool is a `files` backend whose dumps the test rewrites
between cycles, as HTCondor alone would have moved the jobs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gridfair.cli import cli
from gridfair.cli import shadow as _shadow  # noqa: F401 - registers `shadow`
from gridfair.core.shares import share_error
from gridfair.daemon.config import validate
from gridfair.daemon.service import Daemon
from gridfair.daemon.shadow_report import shadow_report

#: Two owners: User1 provides the two fast slots (75.8 % of the power), User2 the slow ones.
SLOTS = (("slot1@vm", "User1", 132250), ("slot2@vm", "User1", 132250),
         ("slot3@vm", "User2", 54760), ("slot4@vm", "User2", 29750))


def write_pool(directory: Path, running: dict[str, tuple[str, str, float]],
               idle: dict[str, str], qdate: float) -> None:
    """Dumps of the pool: `running` job id -> (user, slot, start), `idle` job id -> user.
    Jobs name their owner (`Owner`, no `User`): the files backend maps no submitters."""
    on_slot = {slot: (job, user, start) for job, (user, slot, start) in running.items()}
    slots = []
    for name, owner, mflops in SLOTS:
        lines = [f'Name = "{name}"', f'GridOwner = "{owner}"', f"MFlops = {mflops}",
                 "Cpus = 1", "Memory = 256"]
        if name in on_slot:
            job, user, start = on_slot[name]
            lines += ['State = "Claimed"', 'Activity = "Busy"', f'JobId = "{job}"',
                      f'RemoteUser = "{user}"', f"JobStart = {start:.0f}"]
        else:
            lines += ['State = "Unclaimed"', 'Activity = "Idle"']
        slots.append("\n".join(lines))
    jobs = []
    for job, user in idle.items():
        jobs.append(_job(job, user, 1, qdate))
    for job, (user, slot, start) in running.items():
        jobs.append(_job(job, user, 2, qdate) + f'\nJobCurrentStartDate = {start:.0f}\n'
                    f'RemoteHost = "{slot}"')
    (directory / "pool.status").write_text("\n\n".join(slots) + "\n")
    (directory / "jobs.queue").write_text("\n\n".join(jobs) + "\n")


def _job(job: str, user: str, status: int, qdate: float) -> str:
    cluster, proc = job.split(".")
    return (f"ClusterId = {cluster}\nProcId = {proc}\nJobStatus = {status}\n"
            f'Owner = "{user}"\nQDate = {qdate:.0f}\nRequestCpus = 1\n'
            "RequestMemory = 64")


@pytest.fixture
def shadowed(tmp_path: Path) -> Path:
    """Five shadow cycles: User2 holds every slot and User1 waits. HOSEP would vacate User2's
    jobs on the slowest slots (2.3 on slot4, 2.2 on slot3) for User1's 1.0 and 1.1; HTCondor
    instead starts 1.0 on slot1 when 2.0 ends there (cycle 2), and 1.1 on slot4 when 2.3 ends
    (cycle 3), where gridfair had put it in cycle 2."""
    pool = tmp_path / "pool"
    pool.mkdir()
    raw = {"daemon": {"interval": 1.0, "store": "state.db"},
           "backend": {"kind": "files", "files": {"directory": "pool",
                                                  "actions": "actions.jsonl"}},
           "policy": {"name": "hosep"},
           "safety": {"min_runtime": 0.0, "preempt_cooldown": 0.0, "max_snapshot_age": 3600.0,
                      "max_vacates_per_cycle": 4}}
    daemon = Daemon(validate(raw, base=tmp_path), shadow=True)
    start = time.time() - 100
    users2 = {f"2.{n}": ("User2", SLOTS[n][0], start) for n in range(4)}
    steps = [
        (users2, {"1.0": "User1", "1.1": "User1"}),
        ({**{k: v for k, v in users2.items() if k != "2.0"},
          "1.0": ("User1", "slot1@vm", time.time())}, {"1.1": "User1"}),
        ({"2.1": users2["2.1"], "2.2": users2["2.2"], "1.0": ("User1", "slot1@vm", start + 90),
          "1.1": ("User1", "slot4@vm", time.time())}, {}),
        ({"2.1": users2["2.1"], "2.2": users2["2.2"], "1.0": ("User1", "slot1@vm", start + 90),
          "1.1": ("User1", "slot4@vm", start + 95)}, {}),
        ({"2.1": users2["2.1"], "2.2": users2["2.2"], "1.0": ("User1", "slot1@vm", start + 90),
          "1.1": ("User1", "slot4@vm", start + 95)}, {}),
    ]
    for running, idle in steps:
        write_pool(pool, running, idle, start - 10)
        report = daemon.tick()
        assert report is not None and report.outcome == "dry-run", report
    daemon.close()
    assert not (tmp_path / "actions.jsonl").exists()  # a shadow acts on nothing
    return tmp_path / "state.db"


def test_the_report_sets_gridfair_against_what_the_pool_did(shadowed):
    report = shadow_report(str(shadowed))
    assert report.cycles == 5 and report.policy == "order:hosep preempt:hosep"
    outcomes = {(row["job"], row["slot"], row["cycle"]): row["outcome"]
                for row in report.judged}
    assert outcomes == {("1.0", "slot4@vm", 1): "other_slot",
                        ("1.1", "slot3@vm", 1): "other_slot",
                        ("1.1", "slot4@vm", 2): "made_anyway"}
    assert report.allocations == {"decided": 3, "made_anyway": 1, "other_slot": 2,
                                  "not_started": 0, "too_recent": 0}
    # HOSEP would vacate 2.3 and 2.2; the pool vacated neither (2.3 finished).
    assert report.vacates == {"decided": 2, "pool_vacated": 0, "held_back": 0}
    # Both starts were of jobs gridfair saw waiting and had allocated within two cycles.
    assert report.starts["pool_starts"] == 2 and report.starts["unseen"] == 0
    assert report.starts["same_time"] == 2 and report.starts["sooner"] == 0


def test_share_error_of_each_side(shadowed):
    """Cycle 1: User1 (264,500 MFlops provided) holds nothing with 2 jobs waiting: owed
    min(264,500, 2 x mean power per cpu); gridfair's decisions give it both its slots."""
    report = shadow_report(str(shadowed))
    total = sum(mflops for _, _, mflops in SLOTS)
    owed = share_error([(264500, 0, 2), (84510, total, 0)], total / 4, total)
    assert report.series["pool"]["share_error"][0] == pytest.approx(owed)
    assert report.series["gridfair"]["share_error"][0] == 0.0
    assert report.share_error["gridfair"] < report.share_error["pool"]


def test_the_command_prints_the_report_and_draws_it(shadowed, tmp_path):
    result = CliRunner().invoke(cli, ["shadow", "--db", str(shadowed), "--plot",
                                      str(tmp_path / "shadow.png")])
    assert result.exit_code == 0, result.output
    assert "made by the pool anyway (same job, same slot, within two cycles): 1 (33.3%)" \
        in result.stdout
    assert (tmp_path / "shadow.png").stat().st_size > 10_000
    as_json = CliRunner().invoke(cli, ["shadow", "--db", str(shadowed), "--format", "json"])
    assert json.loads(as_json.stdout)["allocations"]["made_anyway"] == 1


def test_a_store_without_shadow_cycles_is_a_clear_error(tmp_path):
    raw = {"daemon": {"store": "state.db"}, "backend": {"kind": "sim"}}
    daemon = Daemon(validate(raw, base=tmp_path), dry_run=True)
    daemon.run_once()
    result = CliRunner().invoke(cli, ["shadow", "--db", str(tmp_path / "state.db")])
    assert result.exit_code == 2
    assert "no shadow cycles: run gridfair daemon --shadow" in result.stderr


def test_the_window_selects_cycles_and_bad_times_are_one_line(shadowed):
    whole = shadow_report(str(shadowed))
    later = shadow_report(str(shadowed), since=str(whole.series["times"][2]))
    assert later.cycles == 3 and later.since == whole.series["times"][2]
    for since, message in (("2099-01-01", "no shadow cycle in the window"),
                           ("yesterday", "expected epoch seconds, an ISO date/time")):
        result = CliRunner().invoke(cli, ["shadow", "--db", str(shadowed), "--since", since])
        assert result.exit_code == 2 and message in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
