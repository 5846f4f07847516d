"""Prometheus metrics: off by default; when on, served on 127.0.0.1 unless configured.

The endpoint has no authentication: every account that can reach it (on 127.0.0.1, every
local account) reads every series. The per-user gauges name the pool's users in their `user`
label, so they are exported only with `metrics.user_labels = true`; by default no user name
leaves the daemon through the metrics.

Each daemon gets its own `CollectorRegistry`, so tests (and two daemons in one process) do
not collide on metric names. `NullMetrics` is the same interface doing nothing.

The server is bounded, as any local account can connect to it: at most `MAX_CONNECTIONS`
served at once (one more is closed as soon as it is accepted), each given
`CONNECTION_TIMEOUT` seconds between the bytes of its request. Idle connections then hold
at most that many descriptors and threads, whatever their number, and cannot take the
descriptors a cycle needs (prometheus_client's own server gives each a thread with no
timeout: ~1,000 idle connections exhausted the daemon's descriptors).
"""

from __future__ import annotations

import math
import socket
import threading
from collections.abc import Iterable, Mapping
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app

#: Scrapes served at once; a connection past them is closed when accepted.
MAX_CONNECTIONS = 16
#: Seconds a scrape may leave between the bytes it sends.
CONNECTION_TIMEOUT = 5.0
#: Cycle outcomes that are a success: a stale snapshot's cycle acted on nothing.
SUCCEEDED = ("ok", "dry-run")


#: The per-group gauges, `gridfair_group_<key>`, by their key in `HdrfOrder.group_rows`.
GROUP_GAUGES = {
    "dominant_share": "Dominant share of the pool an accounting group's jobs hold (its "
                      "subgroups' included)",
    "guaranteed_share": "Share of the pool an accounting group is guaranteed: its quota over "
                        "the pool (the product of the weights on its path)",
    "hdrf_share": "An accounting group's H-DRF share: rescaled dominant share over its "
                  "weight (the least is served first)",
    "users": "Users charged to an accounting group itself (not its subgroups)",
}


class NullMetrics:
    """Metrics switched off."""

    def cycle(self, outcome: str, seconds: float) -> None:
        """A cycle ended."""

    def decision(self, kind: str) -> None:
        """A policy decision was recorded."""

    def action(self, kind: str, state: str) -> None:
        """An action reached `state`."""

    def error(self, where: str) -> None:
        """Something failed (snapshot, action, store)."""

    def settled(self, landed: int, missed: int, late: int = 0) -> None:
        """Allocations in flight found started on their slots, or given up (not landed), and
        given-up ones since seen started on their slots (landed late)."""

    def users(self, rows: Iterable[tuple[str, float, float]]) -> None:
        """Per-user (name, PowerDiff, dominant share) as of the cycle's snapshot."""

    def groups(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Per accounting group (`HdrfOrder.group_rows`) before the cycle's decisions, as
        the policy sees the pool (its allocations in flight counted as running)."""

    def clock_skew(self, seconds: float) -> None:
        """The lease's clock (the negotiator's) less the daemon's, as last measured."""

    def lease(self, until: float) -> None:
        """The lease on the pool's starts runs to `until` (epoch seconds; 0: none held)."""

    def close(self) -> None:
        """Stop serving."""


class PrometheusMetrics(NullMetrics):
    def __init__(self, address: str, port: int, *, user_labels: bool = False) -> None:
        self.user_labels = user_labels
        self.registry = CollectorRegistry()
        registry = self.registry
        self.cycle_seconds = Histogram(
            "gridfair_cycle_duration_seconds", "Duration of a negotiation cycle",
            ["outcome"], registry=registry,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60),
        )
        self.decisions = Counter("gridfair_decisions_total", "Policy decisions by kind",
                                 ["kind"], registry=registry)
        self.actions = Counter("gridfair_actions_total", "Journaled actions by kind and state",
                               ["kind", "state"], registry=registry)
        self.errors = Counter("gridfair_errors_total", "Errors by where they happened",
                              ["where"], registry=registry)
        self.settlements = Counter("gridfair_allocations_settled_total", "Allocations "
                                   "settled: landed on their slot, or not landed; landed_late: "
                                   "not landed, since seen started on their slot",
                                   ["outcome"], registry=registry)
        self.power_diff = Gauge("gridfair_user_power_diff", "HOSEP PowerDiff per user "
                                "(+Inf: uses power while providing none)", ["user"],
                                registry=registry)
        self.dominant_share = Gauge("gridfair_user_dominant_share", "DRF dominant share per "
                                    "user", ["user"], registry=registry)
        self._users: dict[str, tuple[Gauge, Gauge]] = {}  # the users with series now
        # Group names are the administrator's (the pool's configuration), not users': always
        # exported.
        self.group_gauges = {key: Gauge(f"gridfair_group_{key}", text, ["group"],
                                        registry=registry)
                             for key, text in GROUP_GAUGES.items()}
        self._groups: set[str] = set()
        self.skew = Gauge("gridfair_clock_skew_seconds", "The negotiator's clock less the "
                          "daemon's (0: within the bound the lease tolerates)",
                          registry=registry)
        # Liveness, as times an alert compares with time() (configs/grafana/gridfair-alerts.yml):
        # a counter stops moving both when the daemon hangs and when nothing happens.
        self.started = Gauge("gridfair_daemon_start_time_seconds", "When the daemon started "
                             "(epoch seconds): a change is a restart", registry=registry)
        self.started.set_to_current_time()
        self.last_success = Gauge("gridfair_last_successful_cycle_time_seconds", "When the "
                                  "last cycle that succeeded (ok, dry-run) ended (epoch "
                                  "seconds; 0: none yet)", registry=registry)
        self.lease_end = Gauge("gridfair_lease_end_time_seconds", "When the lease on the "
                               "pool's starts runs out (epoch seconds; 0: none held): past "
                               "it, HTCondor starts jobs on its own", registry=registry)
        self.server = _serve(address, port, registry)

    def cycle(self, outcome: str, seconds: float) -> None:
        self.cycle_seconds.labels(outcome).observe(seconds)
        if outcome in SUCCEEDED:
            self.last_success.set_to_current_time()

    def decision(self, kind: str) -> None:
        self.decisions.labels(kind).inc()

    def action(self, kind: str, state: str) -> None:
        self.actions.labels(kind, state).inc()

    def error(self, where: str) -> None:
        self.errors.labels(where).inc()

    def settled(self, landed: int, missed: int, late: int = 0) -> None:
        self.settlements.labels("landed").inc(landed)
        self.settlements.labels("not_landed").inc(missed)
        self.settlements.labels("landed_late").inc(late)

    def users(self, rows: Iterable[tuple[str, float, float]]) -> None:
        """The cycle's users' series set (with `user_labels` only); those of users the pool no
        longer holds (no job, no slot: no usage) removed, so the series follow the active
        users, not all ever seen."""
        if not self.user_labels:
            return
        # Each user's two series kept at hand: `labels()` looks a child up under a lock, two
        # lookups a user a cycle (a tenth of a 1,000-user cycle, profiled).
        kept, present = self._users, {}
        for user, power_diff, share in rows:
            series = kept.get(user) or (self.power_diff.labels(user),
                                        self.dominant_share.labels(user))
            present[user] = series
            series[0].set(power_diff if not math.isnan(power_diff) else 0.0)
            series[1].set(share)
        for user in kept.keys() - present.keys():
            self.power_diff.remove(user)
            self.dominant_share.remove(user)
        self._users = present

    def groups(self, rows: Iterable[Mapping[str, Any]]) -> None:
        present = set()
        for row in rows:
            present.add(row["group"])
            for key, gauge in self.group_gauges.items():
                gauge.labels(row["group"]).set(row[key])
        for group in self._groups - present:
            for gauge in self.group_gauges.values():
                gauge.remove(group)
        self._groups = present

    def clock_skew(self, seconds: float) -> None:
        self.skew.set(seconds)

    def lease(self, until: float) -> None:
        self.lease_end.set(until)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _QuietHandler(WSGIRequestHandler):
    timeout = CONNECTION_TIMEOUT  # a socket timeout on every read of the request

    def log_message(self, format: str, *args: Any) -> None:
        """No line per scrape (nor per timed-out connection)."""


class _BoundedServer(ThreadingMixIn, WSGIServer):
    """A thread per connection, at most `MAX_CONNECTIONS` of them."""

    daemon_threads = True
    request_queue_size = 128  # the listen backlog, held by the kernel, not by descriptors

    def server_activate(self) -> None:
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().server_activate()

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)  # its descriptor freed at once
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Nothing on stderr for a client that timed out or went away (nor a traceback)."""

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def _serve(address: str, port: int, registry: CollectorRegistry) -> _BoundedServer:
    """The metrics of `registry` served on address:port by a thread of its own."""
    family, _, _, _, bound = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM,
                                                flags=socket.AI_PASSIVE)[0]

    class Server(_BoundedServer):
        address_family = family  # IPv6 addresses too

    server = make_server(bound[0], port, make_wsgi_app(registry), Server,
                         handler_class=_QuietHandler)
    threading.Thread(target=server.serve_forever, name="gridfair-metrics", daemon=True).start()
    return server  # type: ignore[return-value]
