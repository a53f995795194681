"""Retry classification and the retry loop: the one place that decides.

server/spec/v1.md "Error and retry semantics" is the table implemented
here (specs/engine.md §1.4 shows it as built):

- unknown outcome — a timeout, lost connection, or HTTP 500/502/503/504,
  including a proxy's page without the protocol header (upstream #814) — is
  retried with the *identical* request: the caller hands over an immutable
  batch, the client encodes it once, and every attempt sends those bytes;
- 429 and 503 honour ``Retry-After`` (delta-seconds or an HTTP-date);
  otherwise the wait is full-jitter exponential backoff with a cap
  (tenacity's ``wait_random_exponential``);
- attempts and total elapsed time are bounded (:class:`RetryPolicy`); a wait
  that would overrun the time budget is not taken — the error surfaces with
  its ``retry_after`` so the run loop can wait instead;
- everything else is definitive and surfaces at once as its own type.

:func:`classify_error_response`, :func:`classify_status_without_envelope`
and :func:`classify_transport_error` turn a relay answer or an ``httpx``
exception into the typed error; :func:`call_with_retry` runs one request
under the policy. Sleeping and the clock are injected so tests never sleep.
"""

from __future__ import annotations

import email.utils
import logging
import math
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

import httpx

from syncengine.http import errors as e

if TYPE_CHECKING:
    # Parsed by the client, only when the relay answers with an error.
    from wire.http_v1.errors import ErrorResponse

__all__ = [
    "MAX_RETRY_AFTER",
    "RETRY_AFTER_STATUSES",
    "RetryPolicy",
    "backoff_window",
    "call_with_retry",
    "classify_error_response",
    "classify_status_without_envelope",
    "classify_transport_error",
    "is_retryable",
    "parse_retry_after",
]

T = TypeVar("T")

_log = logging.getLogger("syncengine.http")

#: Statuses whose ``Retry-After`` we honour (v1.md: SHOULD on 429, MAY on 503).
RETRY_AFTER_STATUSES = frozenset({429, 503})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Bounds of one request's retry loop (the run loop has its own backoff).

    ``backoff_base`` is the first jitter window in seconds; the window
    doubles per attempt up to ``backoff_cap``. ``max_attempts`` counts the
    first try. ``max_elapsed`` bounds the time spent including waits.
    """

    max_attempts: int = 5
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    max_elapsed: float = 120.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if not (0 < self.backoff_base <= self.backoff_cap):
            raise ValueError("need 0 < backoff_base <= backoff_cap")
        if not self.max_elapsed > 0:
            raise ValueError("max_elapsed must be positive")


# --- Retry-After -------------------------------------------------------------


#: The longest wait a ``Retry-After`` can impose (seconds): a relay, or
#: anything on the path, cannot park a client for longer than an hour per
#: answer, whatever it sends (specs/engine.md §1.4).
MAX_RETRY_AFTER = 3600.0


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """``Retry-After`` → seconds to wait (RFC 9110 §10.2.3), ``None`` if absent or bad.

    The relay sends delta-seconds; an intermediary may send an HTTP-date. A
    date in the past means "now" (0). Any digit count and any date are read
    without overflow and clamped to ``0 .. MAX_RETRY_AFTER``. A value we
    cannot read is ignored and the backoff applies.
    """
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        # Compare as text first: a few hundred digits must not reach float().
        if len(text.lstrip("0")) > 6:
            return MAX_RETRY_AFTER
        return min(float(int(text)), MAX_RETRY_AFTER)
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        return None  # RFC 9110 dates are GMT; a zone-less date is not one
    current = now if now is not None else datetime.now(UTC)
    try:
        seconds = (when - current).total_seconds()
    except OverflowError:  # pragma: no cover - datetime keeps years within 1..9999
        return MAX_RETRY_AFTER
    return min(max(0.0, seconds), MAX_RETRY_AFTER)


# --- classification ----------------------------------------------------------

_BY_CODE: Mapping[str, type[e.RelayClientError]] = {
    "invalid-request": e.InvalidRequest,
    "unauthenticated": e.Unauthenticated,
    "invalid-pairing-token": e.PairingTokenRejected,
    "pairing-token-consumed": e.PairingTokenRejected,
    "pairing-token-expired": e.PairingTokenRejected,
    "forbidden": e.AccessDenied,
    "credential-scope-violation": e.AccessDenied,
    "cipher-policy-violation": e.CipherPolicyViolation,
    "team-not-found": e.TeamNotFound,
    "message-uuid-conflict": e.MessageConflict,
    "read-state-limit-exceeded": e.ReadStateLimitExceeded,
    "resync-required": e.ResyncRequired,
    "request-too-large": e.RequestTooLarge,
    "unsupported-cipher": e.UnsupportedCipher,
    "unsupported-protocol-version": e.ProtocolVersionUnsupported,
    "rate-limited": e.RateLimited,
    "internal-error": e.RelayUnavailable,
    "unavailable": e.RelayUnavailable,
    "sequence-exhausted": e.SequenceExhausted,
}


def _class_for_status(status: int) -> type[e.RelayClientError]:
    """A code this client does not know is classified by its HTTP status."""
    if status == 429:
        return e.RateLimited
    if status in (500, 502, 503, 504):
        return e.RelayUnavailable
    if status == 413:
        return e.RequestTooLarge
    return e.RelayRefusal


def classify_error_response(
    response: ErrorResponse, message: str, retry_after: float | None
) -> e.RelayClientError:
    """A parsed error envelope → its typed error (``message`` already redacted)."""
    cls = _BY_CODE.get(response.code) or _class_for_status(response.status)
    wait = retry_after if response.status in RETRY_AFTER_STATUSES else None
    return cls(
        message,
        code=response.code,
        status=response.status,
        details=response.details,
        retry_after=wait,
    )


def classify_status_without_envelope(
    status: int, retry_after: float | None
) -> e.RelayClientError | None:
    """An answer lacking the protocol header: the status alone may still decide.

    v1.md: a 502/503/504 from an intermediary has no envelope and clients
    apply the status rule (#814). Decision D1 (specs/engine.md §1.3): a proxy's 413
    (request body limit) and 429 (edge rate limit) are also classified by
    status, because their meaning does not depend on the body and treating
    them as protocol violations would leave a batch unsplit or an engine
    refusing for nothing. Any other status without the header is ``None``:
    a protocol violation for the caller to raise.
    """
    wait = retry_after if status in RETRY_AFTER_STATUSES else None
    if status in (502, 503, 504):
        return e.IntermediaryFailure(
            "intermediary failure without a protocol envelope", status=status, retry_after=wait
        )
    if status == 429:
        return e.RateLimited("rate limited by an intermediary", status=status, retry_after=wait)
    if status == 413:
        return e.RequestTooLarge("request refused as too large by an intermediary", status=status)
    return None


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and everything it was caused by or raised during, each once."""
    found: list[BaseException] = []
    pending: list[BaseException] = [exc]
    while pending and len(found) < 16:
        current = pending.pop(0)
        if any(current is seen for seen in found):
            continue
        found.append(current)
        pending.extend(x for x in (current.__cause__, current.__context__) if x is not None)
    return found


def _ssl_verification_cause(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    for current in _chain(exc):
        if isinstance(current, ssl.SSLCertVerificationError):
            return current
    return None


def _cause_chain(exc: BaseException) -> str:
    """Flatten the cause chain so a TLS or DNS cause is visible (upstream #744)."""
    parts = []
    for current in _chain(exc)[:5]:
        text = str(current)
        parts.append(f"{type(current).__name__}: {text}" if text else type(current).__name__)
    return " <- ".join(parts)


def classify_transport_error(exc: httpx.HTTPError) -> e.RelayClientError:
    """An ``httpx`` exception → typed error. Header values never reach the text."""
    detail = _cause_chain(exc)
    if isinstance(exc, httpx.ConnectError) and _ssl_verification_cause(exc) is not None:
        return e.TlsVerificationFailed(f"TLS verification failed ({detail})")
    if isinstance(exc, httpx.UnsupportedProtocol | httpx.LocalProtocolError):
        return e.ProtocolViolation(f"request could not be sent ({detail})")
    if isinstance(exc, httpx.TimeoutException):
        return e.TransportFailure(f"timed out ({detail})", code="timeout")
    # Connection refused/reset, read/write loss, proxy and decoding failures:
    # the request may or may not have been applied — an unknown outcome.
    return e.TransportFailure(f"transport failure ({detail})")


def is_retryable(exc: BaseException) -> bool:
    """The single retry predicate: only our transient errors are retried."""
    return isinstance(exc, e.RelayClientError) and exc.retryable


# --- the loop ----------------------------------------------------------------


def call_with_retry(
    attempt: Callable[[], T],
    policy: RetryPolicy,
    *,
    describe: str,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
) -> T:
    """Run ``attempt`` until it succeeds, fails definitively, or the budget is spent.

    ``attempt`` must send the same bytes every time; this loop never builds
    requests. The error that surfaces carries ``attempts``. The first
    attempt runs here; only a retryable failure of it brings in the loop of
    :mod:`syncengine.http.retry_loop` (and tenacity), which goes on from
    attempt 2 with the budget counted from this first attempt's start.
    """
    started = clock()
    try:
        return attempt()
    except BaseException as exc:
        if not is_retryable(exc):
            raise
        first_failure = exc
    # start-up pin (HTTP_STACK): only this path loads tenacity
    from syncengine.http.retry_loop import retry_after_failure

    return retry_after_failure(
        attempt,
        first_failure,
        policy,
        is_retryable=is_retryable,
        describe=describe,
        sleep=sleep,
        clock=clock,
        started=started,
    )


def backoff_window(policy: RetryPolicy, attempt_number: int) -> float:
    """Upper bound of the jitter window after ``attempt_number`` failed attempts."""
    exponent = min(attempt_number - 1, 1023)
    return min(policy.backoff_cap, policy.backoff_base * math.pow(2, exponent))
