"""The HTTP engine layer: the one seam between the sync engine and the relay.

- :mod:`~syncengine.http.client`: :class:`RelayClient`, one method per
  HTTP v1 endpoint, every answer strictly parsed and binding-checked;
- :mod:`~syncengine.http.retry`: the retry table of server/spec/v1.md
  "Error and retry semantics", in one place;
- :mod:`~syncengine.http.errors`: the exception tree (code, retryable,
  engine state, remediation);
- :mod:`~syncengine.http.credentials`: the in-memory secret and its 0600 file;
- :mod:`~syncengine.http.pairing`: :func:`connect`, health → pairing exchange →
  verified result (imported on first use, like the rest).

specs/engine.md §1 describes the behaviour as built. This package never
imports :mod:`relay`.
"""

from typing import TYPE_CHECKING

from syncengine._lazy import lazy_exports

if TYPE_CHECKING:
    from syncengine.http.client import ClientConfig, RelayBinding, RelayClient, check_endpoint
    from syncengine.http.credentials import Credential, Secret, load_credential, save_credential
    from syncengine.http.errors import (
        AccessDenied,
        BindingMismatch,
        CipherPolicyViolation,
        ClientUsageError,
        CredentialStoreError,
        DefinitiveFailure,
        EngineState,
        IntermediaryFailure,
        InvalidRequest,
        MessageConflict,
        PairingTokenRejected,
        ProtocolVersionUnsupported,
        ProtocolViolation,
        RateLimited,
        ReadStateLimitExceeded,
        RedirectRefused,
        RelayClientError,
        RelayRefusal,
        RelayRollback,
        RelayUnavailable,
        RequestTooLarge,
        ResponseTooLarge,
        ResyncRequired,
        SequenceExhausted,
        TeamNotFound,
        TlsVerificationFailed,
        TransientFailure,
        TransportFailure,
        Unauthenticated,
        UnsupportedCipher,
    )
    from syncengine.http.pairing import ConnectResult, connect
    from syncengine.http.retry import RetryPolicy

_EXPORTS: dict[str, str] = {
    "ClientConfig": "syncengine.http.client",
    "RelayBinding": "syncengine.http.client",
    "RelayClient": "syncengine.http.client",
    "check_endpoint": "syncengine.http.client",
    "ConnectResult": "syncengine.http.pairing",
    "connect": "syncengine.http.pairing",
    "Credential": "syncengine.http.credentials",
    "Secret": "syncengine.http.credentials",
    "load_credential": "syncengine.http.credentials",
    "save_credential": "syncengine.http.credentials",
    "AccessDenied": "syncengine.http.errors",
    "BindingMismatch": "syncengine.http.errors",
    "CipherPolicyViolation": "syncengine.http.errors",
    "ClientUsageError": "syncengine.http.errors",
    "CredentialStoreError": "syncengine.http.errors",
    "DefinitiveFailure": "syncengine.http.errors",
    "EngineState": "syncengine.http.errors",
    "IntermediaryFailure": "syncengine.http.errors",
    "InvalidRequest": "syncengine.http.errors",
    "MessageConflict": "syncengine.http.errors",
    "PairingTokenRejected": "syncengine.http.errors",
    "ProtocolVersionUnsupported": "syncengine.http.errors",
    "ProtocolViolation": "syncengine.http.errors",
    "RateLimited": "syncengine.http.errors",
    "ReadStateLimitExceeded": "syncengine.http.errors",
    "RedirectRefused": "syncengine.http.errors",
    "RelayClientError": "syncengine.http.errors",
    "RelayRefusal": "syncengine.http.errors",
    "RelayRollback": "syncengine.http.errors",
    "RelayUnavailable": "syncengine.http.errors",
    "RequestTooLarge": "syncengine.http.errors",
    "ResponseTooLarge": "syncengine.http.errors",
    "ResyncRequired": "syncengine.http.errors",
    "SequenceExhausted": "syncengine.http.errors",
    "TeamNotFound": "syncengine.http.errors",
    "TlsVerificationFailed": "syncengine.http.errors",
    "TransientFailure": "syncengine.http.errors",
    "TransportFailure": "syncengine.http.errors",
    "Unauthenticated": "syncengine.http.errors",
    "UnsupportedCipher": "syncengine.http.errors",
    "RetryPolicy": "syncengine.http.retry",
}

__all__ = [
    "AccessDenied",
    "BindingMismatch",
    "CipherPolicyViolation",
    "ClientConfig",
    "ClientUsageError",
    "ConnectResult",
    "Credential",
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
    "RelayBinding",
    "RelayClient",
    "RelayClientError",
    "RelayRefusal",
    "RelayRollback",
    "RelayUnavailable",
    "RequestTooLarge",
    "ResponseTooLarge",
    "ResyncRequired",
    "RetryPolicy",
    "Secret",
    "SequenceExhausted",
    "TeamNotFound",
    "TlsVerificationFailed",
    "TransientFailure",
    "TransportFailure",
    "Unauthenticated",
    "UnsupportedCipher",
    "check_endpoint",
    "connect",
    "load_credential",
    "save_credential",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
