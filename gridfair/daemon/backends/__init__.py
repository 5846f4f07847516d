"""Pool backends: where the daemon reads the pool and carries out its decisions.

One small interface (in the manner of APScheduler 4's `abc.py`), with one implementation per
module and one contract test suite (`tests/test_backends.py`) run against every one:

- `sim`: the embedded simulated grid, advancing simulated time each cycle (the default);
- `files`: `condor_status -long` / `condor_q -long` dumps in a directory, actions appended to a
  JSON-lines file;
- `htcondor`: a real pool through the `htcondor2` bindings.

Each is built from its config section by its `from_config`, found by kind in `BACKEND_CLASSES`.
"""

from __future__ import annotations

import importlib
import time
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gridfair.ad_views import Job, Machine, SkippedAd, Snapshot
from gridfair.errors import GridfairError

if TYPE_CHECKING:
    from gridfair.daemon.config import Config

#: Each backend a config may name (`backend.kind`) -> its module and class, imported only when
#: one is built: a daemon on one kind loads nothing of the others (the htcondor bindings).
BACKEND_CLASSES = {
    "sim": ("gridfair.daemon.backends.sim", "SimBackend"),
    "files": ("gridfair.daemon.backends.files", "FilesBackend"),
    "htcondor": ("gridfair.daemon.backends.htcondor", "HTCondorBackend"),
}


class PoolUnavailable(GridfairError):
    """The pool could not be read (unreachable, timed out, files missing): no action is taken."""


class UnusablePool(PoolUnavailable):
    """The pool was read, but nothing in it can be negotiated on: no usable slot ad, or job
    ads none of which is usable. Keeps the snapshot, whose skipped ads say why."""

    def __init__(self, message: str, snapshot: Snapshot) -> None:
        super().__init__(message)
        self.snapshot = snapshot


def unusable(kind: str, where: str, skipped: Sequence[SkippedAd]) -> str:
    """The one line of an `UnusablePool`: no usable `kind` ad in `where`, and the first
    reason."""
    line = f"no usable {kind} ad in {where}"
    if skipped:
        line += f" ({len(skipped)} skipped; the first: {skipped[0].line()})"
    return line


def require_slots(snapshot: Snapshot, where: str) -> Snapshot:
    """The snapshot, if it has a machine to negotiate on; an `UnusablePool` otherwise."""
    if not snapshot.machines:
        raise UnusablePool(unusable("machine", where, snapshot.skipped), snapshot)
    return snapshot


class ActionFailed(GridfairError):
    """An action was refused or could not be delivered; the journal records it as failed."""


def action_problem(error: Exception) -> str:
    """What the journal records of an action that raised `error`: an `ActionFailed`'s own
    message, anything else named as the backend's error."""
    if isinstance(error, ActionFailed):
        return str(error)
    return f"backend error: {type(error).__name__}: {error}"


class PoolBackend(ABC):
    """A pool the daemon negotiates for."""

    name: str = "backend"
    #: Where a simulated clock started (`now()` is then simulated seconds after it, shown as
    #: `t+N s`); None for a pool on the wall clock.
    simulated_since: float | None = None
    #: Whether `hold_starts` holds anything (a pool that starts only what gridfair steered
    #: while its lease lasts).
    leases: bool = False
    #: Whether `steer_ahead` means anything: a pool whose kept claims start a job steered to
    #: a busy slot once its job ends (`gridfair.daemon.steer_ahead`).
    steers_ahead: bool = False

    @classmethod
    def from_config(cls, section: Mapping[str, Any], config: Config) -> PoolBackend:
        """The backend its config section (`backend.<kind>`, validated) describes; `config`
        is the whole configuration, for what another section says."""
        raise NotImplementedError(f"{cls.__name__} is not built from a config")

    @abstractmethod
    def read_snapshot(self) -> Snapshot:
        """The pool now: slots, jobs, and the ads skipped with reasons.

        Raises `PoolUnavailable` when the pool cannot be read at all; a single bad ad is
        skipped (`Snapshot.skipped`), never fatal.
        """

    @abstractmethod
    def vacate(self, job_ids: Sequence[str]) -> dict[str, str | None]:
        """Vacate running jobs. Returns, per job id, None if done or why it failed.

        Raises `ActionFailed` when nothing could be delivered at all.
        """

    @abstractmethod
    def allocate(self, job: Job, machine: Machine) -> None:
        """Have `job` start on `machine` (or steer the pool towards it).

        Raises `ActionFailed` when it is refused.
        """

    def allocate_all(self, allocations: Sequence[tuple[Job, Machine]]) -> list[str | None]:
        """Carry out several allocations: for each, in order, None if done or why not (as
        `action_problem` words what `allocate` raised). Default: `allocate` each; a backend
        that can carry out several in one request to the pool does (htcondor: one edit for
        all the jobs given one value)."""
        problems: list[str | None] = []
        for job, machine in allocations:
            try:
                self.allocate(job, machine)
            except Exception as error:  # noqa: BLE001 - the action's failure, journaled
                problems.append(action_problem(error))
            else:
                problems.append(None)
        return problems

    def steer_ahead(self, allocations: Sequence[tuple[Job, Machine]]) -> list[str | None]:
        """Steer each job to its busy slot, to start there once the slot's job ends (per job,
        None if done or why not). Default: the pool has no such start (nothing done)."""
        return [None] * len(allocations)

    def steered_jobs(self) -> dict[str, str] | None:
        """The jobs not running whose steering may still start them (live, or held and
        live once released): job id -> the slot it names, None if the pool cannot be asked
        now. What a restarted daemon finds it wrote before. Default: the pool keeps no
        steering (none)."""
        return {}

    def can_hand_over(self, machine: Machine) -> bool:
        """Whether `handover` can free `machine` for another job in one action of the pool
        (HTCondor's condor_now), with no window for another match between (default: no)."""
        return False

    def handover(self, victims: Sequence[Job], job: Job, machine: Machine) -> str | None:
        """Vacate `victims` and start `job` on the room they free on `machine` at once.
        Returns None when handed over, or why the backend carried it out instead as a vacate
        of the victims and a steering of the job (the journal says so: "steered (handover
        refused: ...)").

        Raises `ActionFailed` when it is refused.
        """
        raise ActionFailed(f"backend {self.name} cannot hand a slot over")

    def release_orphaned_claims(self) -> list[str]:
        """Release the claims the pool holds for no one (the htcondor backend: those a
        restarted schedd left idle, `orphan_claims`); a line per claim for the cycle's
        events. Default: none."""
        return []

    def actions_done(self) -> None:  # noqa: B027 - optional: most act at once
        """After a cycle's actions: what a backend does once for all of them (the htcondor
        backend asks each schedd it steered jobs on to negotiate). Default: nothing."""

    def renegotiate(self) -> None:  # noqa: B027 - optional: most start at once
        """Ask the pool again for the negotiation that starts the allocations still in
        flight (`daemon.service`: every `RENEGOTIATE_EVERY` seconds while some wait). Default:
        nothing to ask."""

    def changed(self) -> bool:
        """Whether, since the last call, a slot was freed or jobs were submitted: a cheap look
        between cycles that starts one at once (`daemon.poll`). The first call sets what
        later ones compare with. Default: never (cycles at the interval only)."""
        return False

    def ended_runs(self, job_ids: Collection[str], since: float) -> dict[str, tuple[str, float]]:
        """Of these jobs, gone from the pool's queue, those whose last run started at `since`
        or later: job id -> (the slot it ran on, when that run started). How an allocation
        whose job started and ended between two reads is seen to have landed. Default: the
        pool keeps no record of ended jobs (none known)."""
        return {}

    def withdraw(self, job_id: str) -> None:  # noqa: B027 - optional: most start at once
        """Lift what `allocate` asked of the pool for a job that did not start there, so the
        pool may start it anywhere (default: nothing to lift). Raises `ActionFailed`."""

    def hold_starts(self, until: float) -> None:  # noqa: B027 - optional: most pools have no lease
        """Renew gridfair's lease on the pool's starts until `until` (wall time): only the
        jobs gridfair steered start until then, and the pool starts jobs on its own once it
        runs out (a daemon that died). Default: the pool has no lease. Raises `ActionFailed`."""

    def release_starts(self) -> None:  # noqa: B027 - optional, as above
        """End the lease now: the pool starts jobs on its own again (a daemon that stops)."""

    def clock_skew(self, bound: float) -> float:
        """Seconds the clock the lease is compared with (the negotiator's) is ahead of this
        host's (`clock.wall_clock`), known to within `bound`: 0.0 within it. Default: the
        lease is this host's clock's. Raises `ActionFailed` if it cannot be read."""
        return 0.0

    def advertise(self, ad: Mapping[str, Any]) -> None:  # noqa: B027 - optional: a pool to show it in
        """Show the daemon's own ad (`gridfair.daemon.advert`) in the pool, replacing the last
        one. Default: the pool has nowhere to show it. Raises `ActionFailed`."""

    def withdraw_ad(self, ad: Mapping[str, Any]) -> None:  # noqa: B027 - optional, as above
        """Take the daemon's ad (its `MyType` and `Name`) out of the pool: it stops."""

    def now(self) -> float:
        """The pool's clock: wall time for real pools, simulated time for `sim` (from
        `simulated_since`)."""
        return time.time()

    def close(self) -> None:  # noqa: B027 - optional hook: most backends hold nothing open
        """Release connections and files (default: nothing to release)."""


def backend_class(kind: str) -> type[PoolBackend]:
    """The class of the backend `kind` (one of `BACKEND_CLASSES`)."""
    module, name = BACKEND_CLASSES[kind]
    return getattr(importlib.import_module(module), name)
