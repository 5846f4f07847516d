"""The pool the daemon carries from one cycle to the next, and the full rebuild that checks it.

Each cycle the kept pool (`gridfair.classads.kept_pool.KeptPool`) applies the snapshot's
changes alone: slots that came, went or changed, jobs submitted, started, vacated, moved or
gone. Every `rebuild_every` cycles (`daemon.full_rebuild_every`), and at the first cycle or
after a failed one (`forget`), the pool is also made from nothing, as if the daemon had just
started, and that rebuild is the ground truth: what the carried pool holds is compared with it
(each slot's room, owner, power and ad; each running job's slot and size; each user's totals;
the queue order), every difference is logged and returned as a note, and the rebuild is kept
from then on (the carried state repaired). A carried pool that matches the rebuild decides as
it does, since the policy stages learn everything they decide by from the pool.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping

from gridfair.ad_views import Snapshot
from gridfair.classads.kept_pool import JobsChanged, KeptPool
from gridfair.classads.to_pool import LoadedPool
from gridfair.core.pool import Pool
from gridfair.policies.registry import Stages

log = logging.getLogger("gridfair.daemon")

#: Differences logged one line each; the others are counted in one line.
LOGGED_DIFFERENCES = 5

#: What a slot's node is compared by, in the order a difference names them.
NODE_FIELDS = ("owner", "power", "cpus", "memory", "gpus", "free_cpus", "free_memory",
               "free_gpus", "used_cpus", "used_memory", "used_gpus", "index")
USER_FIELDS = ("index", "provided_power", "provided_nodes", "allocated_power", "running",
               "usage", "idle_count")


def _node_rows(pool: Pool) -> dict[str, tuple]:
    # The ad by identity: a node kept for a slot whose ad changed holds the old one.
    return {node.name: (*(getattr(node, name) for name in NODE_FIELDS), id(node.ad))
            for node in pool.nodes}


def _running_rows(pool: Pool) -> dict[str, tuple]:
    return {task.id: (task.user, task.node.name, task.cpus, task.memory, task.gpus,
                      task.start_time)
            for task in pool.tasks.values() if task.node is not None}


def _user_rows(pool: Pool) -> dict[str, tuple]:
    return {user.name: tuple(tuple(value) if isinstance(value, list) else value
                             for value in (getattr(user, name) for name in USER_FIELDS))
            for user in pool.users.values()}


def _differences(kind: str, fields: tuple[str, ...], carried: dict[str, tuple],
                 rebuilt: dict[str, tuple]) -> Iterator[str]:
    for name in carried.keys() - rebuilt.keys():
        yield f"{kind} {name} carried, not in the rebuild"
    for name in rebuilt.keys() - carried.keys():
        yield f"{kind} {name} in the rebuild, not carried"
    for name in sorted(carried.keys() & rebuilt.keys()):
        for field, was, truth in zip(fields, carried[name], rebuilt[name], strict=True):
            if was != truth:
                yield (f"{kind} {name}: its ad is not the snapshot's" if field == "ad" else
                       f"{kind} {name}: {field} {was!r} carried, {truth!r} rebuilt")


class CarriedPool:
    """The kept pool across cycles, checked against a full rebuild every `rebuild_every`
    cycles (0: only at the start and after a failed cycle)."""

    def __init__(self, rebuild_every: int, *, defer: bool = True,
                 served: Mapping[str, float] | None = None) -> None:
        """`defer` and `served` are the kept pool's (`KeptPool`): `served` the daemon's
        own mapping, read at every cycle's layout."""
        self.rebuild_every = rebuild_every
        self.defer = defer
        self.served = served
        self.kept: KeptPool | None = None
        self.loads = 0  # cycles loaded since the last full rebuild
        #: Rebuilds that found the carried pool wrong, over the daemon's life.
        self.repairs = 0

    def forget(self) -> None:
        """The next cycle rebuilds from nothing (a failed cycle may have left it half-done)."""
        self.kept = None

    def load(self, snapshot: Snapshot, make_stages: Callable[[], Stages], cycle: int,
             stages: Stages, changed: JobsChanged | None = None,
             ) -> tuple[LoadedPool, list[str]]:
        """The negotiator over the snapshot's pool (its stages `stages`), with the notes of
        what a check against the rebuild found and repaired (none on most cycles);
        `changed`: the jobs that changed since the last snapshot read (`KeptPool.update`)."""
        if self.kept is None:
            self.kept, self.loads = KeptPool(defer=self.defer, served=self.served), 0
            return self.kept.update(snapshot, stages, changed), []
        self.loads += 1
        if not self.rebuild_every or self.loads % self.rebuild_every:
            return self.kept.update(snapshot, stages, changed), []
        # The carried pool is laid out with stages of its own, looked at and closed before
        # the rebuild is made: the two pools are never held at once.
        carried = self.kept.update(snapshot, make_stages(), changed)
        carried_rows = (_node_rows(carried.pool), _running_rows(carried.pool),
                        _user_rows(carried.pool), [node.name for node in carried.pool.nodes])
        carried_queue = self.kept.queue
        carried.pool.close()
        del carried
        fresh = KeptPool(defer=self.defer, served=self.served)
        rebuilt = fresh.update(snapshot, stages, changed)
        self.kept, self.loads = fresh, 0
        differences = _row_differences(carried_rows, carried_queue, rebuilt, fresh.queue)
        if differences:
            self.repairs += 1
            for line in differences[:LOGGED_DIFFERENCES]:
                log.warning("cycle %d: the carried pool differed from a full rebuild: %s",
                            cycle, line)
            if len(differences) > LOGGED_DIFFERENCES:
                log.warning("cycle %d: %d more differences from the full rebuild", cycle,
                            len(differences) - LOGGED_DIFFERENCES)
            log.warning("cycle %d: the carried pool is repaired: the rebuild is kept", cycle)
        return rebuilt, [f"full rebuild: carried pool differed: {line}"
                         for line in differences]


def _row_differences(carried: tuple, carried_queue: list[str], rebuilt: LoadedPool,
                     rebuilt_queue: list[str]) -> list[str]:
    nodes, running, users, names = carried
    pool = rebuilt.pool
    found = sorted([
        *_differences("slot", (*NODE_FIELDS, "ad"), nodes, _node_rows(pool)),
        *_differences("running job", ("user", "slot", "cpus", "memory", "gpus", "start"),
                      running, _running_rows(pool)),
        *_differences("user", USER_FIELDS, users, _user_rows(pool)),
    ])
    if names != [node.name for node in pool.nodes]:
        found.append("slot order differs")
    if carried_queue != rebuilt_queue:
        at = next((position for position, (was, truth)
                   in enumerate(zip(carried_queue, rebuilt_queue, strict=False))
                   if was != truth),
                  min(len(carried_queue), len(rebuilt_queue)))
        found.append(f"queue order differs from position {at}: {carried_queue[at:at + 3]} "
                     f"carried, {rebuilt_queue[at:at + 3]} rebuilt")
    return found
