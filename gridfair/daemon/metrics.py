"""Prometheus metrics: off by default; when on, served on 127.0.0.1 unless configured.

Each daemon gets its own `CollectorRegistry`, so tests (and two daemons in one process) do
not collide on metric names. `NullMetrics` is the same interface doing nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server


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

    def settled(self, landed: int, missed: int) -> None:
        """Allocations in flight found started on their slots, or given up (not landed)."""

    def users(self, rows: Iterable[tuple[str, float, float]]) -> None:
        """Per-user (name, PowerDiff, dominant share) as of the cycle's snapshot."""

    def close(self) -> None:
        """Stop serving."""


class PrometheusMetrics(NullMetrics):
    def __init__(self, address: str, port: int) -> None:
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
                                   "settled: landed on their slot, or not landed",
                                   ["outcome"], registry=registry)
        self.power_diff = Gauge("gridfair_user_power_diff", "HOSEP PowerDiff per user "
                                "(+Inf: uses power while providing none)", ["user"],
                                registry=registry)
        self.dominant_share = Gauge("gridfair_user_dominant_share", "DRF dominant share per "
                                    "user", ["user"], registry=registry)
        self.server, self.thread = start_http_server(port, addr=address, registry=registry)

    def cycle(self, outcome: str, seconds: float) -> None:
        self.cycle_seconds.labels(outcome).observe(seconds)

    def decision(self, kind: str) -> None:
        self.decisions.labels(kind).inc()

    def action(self, kind: str, state: str) -> None:
        self.actions.labels(kind, state).inc()

    def error(self, where: str) -> None:
        self.errors.labels(where).inc()

    def settled(self, landed: int, missed: int) -> None:
        self.settlements.labels("landed").inc(landed)
        self.settlements.labels("not_landed").inc(missed)

    def users(self, rows: Iterable[tuple[str, float, float]]) -> None:
        for user, power_diff, share in rows:
            self.power_diff.labels(user).set(power_diff if not math.isnan(power_diff) else 0.0)
            self.dominant_share.labels(user).set(share)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
