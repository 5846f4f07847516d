"""Weighted DRF and SDRF as the papers print them (`paper`) and as the SDRF authors' simulator
computes them (`authors`), on hand-made pools where the two forms pick different users."""

from __future__ import annotations

from typing import Any

import pytest
from test_drf import one_node_pool
from test_sdrf import seen_in_order, start_tasks

from gridfair.core.negotiator import Negotiator
from gridfair.core.pool import Node, Task
from gridfair.core.stages import OrderPolicy
from gridfair.errors import ConfigError
from gridfair.policies.authors_ties import python27_dict_order, python27_hash
from gridfair.policies.drf import DrfOrder
from gridfair.policies.sdrf import SdrfOrder
from gridfair.sim.scenario import Scenario, run_scenario

CPU_MEMORY = ("cpus", "memory")
EQUAL = {"A": 1, "B": 1}


def served(order: OrderPolicy, cpus_in_pool: float, seen: tuple[str, str], running: dict[str, int],
           now: float, cpus: float) -> list[str]:
    """On one node of `cpus_in_pool` cpus and 10 mem, users known in the order `seen`, with
    `running` one-cpu tasks started at t = 0, both A and B submit one task of `cpus` cpus at
    `now`: the users whose task started."""
    negotiator = Negotiator(one_node_pool(cpus_in_pool, 10), order)
    seen_in_order(negotiator.pool, *seen)
    for user, count in running.items():
        start_tasks(negotiator, user, count, 1.0, 0.0, 0.0)
    for user in ("A", "B"):
        negotiator.submit(Task(f"{user}.new", user, now, cpus=cpus, memory=0.0, duration=1.0),
                          now)
    negotiator.cycle(now)
    return [user for user in ("A", "B")
            if negotiator.pool.tasks[f"{user}.new"].first_start == now]


# Weighted DRF on one node of (8 cpus, 10 mem). A runs 4 one-cpu tasks, B runs 3: shares of
# cpus A 4/8 = 0.5, B 3/8 = 0.375, no memory. One cpu is free; both want one more.
# paper (w_A = w_B = 1/2):        A 0.5 / 0.5 = 1,       B 0.375 / 0.5 = 0.75  -> B.
# authors (w_A = (.8, .2), w_B = (.2, .8)):
#                                 A max(0.5/.8, 0) = 0.625, B max(0.375/.2, 0) = 1.875 -> A.
@pytest.mark.parametrize("form, expected", [("paper", ["B"]), ("authors", ["A"])])
def test_per_resource_weights_change_weighted_drfs_choice(form, expected) -> None:
    order = DrfOrder(weighted=True, resources=CPU_MEMORY, weights=EQUAL, form=form,
                     resource_weights={"A": {"cpus": 0.8, "memory": 0.2},
                                       "B": {"cpus": 0.2, "memory": 0.8}})
    assert served(order, 8, ("A", "B"), {"A": 4, "B": 3}, 0.0, cpus=1.0) == expected


# SDRF on one node of (10 cpus, 10 mem), n = 2, delta = 1e-9 (tau = 0.05 s: by t = 100 every
# commitment has reached its target). B is seen first. At t = 0 A starts 6 one-cpu tasks and B
# one; at t = 100 both want a 3-cpu task, and 3 cpus are free, so one of them gets it (stop).
# paper (w_i = 1/2): share terms A 0.6, B 0.1; targets A max(0.6 - 0.5, 0) = 0.1, B 0;
#   priorities A 0.7, B 0.1 -> B.
# authors (e_A = (.8, .5), e_B = (.2, .5)): share terms, signed,
#   A max(0.6 - 0.8, 0 - 0.5) = -0.2, B max(0.1 - 0.2, 0 - 0.5) = -0.1;
#   targets max(share - e - 1/2, 0) = 0 for both; priorities A -0.2, B -0.1 -> A.
#   (A share term clipped at 0 would tie the two at 0, and B, seen first, would win: the sign
#   is what serves A.)
@pytest.mark.parametrize("form, expected", [("paper", ["B"]), ("authors", ["A"])])
def test_the_signed_share_term_changes_sdrfs_choice(form, expected) -> None:
    order = SdrfOrder(delta=1e-9, resources=CPU_MEMORY, weights=EQUAL, form=form,
                      resource_weights={"A": {"cpus": 0.8, "memory": 0.5},
                                        "B": {"cpus": 0.2, "memory": 0.5}})
    assert served(order, 10, ("B", "A"), {"A": 6, "B": 1}, 100.0, cpus=3.0) == expected


def test_an_unknown_form_is_refused() -> None:
    with pytest.raises(ConfigError, match="unknown form 'exact'"):
        SdrfOrder(form="exact")
    with pytest.raises(ConfigError, match="unknown form 'exact'"):
        DrfOrder(weighted=True, form="exact")


# ---- The authors' simulator's arithmetic and tie-break (`form="authors"` only), each on a
# ---- hand-made task list where it changes the schedule; every run uses the stop rule. Their
# ---- simulator (github hsadok/sdrf, commit f0159ee), run by hand on the same four task
# ---- lists, starts every task at the time the `authors` cases expect.
def schedule(tasks: list[tuple[str, str, float, float, float]], order: str, form: str,
             cpus: float = 1.0, memory: float = 1.0, **options: Any) -> dict[str, float]:
    """Start times of `tasks` (id, user, submit, cpus, duration; no memory unless `memory`
    is given per task by a 6th field) on one node of (`cpus`, `memory`); a user's position in
    the list is the tie-break order (the user seen first goes first)."""
    node = Node("node", None, power=cpus, cpus=cpus, memory=memory)
    listed = [Task(name, user, submit, cpus=size, memory=rest[0] if rest else 0.0,
                   duration=duration, source_index=index)
              for index, (name, user, submit, size, duration, *rest) in enumerate(tasks)]
    scenario = Scenario([node], listed, policy_options={"resources": CPU_MEMORY, "form": form,
                                                        **options})
    result, _ = run_scenario(scenario, order=order, allocation="stop")
    return {task.id: task.first_start for task in result.tasks}


# One node of 1 cpu. At t = 0 A's task (0.5 cpu) starts first (A is seen first), then B, of
# dominant share 0, asks for 0.5 + 5e-10 cpus where 0.5 is free.
# paper: gridfair's fit test forgives 1e-9 of rounding: B.0 fits now.
# authors: demand <= capacity - consumed exactly: 0.5000000005 > 0.5, so allocation stops
#   and B.0 waits for A.0 to end at t = 10.
@pytest.mark.parametrize("form, b_starts", [("paper", 0.0), ("authors", 10.0)])
def test_the_exact_fit_test_holds_back_a_task_the_tolerance_lets_in(form, b_starts) -> None:
    starts = schedule([("A.0", "A", 0.0, 0.5, 10.0), ("B.0", "B", 0.0, 0.5 + 5e-10, 10.0)],
                      "drf", form)
    assert starts == {"A.0": 0.0, "B.0": b_starts}


# One node of 1 cpu. A runs 0.1 and 0.2 cpus from t = 0 to 10; its usage, summed as the tasks
# start and end, is 0.1 + 0.2 - 0.1 - 0.2 = 2.78e-17 in floating point, not 0. At t = 10
# A and then B (new) each ask for 0.6 cpus: one fits.
# paper: an idle user holds exactly nothing: A and B tie at 0 and A, seen first, goes first.
# authors: A's 2.78e-17 is kept (their simulator never clears it): B at 0 goes first.
@pytest.mark.parametrize("form, first, second", [("paper", "A.2", "B.0"),
                                                 ("authors", "B.0", "A.2")])
def test_usage_never_cleared_when_idle_puts_the_idle_user_behind(form, first, second) -> None:
    assert 0.1 + 0.2 - 0.1 - 0.2 > 0  # the rounding residue A keeps under `authors`
    starts = schedule([("A.0", "A", 0.0, 0.1, 10.0), ("A.1", "A", 0.0, 0.2, 10.0),
                       ("A.2", "A", 10.0, 0.6, 10.0), ("B.0", "B", 10.0, 0.6, 10.0)],
                      "drf", form)
    assert starts == {"A.0": 0.0, "A.1": 0.0, first: 10.0, second: 20.0}


# SDRF, equal shares (n = 2), one node of (8 cpus, 8 mem), delta = 1e-9 (tau = 0.05 s: at
# t = 100 every commitment has reached its target exactly). B is seen first. Tasks take
# (1 cpu, 1 mem). From t = 0, B runs 2 tasks (to t = 1000), A runs 6 (to t = 100): A's
# share is 6/8 and its commitment reaches max(0.75 - 0.5, 0) = 0.25 on both resources.
# At t = 100 A's tasks end and A and B each ask for (5, 5); 6 are free, so one fits.
#   A: share 0 + commitment 0.25 = 0.25, commitment falling at (0 - 0.25) / tau;
#   B: share 2/8 = 0.25 + commitment 0 = 0.25, commitment steady (target 0).
# paper: equal priorities go to the user seen first: B at 100, A at 110 (B's new task ends).
# authors: the commitment's rate of change breaks the tie, lower first: A at 100, B at 110.
@pytest.mark.parametrize("form, first, second", [("paper", "B.new", "A.new"),
                                                 ("authors", "A.new", "B.new")])
def test_sdrf_breaks_equal_priorities_by_the_commitments_rate_of_change(form, first,
                                                                        second) -> None:
    tasks = [(f"B.{k}", "B", 0.0, 1.0, 1000.0, 1.0) for k in range(2)]
    tasks += [(f"A.{k}", "A", 0.0, 1.0, 100.0, 1.0) for k in range(6)]
    tasks += [("A.new", "A", 100.0, 5.0, 10.0, 5.0), ("B.new", "B", 100.0, 5.0, 10.0, 5.0)]
    starts = schedule(tasks, "sdrf", form, cpus=8.0, memory=8.0, delta=1e-9,
                      equal_shares=True)
    assert (starts[first], starts[second]) == (100.0, 110.0)


# Every arrival of an instant is queued before allocating (both forms): on one node of
# 4 cpus, A runs 2 from t = 0 to 10; at t = 1 A asks for 2 more, then B (same instant) for
# 2. DRF serves B first (share 0 against A's 1/2), and A's task no longer fits: it waits to
# t = 10. Allocating after each arrival would have given the 2 cpus to A.
@pytest.mark.parametrize("form", ["paper", "authors"])
def test_the_arrivals_of_an_instant_are_all_queued_before_allocating(form) -> None:
    starts = schedule([("A.0", "A", 0.0, 2.0, 10.0), ("A.1", "A", 1.0, 2.0, 10.0),
                       ("B.0", "B", 1.0, 2.0, 10.0)], "drf", form, cpus=4.0)
    assert starts == {"A.0": 0.0, "A.1": 10.0, "B.0": 1.0}


# ---- The authors' user index (`gridfair.policies.authors_ties`): their weighted DRF and SDRF
# ---- index the users in the order Python 2.7 dicts walk them. Expected values printed by
# ---- CPython 2.7.18 (pyenv's, on this machine) for these keys.
PY27_HASHES = {"a": 12416037344, "bob": 327024216816240890, "user7": -2878283150406289535,
               "": 0, "2V0B3LFwQ48zIHlDcpiCQTAG+f4Nk64GVADb8vfarvA=": -3759868768641395187}
# {} filled with user0..user29, alice, bob, "", x in that order (two resizes, collisions).
PY27_WALK = ["user6", "user7", "user4", "user5", "user2", "user3", "user0", "user1", "user8",
             "user9", "", "user10", "user11", "user12", "user13", "user14", "user15", "user16",
             "user17", "user18", "user19", "alice", "user25", "user24", "user27", "user26",
             "user21", "user20", "user23", "user22", "x", "bob", "user29", "user28"]


def test_python_27_string_hashes_and_dict_walks_are_cpythons() -> None:
    assert {key: python27_hash(key) for key in PY27_HASHES} == PY27_HASHES
    keys = [f"user{k}" for k in range(30)] + ["alice", "bob", "", "x"]
    assert python27_dict_order(keys) == PY27_WALK
    assert python27_dict_order(["alice", "bob"]) == ["bob", "alice"]


# One node of 1 cpu; alice is seen first, then bob, each submits one 1-cpu task at t = 0 with
# equal weights: both at share 0, a tie.
# paper: the user seen first: alice at 0, bob at 10.
# authors: their index walks {alice, bob} as Python 2.7 does, bob first: bob at 0, alice at 10.
@pytest.mark.parametrize("order, options", [
    ("wdrf", {"weights": {"alice": 1, "bob": 1},
              "resource_weights": {user: {"cpus": 0.5, "memory": 0.5}
                                   for user in ("alice", "bob")}}),
    ("sdrf", {"weights": {"alice": 1, "bob": 1}, "equal_shares": False, "delta": 0.9999}),
])
@pytest.mark.parametrize("form, first, second", [("paper", "alice.0", "bob.0"),
                                                 ("authors", "bob.0", "alice.0")])
def test_ties_go_in_the_authors_user_index_in_their_form(order, options, form, first,
                                                         second) -> None:
    starts = schedule([("alice.0", "alice", 0.0, 1.0, 10.0), ("bob.0", "bob", 0.0, 1.0, 10.0)],
                      order, form, **options)
    assert starts == {first: 0.0, second: 10.0}


def test_plain_drf_keeps_the_order_of_appearance_in_the_authors_form() -> None:
    # Their DRF builds no dict of users: its index is the order tasks are read.
    starts = schedule([("alice.0", "alice", 0.0, 1.0, 10.0), ("bob.0", "bob", 0.0, 1.0, 10.0)],
                      "drf", "authors")
    assert starts == {"alice.0": 0.0, "bob.0": 10.0}
