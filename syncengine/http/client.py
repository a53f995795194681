"""``RelayClient``: the one seam between the engine and the relay (HTTP API v1).

One method per endpoint of server/spec/v1.md; each returns the typed
document of :mod:`wire.http_v1` after strict parsing, or raises one error of
:mod:`syncengine.http.errors`. Every response goes through the same steps:

1. any 3xx is refused (redirects are never followed, so the bearer and team
   headers never reach another origin — v1.md "Scope and conventions");
2. ``Agmsg-Protocol-Version: 1`` must be present; without it only the status
   rule of :func:`~syncengine.http.retry.classify_status_without_envelope`
   applies (a proxy's 502/503/504 page is retryable, upstream #814);
3. the body is streamed and refused beyond a bound (:class:`ClientConfig`;
   a message page's bound follows from its ``limit``);
4. the binding IDs in the body — success *or* error — are compared with the
   stored binding before anything else is believed (v1.md "Common response
   fields"); a mismatch is :class:`~syncengine.http.errors.BindingMismatch`;
5. the document is parsed strictly and checked against the request it
   answers (acks vs. batch, page vs. query, revoke vs. path).

Requests are encoded once per call; retries (decided in
:mod:`syncengine.http.retry`) resend those exact bytes. Headers on every
request: ``Agmsg-Client-Version`` and ``Agmsg-Protocol-Version: 1``; team
endpoints add ``Agmsg-Team-ID`` and ``Authorization: Bearer`` (our profile
keeps v1.md's bearer-credential model, specs/http-v1.md). The credential
lives in memory in a :class:`~syncengine.http.credentials.Secret`, is put in
a header only when the request is built, and is redacted from any text the
relay sends back.
"""

from __future__ import annotations

import dataclasses
import functools
import ipaddress
import logging
import math
import os
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

import httpx

from syncengine import __version__
from syncengine.http import errors as e
from syncengine.http.credentials import Credential, Secret
from syncengine.http.guard import AttemptGuard, guard_client
from syncengine.http.retry import (
    RETRY_AFTER_STATUSES,
    RetryPolicy,
    call_with_retry,
    classify_error_response,
    classify_status_without_envelope,
    classify_transport_error,
    parse_retry_after,
)
from wire.errors import SchemaError, WireError
from wire.http_v1 import paths
from wire.http_v1.body import decode_response_body, encode_body
from wire.http_v1.capabilities import Capabilities
from wire.http_v1.headers import (
    AUTHORIZATION,
    CLIENT_VERSION,
    CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    LIVE_HEADER,
    LIVE_HEADER_VALUE,
    PROTOCOL_VERSION_HEADER,
    RETRY_AFTER,
    TEAM_ID,
    check_client_version,
    format_bearer,
    require_response_protocol_version,
)
from wire.http_v1.members import MembersDocument
from wire.http_v1.read_state import ReadStatePage, ReadStateRequest
from wire.limits import MAX_BLOB_CHARS, MAX_KEY_ID_BYTES, MAX_REQUEST_BYTES, PROTOCOL_VERSION
from wire.scalars import check_uuid7

if TYPE_CHECKING:
    # Only ``connect``, ``doctor`` and ``disconnect`` ask for health, pairing
    # or revocation, only a refusal carries an error envelope, and only a
    # pull or push with something to move parses a message page or batch:
    # those documents are imported where they are read, not by every
    # scheduled ``pull`` (start-up cost, issue #17).
    from wire.http_v1.health import Health
    from wire.http_v1.live import LiveWaitAnswer, LiveWaitQuery
    from wire.http_v1.messages import MessageBatch, MessagePage, PushResponse
    from wire.http_v1.pairing import PairingResponse, RevokeResponse

__all__ = [
    "DEFAULT_REQUEST_DEADLINE",
    "DEFAULT_TIMEOUT",
    "PAGE_BASE_BYTES",
    "PAGE_MESSAGE_BYTES",
    "REQUEST_TIMEOUT_ENV",
    "ClientConfig",
    "EncodedBatch",
    "RelayBinding",
    "RelayClient",
    "check_endpoint",
    "default_request_deadline",
    "page_response_bound",
]

T = TypeVar("T")

_log = logging.getLogger("syncengine.http")

#: Explicit per-phase timeouts (seconds); upstream's engine used 15 s per request.
DEFAULT_TIMEOUT = httpx.Timeout(connect=10.0, read=30.0, write=30.0, pool=10.0)
#: Seconds one HTTP request (one attempt, first byte sent to last byte read)
#: may take in total unless ``$SYNCENGINE_REQUEST_TIMEOUT`` says otherwise: a
#: relay dripping its answer cannot hold a scheduled ``sync`` past it (#33).
DEFAULT_REQUEST_DEADLINE = 60.0
#: The longest request bound accepted (the variable or ``request_deadline``).
MAX_REQUEST_DEADLINE = 3600.0
#: Names the request bound for every client this process builds.
REQUEST_TIMEOUT_ENV = "SYNCENGINE_REQUEST_TIMEOUT"
#: A live wait's answer is a few hundred bytes; nothing more is read.
_LIVE_ANSWER_BYTES = 16 * 1024

#: Bytes one pulled message may take in a page: the longest blob text plus the
#: other members (seq, id, time, envelope header, a fully escaped key_id).
PAGE_MESSAGE_BYTES = MAX_BLOB_CHARS + 6 * MAX_KEY_ID_BYTES + 2048
#: Bytes of a page besides its messages (binding members, cursor, slack).
PAGE_BASE_BYTES = 64 * 1024

_MiB = 1024 * 1024
_REDACTED = "<redacted>"


@dataclass(frozen=True, slots=True)
class RelayBinding:
    """The stream a client is bound to: cursors are keyed by these IDs (v1.md)."""

    server_instance_id: str
    team_id: str

    def __post_init__(self) -> None:
        try:
            check_uuid7(self.server_instance_id, "server_instance_id")
            check_uuid7(self.team_id, "team_id")
        except WireError as exc:
            raise e.ClientUsageError(f"invalid binding: {exc}") from None


def default_request_deadline(env: Mapping[str, str] | None = None) -> float:
    """``$SYNCENGINE_REQUEST_TIMEOUT`` (seconds, in (0, 3600]) when set, else
    :data:`DEFAULT_REQUEST_DEADLINE`; a value that is not such a number is a
    usage error naming the variable, never silently replaced."""
    raw = (os.environ if env is None else env).get(REQUEST_TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_REQUEST_DEADLINE
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_REQUEST_DEADLINE:
        raise e.ClientUsageError(
            f"{REQUEST_TIMEOUT_ENV} must be a number of seconds in "
            f"(0, {MAX_REQUEST_DEADLINE:g}], not {raw[:40]!r}"
        )
    return seconds


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """Every knob of the client in one place (STYLE: limits live together).

    ``verify`` is ``None`` for the default trust store (honouring
    ``SSL_CERT_FILE`` when ``trust_env``) or an SSL context that verifies;
    turning verification off is not possible.
    """

    timeout: httpx.Timeout = field(default_factory=lambda: DEFAULT_TIMEOUT)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    client_version: str = __version__
    #: Bound for every non-page success document (capabilities, members, ...).
    max_document_bytes: int = 8 * _MiB
    #: Ceiling for a message page whatever its limit: 1000 full 1 MiB blobs
    #: would be ~1.4 GB, which no engine should hold; ask for smaller pages.
    max_page_bytes: int = 64 * _MiB
    #: Bound for error bodies (a few KiB in practice).
    max_error_bytes: int = 1 * _MiB
    verify: ssl.SSLContext | None = None
    trust_env: bool = True
    max_connections: int = 4
    #: Seconds one attempt may take from sending the request to the last
    #: body byte, however the relay paces it (a per-read timeout alone lets a
    #: relay dripping one byte a second hold a command for ever). Default
    #: :data:`DEFAULT_REQUEST_DEADLINE`, or ``$SYNCENGINE_REQUEST_TIMEOUT``.
    request_deadline: float = field(default_factory=default_request_deadline)

    def __post_init__(self) -> None:
        try:
            check_client_version(self.client_version)
        except SchemaError as exc:
            raise e.ClientUsageError(str(exc)) from None
        for name in ("max_document_bytes", "max_page_bytes", "max_error_bytes"):
            if getattr(self, name) < 1:
                raise e.ClientUsageError(f"{name} must be positive")
        if self.verify is not None and (
            self.verify.verify_mode != ssl.CERT_REQUIRED or not self.verify.check_hostname
        ):
            raise e.ClientUsageError("TLS verification cannot be disabled")
        deadline = self.request_deadline
        if not math.isfinite(deadline) or not 0 < deadline <= MAX_REQUEST_DEADLINE:
            raise e.ClientUsageError(
                f"request_deadline must be a number of seconds in (0, {MAX_REQUEST_DEADLINE:g}]"
            )
        timeouts = (self.timeout.connect, self.timeout.read, self.timeout.write, self.timeout.pool)
        if any(value is None for value in timeouts):
            raise e.ClientUsageError("connect, read, write and pool timeouts must all be set")


def page_response_bound(limit: int, config: ClientConfig, cap: int | None = None) -> int:
    """How many bytes we read for a message page of ``limit`` messages."""
    bound = PAGE_BASE_BYTES + limit * PAGE_MESSAGE_BYTES
    bound = min(bound, config.max_page_bytes)
    return bound if cap is None else min(bound, cap)


def check_endpoint(url: str) -> httpx.URL:
    """An endpoint we may talk to: ``https``, or ``http`` to loopback/private IPs only.

    No userinfo, query or fragment (upstream's endpoint rule). The refusal
    never echoes the URL, which could carry a password in its userinfo.
    """
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        raise e.ClientUsageError("endpoint is not a valid URL") from None
    if parsed.scheme not in ("https", "http") or not parsed.host:
        raise e.ClientUsageError("endpoint must be an absolute http(s) URL")
    if parsed.userinfo or parsed.query or parsed.fragment:
        raise e.ClientUsageError("endpoint must not carry userinfo, a query or a fragment")
    if parsed.scheme == "http" and not _is_local_host(parsed.host):
        raise e.ClientUsageError("plain http is allowed only to loopback or private addresses")
    return parsed.copy_with(raw_path=parsed.raw_path.rstrip(b"/") or b"")


def _is_local_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private


@dataclass(frozen=True, slots=True)
class _Expected:
    """The IDs a response must name when it names them (``None``: not yet known)."""

    server_instance_id: str | None
    team_id: str | None


@dataclass(frozen=True, slots=True)
class _Call(Generic[T]):
    """One endpoint call, fixed before the first attempt so retries are identical."""

    method: str
    path: str
    parse: Callable[[Any], T]
    max_bytes: int
    expected: _Expected
    body: bytes | None = None
    params: tuple[tuple[str, str], ...] = ()
    team_scoped: bool = True
    #: Keys of the IDs in a success body, checked before strict parsing.
    id_keys: tuple[str, str] = ("server_instance_id", "team_id")
    #: Parses a non-200 body that is not an error envelope (health's 503).
    alternate: Callable[[int, Any, float | None], None] | None = None
    #: Extra checks of a classified error against the request (410's ``after``).
    check_error: Callable[[e.RelayClientError], None] | None = None
    #: Secrets that must never appear in text we keep (token in flight).
    redact: tuple[Secret, ...] = ()
    #: Return the 200 body unparsed, as a callable that parses it where called.
    defer: bool = False
    #: Keep the last 200 body and its document: the same bytes again are the
    #: same proven document, not parsed twice (a steady 1,000-member roster
    #: or read-state page every cycle; specs/read-state.md §8).
    memo: bool = False
    #: Checks of the document against this request, run on every answer.
    check: Callable[[T], T] | None = None

    @property
    def describe(self) -> str:
        return f"{self.method} {self.path}"


@dataclass(frozen=True, slots=True)
class EncodedBatch:
    """A batch and its request body, encoded once: every retry sends these bytes."""

    batch: MessageBatch
    body: bytes


class RelayClient:
    """The HTTP engine's client for one relay endpoint (and, when bound, one team).

    Construct unbound for discovery and pairing (:meth:`health`,
    :meth:`exchange_pairing_token`); every team endpoint needs ``binding``
    and ``credential``. ``sleep`` and ``clock`` are injected for tests.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        binding: RelayBinding | None = None,
        credential: Credential | None = None,
        config: ClientConfig | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        interrupt: Callable[[], None] | None = None,
    ) -> None:
        self._endpoint = check_endpoint(endpoint)
        self._config = config if config is not None else ClientConfig()
        if credential is not None:
            if binding is None:
                raise e.ClientUsageError("a credential needs the binding it belongs to")
            if (credential.server_instance_id, credential.team_id) != (
                binding.server_instance_id,
                binding.team_id,
            ):
                raise e.ClientUsageError("the credential belongs to another binding")
        self._binding = binding
        self._credential = credential
        self._sleep = sleep
        self._clock = clock
        #: Called between body chunks; raises to abandon a slow answer (the
        #: run loop's stop signal), so SIGTERM is not held up by a dripping relay.
        self._interrupt = interrupt
        #: The relay's ``Date`` header of the latest answer (``doctor``'s clock check).
        self.last_date: str | None = None
        #: Whether the latest capabilities answer offered the live wait
        #: (``None`` before one was read).
        self.live_offered: bool | None = None
        self._http = httpx.Client(
            base_url=self._endpoint,
            timeout=self._config.timeout,
            follow_redirects=False,
            verify=self._trust(),
            trust_env=self._config.trust_env,
            limits=httpx.Limits(
                max_connections=self._config.max_connections,
                max_keepalive_connections=self._config.max_connections,
            ),
            transport=transport,
        )
        self._guard = AttemptGuard(clock=clock, interrupt=interrupt)
        guard_client(self._http, self._guard)
        #: Per path of a ``memo`` call: the last 200 body and the document it proved.
        self._memos: dict[str, tuple[bytes, Any]] = {}

    def _trust(self) -> ssl.SSLContext | bool:
        """The TLS trust for this client: the configured context, the default
        trust store for ``https`` — or, for a plain ``http`` endpoint (loopback
        or private addresses only, see :func:`check_endpoint`), a verifying
        context that trusts nothing. Nothing is ever sent over TLS then (redirects are refused),
        and a start-up skips loading the CA bundle (about 45 ms); should TLS
        ever be attempted, it fails closed."""
        if self._config.verify is not None:
            return self._config.verify
        if self._endpoint.scheme == "http":
            return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, no anchors
        return True

    # --- lifecycle ------------------------------------------------------------

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RelayClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        bound = self._binding.team_id if self._binding is not None else None
        return f"RelayClient(endpoint={str(self._endpoint)!r}, team_id={bound!r})"

    @property
    def endpoint(self) -> str:
        return str(self._endpoint)

    @property
    def binding(self) -> RelayBinding | None:
        return self._binding

    # --- endpoints ------------------------------------------------------------

    def health(self) -> Health:
        """``GET /v1/health``: a ready relay, or a retryable unavailable error.

        Bound clients also check the instance (and, if echoed, team) IDs; an
        unavailable answer never yields a binding (v1.md "GET /v1/health").
        """
        # start-up pin: idle pull loads no wire.http_v1.health
        from wire.http_v1.health import Health, HealthStatus

        expected = self._expected(team=False)

        def parse(obj: Any) -> Health:
            health = Health.from_obj(obj, http_status=200)
            self._check_ids(health.server_instance_id, health.team_id, expected)
            if PROTOCOL_VERSION not in health.supported_versions:
                raise e.ProtocolVersionUnsupported(
                    "the relay does not advertise protocol version 1", status=200
                )
            return health

        def unavailable(status: int, obj: Any, retry_after: float | None) -> None:
            if status != 503:
                return
            try:
                health = Health.from_obj(obj, http_status=503)
            except WireError:
                return  # not a health document: read it as an error envelope
            self._check_ids(health.server_instance_id, health.team_id, expected)
            assert health.status is HealthStatus.UNAVAILABLE
            raise e.RelayUnavailable(
                "the relay reports its database unavailable", status=503, retry_after=retry_after
            )

        call = _Call(
            "GET",
            paths.HEALTH,
            parse,
            self._config.max_document_bytes,
            expected,
            team_scoped=False,
            alternate=unavailable,
        )
        return self._run(call)

    def capabilities(self) -> Capabilities:
        """``GET /v1/capabilities``: the team's write policy and complete history."""
        call = _Call(
            "GET",
            paths.CAPABILITIES,
            Capabilities.from_obj,
            self._config.max_document_bytes,
            self._expected(),
        )
        return self._run(call)

    def post_messages(self, batch: MessageBatch) -> PushResponse:
        """``POST /v1/messages``: store one batch; retries resend the identical bytes.

        A body over 2 MiB is refused locally as :class:`RequestTooLarge`
        (v1.md "Scope and conventions"), so the caller splits it just as
        after a relay 413.
        """
        return self.send_batch(self.encode_batch(batch))()

    def encode_batch(self, batch: MessageBatch) -> EncodedBatch:
        """The first third of :meth:`post_messages`: the exact request bytes.

        Validated once (a refusal is the caller's bug, as for every request
        built here), then written by :meth:`MessageBatch.encode` — the bytes
        of ``encode_body(batch.to_obj())`` without building 2,000 dicts."""
        body = self._build(batch.validate).encode()
        if len(body) > MAX_REQUEST_BYTES:
            raise e.RequestTooLarge(
                f"batch encodes to {len(body)} bytes, over the {MAX_REQUEST_BYTES}-byte limit"
            )
        return EncodedBatch(batch, body)

    def send_batch(self, encoded: EncodedBatch) -> Callable[[], PushResponse]:
        """The rest of :meth:`post_messages` in two halves, like
        :meth:`fetch_messages`: the request with every retry happens now, the
        returned callable parses and checks the answer where it is called."""
        # start-up pin: idle pull loads no wire.http_v1.messages
        from wire.http_v1.messages import PushResponse

        batch = encoded.batch

        def parse(obj: Any) -> PushResponse:
            return PushResponse.from_obj(obj).check_matches(batch)

        call = _Call(
            "POST",
            paths.MESSAGES,
            parse,
            self._config.max_document_bytes,
            self._expected(),
            body=encoded.body,
        )
        deferred = cast("_Call[Callable[[], PushResponse]]", dataclasses.replace(call, defer=True))
        return self._run(deferred)

    def get_messages(
        self, after: int, limit: int | None = None, *, max_response_bytes: int | None = None
    ) -> MessagePage:
        """``GET /v1/messages?after=&limit=``: one page, checked against the query.

        410 surfaces as :class:`ResyncRequired` (its ``after`` must be ours).
        The body bound follows from ``limit``; ``max_response_bytes`` lowers it.
        """
        return self._run(self._messages_call(after, limit, max_response_bytes))

    def fetch_messages(
        self, after: int, limit: int | None = None, *, max_response_bytes: int | None = None
    ) -> Callable[[], MessagePage]:
        """:meth:`get_messages` in two halves: the request (every retry and
        every error of the table) happens now, and the returned callable
        decodes, checks and parses the body where it is called.

        The engine requests the next page on a thread and parses it on its
        own: parsing holds the GIL, and a thread parsing beside the store's
        SQLite calls (which release it) would make each of those wait for it
        back.
        """
        call = self._messages_call(after, limit, max_response_bytes)
        deferred = cast("_Call[Callable[[], MessagePage]]", dataclasses.replace(call, defer=True))
        return self._run(deferred)

    def _messages_call(
        self, after: int, limit: int | None, max_response_bytes: int | None
    ) -> _Call[MessagePage]:
        # start-up pin: idle pull loads no wire.http_v1.messages
        from wire.http_v1.messages import MessagePage, MessagesQuery

        query = MessagesQuery(after, limit)
        params = tuple(self._build(query.to_params))
        bound = page_response_bound(query.effective_limit, self._config, max_response_bytes)

        def parse(obj: Any) -> MessagePage:
            return MessagePage.from_obj(obj).check_matches(query)

        def check_error(error: e.RelayClientError) -> None:
            if isinstance(error, e.ResyncRequired) and error.after != after:
                raise e.ProtocolViolation(
                    "410 resync-required names another cursor than the one requested",
                    status=error.status,
                )

        call = _Call(
            "GET",
            paths.MESSAGES,
            parse,
            bound,
            self._expected(),
            params=params,
            check_error=check_error,
        )
        return call

    def members(self) -> MembersDocument:
        """``GET /v1/members``: the roster snapshot."""
        call = _Call(
            "GET",
            paths.MEMBERS,
            MembersDocument.from_obj,
            self._config.max_document_bytes,
            self._expected(),
            memo=True,
        )
        return self._run(call)

    def read_state_sync(self, request: ReadStateRequest) -> ReadStatePage:
        """``POST /v1/read-state/sync``: merge updates, read one page (idempotent merge)."""
        body = encode_body(self._build(request.to_obj))

        def check(page: ReadStatePage) -> ReadStatePage:
            return page.check_matches(request)

        call = _Call(
            "POST",
            paths.READ_STATE_SYNC,
            ReadStatePage.from_obj,
            self._config.max_document_bytes,
            self._expected(),
            body=body,
            memo=True,
            check=check,
        )
        return self._run(call)

    def live_wait(self, query: LiveWaitQuery) -> LiveWaitAnswer:
        """Our Stage 3 extension's long poll (specs/live.md): answers when the
        team's head or read-state revision passes ``query``'s, or when its
        time is up. One attempt, never retried here: the caller paces its
        own retries (syncengine/engine/live.py), and this client's
        ``request_deadline`` bounds the attempt however the relay paces it.
        Nothing in the answer is acted on but as a hint to pull."""
        # start-up pin: idle pull loads no wire.http_v1.live
        from wire.http_v1.live import LIVE_WAIT, LiveWaitAnswer

        params = self._build(lambda: tuple(query.to_params().items()))
        call = _Call(
            "GET",
            LIVE_WAIT,
            LiveWaitAnswer.from_obj,
            _LIVE_ANSWER_BYTES,
            self._expected(),
            params=params,
        )
        return self._attempt(call)

    def exchange_pairing_token(
        self, token: Secret, *, server_instance_id: str | None = None
    ) -> PairingResponse:
        """``POST /v1/pairing/exchange``: a one-time token → a device credential.

        ``server_instance_id`` is the ID health discovered; the answer (and
        any error naming an instance) must carry it. A retry after a lost
        answer meets ``409 pairing-token-consumed``: the operator revokes the
        orphan and issues a new token (v1.md "Pairing").
        """
        # start-up pin: idle pull loads no wire.http_v1.pairing
        from wire.http_v1.pairing import PairingRequest, PairingResponse

        if server_instance_id is None and self._binding is not None:
            server_instance_id = self._binding.server_instance_id
        expected = _Expected(server_instance_id, None)
        body = encode_body(self._build(PairingRequest(token.reveal()).to_obj))
        call = _Call(
            "POST",
            paths.PAIRING_EXCHANGE,
            PairingResponse.from_obj,
            self._config.max_document_bytes,
            expected,
            body=body,
            team_scoped=False,
            id_keys=("server_instance_id", "remote_team_id"),
            redact=(token,),
        )
        return self._run(call)

    def revoke_credential(self, credential_id: str) -> RevokeResponse:
        """``POST /v1/credentials/<id>/revoke`` (no body; idempotent on retry)."""
        # start-up pin: idle pull loads no wire.http_v1.pairing
        from wire.http_v1.pairing import RevokeResponse

        path = self._build(lambda: paths.credential_revoke_path(credential_id))

        def parse(obj: Any) -> RevokeResponse:
            return RevokeResponse.from_obj(obj).check_matches(credential_id)

        call = _Call("POST", path, parse, self._config.max_document_bytes, self._expected())
        return self._run(call)

    # --- machinery ------------------------------------------------------------

    @staticmethod
    def _build(build: Callable[[], T]) -> T:
        """Build a request part; a schema refusal is the caller's bug, not the relay's."""
        try:
            return build()
        except WireError as exc:
            raise e.ClientUsageError(f"invalid request: {exc}") from None

    def _expected(self, *, team: bool = True) -> _Expected:
        if self._binding is None:
            if team:
                raise e.ClientUsageError("team endpoints need a bound client")
            return _Expected(None, None)
        if team and self._credential is None:
            raise e.ClientUsageError("team endpoints need the device credential")
        return _Expected(self._binding.server_instance_id, self._binding.team_id)

    def _headers(self, call: _Call[Any]) -> dict[str, str]:
        headers = {
            CLIENT_VERSION: self._config.client_version,
            PROTOCOL_VERSION_HEADER: str(PROTOCOL_VERSION),
            "Accept": JSON_CONTENT_TYPE,
            # The relay never compresses; nothing on the path gets to make
            # us inflate a bomb (a compressed answer is refused unread).
            "Accept-Encoding": "identity",
        }
        if call.team_scoped:
            assert self._binding is not None and self._credential is not None
            headers[TEAM_ID] = self._binding.team_id
            headers[AUTHORIZATION] = format_bearer(self._credential.secret.reveal())
        if call.body is not None:
            headers[CONTENT_TYPE] = JSON_CONTENT_TYPE
        return headers

    def _run(self, call: _Call[T]) -> T:
        return call_with_retry(
            lambda: self._attempt(call),
            self._config.retry,
            describe=call.describe,
            sleep=self._sleep,
            clock=self._clock,
        )

    def _attempt(self, call: _Call[T]) -> T:
        request = self._http.build_request(
            call.method,
            call.path,
            params=list(call.params) or None,
            content=call.body,
            headers=self._headers(call),
        )
        if self._interrupt is not None:
            self._interrupt()  # stopped (or out of time) before this attempt began
        started = self._clock()
        # From the first byte sent to the last byte read, however the relay
        # paces its status line, headers or body (syncengine.http.guard).
        with self._guard.attempt(self._config.request_deadline):
            try:
                response = self._http.send(request, stream=True)
            except httpx.HTTPError as exc:
                error = classify_transport_error(exc)
                _log.info("%s failed: %s", call.describe, error)
                raise error from None
            try:
                _log.debug(
                    "%s -> %d (%.1f ms)",
                    call.describe,
                    response.status_code,
                    (self._clock() - started) * 1000,
                )
                return self._handle(call, response, started)
            finally:
                response.close()
                # The relay has no use for cookies; never replay one a proxy set.
                self._http.cookies.clear()

    def _handle(self, call: _Call[T], response: httpx.Response, started: float) -> T:
        status = response.status_code
        self.last_date = response.headers.get("Date")
        if 300 <= status < 400:
            raise e.RedirectRefused(
                f"the relay answered a redirect ({_origin(response)}); not followed",
                status=status,
            )
        retry_after = parse_retry_after(response.headers.get(RETRY_AFTER))
        try:
            require_response_protocol_version(response.headers.get(PROTOCOL_VERSION_HEADER))
        except SchemaError:
            by_status = classify_status_without_envelope(status, retry_after)
            if by_status is not None:
                raise by_status from None
            raise e.ProtocolViolation(
                "the response lacks Agmsg-Protocol-Version: 1", status=status
            ) from None
        if status == 200:
            if call.path == paths.CAPABILITIES:
                # Our live wait is discovered here, beside a v1 document that
                # stays exactly v1 (wire/http_v1/live.py).
                self.live_offered = response.headers.get(LIVE_HEADER) == LIVE_HEADER_VALUE
            data = self._read(response, call.max_bytes, started)
            if call.defer:
                return cast(T, functools.partial(self._complete, call, data, status))
            return self._complete(call, data, status)
        if 200 <= status < 300 or status < 200:
            raise e.ProtocolViolation(f"unexpected HTTP {status}", status=status)
        raise self._error(call, response, retry_after, started)

    def _complete(self, call: _Call[T], data: bytes, status: int) -> T:
        """A 200 body → the document: strict JSON, binding IDs, then the schema,
        then the checks against the request.

        For a ``memo`` call, a body byte-identical to the last one of its path
        is that body's document: the same bytes decode, name the same IDs (the
        binding is fixed for this client) and parse to the same immutable value,
        so only the request checks run again."""
        memo = self._memos.get(call.path) if call.memo else None
        try:
            if memo is not None and memo[0] == data:
                document: T = memo[1]
            else:
                obj = self._decode(data, status)
                self._precheck_ids(obj, call)
                document = call.parse(obj)
                if call.memo:
                    self._memos[call.path] = (data, document)
            return document if call.check is None else call.check(document)
        except WireError as exc:
            raise e.ProtocolViolation(
                f"invalid {call.describe} answer: {exc}", status=status
            ) from None

    def _error(
        self,
        call: _Call[Any],
        response: httpx.Response,
        retry_after: float | None,
        started: float,
    ) -> e.RelayClientError:
        # start-up pin: idle pull loads no wire.http_v1.errors
        from wire.http_v1.errors import ErrorResponse, is_retryable_status

        status = response.status_code
        try:
            obj = self._decode(self._read(response, self._config.max_error_bytes, started), status)
            if isinstance(obj, Mapping):  # error envelopes name the team as ``team_id``
                server, team = obj.get("server_instance_id"), obj.get("team_id")
                self._check_ids(
                    server if isinstance(server, str) else None,
                    team if isinstance(team, str) else None,
                    call.expected,
                )
            if call.alternate is not None:
                call.alternate(status, obj, retry_after)
            parsed = ErrorResponse.from_obj(obj, status)
        except (e.ProtocolViolation, e.ResponseTooLarge, WireError) as exc:
            if not is_retryable_status(status):
                return e.ProtocolViolation(
                    f"HTTP {status} without a valid error envelope ({type(exc).__name__})",
                    status=status,
                )
            # The status rule still applies to a relay 5xx/429 we cannot read.
            transient = e.RateLimited if status == 429 else e.RelayUnavailable
            wait = retry_after if status in RETRY_AFTER_STATUSES else None
            return transient("unreadable error body", status=status, retry_after=wait)
        self._check_ids(parsed.server_instance_id, parsed.team_id, call.expected)
        error = classify_error_response(parsed, self._scrub(parsed.message, call), retry_after)
        if call.check_error is not None:
            call.check_error(error)
        return error

    def _read(self, response: httpx.Response, limit: int, started: float) -> bytes:
        """The body, within ``limit`` bytes and the attempt's deadline."""
        declared = response.headers.get("Content-Length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise e.ResponseTooLarge(
                f"response declares {declared} bytes, over the {limit}-byte bound",
                status=response.status_code,
            )
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise e.ProtocolViolation(
                f"the answer is compressed ({encoding[:32]}); compressed bodies are refused unread",
                status=response.status_code,
            )
        buffer = bytearray()
        deadline = started + self._config.request_deadline
        # An in-memory answer (a test transport) is already read; a network
        # answer streams its raw bytes, never decoded.
        chunks = [response.content] if response.is_stream_consumed else response.iter_raw()
        try:
            for chunk in chunks:
                buffer += chunk
                if len(buffer) > limit:
                    raise e.ResponseTooLarge(
                        f"response exceeds the {limit}-byte bound", status=response.status_code
                    )
                if self._interrupt is not None:
                    self._interrupt()  # the run loop's stop raises here
                if self._clock() > deadline:
                    raise e.TransportFailure(
                        f"the relay took longer than {self._config.request_deadline:g} s "
                        "to send its answer",
                        status=response.status_code,
                    )
        except httpx.HTTPError as exc:
            raise classify_transport_error(exc) from None
        return bytes(buffer)

    @staticmethod
    def _decode(data: bytes, status: int) -> Any:
        try:
            return decode_response_body(data)
        except WireError as exc:
            raise e.ProtocolViolation(f"body is not strict JSON ({exc})", status=status) from None

    def _precheck_ids(self, obj: Any, call: _Call[Any]) -> None:
        """Compare the binding IDs before strict parsing, so a foreign stream is
        reported as a mismatch even when its document is also malformed."""
        if not isinstance(obj, Mapping):
            return
        server_key, team_key = call.id_keys
        server, team = obj.get(server_key), obj.get(team_key)
        self._check_ids(
            server if isinstance(server, str) else None,
            team if isinstance(team, str) else None,
            call.expected,
        )

    @staticmethod
    def _check_ids(server: str | None, team: str | None, expected: _Expected) -> None:
        if (
            server is not None
            and expected.server_instance_id is not None
            and server != expected.server_instance_id
        ):
            raise e.BindingMismatch(
                f"the response names another server instance ({server}, not the binding's "
                f"{expected.server_instance_id}): the relay was rebuilt or replaced, and its "
                "history is not this binding's — nothing is merged"
            )
        if team is not None and expected.team_id is not None and team != expected.team_id:
            raise e.BindingMismatch("the response names another team")

    def _scrub(self, text: str, call: _Call[Any]) -> str:
        """Relay-supplied text with every secret we hold replaced."""
        secrets = list(call.redact)
        if self._credential is not None:
            secrets.append(self._credential.secret)
        for secret in secrets:
            text = text.replace(secret.reveal(), _REDACTED)
        return text


def _origin(response: httpx.Response) -> str:
    """Where a redirect points, as scheme://host only (a path could carry a secret)."""
    location = response.headers.get("Location")
    if location is None:
        return "no Location"
    try:
        target = response.request.url.join(location)
    except (httpx.InvalidURL, TypeError):
        return "unreadable Location"
    return f"to {target.scheme}://{target.host}"
