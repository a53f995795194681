"""The one exception hierarchy of the HTTP engine layer.

Every failure the relay client can report is a :class:`RelayClientError`.
Each class carries three things the engine and the operator need
(server/spec/v1.md "Error and retry semantics"; specs/engine.md §1.4):

- ``code``: the protocol error code when the relay (or an intermediary's
  status) implies one, otherwise a client-side code naming the condition;
- ``retryable``: whether repeating the *unchanged* request can help;
- ``state``: what the engine does next (:class:`EngineState`), and
  ``remediation``: one sentence an operator can act on.

The tree::

    RelayClientError
    ├── TransientFailure            retryable; state BACKOFF
    │   ├── TransportFailure        timeout or connection loss (unknown outcome)
    │   ├── IntermediaryFailure     a 502/503/504 page without the protocol header (#814)
    │   ├── RelayUnavailable        429-less retryable relay error: 500/502/503/504
    │   └── RateLimited             429 rate-limited
    └── DefinitiveFailure           never retried unchanged
        ├── BindingMismatch         another server instance or team answered (HALTED)
        ├── RelayRollback           the relay reports an older state than before (HALTED)
        ├── AckContradiction        a push ack its own snapshot contradicts (HALTED)
        ├── ProtocolViolation       the answer breaks HTTP v1 (REFUSED)
        ├── ResponseTooLarge        the answer exceeds our read bound (ADJUST)
        ├── RedirectRefused         any 3xx: redirects are never followed (REFUSED)
        ├── TlsVerificationFailed   the relay's certificate did not verify (REFUSED)
        ├── CredentialStoreError    the local credential file is unusable (REFUSED)
        └── RelayRefusal            a definitive relay error envelope (REFUSED)
            ├── InvalidRequest, Unauthenticated, AccessDenied, TeamNotFound,
            │   PairingTokenRejected, UnsupportedCipher, ProtocolVersionUnsupported
            ├── CipherPolicyViolation, ReadStateLimitExceeded, RequestTooLarge (ADJUST)
            ├── MessageConflict     409 message-uuid-conflict (HALTED)
            ├── ResyncRequired      410 resync-required (RESYNC_REQUIRED)
            └── SequenceExhausted   507 (WRITES_STOPPED)

Which status or code becomes which class is decided in one place,
:mod:`syncengine.http.retry`. Messages never contain a bearer credential or
pairing token: the client redacts them from relay-supplied text before an
exception is built. Usage errors (calling a team-scoped method on an unbound
client) are :class:`ClientUsageError`, outside the operational tree.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, ClassVar

__all__ = [
    "AccessDenied",
    "AckContradiction",
    "BindingMismatch",
    "CipherPolicyViolation",
    "ClientUsageError",
    "CredentialStoreError",
    "DefinitiveFailure",
    "EngineState",
    "IntermediaryFailure",
    "InvalidRequest",
    "MessageConflict",
    "PairingTokenRejected",
    "ProtocolVersionUnsupported",
    "ProtocolViolation",
    "RateLimited",
    "ReadStateLimitExceeded",
    "RedirectRefused",
    "RelayClientError",
    "RelayRefusal",
    "RelayRollback",
    "RelayUnavailable",
    "RequestTooLarge",
    "ResponseTooLarge",
    "ResyncRequired",
    "SequenceExhausted",
    "TeamNotFound",
    "TlsVerificationFailed",
    "TransientFailure",
    "TransportFailure",
    "Unauthenticated",
    "UnsupportedCipher",
]


class EngineState(enum.StrEnum):
    """What the engine does after an error of a class (specs/engine.md §1.5).

    None of these exits the process: upstream #773 (a definitive refusal
    killed the engine) and #814 (a proxy page did) are the lessons.
    """

    #: Retry the identical request with backoff; when the budget is spent the
    #: run loop backs off and starts a new cycle.
    BACKOFF = "backoff"
    #: The caller changes the request and carries on: split a batch (413),
    #: ask for a smaller page, refresh capabilities, block one member.
    ADJUST = "adjust"
    #: Record the refusal, keep the engine alive, do not repeat the request
    #: unchanged; an operator remedy is needed.
    REFUSED = "refused"
    #: Terminal for incremental pull until an operator approves a resync; the
    #: cursor is never reset automatically (v1.md "GET /v1/messages").
    RESYNC_REQUIRED = "resync-required"
    #: 507: the team sequence is exhausted; writes stop, reads continue.
    WRITES_STOPPED = "writes-stopped"
    #: Stop syncing this binding: a cursor must never move on an answer from
    #: another stream, and a conflicting wire id means local corruption.
    HALTED = "halted"


class ClientUsageError(Exception):
    """The caller used the client wrongly (e.g. a team call without a binding)."""


class RelayClientError(Exception):
    """Base of every operational failure of the HTTP engine layer."""

    default_code: ClassVar[str] = "client-error"
    retryable: ClassVar[bool] = False
    state: ClassVar[EngineState] = EngineState.REFUSED
    remediation: ClassVar[str] = "Inspect the engine log and the relay's status."

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        details: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code if code is not None else self.default_code
        self.status = status
        self.details: dict[str, Any] = dict(details or {})
        #: Seconds the relay asked us to wait (429/503 ``Retry-After``), if any.
        self.retry_after = retry_after
        #: How many attempts the retry loop made before this error surfaced.
        self.attempts = 1

    def __str__(self) -> str:
        prefix = f"HTTP {self.status} " if self.status is not None else ""
        return f"{prefix}{self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, status={self.status!r})"


# --- transient ---------------------------------------------------------------


class TransientFailure(RelayClientError):
    """Unknown outcome or temporary refusal: repeat the exact same request."""

    retryable = True
    state = EngineState.BACKOFF
    default_code = "unavailable"
    remediation = "Nothing to do if it clears; if it persists, check the relay and network."


class TransportFailure(TransientFailure):
    """Timeout or lost connection; a POST may or may not have been applied."""

    default_code = "transport-error"
    remediation = (
        "Check network reachability of the relay endpoint; the engine retries the same batch."
    )


class IntermediaryFailure(TransientFailure):
    """A proxy's 502/503/504 page without ``Agmsg-Protocol-Version`` (upstream #814)."""

    remediation = "A proxy in front of the relay is failing; the engine keeps retrying."


class RelayUnavailable(TransientFailure):
    """The relay answered 500/502/503/504 (or an unready health probe)."""

    remediation = "The relay or its database is temporarily unavailable; the engine retries."


class RateLimited(TransientFailure):
    """429 rate-limited: wait at least ``Retry-After`` before the next attempt."""

    default_code = "rate-limited"
    remediation = "The relay is throttling this device; the engine waits as asked."


# --- definitive --------------------------------------------------------------


class DefinitiveFailure(RelayClientError):
    """Repeating the request unchanged cannot help."""


class BindingMismatch(DefinitiveFailure):
    """A response names another server instance or team than the stored binding."""

    default_code = "binding-mismatch"
    state = EngineState.HALTED
    remediation = (
        "The endpoint now reaches a different relay database or team; verify the endpoint. "
        "If the relay was rebuilt, bind the team to it anew: 'syncengine disconnect --team T', "
        "then 'syncengine connect' with a token from the new relay (messages and read state "
        "are kept; each machine publishes only its own). No cursor was moved."
    )


class RelayRollback(DefinitiveFailure):
    """An authenticated snapshot older than one this machine already saw: the
    retention floor or ``current_seq`` went backwards (a relay restored from
    a backup, replaced, or lying). Nothing moves on it (issue #14)."""

    default_code = "relay-rollback"
    state = EngineState.HALTED
    remediation = (
        "The relay now reports an older state than it did before (restored from a backup, "
        "replaced, or misbehaving). Nothing was moved; verify the relay and its database "
        "before syncing again."
    )


class AckContradiction(DefinitiveFailure):
    """A push acknowledgement that the relay's own authenticated snapshot
    contradicts: a ``duplicate`` at a sequence beyond the ``current_seq`` of a
    snapshot fetched after the answer, or a ``stored`` (new) message at a
    sequence the preflight snapshot already counted. Nothing of the answer is
    recorded (issue #14; specs/sync-stage1.md §8.20)."""

    default_code = "ack-contradiction"
    state = EngineState.HALTED
    remediation = (
        "The relay acknowledged a push at a sequence its own state contradicts; nothing of "
        "that answer was recorded. Verify the relay, then run 'syncengine resume': the same "
        "messages are sent again under the same IDs, never twice."
    )


class ProtocolViolation(DefinitiveFailure):
    """The answer breaks HTTP v1 (schema, header, status or pairing with the request)."""

    default_code = "protocol-violation"
    remediation = (
        "The relay (or something impersonating it) sent an invalid answer; check the "
        "endpoint and the relay version."
    )


class ResponseTooLarge(DefinitiveFailure):
    """The answer exceeds the bound we are willing to read for that request."""

    default_code = "response-too-large"
    state = EngineState.ADJUST
    remediation = "Request a smaller page (lower limit) or raise the client's response bound."


class RedirectRefused(DefinitiveFailure):
    """Any 3xx: redirects are never followed (v1.md "Scope and conventions")."""

    default_code = "redirect-refused"
    remediation = (
        "The endpoint redirects; configure the final relay URL explicitly "
        "(credentials are never forwarded to another origin)."
    )


class TlsVerificationFailed(DefinitiveFailure):
    """The relay's TLS certificate did not verify; verification is never turned off."""

    default_code = "tls-verification-failed"
    remediation = (
        "Install the relay's CA certificate (e.g. via SSL_CERT_FILE) or fix the certificate."
    )


class CredentialStoreError(DefinitiveFailure):
    """The local credential file is missing, unreadable, malformed or not private."""

    default_code = "credential-store"
    remediation = (
        "Restore the credential file with mode 0600, or pair this device again with a new token."
    )


class RelayRefusal(DefinitiveFailure):
    """A definitive error envelope from the relay; ``code`` is the relay's code."""

    default_code = "refused"
    remediation = "The relay refused the request; see the error code."


class InvalidRequest(RelayRefusal):
    """400 invalid-request: our request broke the protocol; never resent unchanged."""

    default_code = "invalid-request"
    remediation = "This client sent an invalid request; upgrade syncengine or report a bug."


class Unauthenticated(RelayRefusal):
    """401 unauthenticated: the bearer credential is absent, invalid or revoked."""

    default_code = "unauthenticated"
    remediation = "The device credential was revoked or is invalid; pair this device again."


class AccessDenied(RelayRefusal):
    """403 forbidden / credential-scope-violation: the credential cannot do this."""

    default_code = "forbidden"
    remediation = "This credential has no access to the team; ask the relay operator."


class TeamNotFound(RelayRefusal):
    """404 team-not-found: the immutable team is not provisioned on this relay."""

    default_code = "team-not-found"
    remediation = "The team does not exist on this relay; check the endpoint and team binding."


class PairingTokenRejected(RelayRefusal):
    """401/409/410 on pairing exchange: unknown, consumed or expired token."""

    default_code = "invalid-pairing-token"
    remediation = (
        "Ask the operator for a new pairing token; if a previous attempt may have "
        "succeeded, the operator should revoke the orphan credential."
    )


class UnsupportedCipher(RelayRefusal):
    """422 unsupported-cipher: the relay cannot store this envelope version/cipher."""

    default_code = "unsupported-cipher"
    remediation = "The relay cannot store this cipher; upgrade the relay or reconfigure the team."


class ProtocolVersionUnsupported(RelayRefusal):
    """426 (or a health probe without v1): no protocol version in common."""

    default_code = "unsupported-protocol-version"
    remediation = "The relay does not speak protocol v1; upgrade one side."


class CipherPolicyViolation(RelayRefusal):
    """403 cipher-policy-violation: refresh capabilities, never resend unchanged."""

    default_code = "cipher-policy-violation"
    state = EngineState.ADJUST
    remediation = "The team's write policy changed; the engine refreshes capabilities."


class ReadStateLimitExceeded(RelayRefusal):
    """409 read-state-limit-exceeded: block ``member_id`` and retry without it."""

    default_code = "read-state-limit-exceeded"
    state = EngineState.ADJUST
    remediation = "One member has too many out-of-order reads; it is blocked until remedied."

    @property
    def member_id(self) -> str:
        return str(self.details["member_id"])


class RequestTooLarge(RelayRefusal):
    """413 request-too-large: split the batch, keeping every durable id/envelope."""

    default_code = "request-too-large"
    state = EngineState.ADJUST
    remediation = "The engine halves the batch; a single message still too large is reported."


class MessageConflict(RelayRefusal):
    """409 message-uuid-conflict: a wire id exists with another envelope."""

    default_code = "message-uuid-conflict"
    state = EngineState.HALTED
    remediation = (
        "A wire id was reused with a different envelope: local state is inconsistent; "
        "stop and investigate before syncing again."
    )

    @property
    def message_id(self) -> str:
        return str(self.details["id"])


class ResyncRequired(RelayRefusal):
    """410 resync-required: the cursor lies below the relay's retention floor."""

    default_code = "resync-required"
    state = EngineState.RESYNC_REQUIRED
    remediation = (
        "History before the relay's floor is gone; an operator must approve a resync "
        "to the floor. The cursor is never reset automatically."
    )

    @property
    def after(self) -> int:
        return int(self.details["after"])

    @property
    def min_available_seq(self) -> int:
        return int(self.details["min_available_seq"])


class SequenceExhausted(RelayRefusal):
    """507 sequence-exhausted: no new writes can ever be stored for this team."""

    default_code = "sequence-exhausted"
    state = EngineState.WRITES_STOPPED
    remediation = "The team's sequence is exhausted; writes stop, reads continue."
