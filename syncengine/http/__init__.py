"""The HTTP engine layer: the one seam between the sync engine and the relay.

- :mod:`~syncengine.http.client`: :class:`RelayClient`, one method per
  HTTP v1 endpoint, every answer strictly parsed and binding-checked;
- :mod:`~syncengine.http.retry`: the retry table of server/spec/v1.md
  "Error and retry semantics", in one place;
- :mod:`~syncengine.http.errors`: the exception tree (code, retryable,
  engine state, remediation);
- :mod:`~syncengine.http.credentials`: the in-memory secret and its 0600 file;
- :mod:`~syncengine.http.connect`: health → pairing exchange → verified result.

specs/engine.md describes the behaviour as built. This package never
imports :mod:`relay`.
"""

from syncengine.http.client import ClientConfig, RelayBinding, RelayClient, check_endpoint
from syncengine.http.connect import ConnectResult, connect
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
from syncengine.http.retry import RetryPolicy

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
