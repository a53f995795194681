"""Prometheus metrics of one relay app: requests, latency, the store's totals and pool.

Served at ``GET /metrics`` in the Prometheus text format, rendered by
``prometheus_client`` (specs/relay.md "Operations"). Each app owns its
:class:`~prometheus_client.CollectorRegistry`: there is no process-wide
state, so a test process can build many apps and each counts only its own
requests.

What a label may hold is closed by construction: the route *template* (the
relay's own route table, or ``unmatched``), a method from the routed set (or
``other``) and the status code. A raw path, query string, team, member or
credential ID never becomes a label, which keeps the output free of
identifiers and its cardinality bounded however clients misbehave.

The store's gauges are read when Prometheus scrapes, not kept up to date per
request: :meth:`RelayStore.counts` is one aggregate over the team rows (its
cost grows with teams, never with messages) and :meth:`RelayStore.pool_state`
does no I/O. A database that cannot be read makes
``syncengine_relay_database_up`` 0 and leaves the totals out; the scrape
itself still answers 200, so an outage is visible rather than a gap.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Awaitable, Callable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from relay.errors import RelayError
from relay.http.connections import ConnectionGuard
from relay.http.intake import require_no_body
from relay.http.live import LiveHub
from relay.http.metrics_group import MetricsGroup, merge_families
from relay.logformat import AccessRecord
from relay.storage.base import RelayStore

__all__ = [
    "METRICS_PATH",
    "ConnectionCollector",
    "LiveCollector",
    "PoolCollector",
    "RelayMetrics",
    "StoreCollector",
    "metrics_endpoint",
]

METRICS_PATH = "/metrics"
_PREFIX = "syncengine_relay"
#: Request latency buckets in seconds: sub-millisecond reads up to the 10 s a
#: slow PostgreSQL failover or a full 2 MiB upload may take.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class StoreCollector:
    """Scrape-time gauges of the database as a whole: reachability and totals.

    The same for every process on the database, so a worker group reads
    them once per scrape and never adds them up (relay/http/metrics_group.py).
    """

    def __init__(self, store: RelayStore) -> None:
        self._store = store

    def collect(self) -> Iterator[Metric]:
        try:
            counts = self._store.counts()
        except RelayError:  # unavailable or broken: say so, keep the scrape alive
            counts = None
        yield GaugeMetricFamily(
            f"{_PREFIX}_database_up",
            "1 when this scrape could read the relay database, else 0",
            value=0 if counts is None else 1,
        )
        if counts is not None:
            yield GaugeMetricFamily(f"{_PREFIX}_teams", "Provisioned teams", value=counts.teams)
            yield GaugeMetricFamily(
                f"{_PREFIX}_messages_stored",
                "Live messages held (above each team's retention floor)",
                value=counts.messages_stored,
            )
            yield CounterMetricFamily(
                f"{_PREFIX}_messages_sequenced",
                "Messages ever given a sequence (retention never lowers it)",
                value=counts.messages_sequenced,
            )


class PoolCollector:
    """Scrape-time gauges of this process's database connections (no I/O)."""

    def __init__(self, store: RelayStore) -> None:
        self._store = store

    def collect(self) -> Iterator[Metric]:
        pool = self._store.pool_state()
        yield GaugeMetricFamily(
            f"{_PREFIX}_db_pool_connections", "Open database connections", value=pool.size
        )
        optional = (
            ("db_pool_max_connections", "Connection pool maximum", pool.max_size),
            ("db_pool_available_connections", "Idle connections in the pool", pool.available),
            ("db_pool_waiting_requests", "Requests waiting for a connection", pool.waiting),
        )
        for name, documentation, value in optional:
            if value is not None:
                yield GaugeMetricFamily(f"{_PREFIX}_{name}", documentation, value=value)


class LiveCollector:
    """Scrape-time figures of the live wait's hub (counters kept on the event loop)."""

    def __init__(self, hub: LiveHub) -> None:
        self._hub = hub

    def collect(self) -> Iterator[Metric]:
        hub = self._hub
        yield GaugeMetricFamily(
            f"{_PREFIX}_live_waits_open", "Live waits held open now", value=hub.open_waits
        )
        wakes = CounterMetricFamily(
            f"{_PREFIX}_live_wait_answers",
            "Live waits answered, by reason (head, read, timeout, shutdown)",
            labels=("reason",),
        )
        for reason, count in sorted(hub.wakes.items()):
            wakes.add_metric((reason,), count)
        yield wakes
        yield CounterMetricFamily(
            f"{_PREFIX}_live_waits_refused",
            "Live waits refused by a concurrency cap (429 live-wait-limit)",
            value=hub.refused,
        )
        yield CounterMetricFamily(
            f"{_PREFIX}_live_head_refreshes",
            "Head reads made to publish wakes to waiting teams (one per burst)",
            value=hub.refreshes,
        )
        reconnects = hub.listener_reconnects
        if reconnects is not None:
            yield CounterMetricFamily(
                f"{_PREFIX}_live_listener_reconnects",
                "Times the cross-process LISTEN connection was re-established",
                value=reconnects,
            )


class ConnectionCollector:
    """Scrape-time figures of the connection rules (relay/http/connections.py)."""

    def __init__(self, guard: ConnectionGuard) -> None:
        self._guard = guard

    def collect(self) -> Iterator[Metric]:
        guard = self._guard
        yield GaugeMetricFamily(
            f"{_PREFIX}_connections_open",
            "Client connections open now (admitted by the per-peer bound)",
            value=guard.open,
        )
        refused = CounterMetricFamily(
            f"{_PREFIX}_connections_refused",
            "Connections closed by a connection rule, by reason "
            "(per_peer: over --max-connections-per-peer on accept; "
            "request_read_timeout: no whole request within --request-read-timeout)",
            labels=("reason",),
        )
        for reason, count in sorted(guard.refused.items()):
            refused.add_metric((reason,), count)
        yield refused


class _Families:
    """A fixed list of families, in the shape ``generate_latest`` reads."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> list[Metric]:
        return self._families


class RelayMetrics:
    """The request instruments and the scrape-time collectors of one app.

    ``registry`` holds what this process alone counts (requests, latency,
    its pool, its live waits and connections); the database-wide gauges are
    collected beside it. With ``group`` (``relay serve --workers N``) the
    process's own figures are published for its siblings and a scrape
    answers with the whole group's sum (relay/http/metrics_group.py).
    """

    def __init__(
        self,
        store: RelayStore,
        live: LiveHub | None = None,
        connections: ConnectionGuard | None = None,
        group: MetricsGroup | None = None,
    ) -> None:
        self.registry = CollectorRegistry()
        self._requests = Counter(
            f"{_PREFIX}_http_requests",
            "HTTP requests by route template, method and status",
            ("route", "method", "status"),
            registry=self.registry,
        )
        self._latency = Histogram(
            f"{_PREFIX}_http_request_duration_seconds",
            "HTTP request latency by route template and method",
            ("route", "method"),
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(PoolCollector(store))
        if live is not None:
            self.registry.register(LiveCollector(live))
        if connections is not None:
            self.registry.register(ConnectionCollector(connections))
        self._database = StoreCollector(store)
        self.group = group
        self._publishing = threading.Lock()
        if group is not None:
            group.attach(self.publish)

    def observe(self, access: AccessRecord) -> None:
        """Count one finished request (called by the outermost ASGI layer)."""
        self._requests.labels(access.route, access.method, str(access.status)).inc()
        self._latency.labels(access.route, access.method).observe(access.duration_ms / 1000)

    def publish(self) -> list[Metric]:
        """This process's own figures, shared with the group when there is one."""
        own = list(self.registry.collect())
        if self.group is not None:
            with self._publishing, contextlib.suppress(OSError):
                self.group.publish(own)  # a full or vanished directory: siblings see older figures
        return own

    def exposition(self) -> bytes:
        """The text format; blocking (it queries the store), so run off the event loop."""
        own = self.publish()
        if self.group is not None:
            own = merge_families(own, self.group.siblings())
        return generate_latest(_Families([*own, *self._database.collect()]))


def metrics_endpoint(metrics: RelayMetrics) -> Callable[[Request], Awaitable[Response]]:
    """``GET /metrics``: no protocol header or credential (a scraper has neither)."""

    async def scrape(request: Request) -> Response:
        require_no_body(request)
        body = await run_in_threadpool(metrics.exposition)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    return scrape
