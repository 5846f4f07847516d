"""Each accounting group's entitlement: its quota plus its fair part of the surplus, as a
dominant share of the pool, for preemption to the tree's entitlement (`group_preempt`).

The pool (1.0) is divided down the tree, level by level, by weighted max-min (progressive
filling): a parent's entitlement goes to its children (its subgroups, and its own users as
one more child, weighted as H-DRF weighs them, `policies/hdrf.py`) in proportion to their
weights, none getting more than it can use: a child with users waiting below it can use any
amount; one without, what it holds now (its dominant share). A child that does not accept
surplus is capped at its quota's part of the pool (the product of the weights on its path);
what a capped or sated child leaves goes to its siblings, by weight, then to the children of
weight 0 in equal parts. So a group's entitlement is its quota while every group wants more,
and grows by its fair part of what idle siblings leave (siblings first: a parent's surplus
stays among its children).

Dominant shares are added across siblings as scalars (as HTCondor's quotas add its one
`SLOT_WEIGHT`): a child's entitlement is a share of the pool's most contended resource for
it, not a vector.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import NamedTuple

from gridfair.policies.hdrf import GroupNode


class Part(NamedTuple):
    """One child of a group in the division: a subgroup (`own` False) or the group's own
    users (`own` True, for a group that has subgroups; a leaf's users are the leaf). A
    named tuple: parts key dictionaries on every preemption phase, and hash as tuples do
    (a group by its identity)."""

    node: GroupNode
    own: bool

    @property
    def name(self) -> str:
        return f"{self.node.name} (own users)" if self.own else self.node.name


def parts_of(node: GroupNode) -> list[Part]:
    """`node`'s children in the division: its subgroups in listed order, then its own users
    when it has subgroups and users of its own."""
    parts = [Part(child, False) for child in node.subgroups]
    if node.subgroups and node.users:
        parts.append(Part(node, True))
    return parts


def water_fill(amount: float, weights: Sequence[float], limits: Sequence[float]) -> list[float]:
    """Weighted max-min division of `amount`: each part gets its weight's part of what is
    left, at most its limit, the most limited (limit over weight) first; what is left then
    goes to the parts of weight 0 in equal parts, at most their limits."""
    given = [0.0] * len(weights)
    weighted = sorted((index for index, weight in enumerate(weights) if weight > 0),
                      key=lambda index: limits[index] / weights[index])
    left, weight_left = amount, math.fsum(weights[index] for index in weighted)
    for index in weighted:
        given[index] = min(limits[index], left * weights[index] / weight_left)
        left -= given[index]
        weight_left -= weights[index]
    unweighted = [index for index, weight in enumerate(weights) if weight <= 0]
    for position, index in enumerate(unweighted):
        given[index] = min(limits[index], max(0.0, left) / (len(unweighted) - position))
        left -= given[index]
    return given


def division_of(root: GroupNode) -> list[tuple[GroupNode, list[Part]]]:
    """The groups that divide their entitlement, parents first, each with its parts: what
    `entitlements` walks, the same until a group of subgroups gets users of its own."""
    division = []
    pending = [root]
    for node in pending:
        parts = parts_of(node)
        if parts:
            division.append((node, parts))
            pending.extend(part.node for part in parts if not part.own)
    return division


@lru_cache(maxsize=4096)
def _divided(amount: float, weights: tuple[float, ...], limits: tuple[float, ...]
             ) -> tuple[float, ...]:
    """`water_fill`, remembered: on a busy pool the same division recurs phase after phase
    (every part wanting more: no limit but the quotas of those that accept no surplus)."""
    return tuple(water_fill(amount, weights, limits))


def entitlements(root: GroupNode, division: Sequence[tuple[GroupNode, Sequence[Part]]],
                 share_of: Callable[[Sequence[float]], float],
                 none_accepts_surplus: bool) -> tuple[dict[Part, float], dict[Part, float]]:
    """Every part's entitlement and the share it holds (dominant shares of the pool), from
    the tree's usage, weights and waiting users as the H-DRF order keeps them
    (`HdrfOrder.tree_root`), divided as `division` (`division_of(root)`) says; `share_of`
    gives a usage vector's dominant share."""
    # Whether some user below a group waits, children before parents (H-DRF's `active`,
    # which needs its rescaled figures recomputed).
    waiting: dict[str, bool] = {}
    for node, parts in reversed(division):
        waiting[node.name] = len(node.ranking) > 0 or any(
            waiting[part.node.name] if part.node.subgroups else len(part.node.ranking) > 0
            for part in parts if not part.own)
    whole = Part(root, False)
    result: dict[Part, float] = {whole: 1.0}
    holds: dict[Part, float] = {whole: share_of(root.used)}
    guaranteed: dict[Part, float] = {whole: 1.0}
    for node, parts in division:
        whole = Part(node, False)
        weights, limits = [], []
        for part in parts:
            group = part.node
            if part.own:
                weight, wants = group.members_weight, len(group.ranking) > 0
                accepts, held = none_accepts_surplus if group is root else True, \
                    share_of(group.own_used)
            else:
                weight = group.weight
                wants = waiting[group.name] if group.subgroups else len(group.ranking) > 0
                accepts, held = group.accept_surplus, share_of(group.used)
            holds[part] = held
            guaranteed[part] = guaranteed[whole] * weight
            limit = math.inf if wants else held
            if not accepts and guaranteed[part] < limit:
                limit = guaranteed[part]
            weights.append(weight)
            limits.append(limit)
        for part, amount in zip(parts, _divided(result[whole], tuple(weights), tuple(limits)),
                                strict=True):
            result[part] = amount
    return result, holds
