"""DRF and weighted DRF on hand-worked two-user, two-resource cases (DRF paper style)."""

from __future__ import annotations

import json

import pytest

from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import CPUS, MEMORY, Node, Pool, Task
from gridfair.core.stages import OrderPolicy
from gridfair.errors import ConfigError
from gridfair.policies.drf import DrfOrder, Entitlements
from gridfair.policies.registry import build_stages


def one_node_pool(cpus: float, memory: float) -> Pool:
    """A pool of one unowned node (power = cpus, so MFlops shares are cpu shares)."""
    pool = Pool()
    pool.add_node(Node("node", None, power=cpus, cpus=cpus, memory=memory))
    return pool


def submit_many(negotiator: Negotiator, user: str, count: int, cpus: float, memory: float,
                now: float = 0.0, duration: float = 100.0) -> None:
    for number in range(count):
        negotiator.submit(Task(f"{user}.{number}", user, now, cpus=cpus, memory=memory,
                               duration=duration), now)


def running_counts(pool: Pool) -> dict[str, int]:
    return {name: user.running for name, user in pool.users.items()}


def classic_example(order: OrderPolicy) -> tuple[Pool, Negotiator]:
    """Ghodsi et al.: 9 CPUs, 18 GB; A's tasks <1 CPU, 4 GB>, B's <3 CPU, 1 GB>."""
    pool = one_node_pool(9, 18)
    negotiator = Negotiator(pool, order)
    submit_many(negotiator, "A", 10, 1, 4)
    submit_many(negotiator, "B", 10, 3, 1)
    negotiator.cycle(0.0)
    return pool, negotiator


def test_drf_classic_example_gives_a_three_tasks_and_b_two() -> None:
    pool, negotiator = classic_example(DrfOrder(resources=("cpus", "memory")))
    assert running_counts(pool) == {"A": 3, "B": 2}
    # Both end at a dominant share of 2/3: A's memory (12/18), B's cpus (6/9).
    a_share = negotiator.order.key_figures(pool.users["A"], 0.0)
    assert a_share["dominant_share"] == pytest.approx(2 / 3)
    assert a_share["dominant_resource"] == "memory"


def test_weighted_drf_two_to_one_gives_a_four_tasks_and_b_one() -> None:
    # w = (2/3, 1/3): A's task adds (2/9)/(2/3) = 1/3 to its key, B's (1/3)/(1/3) = 1.
    # Keys: A 0 -> 1/3, B 0 -> 1, A -> 2/3, A -> 1, tie A(1) = B(1) goes to A (first seen):
    # A's 4th task fits (7 CPU, 17 GB); then B needs 3 CPUs of 2 free, A 4 GB of 1 free.
    order = DrfOrder(weighted=True, resources=("cpus", "memory"), weights={"A": 2, "B": 1})
    pool, _ = classic_example(order)
    assert running_counts(pool) == {"A": 4, "B": 1}


def test_weighted_drf_with_equal_weights_is_drf() -> None:
    order = DrfOrder(weighted=True, resources=("cpus", "memory"), weights={"A": 1, "B": 1})
    pool, _ = classic_example(order)
    assert running_counts(pool) == {"A": 3, "B": 2}


def test_default_weights_are_the_provided_power_shares() -> None:
    pool = Pool()
    pool.add_node(Node("a1", "A", power=300.0))
    pool.add_node(Node("b1", "B", power=100.0))
    entitlements = Entitlements()
    entitlements.attach(pool)
    assert entitlements.of(pool.users["A"]) == pytest.approx(0.75)
    assert entitlements.of(pool.users["B"]) == pytest.approx(0.25)


def test_why_names_the_dominant_share_and_the_margin() -> None:
    pool = one_node_pool(9, 18)
    negotiator = Negotiator(pool, DrfOrder(resources=("cpus", "memory")))
    submit_many(negotiator, "A", 1, 1, 4)
    submit_many(negotiator, "B", 2, 3, 1)
    pool.start(pool.tasks["B.0"], pool.nodes[0], 0.0)
    decisions = negotiator.cycle(0.0)
    assert decisions[0].task.user == "A"
    assert decisions[0].reason == (
        "free slot to A: least dominant share 0 (of cpus), 0.3333 below the next, B (0.3333)")


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"A": -1, "B": 1}, "weight of user 'A' is -1: weights must be >= 0"),
        ({"A": 0, "B": 0}, "every weight is zero"),
        ({"A": "lots"}, "weight of user 'A' is 'lots', not a number"),
    ],
)
def test_bad_weights_are_refused_with_a_clear_message(weights, message) -> None:
    with pytest.raises(ConfigError, match=message):
        DrfOrder(weighted=True, weights=weights)


def test_weights_naming_unknown_users_are_refused() -> None:
    entitlements = Entitlements({"A": 1, "ghost": 1})
    with pytest.raises(ConfigError, match="weights name users the pool does not have: 'ghost'"):
        entitlements.check_known(["A", "B"])


def test_registry_builds_drf_and_wdrf() -> None:
    assert build_stages("drf").order.name == "drf"
    assert build_stages(order="wdrf", options={"weights": {"A": 1}}).order.name == "wdrf"


def test_resource_set_is_validated() -> None:
    with pytest.raises(ConfigError, match="unknown resource 'disk'"):
        DrfOrder(resources=("cpus", "disk"))
    assert DrfOrder(resources=(CPUS, MEMORY)).resources == (CPUS, MEMORY)


@pytest.mark.parametrize("resources", [["memory"], ["cpus", "power"]])
def test_the_daemons_dominant_share_is_drfs_own_over_its_resources(tmp_path, resources) -> None:
    """The `usage` column (and the gauge it feeds) is the dominant share DRF orders by, over
    the resources its option names, not over every resource the pool has."""
    from test_daemon import files_config, make_daemon, rows

    raw = files_config(tmp_path, policy={"name": "drf", "options": {"resources": resources}})
    assert make_daemon(tmp_path, raw, max_cycles=1).run() == 0
    usage = rows(tmp_path, "select user, dominant_share, figures from usage")
    assert any(share > 0 for _, share, _ in usage)
    for user, share, figures in usage:
        assert share == pytest.approx(json.loads(figures)["dominant_share"], abs=1e-12), user
