"""Placement: given a task the order stage has chosen, which free node it goes to.

A placement is the fourth extension point of a cycle, beside admit, order and preempt (as the
Kubernetes scheduler's score plugins are one interface): `choose(task)` returns a node with room
for the task, or None, and `score(task, node)` the figure it chose by, which every allocation's
reason names. Shipped (higher scores win):

- `fastest`: the node with the most MFlops a cpu (today's `Pool.best_node`, which the iSPD and
  SDRF papers' semantics need: their agreements hold under it);
- `condor`: HTCondor's default `NEGOTIATOR_PRE_JOB_RANK`, best fit on the free slot:
  -(100000 x free cpus) - free MiB;
- `align`: Tetris's alignment (Grandl et al., SIGCOMM 2014), the dot product of the demand and
  the node's free resources, both divided by the node's capacity;
- `shape`: DRFH's best fit (Wang, Liang, Li): minus the L1 distance between the demand's and
  the node's free resources' shapes, each a share of the pool's capacity made to sum to one;
- `most-allocated` and `balanced`: Kubernetes' `NodeResourcesFit` MostAllocated (the mean of
  the fractions of cpus and memory used once the task runs) and
  `NodeResourcesBalancedAllocation` (1 - their standard deviation).

The scored placements never scan every free node: they index free nodes by the shape of what
is free (`ShapeIndex`: `LEVELS` steps of the largest node's cpus and memory), score the fastest
node that fits in each shape bucket, and take the best. A decision costs the number of buckets
(at most (LEVELS + 1) squared, whatever the pool's size) and each event O(log n). Within a bucket
the fastest node is the one scored, not the best scored: nodes in one bucket differ by less
than a step in what is free. Each bucket also keeps its nodes by exactly what is free on them,
so that when no bucket's first `BUCKET_SCAN` nodes hold one that fits, the whole look passes
over the nodes too small in one test for all those of one size. A placement that can bound
its score over a bucket's range of free amounts (`shape`, `condor`: `bound`) looks at the
buckets best bound first and stops at the first whose bound is below the best score found:
it chooses what looking at every bucket would, at fewer buckets a decision.

Ties: the higher score; among equal scores the faster node, then the node added first
(`Node.index`): `fastest`'s own order. Resources scored are cpus and memory (a node or pool
with no memory counts cpus alone); GPUs are only fitted.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import ClassVar

from gridfair.core.pool import EPSILON, Node, Pool, PoolListener, Task
from gridfair.core.reservation import Reservations

#: Steps of the largest node's cpus (and memory) the shape index buckets free nodes by.
LEVELS = 16
#: Nodes looked at in one bucket before going on to the next: a bucket that straddles the
#: demand may hold many nodes just too small. Only when no bucket gave a node are the
#: buckets cut short looked at whole, so a node with room is never missed.
BUCKET_SCAN = 16
#: Least demands remembered as finding no room (`Scored`).
NO_ROOM_KEPT = 8
#: A bucket is passed over only when its bound is below the best score by more than this:
#: the bound and the score are the same figure computed two ways, equal up to rounding.
BOUND_SLACK = 1e-9
#: Demands whose buckets' bounds are kept (`Scored`): a trace's many demands let go past it.
BOUNDS_KEPT = 4096


class Placement(PoolListener):
    """Chooses the node a task starts on, among the free nodes it fits."""

    name: ClassVar[str] = "placement"
    #: What the score is, in the allocation's reason.
    score_text: ClassVar[str] = "score"

    def attach(self, pool: Pool) -> None:
        self.pool = pool

    def choose(self, task: Task) -> Node | None:
        """A free node with room for `task` that matches it, or None."""
        raise NotImplementedError

    def score(self, task: Task, node: Node) -> float:
        """What `node` scores for `task` before it starts there (higher is better)."""
        raise NotImplementedError


class Fastest(Placement):
    """The fastest node with room (`Pool.best_node`)."""

    name = "fastest"
    score_text = "MFlops a cpu"

    def attach(self, pool: Pool) -> None:
        super().attach(pool)
        self.choose = pool.best_node  # the same call as before placements: no extra frame

    def score(self, task: Task, node: Node) -> float:
        return node.power_per_cpu


def _fraction(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


class ShapeIndex:
    """Free nodes bucketed by what is free on them, as (cpu step, memory step) -> the
    bucket's nodes as (-MFlops a cpu, index), fastest first; and in each bucket by exactly
    what is free (`Pool.room`), the same entries in the same order (`rooms`). Kept current by
    `update`."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.buckets: dict[tuple[int, int], list[tuple[float, int]]] = {}
        self.rooms: dict[tuple[int, int],
                         dict[tuple[float, float, float], list[tuple[float, int]]]] = {}
        self.where: dict[int, tuple[int, int]] = {}  # node index -> its bucket
        self.room_of: dict[int, tuple[float, float, float]] = {}  # node index -> its room
        self.cpu_step = self.memory_step = 0.0
        self.known = 0  # nodes of the pool indexed so far

    def ranges(self, key: tuple[int, int]) -> tuple[float, float, float, float]:
        """The free cpus and memory a node of bucket `key` may have, as (cpus low, cpus
        high, memory low, memory high), widened by a part in 1e9 for the division's
        rounding."""
        low, high = 1.0 - BOUND_SLACK, 1.0 + BOUND_SLACK
        return (key[0] * self.cpu_step * low, (key[0] + 1) * self.cpu_step * high,
                key[1] * self.memory_step * low, (key[1] + 1) * self.memory_step * high)

    def sync(self) -> None:
        """Index nodes added to the pool since the last call. The steps are fixed by the pool
        as first seen with nodes; a later, larger node lands in the top buckets."""
        nodes = self.pool.nodes
        if self.known == len(nodes):  # the common case; also a pool with no nodes yet
            return
        if not self.cpu_step:
            largest = self.pool.largest
            self.cpu_step = (largest[0] or 1.0) / LEVELS
            self.memory_step = (largest[1] or 1.0) / LEVELS
        if self.known:
            for node in nodes[self.known:]:
                self.update(node)
        else:  # the whole pool at once (the daemon's pool, laid out every cycle): sorted once
            self._fill(nodes)
        self.known = len(nodes)

    def _fill(self, nodes: list[Node]) -> None:
        room = self.pool.room
        buckets, rooms, where, room_of = self.buckets, self.rooms, self.where, self.room_of
        cpu_step, memory_step = self.cpu_step, self.memory_step
        for node in nodes:
            free = room(node)
            if free[0] > EPSILON:
                key = (int(free[0] / cpu_step), int(free[1] / memory_step))
                entry = (-node.power_per_cpu, node.index)
                buckets.setdefault(key, []).append(entry)
                rooms.setdefault(key, {}).setdefault(free, []).append(entry)
                where[node.index] = key
                room_of[node.index] = free
        for bucket in buckets.values():
            bucket.sort()
        for sizes in rooms.values():
            for entries in sizes.values():
                entries.sort()

    def update(self, node: Node) -> None:
        """Move `node` to the bucket of what is free on it now (out, when no cpu is free)."""
        free = self.pool.room(node)
        key = (int(free[0] / self.cpu_step), int(free[1] / self.memory_step)) \
            if free[0] > EPSILON else None
        old = self.where.get(node.index)
        # Many events change nothing here, as does `Pool.announce`'s replay of a laid-out pool.
        if key == old and (key is None or self.room_of[node.index] == free):
            return
        entry = (-node.power_per_cpu, node.index)
        if old is not None:
            del self.where[node.index]
            sizes = self.rooms[old]
            old_room = self.room_of.pop(node.index)
            entries = sizes[old_room]
            del entries[bisect_left(entries, entry)]
            if not entries:
                del sizes[old_room]
            if key != old:
                bucket = self.buckets[old]
                del bucket[bisect_left(bucket, entry)]
                if not bucket:
                    del self.buckets[old], self.rooms[old]
        if key is not None:
            if key != old:
                insort(self.buckets.setdefault(key, []), entry)
            insort(self.rooms.setdefault(key, {}).setdefault(free, []), entry)
            self.where[node.index] = key
            self.room_of[node.index] = free


class Scored(Placement):
    """A placement by a score, over the shape index: the best of each bucket's fastest fit.

    A demand (cpus, memory, GPUs) that found no node is remembered until a task stops or a
    node joins (a start only takes room), and so is every demand at least as large in each:
    a full pool's many jobs set aside in turn then cost a look at `NO_ROOM_KEPT` demands, not
    a pass over the buckets each. Not with a matcher, whose answer is the task's own.

    A whole-machine job that finds no room has a machine kept for it (`core/reservation.py`),
    where no other job goes."""

    def attach(self, pool: Pool) -> None:
        super().attach(pool)
        self.index = ShapeIndex(pool)
        self.index.sync()
        self.no_room: list[tuple[float, float, float]] = []
        self.reservations = Reservations(pool)
        # (cpus, memory) -> bucket key -> its bound; what they were worked out for.
        self._bounds: dict[tuple[float, float], dict[tuple[int, int], float | None]] = {}
        self._bounds_for: tuple[float, ...] = ()

    def bound(self, task: Task, ranges: tuple[float, float, float, float]) -> float | None:
        """The highest score a node with free amounts in `ranges` (`ShapeIndex.ranges`) could
        give `task`, or None when the placement has no bound (every bucket looked at)."""
        return None

    def _by_bound(self, task: Task, keys: list[tuple[int, int]]
                  ) -> dict[tuple[int, int], float | None] | None:
        """Sort `keys` best bound first (in place, stable) and return their bounds, or None
        without a bound. Bounds are kept per demand while the steps and capacity hold."""
        index = self.index
        made_for = (index.cpu_step, index.memory_step, *self.pool.capacity[:2])
        if made_for != self._bounds_for or len(self._bounds) >= BOUNDS_KEPT:
            self._bounds.clear()
            self._bounds_for = made_for
        bounds = self._bounds.setdefault((task.cpus, task.memory), {})
        for key in keys:
            if key not in bounds:
                bounds[key] = self.bound(task, index.ranges(key))
        if keys and bounds[keys[0]] is None:
            return None
        keys.sort(key=bounds.__getitem__, reverse=True)  # type: ignore[arg-type]
        return bounds

    def task_started(self, task: Task, now: float) -> None:
        self.index.sync()
        self.index.update(task.node)
        if self.reservations.by_node and self.reservations.release_ended():
            self.no_room.clear()  # a kept machine is open to every job again

    def task_stopped(self, task: Task, now: float, node: Node) -> None:
        self.index.sync()
        self.index.update(node)
        if self.no_room:
            self.no_room.clear()

    def choose(self, task: Task) -> Node | None:
        index = self.index
        if index.known != len(self.pool.nodes):
            index.sync()
            self.no_room.clear()
        reservations = self.reservations
        if reservations.by_node:
            if reservations.release_ended():
                self.no_room.clear()
            kept = reservations.node_of(task)
            if kept is not None and self.pool.fits_free(task, kept):
                return kept
        cpus, memory, gpus = demand = (task.cpus, task.memory, task.gpus)
        for least in self.no_room:
            if cpus >= least[0] and memory >= least[1] and gpus >= least[2]:
                self._keep_if_whole(task)
                return None
        # A bucket holds free amounts below (level + 1) x step: one wholly below the demand
        # holds no node that fits.
        cpu_floor = (task.cpus - EPSILON) / index.cpu_step - 1 if index.cpu_step else 0
        memory_floor = (task.memory - EPSILON) / index.memory_step - 1 if index.cpu_step else 0
        keys = [key for key in index.buckets
                if key[0] >= cpu_floor and key[1] >= memory_floor]
        chosen, cut_short = self._best(task, keys, self._by_bound(task, keys))
        if chosen is None and cut_short:
            chosen = self._best_of_whole(task, keys)
        if chosen is None:
            if self.pool.matcher is None:
                self._remember_no_room(demand)
            self._keep_if_whole(task)
        return chosen

    def _keep_if_whole(self, task: Task) -> None:
        """No room for `task`: keep a machine for it if it is a whole-machine job."""
        if self.reservations.wants(task):
            nodes = self.pool.nodes
            self.reservations.reserve(task, (nodes[index] for index in self.index.where))

    def _remember_no_room(self, demand: tuple[float, float, float]) -> None:
        """Keep `demand` among the least demands found no room, the demands it is below let
        go (they follow from it), the oldest let go past `NO_ROOM_KEPT`."""
        kept = [least for least in self.no_room
                if not (least[0] >= demand[0] and least[1] >= demand[1]
                        and least[2] >= demand[2])]
        kept.append(demand)
        self.no_room = kept[-NO_ROOM_KEPT:]

    def _best(self, task: Task, keys: list[tuple[int, int]],
              bounds: dict[tuple[int, int], float | None] | None
              ) -> tuple[Node | None, bool]:
        """The best scored of each bucket's first fit (looking at up to `BUCKET_SCAN` nodes a
        bucket), and whether a bucket was cut short. With `bounds`, `keys` come best bound
        first: past one below the best score found, none can beat it."""
        pool = self.pool
        nodes = pool.nodes
        # The plain test inline where it is the whole test (no GPUs, Requirements or exact
        # arithmetic): a full pool's buckets are walked for every job set aside.
        plain = not (task.gpus or pool.matcher or pool.exact_accounting)
        cpus, memory = task.cpus - EPSILON, task.memory - EPSILON
        fits = pool.fits_free
        score = self.score
        kept = self.reservations.by_node
        best: tuple[float, float, int] | None = None
        chosen = None
        cut_short = False
        buckets = self.index.buckets
        for key in keys:
            if best is not None and bounds is not None \
                    and bounds[key] < best[0] - BOUND_SLACK:  # type: ignore[operator]
                break
            for looked, (speed, node_index) in enumerate(buckets[key]):
                if looked == BUCKET_SCAN:
                    cut_short = True
                    break
                if kept and node_index in kept and kept[node_index] is not task:
                    continue  # kept for a whole-machine job
                node = nodes[node_index]
                if (node.free_cpus >= cpus and node.free_memory >= memory) if plain \
                        else fits(task, node):
                    rank = (score(task, node), -speed, -node_index)
                    if best is None or rank > best:
                        best, chosen = rank, node
                    break
        return chosen, cut_short

    def _best_of_whole(self, task: Task, keys: list[tuple[int, int]]) -> Node | None:
        """The best scored of each whole bucket's first fit. A bucket's first fit is the
        first, in its order, of each size's first fit: sizes too small for the task are
        passed over whole, and in a size none comes after one already found."""
        pool = self.pool
        nodes = pool.nodes
        fits = pool.fits_free
        kept = self.reservations.by_node
        # A size with less free than this cannot fit (the exact test asks for more).
        cpus, memory, gpus = (task.cpus - EPSILON, task.memory - EPSILON, task.gpus - EPSILON)
        best: tuple[float, float, int] | None = None
        chosen = None
        for key in keys:
            first: tuple[float, int] | None = None
            for (free_cpus, free_memory, free_gpus), entries in self.index.rooms[key].items():
                if free_cpus < cpus or free_memory < memory or free_gpus < gpus:
                    continue
                for entry in entries:
                    if first is not None and entry >= first:
                        break
                    if kept and entry[1] in kept and kept[entry[1]] is not task:
                        continue  # kept for a whole-machine job
                    if fits(task, nodes[entry[1]]):
                        first = entry
                        break
            if first is not None:
                node = nodes[first[1]]
                rank = (self.score(task, node), -first[0], -first[1])
                if best is None or rank > best:
                    best, chosen = rank, node
        return chosen


class CondorRank(Scored):
    """HTCondor's default NEGOTIATOR_PRE_JOB_RANK: the least free cpus, then memory."""

    name = "condor"
    score_text = "pre-job rank"

    def score(self, task: Task, node: Node) -> float:
        free_cpus, free_memory, _ = self.pool.room(node)
        return -(100000 * free_cpus) - free_memory

    def bound(self, task: Task, ranges: tuple[float, float, float, float]) -> float:
        return -(100000 * ranges[0]) - ranges[2]


class Align(Scored):
    """Tetris's alignment: demand . free, both as fractions of the node's capacity."""

    name = "align"
    score_text = "alignment"

    def score(self, task: Task, node: Node) -> float:
        free_cpus, free_memory, _ = self.pool.room(node)
        return (_fraction(task.cpus, node.cpus) * _fraction(free_cpus, node.cpus)
                + _fraction(task.memory, node.memory) * _fraction(free_memory, node.memory))


class ShapeFit(Scored):
    """DRFH's best fit: the free resources' shape closest (L1) to the demand's."""

    name = "shape"
    score_text = "minus the shape distance"

    def score(self, task: Task, node: Node) -> float:
        capacity = self.pool.capacity
        free_cpus, free_memory, _ = self.pool.room(node)
        demand_cpus = _fraction(task.cpus, capacity[0])
        demand_memory = _fraction(task.memory, capacity[1])
        free_cpus = _fraction(free_cpus, capacity[0])
        free_memory = _fraction(free_memory, capacity[1])
        demand, free = demand_cpus + demand_memory, free_cpus + free_memory
        if demand <= 0 or free <= 0:
            return 0.0
        return -(abs(demand_cpus / demand - free_cpus / free)
                 + abs(demand_memory / demand - free_memory / free))

    def bound(self, task: Task, ranges: tuple[float, float, float, float]) -> float | None:
        # The two shapes each sum to one, so the distance is twice that of their cpu parts;
        # a node's cpu part grows with its free cpus and shrinks with its free memory.
        cpus, memory = self.pool.capacity[:2]
        demand_cpus, demand_memory = _fraction(task.cpus, cpus), _fraction(task.memory, memory)
        if cpus <= 0 or memory <= 0 or demand_cpus + demand_memory <= 0:
            return None  # a score of 0 may be anywhere: no bound
        wanted = demand_cpus / (demand_cpus + demand_memory)
        cpus_low, cpus_high = ranges[0] / cpus, ranges[1] / cpus
        memory_low, memory_high = ranges[2] / memory, ranges[3] / memory
        least = cpus_low / (cpus_low + memory_high)
        most = cpus_high / (cpus_high + memory_low)
        return -2 * max(0.0, least - wanted, wanted - most)


def _used_after(pool: Pool, task: Task, node: Node) -> tuple[float, float | None]:
    """The fractions of the node's cpus and memory used once `task` runs (memory None on a
    node with none)."""
    free_cpus, free_memory, _ = pool.room(node)
    cpus = (node.cpus - free_cpus + task.cpus) / node.cpus
    if node.memory <= 0:
        return cpus, None
    return cpus, (node.memory - free_memory + task.memory) / node.memory


class MostAllocated(Scored):
    """Kubernetes' NodeResourcesFit MostAllocated: the mean fraction used once it runs."""

    name = "most-allocated"
    score_text = "mean fraction allocated"

    def score(self, task: Task, node: Node) -> float:
        cpus, memory = _used_after(self.pool, task, node)
        return cpus if memory is None else (cpus + memory) / 2


class Balanced(Scored):
    """Kubernetes' NodeResourcesBalancedAllocation: 1 - the standard deviation of the
    fractions used once it runs (over two resources, half their difference)."""

    name = "balanced"
    score_text = "balance"

    def score(self, task: Task, node: Node) -> float:
        cpus, memory = _used_after(self.pool, task, node)
        return 1.0 if memory is None else 1.0 - abs(cpus - memory) / 2


#: The placements by name; `fastest` is the default of a run that names none.
PLACEMENTS: dict[str, type[Placement]] = {
    placement.name: placement
    for placement in (Fastest, CondorRank, Align, ShapeFit, MostAllocated, Balanced)
}
FASTEST = Fastest.name
