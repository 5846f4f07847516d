"""What the parts of the `htcondor` backend share: the collectors (which of them answered
the last read), the schedd of each job read, the schedds steered on since the last
`actions_done`, and the daemons the lease is set on. Reading fills it; steering, the lease
and the advert act through it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import classad2
import htcondor2

from gridfair.ad_views import SkippedAd
from gridfair.classads.live_reads import probe_side_by_side
from gridfair.daemon.backends import ActionFailed, PoolUnavailable
from gridfair.errors import ConfigError

# The bindings raise HTCondorException for daemon errors, and plain OSError/RuntimeError/
# ValueError from the lower layers (no route, refused, bad reply).
POOL_ERRORS = (htcondor2.HTCondorException, OSError, RuntimeError, ValueError)

#: The collector's ad type of each kind of daemon the lease is set on.
_DAEMON_AD_TYPES = {"negotiator": htcondor2.AdType.Negotiator,
                    "schedd": htcondor2.AdType.Schedd}

#: Seconds the collectors, when there are several, may take to answer a probe, side by side,
#: before those that have not are skipped for the snapshot read (`probe_collectors`).
COLLECTOR_TIMEOUT = 5.0


def schedd_name(location: classad2.ClassAd) -> str:
    return str(location.get("Name", "schedd"))


def probe_collector(collector: Any) -> None:
    """A query that a collector answers at once (no slot matches `false`)."""
    collector.query(htcondor2.AdType.Startd, "false", ["Name"])


def collector_name(pool: str | None) -> str:
    """The collector in error messages: its address, or where HTCondor looks for it."""
    if pool:
        return f"collector {pool}"
    host = htcondor2.param.get("COLLECTOR_HOST")
    return (f"collector {host} (COLLECTOR_HOST)" if host else
            "collector COLLECTOR_HOST (not set in HTCondor's configuration here)")


def pool_uid_domain() -> str:
    """The pool's UID_DOMAIN, as HTCondor's configuration where gridfair runs names it (the
    central manager's: `htcondor2.param`, read through CONDOR_CONFIG)."""
    try:
        return str(htcondor2.param["UID_DOMAIN"])
    except KeyError:
        raise ConfigError("HTCondor's configuration here names no UID_DOMAIN: set "
                          "backend.htcondor.uid_domain to the pool's") from None


class PoolState:
    """The pool's daemons as the backend's parts know them, between reads and actions."""

    def __init__(self, collector: Any, *, pool: str | None,
                 more_collectors: Mapping[str, Any] | None,
                 schedd_factory: Callable[[classad2.ClassAd], Any], slot_constraint: str,
                 tool_environment: Mapping[str, str] | None,
                 collector_timeout: float = COLLECTOR_TIMEOUT) -> None:
        self.pool = pool  # the collector's address, for the tools (None: COLLECTOR_HOST)
        # Every collector read, in order (earlier ones win a machine name, `_query_slots`):
        # the first, then `more_collectors` (address -> collector).
        self.collectors: list[tuple[str, Any]] = [(collector_name(pool), collector), *(
            (f"collector {address}", other) for address, other in
            (more_collectors or {}).items())]
        self.collector_timeout = collector_timeout
        # Collectors that did not answer in this snapshot read -> why; the cycle's lease and
        # adverts do not wait on them either (`for_actions`).
        self.silent_collectors: dict[str, str] = {}
        self.schedd_factory = schedd_factory
        self.slot_constraint = slot_constraint
        self.tool_environment = dict(tool_environment) if tool_environment else None
        self.schedd_of: dict[str, classad2.ClassAd] = {}  # job id -> its schedd's location
        # Whether a job was steered since the last `actions_done` (then it asks for a cycle).
        self.negotiation_wanted = False
        # The daemons of each kind last listed (`daemons`): the lease is set on the
        # negotiators and the schedds.
        self.known_daemons: dict[str, list[tuple[classad2.ClassAd, Any]]] = {}

    def probe_collectors(self) -> None:
        """With several collectors, whether each answers is probed first, side by side
        (`probe_side_by_side`, as for schedds): one that fails, or has not answered within
        `collector_timeout`, is not asked again in this snapshot read, nor by the cycle's
        lease and adverts. One collector alone is asked at once."""
        self.silent_collectors = {}
        if len(self.collectors) > 1:
            problems = probe_side_by_side([collector for _, collector in self.collectors],
                                          probe_collector, self.collector_timeout)
            self.silent_collectors = {
                name: problem for (name, _), problem in zip(self.collectors, problems,
                                                             strict=True) if problem}
        self.answering()

    def answering(self) -> list[tuple[str, Any]]:
        """(name, collector) of the collectors not silent in the last snapshot read;
        `PoolUnavailable` naming each one's reason if there is none."""
        answering = [(name, collector) for name, collector in self.collectors
                     if name not in self.silent_collectors]
        if not answering:
            raise PoolUnavailable("; ".join(f"{name}: {problem}" for name, problem
                                            in self.silent_collectors.items()))
        return answering

    def for_actions(self) -> list[tuple[str, Any]]:
        """The collectors the cycle's lease and adverts go to: those that answered the last
        read (a silent one would hold each for the bindings' wait), or all if none did."""
        return [(name, collector) for name, collector in self.collectors
                if name not in self.silent_collectors] or self.collectors

    def ask_collectors(self, ask: Callable[[Any], Any]) -> list[tuple[str, Any]]:
        """(name, `ask(collector)`) of each collector that answers, in order; one that
        fails is silent for the rest of the read (`answering` raises if none is left)."""
        answers = []
        for name, collector in self.answering():
            try:
                answers.append((name, ask(collector)))
            except POOL_ERRORS as error:
                self.silent_collectors[name] = f"query failed: {error}"
        if not answers:
            self.answering()
        return answers

    def collector_skips(self) -> list[SkippedAd]:
        """The collectors that did not answer the snapshot read, as skipped sources."""
        return [SkippedAd(name, 0, name.removeprefix("collector "), problem)
                for name, problem in self.silent_collectors.items()]

    def locate_schedds(self) -> list[classad2.ClassAd]:
        """The schedds every collector that answers lists, each name once (the first
        collector's location of it)."""
        found: dict[str, classad2.ClassAd] = {}
        for _, answer in self.ask_collectors(
                lambda collector: collector.locateAll(htcondor2.DaemonType.Schedd)):
            for location in answer:
                found.setdefault(schedd_name(location), location)
        return list(found.values())

    def schedd(self, job_id: str) -> Any:
        location = self.schedd_of.get(job_id)
        if location is None:
            raise ActionFailed(f"job {job_id}: its schedd is unknown (not in any schedd's "
                               "answer to the last query)")
        return self.schedd_factory(location)

    def negotiators(self) -> list[tuple[classad2.ClassAd, Any]]:
        return self.daemons("negotiator")

    def schedds(self) -> list[tuple[classad2.ClassAd, Any]]:
        """The schedds, for the lease: none listed is no failure (a pool with no schedd
        starts no job)."""
        return self.daemons("schedd", required=False)

    def daemons(self, kind: str, *, required: bool = True) -> list[tuple[classad2.ClassAd, Any]]:
        """(ad, the collector it came from) of each daemon of `kind` ("negotiator",
        "schedd") the collectors that answered the last read list, each name once (the first
        collector's ad of it: both of an HA pair hear it), else the last ones listed: a
        collector that restarts hears from a daemon again only at its update interval (5
        minutes by default for a negotiator), and the lease must not lapse for that."""
        by_name: dict[str, tuple[classad2.ClassAd, Any]] = {}
        problems = []
        ad_type = _DAEMON_AD_TYPES[kind]
        for name, collector in self.for_actions():
            try:
                ads = collector.query(ad_type)
            except POOL_ERRORS as error:
                problems.append(f"{name}: query failed: {error}")
                continue
            for ad in ads:
                by_name.setdefault(str(ad.get("Name")), (ad, collector))
        found = list(by_name.values())
        problem = "; ".join(problems) or (
            f"the collector lists no {kind}" if len(self.collectors) == 1 else
            f"no collector lists a {kind}")
        if found:
            self.known_daemons[kind] = found
        elif self.known_daemons.get(kind):
            found = self.known_daemons[kind]
        elif required:
            raise ActionFailed(f"lease: {problem}")
        return found

