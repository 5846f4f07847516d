"""A group that owns machines is an owner to OSEP, HOSEP and `reclaim`
(`policies/group_owners.py`), in the negotiator, the simulator and the daemon.

The worked example: four 1-cpu machines of 100 MFlops, m0 and m1 owned by the group
`group_sci` (users alice and carol), m2 and m3 by bob. Bob runs a job on each; then alice and
carol each submit one.
- With the tree, alice and carol count as group_sci: it provides 200 MFlops (2 nodes) and
  holds none, PowerDiff (0 - 200) / 200 = -1 (OSEP's f = 2 - 0 = 2); bob holds 400 of his
  200, PowerDiff +1 (f = 2 - 4 = -2). HOSEP vacates one of bob's jobs for alice: bob's omega
  (300 - 200) / 200 = +0.5 > -1, Phi falls (-1 + -0.5 < 1 + 0.5); group_sci is then at
  (100 - 200) / 200 = -0.5, and a second move for carol leaves bob at omega 0 > -0.5, Phi
  falling again (-0.5 + 0 < 0.5 + 0). Both end at their share: two vacates, alice and carol
  one job each, bob two. OSEP's balances move the same way (2 and -2, then 1 and -1, then 0).
- Without it, alice and carol provide nothing: neither is ever a receiver, bob keeps all four.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gridfair.core.groups import tree_from_toml
from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import Node, Pool, Task
from gridfair.daemon.config import validate
from gridfair.daemon.service import Daemon
from gridfair.errors import ConfigError
from gridfair.policies.group_owners import GroupOwners, OwnerAccount
from gridfair.policies.hosep import HosepOrder, HosepPreempt
from gridfair.policies.osep import OsepOrder, OsepPreempt
from gridfair.policies.reclaim import ReclaimPreempt
from gridfair.policies.registry import build_stages
from gridfair.sim.scenario import Scenario, run_scenario

TREE = {"group_sci": {"quota": 2, "users": ["alice", "carol"]}}
MACHINES = (("group_sci", 100.0), ("group_sci", 100.0), ("bob", 100.0), ("bob", 100.0))
STAGES = {"osep": (OsepOrder, OsepPreempt), "hosep": (HosepOrder, HosepPreempt),
          "reclaim": (HosepOrder, ReclaimPreempt)}
WORK = 1e7  # 100,000 s on a 100 MFlops machine: no job ends during the test


def running_by_user(pool: Pool) -> dict[str, int]:
    counts: dict[str, int] = {}
    for task in pool.tasks.values():
        if task.node is not None:
            counts[task.user] = counts.get(task.user, 0) + 1
    return counts


@pytest.mark.parametrize("policy", STAGES)
@pytest.mark.parametrize("grouped", [True, False])
def test_a_group_s_users_reclaim_its_machines(policy: str, grouped: bool) -> None:
    order_class, preempt_class = STAGES[policy]
    owners = (lambda: GroupOwners(tree_from_toml(TREE))) if grouped else (lambda: None)
    order, preempt = order_class(owners()), preempt_class(owners=owners())
    pool = Pool(task_key=order.task_key)
    negotiator = Negotiator(pool, order, preempt)
    for index, (owner, power) in enumerate(MACHINES):
        pool.add_node(Node(f"m{index}", owner, power))
    for number in range(4):
        negotiator.submit(Task(f"bob.{number}", "bob", 0.0, work=WORK), 0.0)
    negotiator.cycle(0.0)
    assert running_by_user(pool) == {"bob": 4}
    for user in ("alice", "carol"):
        negotiator.submit(Task(f"{user}.0", user, 10.0, work=WORK), 10.0)
    decisions = negotiator.cycle(10.0)
    vacates = [decision for decision in decisions if decision.kind == "vacate"]
    if not grouped:
        assert vacates == [] and running_by_user(pool) == {"bob": 4}
        return
    assert running_by_user(pool) == {"bob": 2, "alice": 1, "carol": 1}
    assert len(vacates) == 2
    account = preempt.account(pool.users["alice"])
    assert isinstance(account, OwnerAccount) and account.name == "group_sci"
    assert (account.provided_power, account.allocated_power, account.power_diff) == \
        (200.0, 200.0, 0.0)
    assert preempt.account(pool.users["carol"]) is account
    assert preempt.account(pool.users["bob"]) is pool.users["bob"]
    if policy != "osep":
        first = vacates[0].figures
        assert (first["receiver_power_diff"], first["victim_power_diff"], first["omega"]) == \
            (-1.0, 1.0, 0.5)


def test_a_machine_may_name_the_group_s_identity_and_a_subgroup_counts_too() -> None:
    """`GridOwner = "group group_sci"` names the group as a trusted group's jobs are named;
    a job of a subgroup (`group group_sci.hep`) counts as group_sci, the nearest group on its
    path that owns machines, and so does dave, a user of it, whose own machine counts for the
    group; a user of no such group (eve) is its own owner."""
    tree = tree_from_toml({"group_sci": {"users": ["dave"]}, "group_sci.hep": {},
                           "group_lab": {}})
    owners = GroupOwners(tree)
    pool = Pool()
    owners.attach(pool)
    pool.add_node(Node("m0", "group group_sci", 100.0))
    pool.add_node(Node("m1", "dave", 50.0))
    pool.add_node(Node("m2", "eve", 100.0))
    for name in ("group group_sci.hep", "group group_lab"):
        pool.user(name)
    sci = owners.of(pool.users["group group_sci.hep"])
    assert isinstance(sci, OwnerAccount) and sci.name == "group_sci"
    assert owners.of(pool.users["dave"]) is sci
    assert (sci.provided_power, sci.provided_nodes) == (150.0, 2)
    assert owners.of(pool.users["group group_lab"]) is pool.users["group group_lab"]
    assert owners.of(pool.users["eve"]) is pool.users["eve"]
    assert owners.owner_name("group group_sci") == owners.owner_name("group group_sci.hep") \
        == owners.owner_name("dave") == "group_sci"
    assert owners.owner_name("eve") == "eve"


def scenario() -> Scenario:
    return Scenario(
        nodes=[Node(f"m{index}", owner, power) for index, (owner, power) in enumerate(MACHINES)],
        tasks=[*(Task(f"bob.{n}", "bob", 0.0, work=WORK) for n in range(4)),
               *(Task(f"{user}.0", user, 10.0, work=WORK) for user in ("alice", "carol"))])


@pytest.mark.parametrize("policy", ["osep", "hosep", "reclaim"])
def test_the_simulator_takes_the_tree_of_owning_groups(policy: str) -> None:
    """`simulate --policy P --groups FILE`: alice's and carol's jobs start at 10 s, each
    vacating one of bob's; without the tree they wait for bob's jobs to end."""
    grouped, _ = run_scenario(scenario(), policy=policy, policy_options={"groups": TREE})
    starts = {task.id: task.first_start for task in grouped.tasks}
    assert starts["alice.0"] == starts["carol.0"] == 10.0
    assert sum(task.preemptions for task in grouped.tasks) == 2
    plain, _ = run_scenario(scenario(), policy=policy)
    assert min(task.first_start for task in plain.tasks if task.user != "bob") >= WORK / 100
    assert sum(task.preemptions for task in plain.tasks) == 0


def test_a_bad_tree_is_one_error() -> None:
    with pytest.raises(ConfigError, match=r"\[groups\] group \"group_sci\": unknown key"):
        build_stages("reclaim", options={"groups": {"group_sci": {"owner": "bob"}}})


def test_the_daemon_vacates_for_an_owning_group_s_users(tmp_path: Path) -> None:
    """The daemon on ad files (`files` backend) under `reclaim` with the tree: its first cycle
    vacates the two of bob's jobs on group_sci's machines (its own machines first, reclaim's
    step 2), for alice and carol; without the tree it would vacate none."""
    pool = tmp_path / "pool"
    pool.mkdir()
    start = time.time() - 600
    slots, jobs = [], []
    for index, (owner, power) in enumerate(MACHINES):
        slots.append(f'Name = "slot{index}@vm"\nGridOwner = "{owner}"\nMFlops = {power:.0f}\n'
                     'Cpus = 1\nMemory = 256\nState = "Claimed"\nActivity = "Busy"\n'
                     f'JobId = "2.{index}"\nRemoteUser = "bob"\nJobStart = {start:.0f}')
        jobs.append(f'ClusterId = 2\nProcId = {index}\nJobStatus = 2\nOwner = "bob"\n'
                    f"QDate = {start:.0f}\nRequestCpus = 1\nRequestMemory = 64\n"
                    f'JobCurrentStartDate = {start:.0f}\nRemoteHost = "slot{index}@vm"')
    for cluster, user in ((1, "alice"), (3, "carol")):
        jobs.append(f'ClusterId = {cluster}\nProcId = 0\nJobStatus = 1\nOwner = "{user}"\n'
                    f"QDate = {start:.0f}\nRequestCpus = 1\nRequestMemory = 64")
    (pool / "pool.status").write_text("\n\n".join(slots) + "\n")
    (pool / "jobs.queue").write_text("\n\n".join(jobs) + "\n")
    raw = {"daemon": {"store": "state.db"},
           "backend": {"kind": "files", "files": {"directory": "pool",
                                                  "actions": "actions.jsonl"}},
           "policy": {"name": "reclaim", "options": {"groups": TREE}},
           "safety": {"min_runtime": 0.0, "preempt_cooldown": 0.0, "max_snapshot_age": 3600.0,
                      "max_vacates_per_cycle": 4}}
    daemon = Daemon(validate(raw, base=tmp_path))
    try:
        daemon.tick()
    finally:
        daemon.close()
    log = tmp_path / "actions.jsonl"
    actions = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() \
        else []
    vacated = sorted(action["job"] for action in actions if action["action"] == "vacate")
    assert vacated == ["2.0", "2.1"]
