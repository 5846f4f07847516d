"""HTCondor's hierarchical group quotas under the `condor` order (`policies/group_quotas.py`).

The worked examples are the HTCondor manual's ("Accounting Groups with Hierarchical Group
Quotas", `docs/admin-manual/cm-configuration.rst`), their figures as the manual states them:

- static: 30 slots, GROUP_QUOTA_group_physics = 20, GROUP_QUOTA_group_chemistry = 10:
  "no more than twenty concurrent jobs are ever running from the physicists, and only ten
  from the chemists"; with half the slots lost, "physics would be scaled back to a quota of
  ten, and chemistry to five", a scaling that NEGOTIATOR_ALLOW_QUOTA_OVERSUBSCRIPTION = True
  (HTCondor's default, param_info.in) disables; with sixty slots, "physics would still be
  limited to 20 slots, and chemistry would be limited to 10";
- dynamic: chemistry 0.33334, physics 0.66667, hep 0.75 and lep 0.25 of physics: "If there
  are 30 machines in the pool, that would be the same 15 machines" for hep;
- surplus: physics 20 (no surplus), hep 15 and lep 5 accepting surplus, chemistry 10:
  "group_physics.lep and group_physics.hep are allowed to exceed their quota of 15 and 5, but
  their sum cannot exceed 20 ... If the group_physics had GROUP_ACCEPT_SURPLUS set to True,
  then either group_physics.lep and group_physics.hep would not be limited by quota";
  "any leaf nodes of this tree with excess quota will share it with any peers which accept
  surplus";
- order: "the group whose current usage is the smallest fraction of its quota goes first".
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gridfair.cli.group import cli
from gridfair.core.groups import NONE_GROUP, tree_from_knobs, tree_from_toml
from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import CPUS, QUEUED, RUNNING, Node, Pool, Task, UserState
from gridfair.errors import ConfigError
from gridfair.policies.condor_priority import CondorPriorityOrder
from gridfair.policies.group_quotas import (
    GroupQuotaOrder,
    allocate,
    group_limit,
    hgq_groups,
    negotiation_order,
)
from gridfair.policies.registry import build_stages

STATIC = {"GROUP_NAMES": "group_physics, group_chemistry",
          "GROUP_QUOTA_group_physics": "20", "GROUP_QUOTA_group_chemistry": "10"}
DYNAMIC = {"GROUP_NAMES": "group_physics, group_physics.hep, group_physics.lep, "
                          "group_chemistry",
           "GROUP_QUOTA_DYNAMIC_group_chemistry": "0.33334",
           "GROUP_QUOTA_DYNAMIC_group_physics": "0.66667",
           "GROUP_QUOTA_DYNAMIC_group_physics.hep": "0.75",
           "GROUP_QUOTA_DYNAMIC_group_physics.lep": "0.25"}
SURPLUS = {"GROUP_NAMES": "group_physics, group_physics.hep, group_physics.lep, "
                          "group_chemistry",
           "GROUP_QUOTA_group_physics": "20", "GROUP_QUOTA_group_physics.hep": "15",
           "GROUP_QUOTA_group_physics.lep": "5", "GROUP_QUOTA_group_chemistry": "10",
           "GROUP_ACCEPT_SURPLUS": "false", "GROUP_ACCEPT_SURPLUS_group_physics": "false",
           "GROUP_ACCEPT_SURPLUS_group_physics.lep": "true",
           "GROUP_ACCEPT_SURPLUS_group_physics.hep": "true"}


def allocated(knobs: Mapping[str, str], total: float, requested: Mapping[str, float],
              **settings: Any) -> dict[str, float]:
    groups = hgq_groups(tree_from_knobs(knobs))
    return {name: round(figures.allocated, 3)
            for name, figures in allocate(groups, total, requested, **settings).items()}


def quotas(knobs: Mapping[str, str], total: float, **settings: Any) -> dict[str, float]:
    groups = hgq_groups(tree_from_knobs(knobs))
    return {name: round(figures.quota, 3)
            for name, figures in allocate(groups, total, {}, **settings).items()}


def held(knobs: Mapping[str, str], slots: int, *cycles: Mapping[str, int]
         ) -> dict[str, float]:
    """Cpus each group holds after cycles of `condor` over the knobs' tree on `slots` 1-cpu
    slots, one cycle a second, each group's user submitting `jobs[group]` 1-cpu jobs (of
    each cycle's `jobs`, in that order) before it."""
    pool = Pool()
    for index in range(slots):
        pool.add_node(Node(f"slot{index}", None, power=1.0, cpus=1.0, memory=1024.0))
    stages = build_stages(order="condor", options={"groups": tree_from_knobs(knobs)})
    negotiator = Negotiator(pool, stages.order)
    for now, jobs in enumerate(cycles):
        for group, count in jobs.items():
            for number in range(count):
                negotiator.submit(Task(f"{group}.{now}.{number}", f"group {group}",
                                       float(now), cpus=1.0, memory=1.0, duration=100.0),
                                  float(now))
        negotiator.cycle(float(now))
    return {name[len("group "):]: user.usage[CPUS] for name, user in pool.users.items()}


# ------------------------------------------------------------- static quotas
def test_static_quotas_cap_physics_at_20_and_chemistry_at_10() -> None:
    assert quotas(STATIC, 30) == {NONE_GROUP: 0.0, "group_physics": 20.0,
                                  "group_chemistry": 10.0}
    # Both ask for more than the pool: each runs its quota, no more.
    assert held(STATIC, 30, {"group_physics": 40, "group_chemistry": 40}) == {
        "group_physics": 20.0, "group_chemistry": 10.0}


def test_static_quotas_scaled_down_only_without_oversubscription() -> None:
    assert quotas(STATIC, 15, oversubscription=False) == {
        NONE_GROUP: 0.0, "group_physics": 10.0, "group_chemistry": 5.0}
    # HTCondor's default allows oversubscription: the quotas stay as configured.
    assert quotas(STATIC, 15) == {NONE_GROUP: 0.0, "group_physics": 20.0,
                                  "group_chemistry": 10.0}


def test_static_quotas_not_scaled_up_when_the_pool_doubles() -> None:
    assert quotas(STATIC, 60) == {NONE_GROUP: 30.0, "group_physics": 20.0,
                                  "group_chemistry": 10.0}
    assert held(STATIC, 60, {"group_physics": 40, "group_chemistry": 40}) == {
        "group_physics": 20.0, "group_chemistry": 10.0}


# ------------------------------------------------------------ dynamic quotas
def test_dynamic_quotas_of_a_parent_give_hep_15_of_30_machines() -> None:
    got = quotas(DYNAMIC, 30)
    assert got["group_physics.hep"] == 15.0
    assert got["group_physics.lep"] == 5.0
    assert got["group_chemistry"] == 10.0
    # Physics keeps the quota it received for its own submitters (oversubscription).
    assert got["group_physics"] == 20.0


# ------------------------------------------------------------------- surplus
def test_surplus_accepted_by_subgroups_is_capped_by_their_parent() -> None:
    # lep and chemistry idle: hep may take lep's 5 (a peer's surplus), not chemistry's 10.
    groups = hgq_groups(tree_from_knobs(SURPLUS))
    figures = allocate(groups, 40, {"group_physics.hep": 60})
    by_name = {group.name: group for group in groups}
    assert group_limit(by_name, figures, {}, "group_physics.hep") == 20.0
    assert held(SURPLUS, 40, {"group_physics.hep": 60}) == {"group_physics.hep": 20.0}


def test_surplus_not_limited_when_the_parent_accepts_it() -> None:
    knobs = {**SURPLUS, "GROUP_ACCEPT_SURPLUS_group_physics": "true"}
    assert held(knobs, 40, {"group_physics.hep": 60}) == {"group_physics.hep": 40.0}


def test_surplus_refused_keeps_a_group_at_its_quota() -> None:
    knobs = {**SURPLUS, "GROUP_ACCEPT_SURPLUS_group_physics.hep": "false"}
    assert allocated(knobs, 40, {"group_physics.hep": 60})["group_physics.hep"] == 15.0
    assert held(knobs, 40, {"group_physics.hep": 60, "group_chemistry": 4}) == {
        "group_physics.hep": 15.0, "group_chemistry": 4.0}


def test_a_group_below_its_quota_gives_its_surplus_to_its_sibling() -> None:
    # lep wants 2 of its 5: hep gets the other 3 on top of its 15. (With oversubscription,
    # HTCondor's default, physics' own quota of 20, idle, is surplus too and hep's
    # allocation is 38; its parent's cap holds it to the same 18.)
    got = allocated(SURPLUS, 30, {"group_physics.hep": 60, "group_physics.lep": 2,
                                  "group_chemistry": 60}, oversubscription=False)
    assert (got["group_physics.hep"], got["group_physics.lep"],
            got["group_chemistry"]) == (18.0, 2.0, 10.0)
    # lep's jobs run first: hep then takes the rest of physics' 20.
    assert held(SURPLUS, 30, {"group_physics.lep": 2},
                {"group_physics.hep": 60, "group_chemistry": 60}) == {
        "group_physics.hep": 18.0, "group_physics.lep": 2.0, "group_chemistry": 10.0}


def test_in_one_cycle_the_first_listed_of_tied_groups_takes_its_parents_cap() -> None:
    # HTCondor's negotiator, not the manual: every group at no usage ties under the default
    # GROUP_SORT_EXPR; the list order (breadth first, by name) puts hep before lep, and hep
    # negotiates to its limit, physics' configured 20 (NEGOTIATOR_STRICT_ENFORCE_QUOTA), so
    # nothing is left for lep in this cycle.
    assert held(SURPLUS, 30, {"group_physics.hep": 60, "group_physics.lep": 2,
                              "group_chemistry": 60}) == {
        "group_physics.hep": 20.0, "group_physics.lep": 0.0, "group_chemistry": 10.0}


def test_surplus_shared_in_proportion_to_quotas_when_short() -> None:
    # Both subgroups want far more than their quotas, 6 and 2; physics' own submitters are
    # idle: what physics' children leave of its 20, 12, goes 3/4 to hep (quota 6 of 8) and
    # 1/4 to lep (hgq_allocate_surplus_loop, by quota).
    knobs = {**SURPLUS, "GROUP_QUOTA_group_physics.hep": "6",
             "GROUP_QUOTA_group_physics.lep": "2"}
    got = allocated(knobs, 30, {"group_physics.hep": 60, "group_physics.lep": 60},
                    oversubscription=False)
    assert (got["group_physics.hep"], got["group_physics.lep"]) == (15.0, 5.0)
    # ... but physics accepts no surplus: the two hold its 20 at most.
    result = held(knobs, 30, {"group_physics.hep": 60, "group_physics.lep": 60})
    assert sum(result.values()) == 20.0


# --------------------------------------------------------------------- order
def test_the_most_starved_group_negotiates_first_and_none_last() -> None:
    groups = hgq_groups(tree_from_knobs(STATIC))
    figures = allocate(groups, 30, {"group_physics": 40, "group_chemistry": 40})
    usage = {"group_physics": 10.0, "group_chemistry": 2.0, NONE_GROUP: 0.0}
    # chemistry at 2/10 is more starved than physics at 10/20.
    assert negotiation_order(groups, figures, usage) == [
        "group_chemistry", "group_physics", NONE_GROUP]


def test_users_in_a_group_by_effective_priority() -> None:
    # a's effective priority is five times b's (factors 5000 and 1000): with room for one
    # job in the group, b's runs although a submitted first.
    tree = tree_from_toml({"g": {"quota": 1, "users": ["a", "b"]}})
    pool = Pool()
    for index in range(4):
        pool.add_node(Node(f"slot{index}", None, power=1.0, cpus=1.0, memory=1024.0))
    negotiator = Negotiator(pool, GroupQuotaOrder(groups=tree, factors={"a": 5000.0}))
    for user in ("a", "b"):
        negotiator.submit(Task(f"{user}.0", user, 0.0, cpus=1.0, memory=1.0,
                               duration=50.0), 0.0)
    decisions = negotiator.cycle(0.0)
    assert {name: user.usage[CPUS] for name, user in pool.users.items()} == {
        "a": 0.0, "b": 1.0}
    assert "group g: usage 0 under its limit 1" in decisions[0].reason


def test_autoregroup_serves_a_capped_group_again_past_its_quota() -> None:
    # GROUP_AUTOREGROUP: once every group has negotiated, the group's submitters negotiate
    # again with <none>'s, with no group limit (hgq_prepare_for_matchmaking; the root's
    # round has no group name, so no quota check).
    knobs = {"GROUP_NAMES": "group_a", "GROUP_QUOTA_group_a": "1"}
    assert held(knobs, 4, {"group_a": 4}) == {"group_a": 1.0}
    assert held({**knobs, "GROUP_AUTOREGROUP_group_a": "true"}, 4, {"group_a": 4}) == {
        "group_a": 4.0}


def test_a_later_round_gives_what_a_group_could_not_place_to_others() -> None:
    # GROUP_QUOTA_MAX_ALLOCATION_ROUNDS (3): g1's jobs ask 2 cpus of 1-cpu slots and place
    # none of its allocation of 2; the next round cuts its demand to what it holds, 0, and
    # its quota goes as surplus to g2, which accepts it: g2 runs on all 4 slots.
    pool = Pool()
    for index in range(4):
        pool.add_node(Node(f"slot{index}", None, power=1.0, cpus=1.0, memory=1024.0))
    tree = tree_from_toml({"g1": {"quota": 2, "users": ["a"]},
                           "g2": {"quota": 2, "users": ["b"], "accept_surplus": True}})
    negotiator = Negotiator(pool, GroupQuotaOrder(groups=tree))
    for number in range(4):
        negotiator.submit(Task(f"a.{number}", "a", 0.0, cpus=2.0, memory=1.0,
                               duration=50.0), 0.0)
        negotiator.submit(Task(f"b.{number}", "b", 0.0, cpus=1.0, memory=1.0,
                               duration=50.0), 0.0)
    negotiator.cycle(0.0)
    assert {name: user.usage[CPUS] for name, user in pool.users.items()} == {
        "a": 0.0, "b": 4.0}


def test_flat_condor_is_the_plain_order() -> None:
    stages = build_stages(order="condor", options={"groups": {}})
    assert type(stages.order) is CondorPriorityOrder
    assert type(build_stages(order="condor").order) is CondorPriorityOrder


def test_a_quota_in_memory_is_refused_by_name() -> None:
    tree = tree_from_toml({"g": {"quota": {"cpus": 4, "memory": 1000}}})
    with pytest.raises(ConfigError, match="group 'g'.*memory quota"):
        build_stages(order="condor", options={"groups": tree})


# ------------------------------------------------------------------ property
def random_knobs(rng: random.Random) -> dict[str, str]:
    names: list[str] = []
    knobs: dict[str, str] = {}
    for index in range(rng.randint(1, 6)):
        parent = rng.choice([None, *names]) if names else None
        name = f"g{index}" if parent is None else f"{parent}.s{index}"
        names.append(name)
        if rng.random() < 0.5:
            knobs[f"GROUP_QUOTA_{name}"] = str(rng.randint(0, 12))
        else:
            knobs[f"GROUP_QUOTA_DYNAMIC_{name}"] = str(round(rng.uniform(0, 0.5), 2))
        knobs[f"GROUP_ACCEPT_SURPLUS_{name}"] = rng.choice(["true", "false"])
    knobs["GROUP_NAMES"] = ", ".join(names)
    return knobs


@pytest.mark.parametrize("seed", range(40))
def test_property_no_group_over_its_limit_and_no_more_than_the_pool(seed: int) -> None:
    rng = random.Random(seed)
    knobs = random_knobs(rng)
    tree = tree_from_knobs(knobs)
    slots = rng.randint(4, 24)
    jobs = {name: rng.randint(0, 20) for name in tree.names()[1:]}
    jobs[NONE_GROUP] = rng.randint(0, 10)
    result = held(knobs, slots, jobs)
    groups = hgq_groups(tree)
    demand = {name: float(count) for name, count in jobs.items()}
    # Without oversubscription the allocations sum to the pool at most. (With it, HTCondor's
    # default, a parent keeps the quota its children share and static quotas may exceed the
    # pool: the allocations may sum over it, and the limits below hold what runs.)
    assert sum(entry.allocated for entry in allocate(
        groups, slots, demand, oversubscription=False).values()) <= slots + 1e-6
    figures = allocate(groups, slots, demand)
    by_name = {group.name: group for group in groups}
    assert sum(result.values()) <= slots
    usage = {name: result.get(name, 0.0) for name in by_name}
    usage[NONE_GROUP] = result.get("<none>", 0.0)
    subtree = dict(usage)
    for group in reversed(groups):
        if group.parent is not None:
            subtree[group.parent] += subtree[group.name]
    for group in groups:
        # No group over what it may hold (max of allocated and quota, strictly enforced).
        assert usage[group.name] <= group_limit(by_name, figures, dict.fromkeys(usage, 0.0),
                                                group.name) + 1e-6
        # A group that accepts no surplus never holds more than its own quota, with its
        # subtree.
        if not group.accept_surplus:
            cap = group.configured if group.static else figures[group.name].subtree_quota
            assert subtree[group.name] <= cap + 1e-6


def recount(order: GroupQuotaOrder) -> tuple[dict[str, float], dict[str, float],
                                              dict[str, float], dict[str, set[str]]]:
    """Each group's usage, demand, lightest waiting next job and waiting users, read from
    every user of the pool (what the order keeps by events)."""
    terms: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in order.hgq}
    least = dict.fromkeys(order.hgq, math.inf)
    waiting: dict[str, set[str]] = {name: set() for name in order.hgq}
    for user in order.pool.users.values():
        group = order.group_tree.group_of(user.name)
        held = order.slot_weight.of_usage(user)
        head = order.pool.head(user)
        weight = order.slot_weight.of_task(head) if head is not None else 0.0
        terms[group][0].append(held)
        terms[group][1].append(held + user.idle_count * weight)
        if user.active:
            least[group] = min(least[group], weight)
            waiting[group].add(user.name)
    return ({name: math.fsum(usage) for name, (usage, _) in terms.items()},
            {name: math.fsum(demand) for name, (_, demand) in terms.items()}, least, waiting)


def listed_first(order: GroupQuotaOrder, flat: CondorPriorityOrder, now: float
                 ) -> UserState | None:
    """The user `order` would serve read as it was before its state was kept by events:
    every waiting user listed in one order of the pool (`flat`'s, over the same pool), every
    user's usage and demand recounted (`order` keeps only the cycle's allocations)."""
    waiting = list(flat.tree.ordered(now))
    if not waiting:
        return None
    usage, requested, _, _ = recount(order)
    if now != order.cycle_time:
        order.cycle_time, order.rounds = now, 1
        order._allocate(requested, usage)
    by_group: dict[str, list[UserState]] = {}
    for user in waiting:
        by_group.setdefault(order._group(user), []).append(user)
    while True:
        user = next((found for found in (
            order._fitting(by_group[name], group_limit(order.hgq, order.allocations, usage,
                                                       name) - usage[name])
            for name in order.order_of_groups
            if order.allocations[name].allocated > 0 and name in by_group) if found), None)
        if user is not None or not order._another_round(requested, usage):
            break
    if user is not None or not order.hgq[NONE_GROUP].autoregroup:
        return user
    return order._fitting([user for user in waiting if order._group(user) == NONE_GROUP
                           or order.hgq[order._group(user)].autoregroup], math.inf)


@pytest.mark.parametrize("weight", ["Cpus", "Cpus + Memory / 3000 + 0.7 * GPUs"])
@pytest.mark.parametrize("seed", range(12))
def test_property_state_kept_by_events_equals_a_recount_and_decides_alike(
        seed: int, weight: str) -> None:
    # Random submits, starts, finishes, vacates, kills, drops, parks, blocks and unblocks:
    # after each, the groups' usage and demand kept by events are a recount's, bit for bit
    # (float sizes, so an event applied twice or not at all shows), and so are the groups'
    # waiting users and their lightest next job; and each decision is the one made by
    # listing every user (jobs of several sizes: some users passed over for want of room).
    rng = random.Random(seed)
    knobs = random_knobs(rng)
    group = rng.choice(knobs["GROUP_NAMES"].split(", "))
    knobs[f"GROUP_AUTOREGROUP_{group}"] = "true"
    tree = tree_from_knobs(knobs)
    # Two users in no group (<none>), the others charged to a group each (HTCondor's
    # `group.user` identity).
    users = ["u0", "u1", *(f"group {rng.choice(tree.names()[1:])}.u{index}"
                           for index in range(2, 8))]
    order = GroupQuotaOrder(groups=tree, slot_weight=weight)
    listed = GroupQuotaOrder(groups=tree, slot_weight=weight)
    flat = CondorPriorityOrder(slot_weight=weight)
    pool = Pool()
    for index in range(6):
        pool.add_node(Node(f"n{index}", None, power=1.0, cpus=rng.choice([1.0, 2.0, 4.0]),
                           memory=4096.0, gpus=rng.choice([0.0, 1.0])))
    for listener in (order, listed, flat):
        pool.listen(listener)
    now = 0.0
    for step in range(300):
        now += rng.choice([0.0, 1.5, 600.0])
        running = [task for task in pool.tasks.values() if task.state == RUNNING]
        action = rng.random()
        if action < 0.35:
            pool.submit(Task(f"t{step}", rng.choice(users), now,
                             cpus=rng.choice([0.5, 1.0, 1.5]),
                             memory=rng.choice([100.0, 333.3, 1000.0]),
                             gpus=rng.choice([0.0, 0.0, 1.0]), duration=10.0), now)
        elif action < 0.6:
            user = order.first(now)
            assert user is listed_first(listed, flat, now), f"at step {step}"
            # A reason names the pool's runner-up, whatever its group (ties as one tree).
            assert order.runner_up(now) == flat.runner_up(now), f"at step {step}"
            head = pool.head(user) if user is not None else None
            node = pool.best_node(head) if head is not None else None
            if node is not None:
                pool.start(head, node, now)
            elif user is not None:
                pool.park(user, now) if rng.random() < 0.5 else pool.block(user, now)
        elif action < 0.7 and running:
            pool.finish(rng.choice(running), now)
        elif action < 0.78 and running:
            pool.vacate(rng.choice(running), now)
        elif action < 0.83 and running:
            pool.kill(rng.choice(running), now)
        elif action < 0.9:
            queued = [task for task in pool.tasks.values() if task.state == QUEUED]
            if queued:
                pool.drop(rng.choice(queued), now)
        elif action < 0.93:  # a machine joins: its owner's event comes at time 0
            pool.add_node(Node(f"m{step}", rng.choice(users), power=1.0, cpus=1.0,
                               memory=4096.0))
        else:
            pool.unblock_all(now)
        usage, demand = order.snapshot()
        least = {name: order._least_head(name) for name in order.hgq}
        waiting = {name: {user.name for user in order.trees[name].ordered(now)}
                   for name in order.hgq}
        flat.tree.advance(now)  # read as the groups' trees just were
        assert (usage, demand, least, waiting) == recount(order), f"after step {step}"
    # Levels a daemon saved at an earlier cycle, restored: every priority as in one tree.
    state = flat.export_state(now - 900.0)
    for restored in (order, flat):
        restored.import_state(state)
    assert all(order.priority(user, now) == flat.priority(user, now)
               for user in pool.users.values())
    assert order.runner_up(now) == flat.runner_up(now)


def test_levels_restored_as_of_the_latest_groups_clock() -> None:
    # A decision reads the tree of the group it serves only, so the groups' trees' clocks
    # part; levels restored after it are placed as of the latest (as one tree of the pool
    # would place them), whichever group's event came last.
    tree = tree_from_knobs({"GROUP_NAMES": "g1, g2", "GROUP_QUOTA_g1": "2",
                            "GROUP_QUOTA_g2": "2"})
    order, flat, pool = GroupQuotaOrder(groups=tree), CondorPriorityOrder(), Pool()
    for index in range(4):
        pool.add_node(Node(f"slot{index}", None, power=1.0, cpus=1.0, memory=1024.0))
    for listener in (order, flat):
        pool.listen(listener)
    for user in ("group g1.a", "group g2.b"):
        pool.submit(Task(f"{user}.0", user, 0.0, cpus=1.0, memory=1.0, duration=50.0), 0.0)
    assert order.first(2000.0) is flat.first(2000.0) is pool.users["group g1.a"]
    state = {**flat.export_state(1000.0), "priorities": {"group g1.a": [3.0],
                                                         "group g2.b": [2.0]}}
    for restored in (order, flat):
        restored.import_state(state)
    assert [order.priority(user, 2000.0) for user in pool.users.values()] == [
        flat.priority(user, 2000.0) for user in pool.users.values()]


# ----------------------------------------------------------------- simulator
def test_simulate_takes_the_tree_under_condor(tmp_path: Path) -> None:
    tree = tmp_path / "groups.toml"
    tree.write_text('[groups.owners_ab]\nquota = 3\naccept_surplus = true\n'
                    'users = ["User1", "User2"]\n[groups.owners_c]\nquota = 1\n'
                    'users = ["User3"]\n')

    def simulate(*args: str) -> dict[str, Any]:
        result = CliRunner().invoke(cli, ["simulate", "hosep-table1", "-w", "medium",
                                          "--format", "json", "-q", "--order", "condor",
                                          *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.output)

    grouped = simulate("--groups", str(tree))
    assert grouped["summary"]["completed"] == grouped["summary"]["tasks"]
    assert grouped == simulate("--groups", str(tree))  # deterministic
    assert grouped["users"] != simulate()["users"]
