"""How the simulator runs a workload: one frozen set of options, checked once, when made.

The modes are enums (`Arrivals`, `SameInstant`), string-valued so that a command line, a sweep
spec or a JSON record writes them as before; the engine's module docstring says what each does.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gridfair.errors import InputError


class Arrivals(StrEnum):
    """The simulator's arrival semantics."""

    #: All that happens at one instant is applied, then one negotiation cycle (the daemon's).
    BATCH = "batch"
    #: The published simulator's (iSPD) event loop: one decision per negotiation event.
    SEQUENTIAL = "sequential"


class SameInstant(StrEnum):
    """The order of the events of one instant under sequential arrivals."""

    #: Completions and chained negotiations, then arrivals in submit order.
    ORDERED = "ordered"
    #: iSPD 2014's own event list (`sim/ispd_events.py`).
    ISPD2014 = "ispd2014"


ARRIVALS = tuple(mode.value for mode in Arrivals)
SAME_INSTANT_ORDERS = tuple(order.value for order in SameInstant)


def _mode(kind: type[StrEnum], value: str, what: str) -> StrEnum:
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(member.value for member in kind)
        raise InputError(f"{what} must be one of {known}, got {value!r}") from None


@dataclass(frozen=True)
class EngineOptions:
    """The simulator's options (`Simulation`, `simulation_of`): modes given as strings are
    turned into their enums; a value or combination the engine cannot run is an InputError
    naming the option."""

    arrivals: Arrivals = Arrivals.BATCH
    #: Negotiate every this many simulated seconds (None: on every arrival and completion).
    interval: float | None = None
    #: Seconds a vacated node needs before its new task starts.
    vacate_delay: float = 0.0
    #: Sequential arrivals: iSPD's periodic machine status, every this many seconds.
    status_refresh: float | None = None
    #: Reuse a finished task's claim for its user's next task this long (negative: forever).
    claim_worklife: float | None = None
    same_instant: SameInstant = SameInstant.ORDERED

    def __post_init__(self) -> None:
        # Frozen: the enums replace the strings given through object.__setattr__.
        object.__setattr__(self, "arrivals", _mode(Arrivals, self.arrivals, "arrivals"))
        object.__setattr__(self, "same_instant",
                           _mode(SameInstant, self.same_instant, "same-instant order"))
        sequential = self.sequential
        if sequential and self.interval is not None:
            raise InputError("sequential arrivals negotiate on events: they take no interval")
        if self.interval is not None and self.interval <= 0:
            raise InputError(f"negotiation interval must be positive, got {self.interval}")
        if self.vacate_delay < 0:
            raise InputError(f"vacate delay must be zero or positive, got {self.vacate_delay}")
        if self.status_refresh is not None and not sequential:
            raise InputError("a status refresh is an option of sequential arrivals")
        if self.status_refresh is not None and not self.status_refresh > 0:
            raise InputError(f"status refresh must be positive, got {self.status_refresh}")
        if sequential and self.claim_worklife is not None:
            raise InputError("claim reuse (--claim-worklife) takes batch arrivals")
        if self.same_instant is not SameInstant.ORDERED and not sequential:
            raise InputError("a same-instant order is an option of sequential arrivals")

    @property
    def sequential(self) -> bool:
        return self.arrivals is Arrivals.SEQUENTIAL

    @property
    def ispd_event_list(self) -> bool:
        """Whether the run replays iSPD 2014's event list."""
        return self.same_instant is SameInstant.ISPD2014


#: The engine's defaults: batch arrivals, negotiation on every event.
DEFAULT_ENGINE = EngineOptions()
