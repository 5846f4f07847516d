"""The `htcondor` backend's lease on starts: the lease knob set on every negotiator and
schedd (as persistent configuration: `backends.lease`), and their clocks read against this
host's."""

from __future__ import annotations

import math
from typing import Any

import htcondor2

from gridfair.daemon.backends import ActionFailed
from gridfair.daemon.backends.htcondor.state import POOL_ERRORS, PoolState
from gridfair.daemon.backends.lease import config_tool, not_answering, persist, warn_not_kept
from gridfair.daemon.clock import wall_clock


class StartsLease:
    """The lease gridfair holds on the pool's starts, through the daemons `PoolState` lists."""

    def __init__(self, state: PoolState, *, lease_knob: str) -> None:
        self.state = state
        # The negotiator knob holding gridfair's lease on starts ("": hold none).
        self.lease_knob = lease_knob

    def hold_starts(self, until: float) -> None:
        """Set the lease knob (`GRIDFAIR_LEASE_UNTIL`) on every negotiator, whose
        NEGOTIATOR_JOB_CONSTRAINT compares it with `time()`, and on every schedd the last read
        located, whose START_VANILLA_UNIVERSE does (a schedd starts jobs on claims it keeps
        without a negotiation): as persistent configuration (kept across a restart:
        `backends.lease`), and have each reconfigure. The account needs CONFIG there, for a
        knob in SETTABLE_ATTRS_CONFIG, and ADMINISTRATOR (configs/htcondor-pool.config)."""
        self._set_lease(str(math.ceil(until)))

    def release_starts(self) -> None:
        self._set_lease("0")

    def _set_lease(self, value: str) -> None:
        if not self.lease_knob:
            return
        tool = config_tool(htcondor2.param)
        daemons = [("negotiator", ad) for ad, _ in self.state.negotiators()]
        daemons += [("schedd", ad) for ad, _ in self.state.schedds()]
        for kind, ad in daemons:
            name = f"{kind} {ad.get('Name', kind)}"
            try:
                if tool is None:  # runtime configuration only: forgotten at a restart
                    warn_not_kept()
                    htcondor2.RemoteParam(ad)[self.lease_knob] = value
                elif refused := persist(tool, ad, self.lease_knob, value,
                                        self.state.tool_environment):
                    raise ActionFailed(
                        f"lease: {name} does not answer ({refused})"
                        if not_answering(refused) else
                        f"lease: {name} refused {self.lease_knob} = {value} "
                        f"({refused}; is the daemon's account in its ALLOW_CONFIG and "
                        "ALLOW_ADMINISTRATOR, the knob in SETTABLE_ATTRS_CONFIG, "
                        "ENABLE_PERSISTENT_CONFIG on?)")
                htcondor2.send_command(ad, htcondor2.DaemonCommand.Reconfig)
            except POOL_ERRORS as error:
                raise ActionFailed(f"lease: {name} refused {self.lease_knob} = "
                                   f"{value} ({error}; is the daemon's account in its "
                                   "ALLOW_CONFIG and ALLOW_ADMINISTRATOR, the knob in "
                                   "SETTABLE_ATTRS_CONFIG, ENABLE_RUNTIME_CONFIG on?)") from None

    def clock_skew(self, bound: float) -> float:
        """The negotiators' clock against this host's: each negotiator's against the
        collector's (its ad's `MyCurrentTime`, stamped by the negotiator when it sent the ad,
        less `LastHeardFrom`, stamped by the collector when it came: whatever the ad's age),
        plus that collector's against this host's (`_collector_offset`): the negotiator
        furthest off."""
        offsets: dict[int, float] = {}  # id(collector) -> its offset, asked once
        skews = []
        for ad, collector in self.state.negotiators():
            if id(collector) not in offsets:
                offsets[id(collector)] = self._collector_offset(collector, bound)
            own = (ad["MyCurrentTime"] - ad["LastHeardFrom"] if type(ad.get("MyCurrentTime"))
                   is int and type(ad.get("LastHeardFrom")) is int else 0)
            skews.append(own + offsets[id(collector)])
        return float(max(skews, key=abs, default=0.0))

    def _collector_offset(self, collector: Any, bound: float) -> float:
        """The collector's clock less this host's, in whole seconds; 0.0 if within `bound`.
        Read by asking the collector for its own ad under `time() >= T`, a constraint it
        evaluates with its own clock: two questions say whether it is within the bound, and
        beyond it, a bisection finds it (32 more, only then)."""
        def at_least(offset: int) -> bool:
            moment = math.floor(wall_clock()) + offset
            try:
                return bool(collector.query(htcondor2.AdType.Collector,
                                            f"time() >= {moment}", ["Name"]))
            except POOL_ERRORS as error:
                raise ActionFailed(f"lease: cannot read the collector's clock: {error}") from None

        within = math.ceil(bound)
        if at_least(-within) and not at_least(within + 1):
            return 0.0
        low, high = -(1 << 32), 1 << 32  # at_least(low) holds, at_least(high) does not
        if not at_least(low):
            raise ActionFailed("lease: cannot read the collector's clock (it sends no ad of "
                               "its own)")
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if at_least(middle) else (low, middle)
        return float(low)

