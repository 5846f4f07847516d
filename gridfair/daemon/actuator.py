"""The daemon's actuator: a cycle's planned actions carried out on the backend, each
journaled `issued` (committed) before the backend call and `confirmed` or `failed` after;
vacates first (one batch), then allocations in batches, a preemption handed over in one step
where the backend can; and the lease on the pool's starts renewed before acting."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from gridfair.ad_views import Machine
from gridfair.core.stages import ALLOCATE, VACATE
from gridfair.daemon.backends import ActionFailed, PoolBackend, action_problem
from gridfair.daemon.clock import wall_clock
from gridfair.daemon.faults import FaultPoints
from gridfair.daemon.journal import PlannedAction
from gridfair.daemon.metrics import NullMetrics
from gridfair.daemon.store import ABANDONED, CONFIRMED, FAILED, ISSUED, Store

log = logging.getLogger("gridfair.daemon")

#: Allocations journaled issued, carried out and journaled done together (`carry_out`).
#: Large, because a backend's cost is per value it sets in a call, not per job (htcondor: an
#: edit, hence a connection, for each slot named and each size given), and the connections
#: of a minute past about 13,000 make each dearer (the kernel's search for a free local port
#: among those in TIME_WAIT: measured, docs/results/scale.md); small enough that a stop waits
#: for one batch only (about 3.5 s at 4,096 allocations, live at 10,000 slots).
ALLOCATION_BATCH = 4096
#: The clock skew a lease tolerates: this share of its length, and at least this many seconds
#: (HTCondor stamps ads to the second, and a loaded collector takes a while to stamp an ad it
#: received, which reads as skew). Beyond it, no lease is claimed.
CLOCK_SKEW_SHARE = 0.25
MIN_CLOCK_SKEW = 5.0


class Actuator:
    """Carries out a cycle's actions on one backend, journaled in one store."""

    def __init__(self, backend: PoolBackend, store: Store, metrics: NullMetrics,
                 faults: FaultPoints, stopping: threading.Event, *, lease: float,
                 interval: float) -> None:
        self.backend = backend
        self.store = store
        self.metrics = metrics
        self.faults = faults
        self.stopping = stopping
        self.lease = lease
        # The lease is renewed at most this often (seconds): cycles may come every `poll`
        # seconds, and each renewal reconfigures every negotiator and schedd. Renewed half way
        # through what the lease gives beyond one interval, it never lapses while cycles come
        # at least every interval.
        self.renew_every = max(0.0, (lease - interval) / 2)
        self._renewed: tuple[float, float] | None = None  # (when, until) of the last renewal

    # ------------------------------------------------------------------ lease
    def hold_pool(self, cycle: int) -> dict[str, Any]:
        """Renew the lease on the pool's starts, before acting: gridfair has just read the
        pool and decided. Never on a dry run, a stale snapshot or a failed cycle, so a daemon
        that cannot decide lets the pool start jobs on its own once the lease runs out.
        Returns the cycle's lease columns."""
        if not self.backend.leases:
            return {}
        bound = max(MIN_CLOCK_SKEW, CLOCK_SKEW_SHARE * self.lease)
        recent, self._renewed = self._renewed, None
        try:
            # The clocks every cycle (two small queries): a skew found hands the lease back
            # at once, whenever it was renewed.
            skew = self.backend.clock_skew(bound)
            self.metrics.clock_skew(skew)
            if abs(skew) > bound:
                return self._refuse_lease(cycle, skew, bound)
            if recent is not None and wall_clock() - recent[0] < self.renew_every:
                self._renewed = recent
                return {"lease_until": recent[1]}
            renewed = wall_clock()
            until = renewed + self.lease
            self.backend.hold_starts(until)
            self._renewed = (renewed, until)
        except ActionFailed as error:
            log.warning("cycle %d: lease not renewed, the pool starts jobs on its own once the "
                        "last one runs out: %s", cycle, error)
            self.metrics.error("lease")
            return {"lease_error": str(error)}
        return {"lease_until": until}

    def _refuse_lease(self, cycle: int, skew: float, bound: float) -> dict[str, Any]:
        """No lease stated in a clock the negotiator does not keep: a day behind, it would
        have run out when set; a day ahead, a dead daemon would block unsteered starts for a
        day. The lease held is handed back, and the cycle goes on unleased."""
        message = (f"clock skew: the negotiator's clock is {skew:+.0f} s off this host's, "
                   f"more than the {bound:.0f} s a {self.lease:.0f} s lease tolerates: no lease "
                   "claimed, the pool starts jobs on its own (keep the clocks of this host and "
                   "the central manager synchronized: NTP)")
        log.error("cycle %d: %s", cycle, message)
        self.metrics.error("clock")
        with contextlib.suppress(ActionFailed):
            self.backend.release_starts()
        return {"lease_error": message}

    def release_pool(self) -> None:
        """End the lease: a daemon that stops hands the starts back to the pool at once."""
        if not self.backend.leases:
            return
        self._renewed = None
        try:
            self.backend.release_starts()
        except ActionFailed as error:
            log.warning("lease not released (it runs out by itself): %s", error)
            return
        log.info("lease released: the pool starts jobs on its own")

    # ------------------------------------------------------------ carrying out
    def carry_out(self, cycle: int, number: int,
                  actions: list[PlannedAction]) -> tuple[int, int, int]:
        """Carry out the planned actions; returns (confirmed, failed, left planned)."""
        store = self.store
        not_freed: set[str] = set()
        # A preemption's vacates + the allocation of the room they free as one action, where
        # the backend can.
        groups, rest = handover_groups(actions, self.backend.can_hand_over)
        vacates = [a for a in rest if a.kind == VACATE]
        allocations = steering_order([a for a in rest if a.kind == ALLOCATE])
        confirmed, failed, left = self._hand_over(cycle, groups)
        if self.stopping.is_set():
            # Left planned: the next start carries them out if it decides them again.
            return confirmed, failed, left + len(vacates) + len(allocations)
        if vacates:
            self._issue(vacates, cycle)
            self.faults.reached("after_issue", number)
            try:
                results = self.backend.vacate([a.job.id for a in vacates])
            except Exception as error:  # noqa: BLE001 - recorded as the actions' failure
                results = {a.job.id: action_problem(error) for a in vacates}
            self.faults.reached("after_vacate", number)
            now = self.backend.now()
            with store.transaction("record vacate outcomes") as db:
                for action in vacates:
                    problem = results.get(action.job.id, "no result from the backend")
                    self._record_outcome(db, action, problem, cycle, now)
                    if problem is None:
                        confirmed += 1
                    else:
                        not_freed.add(action.machine.name)
                        failed += 1
        for start in range(0, len(allocations), ALLOCATION_BATCH):
            if self.stopping.is_set():
                # Left planned: the next start carries them out if it decides them again.
                return confirmed, failed, len(allocations) - start
            batch = []
            for action in allocations[start:start + ALLOCATION_BATCH]:
                if action.machine.name in not_freed:
                    store.set_action_state(action.key, ABANDONED, cycle, self.backend.now(),
                                           f"{action.machine.name} was not freed: its vacate "
                                           "failed")
                    self.metrics.action(ALLOCATE, ABANDONED)
                else:
                    batch.append(action)
            if not batch:
                continue
            # Journaled issued together and their outcomes together: two transactions a
            # batch, not two an allocation. A crash in between leaves the batch issued, and
            # the restart resolves each from the pool (never issued again).
            self._issue(batch, cycle)
            self.faults.reached("after_issue_allocations", number)
            try:
                problems = self.backend.allocate_all([(a.job, a.machine) for a in batch])
            except Exception as error:  # noqa: BLE001 - recorded as the actions' failure
                problems = [action_problem(error)] * len(batch)
            now = self.backend.now()
            with store.transaction("record allocation outcomes") as db:
                for action, problem in zip(batch, problems, strict=True):
                    self._record_outcome(db, action, problem, cycle, now)
            failed += sum(problem is not None for problem in problems)
            confirmed += sum(problem is None for problem in problems)
        return confirmed, failed, 0

    def _hand_over(self, cycle: int, groups: list[tuple[list[PlannedAction], PlannedAction]]
                   ) -> tuple[int, int, int]:
        """Carry out each (vacates, allocation) group with `backend.handover`; its actions
        share the outcome. Returns (confirmed, failed) actions and the actions left planned
        because the daemon is stopping."""
        confirmed = failed = 0
        for done, (vacates, allocation) in enumerate(groups):
            if self.stopping.is_set():
                return confirmed, failed, sum(len(v) + 1 for v, _ in groups[done:])
            group = [*vacates, allocation]
            self._issue(group, cycle)
            refused = None
            try:
                refused = self.backend.handover([vacate.job for vacate in vacates],
                                                allocation.job, allocation.machine)
                problem = None
            except Exception as error:  # noqa: BLE001 - recorded as the actions' failure
                problem = action_problem(error)
            now = self.backend.now()
            with self.store.transaction("record a handover's outcome") as db:
                for action in group:
                    self._record_outcome(db, action, problem, cycle, now,
                                         handover_label(action.kind, refused))
            confirmed += len(group) * (problem is None)
            failed += len(group) * (problem is not None)
        return confirmed, failed, 0

    def _record_outcome(self, db: Any, action: PlannedAction, problem: str | None, cycle: int,
                        now: float, note: str = "") -> None:
        """Journal a carried-out action as confirmed (a vacate also marks its user preempted,
        for the cool-down) or as a retryable failure, inside the caller's transaction."""
        if problem is None:
            self.store.set_action_state(action.key, CONFIRMED, cycle, now, note, db=db)
            if action.kind == VACATE:
                db.execute("update users set last_preempted = ? where name = ?",
                           [now, action.job.user])
        else:
            self.store.set_action_state(action.key, FAILED, cycle, now, problem,
                                        retryable=True, db=db)
        self.metrics.action(action.kind, CONFIRMED if problem is None else FAILED)

    def _issue(self, actions: list[PlannedAction], cycle: int) -> None:
        now = self.backend.now()
        with self.store.transaction("mark actions issued") as db:
            for action in actions:
                self.store.set_action_state(action.key, ISSUED, cycle, now, attempt=True, db=db)
        for action in actions:
            self.metrics.action(action.kind, ISSUED)



def steering_order(allocations: Iterable[PlannedAction]) -> list[PlannedAction]:
    """The allocations with those to one slot side by side (the slots by name, each's jobs in
    decision order): a batch then names each slot once, where the jobs one slot takes would
    otherwise be spread over several batches, an edit each."""
    return sorted(allocations, key=lambda action: action.machine.name)



def handover_label(kind: str, refused: str | None) -> str:
    """The journal's note of an action of a handover: "handed over", or, when the backend
    carried it out as a vacate and a steering (`refused`: why), what it did instead."""
    if refused is None:
        return "handed over"
    return f"{'steered' if kind == ALLOCATE else 'vacated'} (handover refused: {refused})"


def handover_groups(
    actions: list[PlannedAction], can_hand_over: Callable[[Machine], bool],
) -> tuple[list[tuple[list[PlannedAction], PlannedAction]], list[PlannedAction]]:
    """The preemptions to carry out as one handover: a run of vacates on one slot followed, in
    decision order, by the allocation on it (the negotiator writes a preemption so), on a
    slot `can_hand_over` accepts; and the other actions, in order."""
    groups: list[tuple[list[PlannedAction], PlannedAction]] = []
    rest: list[PlannedAction] = []
    run: list[PlannedAction] = []
    for action in actions:
        if action.kind == VACATE:
            if run and run[0].machine.name != action.machine.name:
                rest += run
                run = []
            run.append(action)
            continue
        if run and run[0].machine.name == action.machine.name and can_hand_over(
                action.machine):
            groups.append((run, action))
        else:
            rest += [*run, action]
        run = []
    return groups, rest + run

