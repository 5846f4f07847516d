"""Deadline formulations: the factors each type draws, seeding, and unknown names."""

from __future__ import annotations

import pytest

from gridfair.errors import InputError
from gridfair.sim.deadlines import DEADLINE_TYPES, deadline_factors, deadline_type

COUNT = 4000


def test_fixed_types_are_constant():
    assert set(deadline_factors("Fixed1x", 10, seed=3)) == {1.0}
    assert set(deadline_factors("fixed2X", 10, seed=3)) == {2.0}  # any case


@pytest.mark.parametrize(("name", "values", "p_large"), [
    ("Jockey1x2x", {1.0, 2.0}, 0.5),
    ("Jockey2x4x", {2.0, 4.0}, 0.5),
    ("90loose", {1.0, 2.0}, 0.9),
])
def test_two_valued_types(name, values, p_large):
    factors = deadline_factors(name, COUNT, seed=7)
    assert set(factors) == values
    share_large = sum(factor == max(values) for factor in factors) / COUNT
    assert abs(share_large - p_large) < 0.03


@pytest.mark.parametrize(("name", "low", "high"), [("Aria1x3x", 1.0, 3.0), ("Aria2x4x", 2.0, 4.0)])
def test_uniform_types(name, low, high):
    factors = deadline_factors(name, COUNT, seed=7)
    assert all(low <= factor <= high for factor in factors)
    assert abs(sum(factors) / COUNT - (low + high) / 2) < 0.05
    assert len(set(factors)) == COUNT


def test_seeded_and_repeatable():
    for name in DEADLINE_TYPES:
        assert deadline_factors(name, 50, seed=1) == deadline_factors(name, 50, seed=1)
    assert deadline_factors("Aria1x3x", 50, seed=1) != deadline_factors("Aria1x3x", 50, seed=2)


def test_every_factor_is_at_least_one():
    for name in DEADLINE_TYPES:
        assert min(deadline_factors(name, 200, seed=5)) >= 1.0


def test_unknown_type_lists_the_known_ones():
    with pytest.raises(InputError, match=r"unknown deadline type 'Fixed3x'.*Fixed1x.*Aria2x4x"):
        deadline_type("Fixed3x")
