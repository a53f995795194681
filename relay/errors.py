"""One exception hierarchy for the relay, mapped to v1.md's error table.

Every protocol refusal is a :class:`RelayError` subclass that knows its HTTP
status and ``error.code``; the HTTP edge turns it into the single error
envelope (v1.md "Common response fields" and "Error and retry semantics").
Operator mistakes in the admin CLI are :class:`OperatorError`, which never
reaches HTTP and carries remediation text instead of a status.

::

    RelayError
    ├── InvalidRequest              400 invalid-request
    ├── Unauthenticated             401 unauthenticated
    ├── InvalidPairingToken         401 invalid-pairing-token
    ├── Forbidden                   403 forbidden
    ├── CredentialScopeViolation    403 credential-scope-violation
    ├── CipherPolicyViolation       403 cipher-policy-violation
    ├── TeamNotFound                404 team-not-found
    ├── RouteNotFound               404 not-found            (no v1 route)
    ├── MethodNotAllowed            405 method-not-allowed   (no v1 route)
    ├── MessageUuidConflict         409 message-uuid-conflict
    ├── PairingTokenConsumed        409 pairing-token-consumed
    ├── ReadStateLimitExceeded      409 read-state-limit-exceeded
    ├── ResyncRequired              410 resync-required
    ├── PairingTokenExpired         410 pairing-token-expired
    ├── RequestTooLarge             413 request-too-large
    ├── UnsupportedCipher           422 unsupported-cipher
    ├── UnsupportedProtocolVersion  426 unsupported-protocol-version
    ├── LiveWaitLimit               429 live-wait-limit      (the live wait extension)
    ├── InternalError               500 internal-error
    ├── Unavailable                 503 unavailable
    └── SequenceExhausted           507 sequence-exhausted

    OperatorError                   admin CLI only, exit status 2
    └── ProvisioningRejected

Binding fields: v1.md says errors raised before database/team resolution omit
``server_instance_id`` and ``team_id``; after the database is resolved the
server ID is present; after the team is resolved both are. An error records
how far resolution got (:attr:`RelayError.server_bound` and
:attr:`RelayError.team_id`), never a secret. Messages are fixed, operator-safe
strings: no credential, token, envelope or body ever appears in one.
"""

from __future__ import annotations

from typing import Any, ClassVar


class RelayError(Exception):
    """A definitive protocol refusal with its spec status and code."""

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal-error"
    default_message: ClassVar[str] = "internal error"

    def __init__(
        self,
        message: str | None = None,
        *,
        details: dict[str, Any] | None = None,
        team_id: str | None = None,
        server_bound: bool = False,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.message = message or self.default_message
        super().__init__(self.message)
        self.details: dict[str, Any] = dict(details or {})
        self.team_id = team_id
        # A team-bound error is necessarily also server-bound.
        self.server_bound = server_bound or team_id is not None
        self.extra: dict[str, Any] = dict(extra or {})
        self.headers: dict[str, str] = dict(headers or {})

    def bind_team(self, team_id: str) -> RelayError:
        """Record that the team was resolved before this error was raised."""
        if self.team_id is None:
            self.team_id = team_id
        self.server_bound = True
        return self

    def bind_server(self) -> RelayError:
        """Record that the database was resolved before this error was raised."""
        self.server_bound = True
        return self


class InvalidRequest(RelayError):
    status = 400
    code = "invalid-request"
    default_message = "malformed request"


class Unauthenticated(RelayError):
    status = 401
    code = "unauthenticated"
    default_message = "a valid bearer credential is required"


class InvalidPairingToken(RelayError):
    status = 401
    code = "invalid-pairing-token"
    default_message = "pairing token is not valid"


class Forbidden(RelayError):
    status = 403
    code = "forbidden"
    default_message = "credential cannot access this team"


class CredentialScopeViolation(RelayError):
    status = 403
    code = "credential-scope-violation"
    default_message = "a credential may revoke only itself"


class CipherPolicyViolation(RelayError):
    status = 403
    code = "cipher-policy-violation"
    default_message = "cipher is not write-allowed by current team policy"


class TeamNotFound(RelayError):
    status = 404
    code = "team-not-found"
    default_message = "team is not provisioned on this server"


class RouteNotFound(RelayError):
    status = 404
    code = "not-found"
    default_message = "no such v1 endpoint"


class MethodNotAllowed(RelayError):
    status = 405
    code = "method-not-allowed"
    default_message = "method not allowed on this endpoint"


class MessageUuidConflict(RelayError):
    status = 409
    code = "message-uuid-conflict"
    default_message = "message id already exists with a different payload"


class PairingTokenConsumed(RelayError):
    status = 409
    code = "pairing-token-consumed"
    default_message = "pairing token was already exchanged"


class ReadStateLimitExceeded(RelayError):
    status = 409
    code = "read-state-limit-exceeded"
    default_message = "unabsorbed exact reads exceed a member or team bound"


class ResyncRequired(RelayError):
    status = 410
    code = "resync-required"
    default_message = "cursor predates retained history"


class PairingTokenExpired(RelayError):
    status = 410
    code = "pairing-token-expired"
    default_message = "pairing token has expired"


class RequestTooLarge(RelayError):
    status = 413
    code = "request-too-large"
    default_message = "request body exceeds 2 MiB"


class UnsupportedCipher(RelayError):
    status = 422
    code = "unsupported-cipher"
    default_message = "envelope version or cipher cannot be stored by this server"


class UnsupportedProtocolVersion(RelayError):
    status = 426
    code = "unsupported-protocol-version"
    default_message = "a supported Agmsg-Protocol-Version header is required"


class LiveWaitLimit(RelayError):
    """Too many open live waits (per credential or per relay process).

    Our extension's own code (specs/live.md); a v1 client classifies an
    unknown code by its status, and 429 means "retry later".
    """

    status = 429
    code = "live-wait-limit"
    default_message = (
        "too many live waits are open; hold one wait per team and retry after Retry-After"
    )


class InternalError(RelayError):
    status = 500
    code = "internal-error"
    default_message = "internal error"


class Unavailable(RelayError):
    status = 503
    code = "unavailable"
    default_message = "database temporarily unavailable"


class SequenceExhausted(RelayError):
    status = 507
    code = "sequence-exhausted"
    default_message = "team sequence reached the signed 64-bit maximum"


class OperatorError(Exception):
    """An admin CLI refusal; ``remediation`` tells the operator what to do."""

    def __init__(self, message: str, remediation: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.remediation = remediation


class ProvisioningRejected(OperatorError):
    """A provisioning document or policy/retention request was refused atomically."""
