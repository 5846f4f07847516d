"""`PairRanking` (the DRF family's) orders users exactly as `UserRanking` does for (class,
value) keys: ties in value broken by the user's index, -0.0 equal to 0.0, infinite values,
users leaving and coming back."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from gridfair.core.pool import UserState
from gridfair.policies.ranking import PairRanking, UserRanking

USERS = [UserState(f"u{index}", index) for index in range(6)]

#: Values that tie, differ only in sign of zero, or are infinite, so that the index decides.
VALUES = st.sampled_from([0.0, -0.0, 0.25, 0.5, 1.0, math.inf])
KEYS = st.one_of(st.none(), st.tuples(st.sampled_from([0, 1]), VALUES))
UPDATES = st.lists(st.tuples(st.integers(0, len(USERS) - 1), KEYS), max_size=60)


@given(UPDATES)
def test_pair_ranking_orders_users_as_user_ranking_does(updates):
    plain, pairs = UserRanking(), PairRanking()
    for index, key in updates:
        plain.update(USERS[index], key)
        pairs.update(USERS[index], key)
        assert [user.index for user in pairs] == [user.index for user in plain]
        assert pairs.first() is plain.first()
        assert len(pairs) == len(plain)
        for user in USERS:
            assert (user in pairs) == (user in plain)
            assert pairs.key_of(user) == plain.key_of(user)


def test_a_user_keyed_again_moves_and_one_keyed_none_leaves():
    ranking = PairRanking()
    ranking.update(USERS[0], (0, 0.5))
    ranking.update(USERS[1], (0, 0.5))  # equal value: the lower index first
    ranking.update(USERS[2], (1, 0.0))  # a later class goes after every class-0 user
    assert [user.index for user in ranking] == [0, 1, 2]
    ranking.update(USERS[0], (0, 0.75))
    assert [user.index for user in ranking] == [1, 0, 2]
    ranking.update(USERS[1], None)
    assert [user.index for user in ranking] == [0, 2]
    assert ranking.key_of(USERS[1]) is None
