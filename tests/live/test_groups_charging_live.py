"""The daemon on a live pool with a two-level accounting group tree (issue 47): jobs are
charged to the group leaves the pool validated (HTCondor's AssignAccountingGroup,
`trust_accounting_groups = true`), and with `hdrf-fair` a group below its guarantee takes room
from the group over its own, so every group ends at its guarantee."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

from tests.live.conftest import POOL_CONFIG, QUICK_SAFETY, own_pool, run_daemon, write_daemon_config
from tests.live.harness.personal_pool import JobSpec, SlotSpec

LONG = 1000 * 600
#: account -> the one group the pool lets it use
GROUP_OF = {"User1": "group_a.one", "User2": "group_a.two", "User3": "group_b"}
TREE = ["GROUP_NAMES = group_a, group_a.one, group_a.two, group_b",
        "GROUP_QUOTA_DYNAMIC_group_a = 0.5", "GROUP_QUOTA_DYNAMIC_group_a.one = 0.5",
        "GROUP_QUOTA_DYNAMIC_group_a.two = 0.5", "GROUP_QUOTA_DYNAMIC_group_b = 0.5",
        "GROUP_ACCEPT_SURPLUS = True", "PREEMPTION_REQUIREMENTS = False"]


def test_jobs_are_charged_to_their_leaves_and_a_group_below_its_guarantee_is_served(
        daemon_python: Path, daemon_dir: Path) -> None:
    pool = own_pool([SlotSpec("pool", 1000)] * 4, extra_config=[
        *POOL_CONFIG.read_text().splitlines(), *TREE,
        "use FEATURE : AssignAccountingGroup($(LOCAL_DIR)/jobs/groups.map)"])
    (pool.jobs_folder / "groups.map").write_text(
        "".join(f"* {account} {group}\n" for account, group in GROUP_OF.items()))
    (pool.jobs_folder / "groups.map").chmod(0o644)
    with pool:
        group_of_job: dict[str, str] = {}

        def submit(account: str, count: int) -> list[str]:
            ids = pool.submit([JobSpec(account, LONG)] * count,
                              extra=[f"accounting_group = {GROUP_OF[account]}"])
            group_of_job.update(dict.fromkeys(ids, GROUP_OF[account]))
            return ids

        fillers = submit("User1", 4)  # HTCondor alone: group_a.one holds all by surplus
        pool.wait_until(lambda: set(pool.running()) == set(fillers), 30)
        submit("User2", 2)
        submit("User3", 2)
        write_daemon_config(daemon_dir, pool,
                            daemon={"interval": 2},
                            policy={"order": "hdrf", "preempt": "group-fair"},
                            policy_options={"groups": "condor"},
                            safety=QUICK_SAFETY,
                            htcondor={"trust_accounting_groups": True})
        done = run_daemon(daemon_python, pool, daemon_dir, "--cycles", "5")
        assert done.returncode == 0, done.stderr
        expected = ["group_a.one", "group_a.two", "group_b", "group_b"]

        def running_groups() -> list[str]:
            return sorted(group_of_job[job] for job in pool.running() if job in group_of_job)

        # The last cycle's allocations start within a negotiation cycle or two.
        with contextlib.suppress(TimeoutError):
            pool.wait_until(lambda: running_groups() == expected, 20)
        groups = running_groups()
    with sqlite3.connect(daemon_dir / "state.db") as db:
        first = json.loads(db.execute("select groups from cycles order by id").fetchone()[0])
        actions = list(db.execute("select kind, job, state from actions"))
    # Charged to the leaves: the first cycle sees group_a.one holding the whole pool.
    rows = {row["group"]: row for row in first}
    assert rows["group_a.one"]["dominant_share"] == 1.0 and rows["group_a.one"]["users"] == 1
    assert rows["group_b"]["guaranteed_share"] == 0.5, rows
    assert rows["group_a.two"]["guaranteed_share"] == 0.25, rows
    # Served to the guarantees: group_b two slots, each project one.
    assert groups == expected, actions
    vacated = {job for kind, job, state in actions if kind == "vacate"}
    assert vacated and vacated <= set(fillers), actions
