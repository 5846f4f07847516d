"""HTCondor's hierarchical group quotas reproduced live (issue 47): on a pool whose
configuration holds a group tree with static quotas and surplus, HTCondor's negotiator alone
fills it; then on a fresh pool of the same layout and knobs, gridfair (`order = "condor"`,
`groups = "condor"`: the tree read from the pool's own knobs) steers the same workload while
HTCondor's negotiator there knows no groups (`NEGOTIATOR.GROUP_NAMES` empty) and starts only
what gridfair steers (the lease held from the start). The slots each group holds agree.

The tree (10 one-cpu slots): group_a 6 (no surplus) of group_a.one 4 and group_a.two 2 (both
accept surplus), group_b 2 (no surplus); `<none>` keeps 2, which no group may take. group_a.two
runs 1 job and group_b 6, then group_a.one submits 8: HTCondor's semantics give group_a.one
5 (its 4 and its sibling's unused 1, capped by its parent's 6), group_a.two 1, group_b 2
(capped, two slots idle). group_a.one submits once the others run, on both sides: with every
job at once, which of the negotiator's cycles sees which submission is a race on HTCondor's
side, and in a cycle where all three tie at no usage group_a.one, listed first, takes its
parent's whole 6 (`tests/test_group_quotas.py` checks that case offline)."""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path

from tests.live.conftest import (
    POOL_CONFIG,
    QUICK_SAFETY,
    own_pool,
    start_daemon,
    write_daemon_config,
)
from tests.live.harness.personal_pool import JobSpec, PersonalPool, SlotSpec

LONG = 1000 * 600
SLOTS = [SlotSpec("pool", 1000)] * 10
GROUP_OF = {"User1": "group_a.one", "User2": "group_a.two", "User3": "group_b"}
KNOBS = ["GROUP_NAMES = group_a, group_a.one, group_a.two, group_b",
         "GROUP_QUOTA_group_a = 6", "GROUP_QUOTA_group_a.one = 4",
         "GROUP_QUOTA_group_a.two = 2", "GROUP_QUOTA_group_b = 2",
         "GROUP_ACCEPT_SURPLUS = False", "GROUP_ACCEPT_SURPLUS_group_a.one = True",
         "GROUP_ACCEPT_SURPLUS_group_a.two = True", "PREEMPTION_REQUIREMENTS = False"]
#: What HTCondor's semantics give (module docstring).
EXPECTED = {"group_a.one": 5, "group_a.two": 1, "group_b": 2}


def pool_with(extra: list[str]) -> PersonalPool:
    pool = own_pool(SLOTS, extra_config=[
        *POOL_CONFIG.read_text().splitlines(), *KNOBS,
        "use FEATURE : AssignAccountingGroup($(LOCAL_DIR)/jobs/groups.map)", *extra])
    (pool.jobs_folder / "groups.map").write_text(
        "".join(f"* {account} {group}\n" for account, group in GROUP_OF.items()))
    (pool.jobs_folder / "groups.map").chmod(0o644)
    return pool


def run_workload(pool: PersonalPool) -> dict[str, int]:
    """Submit the workload (group_a.two's and group_b's jobs, then, once they run,
    group_a.one's) and the running jobs per group once they settle."""
    group_of_job: dict[str, str] = {}

    def submit(account: str, count: int) -> None:
        ids = pool.submit([JobSpec(account, LONG)], count=count,
                          extra=[f"accounting_group = {GROUP_OF[account]}"])
        cluster = ids[0].split(".")[0]
        group_of_job.update({f"{cluster}.{proc}": GROUP_OF[account] for proc in range(count)})

    def held() -> dict[str, int]:
        return dict(Counter(group_of_job[job] for job in pool.running()
                            if job in group_of_job))

    submit("User2", 1)
    submit("User3", 6)
    with contextlib.suppress(TimeoutError):
        pool.wait_until(lambda: held() == {"group_a.two": 1, "group_b": 2}, 30)
    submit("User1", 8)
    with contextlib.suppress(TimeoutError):
        pool.wait_until(lambda: held() == EXPECTED, 30)
    # Settled: nothing more starts in a few more cycles.
    first = held()
    with contextlib.suppress(TimeoutError):
        pool.wait_until(lambda: held() != first, 6)
    return held()


def test_gridfair_condor_order_holds_the_group_shares_htcondor_gives(
        daemon_python: Path, daemon_dir: Path) -> None:
    with pool_with([]) as pool:
        htcondor = run_workload(pool)
    # HTCondor's negotiator flat on this pool, and no start but gridfair's (a lease that
    # never runs out, until the daemon's own replaces it).
    with pool_with(["NEGOTIATOR.GROUP_NAMES =", "GRIDFAIR_LEASE_UNTIL = 4000000000"]) as pool:
        write_daemon_config(daemon_dir, pool, daemon={"interval": 2},
                            policy={"order": "condor", "preempt": "none"},
                            policy_options={"groups": "condor"},
                            safety=QUICK_SAFETY, htcondor={"trust_accounting_groups": True})
        daemon = start_daemon(daemon_python, pool, daemon_dir)
        try:
            gridfair = run_workload(pool)
        finally:
            daemon.terminate()
            _, errors = daemon.communicate(timeout=30)
    assert htcondor == EXPECTED, htcondor
    assert gridfair == htcondor, errors
