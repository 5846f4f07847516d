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

    @property
    def dominant(self) -> float:
        return max(self.given, default=0.0)


def progressive_fill(root: Claim, width: int) -> None:
    """Fill the pool (1.0 of each of `width` resources) from `root` down (`fill`): `given`
    set on every claim."""
    claims: list[Claim] = []
    specs: list[ClaimSpec] = []
    pending: list[tuple[Claim, int]] = [(root, -1)]
    for claim, parent in pending:  # parents first
        pending.extend((part, len(claims)) for part in claim.parts)
        claims.append(claim)
        specs.append((parent, claim.weight, claim.cap, tuple(claim.demand), claim.limit))
    for claim, given in zip(claims, fill(specs, width)[1], strict=True):
        claim.given = given


def fill(specs: Sequence[ClaimSpec], width: int
         ) -> tuple[tuple[float, ...], list[list[float]]]:
    """Each claim's dominant share and what it is given (shares of the pool per resource),
    once the pool (1.0 of each of `width` resources) is filled from `specs[0]` down, event by
    event: between two events every growing leaf's dominant share grows at a constant rate,
    its parent's rate split among its growing parts by weight (module docstring). `specs` are
    parents first (`ClaimSpec`). Written over plain lists, as it runs on most preemption
    phases: the same arithmetic, in the same order, as over `Claim`s."""
    count = len(specs)
    parts: list[list[int]] = [[] for _ in range(count)]
    for index in range(1, count):
        parts[specs[index][0]].append(index)
    weight = [spec[1] for spec in specs]
    cap = [spec[2] for spec in specs]
    limit = [spec[4] for spec in specs]
    given = [[0.0] * width for _ in range(count)]
    top = [0.0] * count  # max(given[i]): the claim's dominant share
    demand: list[list[float]] = [[] for _ in range(count)]
    growing = [True] * count
    for index in range(count):
        if not parts[index]:
            shape = specs[index][3]
            most = max(shape, default=0.0)
            demand[index] = [share / most for share in shape] if most > 0 else []
            growing[index] = most > 0 and limit[index] > FILLED
    rate = [0.0] * count
    idle = [0.0] * width
    speed: list[list[float]] = [idle] * count
    resources = range(width)
    # The claims still growing, parents first: a claim that stops never grows again, and its
    # parts have stopped with it (the stop pass below), so each pass looks at these alone.
    live = [index for index in range(count) if growing[index]]
    while True:
        for index in reversed(live):  # children first: a group grows if a part of it does
            if parts[index] and not any(growing[part] for part in parts[index]):
                growing[index] = False
                speed[index] = idle
        if not growing[0]:
            return tuple(top), given
        live = [index for index in live if growing[index]]
        rate[0] = 1.0
        for index in live:  # parents first: a group's rate to its growing parts
            if parts[index]:
                moving = [part for part in parts[index] if growing[part]]
                weighted = [part for part in moving if weight[part] > 0]
                if weighted:
                    total = math.fsum(weight[part] for part in weighted)
                    for part in moving:  # weight 0: none until no weighted part grows
                        rate[part] = rate[index] * weight[part] / total
                else:
                    for part in moving:
                        rate[part] = rate[index] / len(moving)
        step = math.inf
        for index in reversed(live):  # children first; a stopped claim's speed is `idle`
            if parts[index]:
                pace = speed[index] = [sum(column) for column in
                                       zip(*(speed[part] for part in parts[index]), strict=True)]
            else:
                pace = speed[index] = [rate[index] * share for share in demand[index]]
                if rate[index] > 0:
                    step = min(step, (limit[index] - top[index]) / rate[index])
            bound = 1.0 if index == 0 else cap[index]
            held = given[index]
            for resource in resources:
                if pace[resource] > 0:
                    step = min(step, (bound - held[resource]) / pace[resource])
        step = max(step, 0.0)
        for index in live:
            held, pace = given[index], speed[index]
            for resource in resources:
                held[resource] += pace[resource] * step
            top[index] = max(held, default=0.0)
        full = [resource for resource in resources if given[0][resource] >= 1.0 - FILLED]
        for index in live:  # parents first: a capped group stops its parts
            if not growing[index]:
                for part in parts[index]:
                    growing[part] = False
                speed[index] = idle
            elif top[index] >= cap[index] - FILLED:
                growing[index] = False
                for part in parts[index]:
                    growing[part] = False
                speed[index] = idle
            elif not parts[index] and (top[index] >= limit[index] - FILLED
                                       or any(demand[index][r] > 0 for r in full)):
                growing[index] = False
                speed[index] = idle


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
    return fill(specs, width)[0]


#: A leaf part's figures in the division as of a stamp (its group's `version`, the pool's
#: generation): the share it holds, its demand's shape and its limit.
LeafFigures = tuple[tuple[int, int], float, tuple[float, ...], float]


def entitlements(root: GroupNode, division: Sequence[tuple[GroupNode, Sequence[Part]]],
                 shares_of: Callable[[Sequence[float]], Sequence[float]],
                 none_accepts_surplus: bool, memo: dict[Part, LeafFigures],
                 generation: int) -> tuple[dict[Part, float], dict[Part, float]]:
    """Every part's entitlement and the share it holds (dominant shares of the pool), from
    the tree's usage, weights and waiting users as the H-DRF order keeps them
    (`HdrfOrder.tree_root`), divided as `division` (`division_of(root)`) says; `shares_of`
    gives a usage vector's shares of the pool per counted resource. A leaf's figures are
    kept in `memo` until its group changes (`GroupNode.version`) or the pool's capacity
    (`generation`): an event changes one group's, the others' are read again."""
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
            guaranteed[part] = guaranteed[whole] * weight
            demand: tuple[float, ...] = ()
            limit = 0.0
            if part.own or not group.subgroups:  # a leaf of the division
                stamp = (group.version, generation)
                figures = memo.get(part)
                if figures is None or figures[0] != stamp:
                    held = max(shares_of(used), default=0.0)
                    wants = len(group.ranking) > 0
                    figures = memo[part] = (
                        stamp, held, tuple(shares_of(asked(group, used) if wants else used)),
                        math.inf if wants else held)
                _, holds[part], demand, limit = figures
            else:
                holds[part] = max(shares_of(used), default=0.0)
            position[part] = len(specs)
            specs.append((position[whole], weight,
                          math.inf if accepts else guaranteed[part], demand, limit))
    dominant = _filled(tuple(specs), len(shares_of(root.used)))
    return {part: dominant[index] for part, index in position.items()}, holds
