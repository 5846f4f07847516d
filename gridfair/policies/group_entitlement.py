"""Each accounting group's entitlement: its quota plus its fair part of the surplus, as a
dominant share of the pool, for preemption to the tree's entitlement (`group_preempt`).

The pool is divided per resource (cpus, memory, GPUs, ...), by hierarchical progressive
filling (H-DRF's static division): every part of the tree that can still grow does, along
its demand's shape, a group's rate split among its growing children (its subgroups, and its
own users as one more child, weighted as H-DRF weighs them, `policies/hdrf.py`) by their
weights, then among those of weight 0 in equal parts once no weighted one grows. A part stops
when its demand is met (one with users waiting below it can use any amount; one without, what
it holds now), when a resource it asks for is full, or, for a part that does not accept
surplus, at its quota's part of the pool (the product of the weights on its path). So a group
is entitled to its quota while every group wants more of every resource, grows by its fair
part of what idle siblings leave (siblings first: a parent's surplus stays among its
children), and is entitled to a resource nobody else asks for, all of it: a GPU project alone
in asking for GPUs may hold every GPU, whatever its quota.

A part's entitlement is the dominant share of what the division gives its subtree.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import NamedTuple

from gridfair.core.pool_parts import CPUS, GPUS, MEMORY
from gridfair.policies.hdrf import GroupNode

#: Slack on a share against its bound in the division: float noise is the bound.
FILLED = 1e-9


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


@dataclasses.dataclass(eq=False, slots=True)
class Claim:
    """One node of a progressive filling: a group of claims (`parts`) or a leaf (its
    `demand`, shares of the pool per resource, and the most dominant share it can use,
    `limit`). `given` is what the filling gives its subtree, shares of the pool per resource."""

    weight: float
    parts: list[Claim] = dataclasses.field(default_factory=list)
    demand: Sequence[float] = ()
    limit: float = 0.0
    #: The most dominant share its subtree may hold (a quota that accepts no surplus).
    cap: float = math.inf
    given: list[float] = dataclasses.field(default_factory=list)
    # The filling's state between two events: whether it grows, its dominant share's rate of
    # growth (a leaf's), its use's per resource.
    growing: bool = False
    rate: float = 0.0
    speed: list[float] = dataclasses.field(default_factory=list)

    @property
    def dominant(self) -> float:
        return max(self.given, default=0.0)


def progressive_fill(root: Claim, width: int) -> None:
    """Fill the pool (1.0 of each of `width` resources) from `root` down, event by event:
    between two events every growing leaf's dominant share grows at a constant rate, its
    parent's rate split among its growing parts by weight (module docstring); `given` set on
    every claim."""
    claims: list[Claim] = []
    pending = [root]
    for claim in pending:  # parents first
        claims.append(claim)
        pending.extend(claim.parts)
        claim.given = [0.0] * width
        if not claim.parts:
            top = max(claim.demand, default=0.0)
            claim.demand = [share / top for share in claim.demand] if top > 0 else []
            claim.growing = top > 0 and claim.limit > FILLED
        else:
            claim.growing = True
    while True:
        for claim in reversed(claims):  # children first: a group grows if a part of it does
            if claim.parts:
                claim.growing = claim.growing and any(part.growing for part in claim.parts)
        if not root.growing:
            return
        root.rate = 1.0
        for claim in claims:  # parents first: a group's rate to its growing parts
            if claim.parts and claim.growing:
                parts = [part for part in claim.parts if part.growing]
                weighted = [part for part in parts if part.weight > 0]
                if weighted:
                    total = math.fsum(part.weight for part in weighted)
                    for part in parts:  # weight 0: none until no weighted part grows
                        part.rate = claim.rate * part.weight / total
                else:
                    for part in parts:
                        part.rate = claim.rate / len(parts)
        step = math.inf
        for claim in reversed(claims):
            if not claim.growing:
                claim.speed = [0.0] * width
                continue
            if claim.parts:
                claim.speed = [sum(part.speed[r] for part in claim.parts)
                               for r in range(width)]
            else:
                claim.speed = [claim.rate * share for share in claim.demand]
                if claim.rate > 0:
                    step = min(step, (claim.limit - claim.dominant) / claim.rate)
            bound = 1.0 if claim is root else claim.cap
            for r in range(width):
                if claim.speed[r] > 0:
                    step = min(step, (bound - claim.given[r]) / claim.speed[r])
        step = max(step, 0.0)
        for claim in claims:
            if claim.growing:
                for r in range(width):
                    claim.given[r] += claim.speed[r] * step
        full = [r for r in range(width) if root.given[r] >= 1.0 - FILLED]
        for claim in claims:  # parents first: a capped group stops its parts
            if not claim.growing:
                for part in claim.parts:
                    part.growing = False
            elif claim.dominant >= claim.cap - FILLED:
                claim.growing = False
                for part in claim.parts:
                    part.growing = False
            elif not claim.parts and (claim.dominant >= claim.limit - FILLED
                                      or any(claim.demand[r] > 0 for r in full)):
                claim.growing = False


def asked(node: GroupNode, used: Sequence[float]) -> list[float]:
    """`used` plus the next job of each of `node`'s own waiting users (what it asks for next:
    the shape its demand grows along)."""
    total = list(used)
    for cpus, memory, gpus in node.demands.values():
        total[CPUS] += max(cpus, 0.0)
        total[MEMORY] += max(memory, 0.0)
        total[GPUS] += max(gpus, 0.0)
    return total


#: One claim of a division, as `entitlements` describes it to `_filled`: its parent's
#: position (-1: the root), weight, cap, demand and limit (`Claim`'s).
ClaimSpec = tuple[int, float, float, tuple[float, ...], float]


@lru_cache(maxsize=4096)
def _filled(specs: tuple[ClaimSpec, ...], width: int) -> tuple[float, ...]:
    """Each claim's dominant share once `specs` is filled, remembered: a pool whose usage and
    waiting jobs did not change since the last phase asks for the same division."""
    claims: list[Claim] = []
    for parent, weight, cap, demand, limit in specs:
        claim = Claim(weight, demand=demand, limit=limit, cap=cap)
        if parent >= 0:
            claims[parent].parts.append(claim)
        claims.append(claim)
    progressive_fill(claims[0], width)
    return tuple(claim.dominant for claim in claims)


def entitlements(root: GroupNode, division: Sequence[tuple[GroupNode, Sequence[Part]]],
                 shares_of: Callable[[Sequence[float]], Sequence[float]],
                 none_accepts_surplus: bool) -> tuple[dict[Part, float], dict[Part, float]]:
    """Every part's entitlement and the share it holds (dominant shares of the pool), from
    the tree's usage, weights and waiting users as the H-DRF order keeps them
    (`HdrfOrder.tree_root`), divided as `division` (`division_of(root)`) says; `shares_of`
    gives a usage vector's shares of the pool per counted resource."""
    whole = Part(root, False)
    position: dict[Part, int] = {whole: 0}
    specs: list[ClaimSpec] = [(-1, 1.0, math.inf, (), 0.0)]
    holds: dict[Part, float] = {whole: max(shares_of(root.used), default=0.0)}
    guaranteed: dict[Part, float] = {whole: 1.0}
    for node, parts in division:
        whole = Part(node, False)
        for part in parts:
            group = part.node
            if part.own:
                weight, used = group.members_weight, group.own_used
                accepts = none_accepts_surplus if group is root else True
            else:
                weight, used, accepts = group.weight, group.used, group.accept_surplus
            held = holds[part] = max(shares_of(used), default=0.0)
            guaranteed[part] = guaranteed[whole] * weight
            demand: tuple[float, ...] = ()
            limit = 0.0
            if part.own or not group.subgroups:  # a leaf of the division
                wants = len(group.ranking) > 0
                demand = tuple(shares_of(asked(group, used) if wants else used))
                limit = math.inf if wants else held
            position[part] = len(specs)
            specs.append((position[whole], weight,
                          math.inf if accepts else guaranteed[part], demand, limit))
    dominant = _filled(tuple(specs), len(shares_of(root.used)))
    return {part: dominant[index] for part, index in position.items()}, holds
