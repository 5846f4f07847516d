"""The live tree keeps exactly the order a full re-sort gives, at every time."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from gridfair.policies.live_tree import LiveTree, upper_envelope, value_at

# Two priorities closer than this are a tie as far as floating point can tell.
TIE = 1e-9

coefficient = st.one_of(
    st.sampled_from([0.0, 0.25, 0.5, 1.0, -0.5]),  # exact ties and shared lines
    st.floats(-2.0, 2.0, allow_nan=False),
)
curve = st.lists(st.tuples(coefficient, coefficient), min_size=1, max_size=3)


def resorted(curves: dict[int, tuple[list, float]], now: float, tau: float) -> list[int]:
    def key(item):
        element, (lines, set_at) = item
        return (value_at(lines, math.exp(-(now - set_at) / tau)), element)

    return [element for element, _ in sorted(curves.items(), key=key)]


def assert_same_order(tree_order, expected, curves, now, tau) -> None:
    """Equal orders, except between priorities that are equal up to rounding."""
    if tree_order == expected:
        return
    values = {
        element: value_at(lines, math.exp(-(now - set_at) / tau))
        for element, (lines, set_at) in curves.items()
    }
    rank = {element: position for position, element in enumerate(expected)}
    for i, first in enumerate(tree_order):
        for second in tree_order[i + 1:]:
            if rank[second] < rank[first]:
                assert abs(values[first] - values[second]) <= TIE, (
                    f"at t={now}: {first} ({values[first]!r}) ahead of {second} "
                    f"({values[second]!r})"
                )


@settings(max_examples=150, deadline=None)
@given(
    initial=st.lists(curve, min_size=1, max_size=12),
    steps=st.lists(
        st.tuples(
            st.floats(0.0, 3.0, allow_nan=False),  # time step, in time constants
            st.sampled_from(["query", "set", "remove"]),
            st.integers(0, 14),
            curve,
        ),
        max_size=40,
    ),
    tau=st.sampled_from([1.0, 0.01, 1e6]),
)
def test_live_tree_matches_a_full_resort_at_every_time(initial, steps, tau) -> None:
    tree = LiveTree(tau)
    curves: dict[int, tuple[list, float]] = {}
    now = 0.0
    for element, lines in enumerate(initial):
        tree.set(element, lines, now, element)
        curves[element] = (lines, now)
    for step, action, element, lines in steps:
        # Steps of up to 3 tau, with the occasional jump far past the re-base horizon.
        now += step * tau * (30.0 if step > 2.9 else 1.0)
        if action == "set":
            tree.set(element, lines, now, element)
            curves[element] = (lines, now)
        elif action == "remove":
            tree.remove(element, now)
            curves.pop(element, None)
        order = list(tree.ordered(now))
        assert_same_order(order, resorted(curves, now, tau), curves, now, tau)
        assert tree.first(now) == (order[0] if order else None)


def test_neighbours_crossing_are_swapped_and_counted() -> None:
    tree = LiveTree(1.0)
    tree.set(0, [(1.0, -1.0)], 0.0, "rising")  # 1 - e^-t: 0 at t=0, towards 1
    tree.set(1, [(0.5, 0.0)], 0.0, "flat")  # 0.5
    assert list(tree.ordered(0.0)) == ["rising", "flat"]
    crossing = math.log(2.0)  # 1 - e^-t = 0.5
    assert list(tree.ordered(crossing * 0.999)) == ["rising", "flat"]
    assert list(tree.ordered(crossing * 1.001)) == ["flat", "rising"]
    assert tree.swaps == 1


def test_upper_envelope_drops_lines_that_can_never_be_the_maximum() -> None:
    lines = [(0.0, 1.0), (0.5, 0.0), (0.1, 0.1)]
    # On (0, 1]: 0.5 wins for x < 0.5, x wins above; 0.1 + 0.1x never wins.
    assert sorted(upper_envelope(lines, 1.0)) == [(0.0, 1.0), (0.5, 0.0)]
    assert upper_envelope(lines, 0.4) == [(0.5, 0.0)]


def test_equal_priorities_go_by_rank_set_at_any_time_and_across_a_rebase() -> None:
    # tau = 1. Three constant curves of priority 1: key 0 with rank 0, key 1 with rank -2 set
    # at t = 0, key 2 with rank -1 set at t = 1. A rank scales like a slope: set at t = 1
    # (x = e^-1) it is stored as -1 / e^-1 = -e, below key 1's -2, so key 2 goes first, then
    # key 1, then key 0 (rank 0). The order survives a re-base (after 50 time constants),
    # which rescales every rank by the same factor.
    tree = LiveTree(1.0)
    tree.set(0, [(1.0, 0.0)], 0.0, "rank 0")
    tree.set(1, [(1.0, 0.0)], 0.0, "rank -2", rank=-2.0)
    tree.set(2, [(1.0, 0.0)], 1.0, "rank -1 at t = 1", rank=-1.0)
    assert list(tree.ordered(1.0)) == ["rank -1 at t = 1", "rank -2", "rank 0"]
    assert list(tree.ordered(100.0)) == ["rank -1 at t = 1", "rank -2", "rank 0"]
    assert tree.rebases == 1
    # Without ranks, equal priorities go to the smaller key.
    plain = LiveTree(1.0)
    for key in (2, 0, 1):
        plain.set(key, [(1.0, 0.0)], 0.0, key)
    assert list(plain.ordered(0.0)) == [0, 1, 2]


FLOORS = (0.5, 1.0)


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(128, 256),
    floors=st.lists(st.sampled_from(FLOORS), min_size=256, max_size=256),
    sets=st.lists(
        st.tuples(
            st.floats(0.0, 2.0, allow_nan=False),  # time step, in time constants
            st.integers(0, 15),  # a user of small key: it goes ahead of most of its floor
            st.sampled_from(FLOORS),
            st.sampled_from([1.5, 2.0, 3.0]),  # the priority's top, over the floor
            st.booleans(),  # decaying from the top onto the floor, or rising from the floor
            st.sampled_from([0.0, 0.3, 1.0]),  # query this far after, in time constants
        ),
        min_size=4, max_size=12,
    ),
)
def test_users_decaying_onto_a_floor_take_their_place_among_the_tied_in_one_search(
        size, floors, sets) -> None:
    """Many exact ties: users at a floor (HTCondor's idle users at priority 0.5), users
    decaying onto it from above (a job ended) and rising off it (a job started). The order at
    every query is the full sort (ties by key), and each change costs O(log n) events, not a
    swap per tied user passed."""
    tau = 1.0
    tree = LiveTree(tau)
    curves: dict[int, tuple[list, float]] = {}
    for element in range(size):
        lines = [(floors[element], 0.0)]
        tree.set(element, lines, 0.0, element)
        curves[element] = (lines, 0.0)
    swaps_at_start = tree.swaps
    now = 0.0
    for step, element, floor, height, decays, query_after in sets:
        now += step * tau
        top = height * floor
        # max(floor, top e^-(t - now)) or max(floor, top - (top - floor) e^-(t - now))
        lines = [(0.0, top), (floor, 0.0)] if decays else [(floor, 0.0), (top, floor - top)]
        tree.set(element, lines, now, element)
        curves[element] = (lines, now)
        now += query_after * tau
        assert_same_order(list(tree.ordered(now)), resorted(curves, now, tau), curves, now, tau)
    now += 20.0 * tau  # every decay has landed
    assert_same_order(list(tree.ordered(now)), resorted(curves, now, tau), curves, now, tau)
    assert tree.rebases == 0
    assert tree.swaps - swaps_at_start <= 4 * len(sets) * math.ceil(math.log2(size))
