"""The relay's ASGI application: v1 routes on Starlette, one error envelope.

Request pipeline for team-scoped endpoints (v1.md "Scope and conventions"):
protocol version (426) → team header (400) → bearer credential (401) →
authorization against the team (404/403, one read transaction) → body (413/
400, now team-bound) → the operation's own storage transaction, which
re-authenticates so a concurrent revocation cannot be outrun.

Every response — success, refusal, unknown route, crash — passes through
:class:`ProtocolHeaders`, which stamps ``Agmsg-Protocol-Version: 1`` and
``Cache-Control: no-store``, writes one access-log record
(:class:`relay.logformat.AccessRecord`: method, route template, status,
duration, bytes out — no body, credential, token, envelope, team, query
string or raw path) and, when ``/metrics`` is on, counts the request in the
app's own registry (relay/http/metrics.py). The route template reaches it
through the ASGI scope: each routed endpoint writes :data:`ROUTE_SCOPE_KEY`
before it runs, and Starlette's router updates that same scope dict in place.
Redirects are never produced: slash redirection is disabled and there is no
redirecting route.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime, timedelta
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, Router, request_response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from relay import openapi
from relay.errors import (
    InternalError,
    InvalidPairingToken,
    InvalidRequest,
    MethodNotAllowed,
    RelayError,
    RouteNotFound,
    Unauthenticated,
    Unavailable,
)
from relay.http import bodies, render
from relay.http.body_cache import BodyCache
from relay.http.connections import ConnectionGuard
from relay.http.intake import (
    query_params,
    read_json_body,
    require_bearer,
    require_no_body,
    require_protocol_version,
    require_team_id,
)
from relay.http.live import LiveHub, LiveOptions
from relay.http.metrics import METRICS_PATH, RelayMetrics, metrics_endpoint
from relay.http.metrics_group import MetricsGroup
from relay.limits import (
    PAIRING_TOKEN_TTL_SECONDS,
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
)
from relay.logformat import ACCESS_ATTRIBUTE, ACCESS_LOGGER, AccessRecord
from relay.secrets import hash_secret, new_credential_secret, new_uuid7, timestamp, utc_now
from relay.storage.base import RelayStore
from relay.storage.records import Access, TeamBinding
from wire.errors import WireError
from wire.http_v1 import paths
from wire.http_v1.live import LIVE_HEADER, LIVE_HEADER_VALUE, LIVE_WAIT, LiveWaitQuery
from wire.scalars import check_uuid7

__all__ = ["PAIRING_TOKEN_TTL", "ProtocolHeaders", "create_app"]

PAIRING_TOKEN_TTL = timedelta(seconds=PAIRING_TOKEN_TTL_SECONDS)
_access_log = logging.getLogger(ACCESS_LOGGER)
_error_log = logging.getLogger("relay.errors")
T = TypeVar("T")
Clock = Callable[[], datetime]
Endpoint = Callable[[Request], Awaitable[Response]]

_PROTOCOL_HEADER = b"agmsg-protocol-version"
_STAMPED = (
    (_PROTOCOL_HEADER, str(PROTOCOL_VERSION).encode()),
    (b"cache-control", b"no-store"),
)
_ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
_LIVE_QUERY = frozenset({"after", "read_after", "wait"})
#: Scope key holding the matched route template, written by each routed endpoint.
ROUTE_SCOPE_KEY = "relay.route"
UNMATCHED_ROUTE = "unmatched"


def _access_record(scope: Scope, status: int, started: float, bytes_out: int) -> AccessRecord:
    """What may be logged and counted about a request; the method set is closed."""
    method = str(scope.get("method", ""))
    return AccessRecord(
        method=method if method in _ALL_METHODS else "other",
        route=str(scope.get(ROUTE_SCOPE_KEY, UNMATCHED_ROUTE)),
        status=status,
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
        bytes_out=bytes_out,
    )


def _json_bytes(document: dict[str, Any]) -> bytes:
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def json_response(
    document: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(_json_bytes(document), status, headers, media_type="application/json")


class ProtocolHeaders:
    """Outermost ASGI layer: protocol headers, crash envelope, access log, request metrics."""

    def __init__(
        self,
        app: ASGIApp,
        server_instance_id: str,
        metrics: RelayMetrics | None = None,
        live: LiveHub | None = None,
    ) -> None:
        self._app = app
        self._server_instance_id = server_instance_id
        self._metrics = metrics
        #: The live wait's hub, for the server's shutdown (``None`` with ``--no-live``).
        self.live = live

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0
        bytes_out = 0
        response_started = False

        async def stamped_send(message: Message) -> None:
            nonlocal status, response_started, bytes_out
            if message["type"] == "http.response.body":
                bytes_out += len(message.get("body", b""))
            elif message["type"] == "http.response.start":
                response_started = True
                status = int(message["status"])
                headers = [
                    (name, value)
                    for name, value in message.get("headers", [])
                    if name.lower() not in (_PROTOCOL_HEADER, b"cache-control")
                ]
                headers.extend(_STAMPED)
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self._app(scope, receive, stamped_send)
        except Exception as exc:  # the envelope must hold even for a bug
            route = scope.get(ROUTE_SCOPE_KEY, UNMATCHED_ROUTE)
            _error_log.error("unhandled %s on %s", type(exc).__name__, route)
            if response_started:
                raise
            error = InternalError()
            response = json_response(render.error(error, None), error.status)
            await response(scope, receive, stamped_send)
        finally:
            access = _access_record(scope, status, started, bytes_out)
            _access_log.info("access", extra={ACCESS_ATTRIBUTE: access})
            if self._metrics is not None:
                self._metrics.observe(access)


@contextmanager
def _team_bound(access: Access) -> Iterator[None]:
    """Refusals after authorization carry the team (intake before it stays unbound)."""
    try:
        yield
    except RelayError as exc:
        raise exc.bind_team(access.team_id) from None


class _Handlers:
    def __init__(self, store: RelayStore, clock: Clock, live: LiveHub | None) -> None:
        self.store = store
        self.clock = clock
        self.live = live
        #: The roster and read-state bodies last rendered per team (relay/http/body_cache.py).
        self.bodies = BodyCache()

    # -- plumbing -----------------------------------------------------------------------------
    async def call(self, fn: Callable[..., T], *args: Any, team_id: str | None = None) -> T:
        """Run a storage operation off the event loop and bind its errors.

        401s are produced before resolution and stay unbound; anything else
        the store raises happened after the database (and, with ``team_id``,
        the team) was resolved.
        """
        try:
            return await run_in_threadpool(fn, *args)
        except RelayError as exc:
            if not isinstance(exc, Unauthenticated | InvalidPairingToken):
                exc.bind_server()
                if team_id is not None:
                    exc.bind_team(team_id)
            raise

    async def team_request(self, request: Request) -> tuple[Access, TeamBinding]:
        require_protocol_version(request)
        team_id = require_team_id(request)
        secret = require_bearer(request)
        access = Access(team_id, hash_secret(secret))
        binding = await self.call(self.store.authorize, access)
        return access, binding

    async def team_query(
        self, request: Request, allowed: frozenset[str] = frozenset()
    ) -> tuple[Access, dict[str, str]]:
        """A body-less team request: no body and a strict query string, team-bound."""
        access, _ = await self.team_request(request)
        with _team_bound(access):
            require_no_body(request)
            return access, query_params(request, allowed)

    async def team_body(self, request: Request, parse: Callable[[Any], T]) -> tuple[Access, T]:
        """A team request with a JSON body: no query string, one parsed body, team-bound."""
        access, _ = await self.team_request(request)
        with _team_bound(access):
            query_params(request, frozenset())
            body = await read_json_body(request)
            return access, parse(body.value)

    async def team_call(self, fn: Callable[..., T], access: Access, *args: Any) -> T:
        """A team-scoped storage operation; its errors are bound to the team."""
        return await self.call(fn, access, *args, team_id=access.team_id)

    def now(self) -> str:
        return timestamp(self.clock())

    @property
    def sid(self) -> str:
        return self.store.server_instance_id

    # -- endpoints ----------------------------------------------------------------------------
    async def health(self, request: Request) -> Response:
        supported = {"supported_versions": list(SUPPORTED_VERSIONS)}
        try:
            instance_id = await run_in_threadpool(self.store.probe)
        except Unavailable:
            return json_response(
                {"status": "unavailable", "protocol": supported, "database": "unavailable"},
                503,
                {"Retry-After": "1"},
            )
        return json_response(
            {
                "status": "ok",
                "server_instance_id": instance_id,
                "protocol": supported,
                "database": "ok",
            }
        )

    async def capabilities(self, request: Request) -> Response:
        access, _ = await self.team_query(request)
        snapshot = await self.team_call(self.store.capabilities, access)
        # The live wait is discovered here without changing the v1 document.
        headers = {LIVE_HEADER: LIVE_HEADER_VALUE} if self.live is not None else None
        return json_response(render.capabilities(self.sid, snapshot), headers=headers)

    async def post_messages(self, request: Request) -> Response:
        access, batch = await self.team_body(request, bodies.parse_message_batch)
        result = await self.team_call(self.store.post_messages, access, batch, self.now())
        if self.live is not None and any(ack.disposition == "stored" for ack in result.acks):
            self.live.notify(access.team_id)
        return json_response(render.post_result(self.sid, result))

    async def get_messages(self, request: Request) -> Response:
        access, params = await self.team_query(request, frozenset({"after", "limit"}))
        with _team_bound(access):
            after, limit = bodies.parse_messages_query(params.items())
        page = await self.team_call(self.store.page_messages, access, after, limit)
        return json_response(render.message_page(self.sid, page))

    async def members(self, request: Request) -> Response:
        access, _ = await self.team_query(request)
        roster = await self.team_call(self.store.members, access)
        body = self.bodies.body(
            paths.MEMBERS, access.team_id, roster, lambda r: _json_bytes(render.roster(self.sid, r))
        )
        return Response(body, media_type="application/json")

    async def read_state_sync(self, request: Request) -> Response:
        access, parsed = await self.team_body(request, bodies.parse_read_state_request)
        page = await self.team_call(self.store.sync_read_state, access, parsed)
        if self.live is not None and parsed.updates:
            self.live.notify(access.team_id)  # the refresh reads whether it moved
        body = self.bodies.body(
            paths.READ_STATE_SYNC,
            access.team_id,
            page,
            lambda p: _json_bytes(render.read_state_page(self.sid, p)),
        )
        return Response(body, media_type="application/json")

    async def live_wait(self, request: Request) -> Response:
        """Our extension's long poll (wire/http_v1/live.py, relay/http/live.py)."""
        assert self.live is not None  # the route exists only with the hub
        access, params = await self.team_query(request, _LIVE_QUERY)
        try:
            query = LiveWaitQuery.from_params(params)
        except WireError as exc:
            raise InvalidRequest(
                exc.rule, details={"field": exc.field}, team_id=access.team_id
            ) from None
        # Not inside _team_bound: a credential revoked mid-wait is a plain 401.
        head, woken = await self.live.wait(
            access, query, lambda: self.team_call(self.store.live_head, access)
        )
        return json_response(render.live_answer(self.sid, head, woken))

    async def pairing_exchange(self, request: Request) -> Response:
        require_protocol_version(request)
        query_params(request, frozenset())
        body = await read_json_body(request)
        token = bodies.parse_pairing_exchange(body.value)
        secret = new_credential_secret()
        result = await self.call(
            self.store.exchange_pairing_token,
            hash_secret(token),
            new_uuid7(),
            hash_secret(secret),
            self.now(),
        )
        return json_response(render.exchange_result(self.sid, result, secret))

    async def openapi_document(self, request: Request) -> Response:
        """Like health, a discovery endpoint: no team, credential or version needed."""
        require_no_body(request)
        return json_response(openapi.document())

    async def revoke(self, request: Request) -> Response:
        require_protocol_version(request)
        team_id = require_team_id(request)
        secret = require_bearer(request)
        require_no_body(request)
        query_params(request, frozenset())
        raw_id = request.path_params["credential_id"]
        try:
            credential_id = check_uuid7(raw_id, "credential_id")
        except WireError as exc:
            raise InvalidRequest(exc.rule, details={"field": exc.field}) from None
        access = Access(team_id, hash_secret(secret))
        result = await self.call(
            self.store.revoke_own_credential, access, credential_id, self.now()
        )
        return json_response(render.revoke_result(self.sid, result))


def _guard(
    route: str, methods: frozenset[str], endpoint: Endpoint, handlers: _Handlers
) -> Endpoint:
    """Route label, method check and the single error envelope around one endpoint."""

    async def guarded(request: Request) -> Response:
        request.scope[ROUTE_SCOPE_KEY] = route
        try:
            if request.method not in methods:
                raise MethodNotAllowed(headers={"Allow": ", ".join(sorted(methods))})
            return await endpoint(request)
        except RelayError as exc:
            sid = handlers.sid if exc.server_bound else None
            return json_response(render.error(exc, sid), exc.status, exc.headers)

    return guarded


class _AnyMethod:
    """One guarded endpoint as an ASGI app whose route matches every method.

    Starlette answers a method outside a route's ``methods`` itself, in plain
    text; a route built on an ASGI app instead of a function has no method
    set, so every method — ``BREW`` too — reaches :func:`_guard`, whose 405
    is the protocol's error body with the route's own ``Allow`` header
    (specs/relay.md, decision 4: wrong methods answer 405 in the envelope).
    """

    def __init__(self, endpoint: Endpoint) -> None:
        self._app = request_response(endpoint)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)


def create_app(
    store: RelayStore,
    *,
    clock: Clock = utc_now,
    metrics: bool = False,
    live: LiveOptions | None = LiveOptions(),  # noqa: B008 - frozen, never mutated
    connections: ConnectionGuard | None = None,
    metrics_group: MetricsGroup | None = None,
) -> ProtocolHeaders:
    """Build the v1 ASGI application around one store.

    ``metrics`` adds ``GET /metrics`` and the request instruments behind it;
    without it the path is an unknown route (404 in the error envelope). The
    decision of when to turn it on is the server's (relay/server.py).

    ``live`` offers our live wait extension with those bounds (the
    ``Syncengine-Live`` header on capabilities, and :data:`LIVE_WAIT`);
    ``None`` (``--no-live``) leaves both out: no header, and the path is an
    unknown route.

    ``connections`` is the server's connection rules (relay/server.py applies
    them at the transport); with metrics on, ``/metrics`` counts what they
    refused. ``metrics_group`` makes ``/metrics`` answer for a whole
    ``relay serve --workers N`` group (relay/http/metrics_group.py).
    """
    hub = LiveHub(store, live) if live is not None else None
    handlers = _Handlers(store, clock, hub)
    get, post = frozenset({"GET"}), frozenset({"POST"})
    table: list[tuple[str, frozenset[str], Endpoint]] = [
        (paths.HEALTH, get, handlers.health),
        (paths.CAPABILITIES, get, handlers.capabilities),
        (paths.MEMBERS, get, handlers.members),
        (paths.READ_STATE_SYNC, post, handlers.read_state_sync),
        (paths.PAIRING_EXCHANGE, post, handlers.pairing_exchange),
        ("/v1/credentials/{credential_id}/revoke", post, handlers.revoke),
        (openapi.OPENAPI_PATH, get, handlers.openapi_document),
    ]
    if hub is not None:
        table.append((LIVE_WAIT, get, handlers.live_wait))
    instruments = RelayMetrics(store, hub, connections, metrics_group) if metrics else None
    if instruments is not None:
        table.append((METRICS_PATH, get, metrics_endpoint(instruments)))
    routes = [
        Route(path, _AnyMethod(_guard(path, methods, endpoint, handlers)))
        for path, methods, endpoint in table
    ]

    async def messages(request: Request) -> Response:
        if request.method == "POST":
            return await handlers.post_messages(request)
        return await handlers.get_messages(request)

    routes.append(
        Route(
            paths.MESSAGES,
            _AnyMethod(_guard(paths.MESSAGES, frozenset({"GET", "POST"}), messages, handlers)),
        )
    )

    async def not_found(scope: Scope, receive: Receive, send: Send) -> None:
        error = RouteNotFound()
        await json_response(render.error(error, None), error.status)(scope, receive, send)

    @asynccontextmanager
    async def lifespan(_app: Any) -> AsyncIterator[None]:
        if hub is None:
            yield
            return
        async with hub.running():
            yield

    router = Router(routes, redirect_slashes=False, default=not_found, lifespan=lifespan)
    return ProtocolHeaders(router, store.server_instance_id, instruments, hub)
