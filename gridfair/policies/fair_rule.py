"""Fair-share preemption's rule (Kueue's `LessThanOrEqualToFinalShare`, with gridfair's
refinement), written once: the stage's choice (`FairPreempt._allowed`) and its account of why
it stopped (`FairPreempt.declined`, which `explain` shows) both ask `refusal`.

Keys are refined keys: the order's own (class, value) first (`ORDER_KEY` entries), then the
user's shares from the largest down (`fair_preempt`'s module docstring says why).
"""

from __future__ import annotations

#: A refined key: the order's (class, value), then the user's shares, largest first.
Key = tuple[float, ...]
#: How much of a refined key is the order's own.
ORDER_KEY = 2

#: Why the rule refuses a move: the victim user would end below the receiver on the order's
#: key; or the receiver would end tied with it there and above it on the next share.
BELOW, TIED = "below", "tied"


def stays_at_or_above(victim_after: Key, receiver_after: Key) -> bool:
    """The victim user, after losing its victims, is not below the receiver after it starts
    its job, on the order's key (Kueue's rule)."""
    return victim_after[:ORDER_KEY] >= receiver_after[:ORDER_KEY]


def refusal(receiver_after: Key, victim_before: Key, victim_after: Key) -> str | None:
    """Why the rule refuses a move for one victim user (`BELOW` or `TIED`), or None when it
    allows it: Kueue's rule on the order's key, and the receiver after below the victim user
    before on the refined key."""
    if not stays_at_or_above(victim_after, receiver_after):
        return BELOW
    if not receiver_after < victim_before:
        return TIED
    return None
