"""Which further tasks to vacate on one machine so that a waiting task fits there.

A one-cpu slot (a static slot: one job claims it whole) is freed by one vacate. On a
partitionable machine (a node of more than one cpu) a receiver asking for 4 cpus may need
several victims. A preemption stage names the first victim by its own rule (HOSEP's least
powerful machine, reclaim's own machine, OSEP's least run time); `complete` chooses the others,
on the same node, among the running tasks the stage allows, so that what is free there and
what they all free hold the receiver's cpus, memory and GPUs (`cheapest`, the whole set on a
node, when the stage names no first victim: `group_preempt`'s moves of several jobs):
1. fewest vacates;
2. then the least work lost (the run time a vacate throws away, `Pool.lost_work_if_vacated`:
   none with checkpointing);
3. then, among sets equal in both, the first one taking the candidates in order of work lost,
   then submission (`Task.seq`).
None when no set of them does: a receiver that would still not fit is never a reason to
vacate. The search is exact (branch and bound over the candidates) up to `SEARCH_STEPS`
partial sets; a machine with so many small tasks that it runs out keeps the best set found by
then, or none.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import accumulate

from gridfair.core.pool import Node, Pool, Task

#: Partial sets the search may look at for one receiver on one node.
SEARCH_STEPS = 20_000


class _OutOfSteps(Exception):
    """The search's budget is spent."""


def sizes(task: Task) -> tuple[float, float, float]:
    """What a task holds: cpus, memory, GPUs."""
    return (task.cpus, task.memory, task.gpus)


def complete(pool: Pool, receiver: Task, first: Task, candidates: Iterable[Task],
             now: float) -> tuple[Task, ...] | None:
    """The further victims on `first`'s node (from `candidates`, tasks running there) that
    make room for `receiver` once `first` is vacated too: () if `first` alone does, None if
    no set of candidates does (or the node does not match the receiver)."""
    node = first.node
    assert node is not None
    return cheapest(pool, receiver, node, (task for task in candidates if task is not first),
                    now, freed=sizes(first))


def cheapest(pool: Pool, receiver: Task, node: Node, candidates: Iterable[Task], now: float,
             freed: tuple[float, float, float] = (0.0, 0.0, 0.0),
             most: int | None = None) -> tuple[Task, ...] | None:
    """The victims on `node` (from `candidates`, tasks running there) that make room for
    `receiver` there, with `freed` freed besides, by the rules above: () if what is free
    does, None if no set of candidates does (or the node does not match the receiver), nor
    any of at most `most` tasks."""
    if pool.matcher is not None and not pool.matcher(receiver, node):
        return None
    tolerance = pool.fit_tolerance
    need = [asked - free - also for asked, free, also
            in zip(sizes(receiver), pool.room(node), freed, strict=True)]
    short = [dimension for dimension in range(3) if need[dimension] > tolerance]
    if not short:
        return ()
    ranked = sorted(((pool.lost_work_if_vacated(task, now), task.seq, task)
                     for task in candidates), key=lambda item: item[:2])
    tasks = [task for _, _, task in ranked]
    lost = [lost for lost, _, _ in ranked]
    shortfall = [need[dimension] - tolerance for dimension in short]
    held = [[sizes(task)[dimension] for dimension in short] for task in tasks]
    fewest = _fewest(held, shortfall)
    if fewest is None:
        return None
    search = _Search(held, lost, shortfall)
    for count in range(fewest, min(len(tasks), len(tasks) if most is None else most) + 1):
        try:
            found = search.cheapest(count)
        except _OutOfSteps:
            found = search.best
            if found is None:
                return None
        if found is not None:
            return tuple(tasks[index] for index in found)
    return None


def _fewest(held: list[list[float]], shortfall: list[float]) -> int | None:
    """A lower bound on how many tasks cover the shortfall: for each resource, the fewest of
    the largest holders that do; None if all of them together do not."""
    bound = 0
    for dimension, needed in enumerate(shortfall):
        total = 0.0
        for count, amount in enumerate(sorted((row[dimension] for row in held), reverse=True),
                                       start=1):
            total += amount
            if total >= needed:
                bound = max(bound, count)
                break
        else:
            return None
    return bound


class _Search:
    """Depth-first over sets of a given size, candidates in order of work lost: a branch is
    cut when even its cheapest completion loses no less than the best set found, or when all
    that is left cannot cover the shortfall."""

    def __init__(self, held: list[list[float]], lost: list[float],
                 shortfall: list[float]) -> None:
        self.held, self.lost, self.shortfall = held, lost, shortfall
        self.prefix = [0.0, *accumulate(lost)]  # lost work of the first i candidates
        dimensions = range(len(shortfall))
        # What candidates i.. hold together, per resource.
        self.suffix = [[0.0 for _ in dimensions]]
        for row in reversed(held):
            self.suffix.append([total + part for total, part in zip(self.suffix[-1], row,
                                                                       strict=True)])
        self.suffix.reverse()
        self.steps = 0
        self.best: list[int] | None = None

    def cheapest(self, count: int) -> list[int] | None:
        self.best, self.best_lost = None, float("inf")
        self._extend([], 0, [0.0] * len(self.shortfall), 0.0, count)
        return self.best

    def _extend(self, chosen: list[int], start: int, covered: list[float], lost: float,
                count: int) -> None:
        left = count - len(chosen)
        if left == 0:
            if all(have >= want for have, want in zip(covered, self.shortfall, strict=True)):
                self.best, self.best_lost = chosen[:], lost
            return
        self.steps += 1
        if self.steps > SEARCH_STEPS:
            raise _OutOfSteps
        if any(have + rest < want for have, rest, want
               in zip(covered, self.suffix[start], self.shortfall, strict=True)):
            return
        prefix = self.prefix
        for index in range(start, len(self.held) - left + 1):
            # The cheapest completion from here takes the next `left` candidates.
            if lost + prefix[index + left] - prefix[index] >= self.best_lost:
                return
            chosen.append(index)
            self._extend(chosen, index + 1,
                         [have + amount for have, amount in zip(covered, self.held[index],
                                                                strict=True)],
                         lost + self.lost[index], count)
            chosen.pop()
