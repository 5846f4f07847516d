"""Whole-machine jobs behind fragments: a machine kept for a job that needs all of one.

A scored placement spreads small jobs over every machine (`docs/results/placement.md`), and a
job asking for as many cpus as the largest machine has then waits until the small jobs stop
coming. When such a whole-machine job finds no room, `Reservations` keeps a machine for it:
among the machines partly in use (some cpus free, too few) that could hold it empty, the one
with the fewest cpus in use (it frees soonest, on average), ties to the faster, then to the
one added first. A machine wholly in use is no fragment: a job waits for it as for any slot
(on a pool of static one-cpu slots nothing is ever kept). No other job is placed
there, so it drains as its jobs end (nothing is vacated, unlike `condor_defrag`'s draining),
and the job starts there once it fits. At most `MAX_RESERVED` machines are kept at once; a
reservation ends when its job starts (anywhere) or leaves the queue.
"""

from __future__ import annotations

from collections.abc import Iterable

from gridfair.core.pool import EPSILON, QUEUED, Node, Pool, Task

#: Machines kept for whole-machine jobs at once: each costs the small jobs a machine while it
#: drains.
MAX_RESERVED = 1


class Reservations:
    """The machines kept for whole-machine jobs, by node index."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.by_node: dict[int, Task] = {}

    def node_of(self, task: Task) -> Node | None:
        """The machine kept for `task`, or None."""
        for index, holder in self.by_node.items():
            if holder is task:
                return self.pool.nodes[index]
        return None

    def release_ended(self) -> bool:
        """End the reservations of jobs no longer queued (started, dropped); whether any."""
        ended = [index for index, holder in self.by_node.items() if holder.state != QUEUED]
        for index in ended:
            del self.by_node[index]
        return bool(ended)

    def wants(self, task: Task) -> bool:
        """Whether `task` is a whole-machine job that may have a machine kept now."""
        return (task.cpus >= self.pool.largest[0] - EPSILON
                and len(self.by_node) < MAX_RESERVED and self.node_of(task) is None)

    def reserve(self, task: Task, partly_free: Iterable[Node]) -> Node | None:
        """Keep the machine that frees soonest among `partly_free` (the machines with some
        cpus free) that could hold `task` empty."""
        pool = self.pool
        matcher = pool.matcher
        best: tuple[float, float, int] | None = None
        chosen = None
        for node in partly_free:
            if node.index in self.by_node or node.cpus < task.cpus - EPSILON \
                    or node.memory < task.memory - EPSILON or node.gpus < task.gpus - EPSILON:
                continue
            if matcher is not None and not matcher(task, node):
                continue
            rank = (node.cpus - pool.room(node)[0], -node.power_per_cpu, node.index)
            if best is None or rank < best:
                best, chosen = rank, node
        if chosen is not None:
            self.by_node[chosen.index] = task
        return chosen
