"""HTTP API v1 schemas: typed builders and strict parsers for every body.

Both sides use this package: the relay builds what it sends and parses what
clients send; the client engine builds requests and validates every relay
answer before acting on it. Each document is a frozen dataclass with
``validate(field)``, ``to_obj()`` (which validates first, so nothing invalid
is ever built) and ``from_obj(value, ...)``. Request parsers are closed
(unknown members are errors, v1.md "Scope and conventions"); response
parsers ignore unknown members, as v1.md requires of clients, but check
every member they know. Checks that need the request a response answers are
separate ``check_matches`` methods. See specs/http-v1.md.

Modules: ``headers`` and ``paths`` (transport framing), ``body`` (size and
strict JSON), ``binding`` (common response members and the stop rule),
``health``, ``capabilities``, ``messages``, ``members``, ``read_state``,
``pairing`` and ``errors`` (envelope, code table, :class:`RelayError`).
"""

from wire.http_v1.binding import (
    BINDING_MEMBERS,
    BindingMismatchError,
    ResponseBinding,
    require_binding,
)
from wire.http_v1.body import (
    decode_request_body,
    decode_response_body,
    encode_body,
    require_empty_body,
)
from wire.http_v1.capabilities import Capabilities, PolicyEntry
from wire.http_v1.errors import (
    ERROR_CODES,
    BindingRule,
    ClientAction,
    ErrorCode,
    ErrorResponse,
    RelayError,
    intermediary_failure,
    is_retryable_status,
)
from wire.http_v1.health import Health, HealthStatus
from wire.http_v1.members import Member, MembersDocument, Registration
from wire.http_v1.messages import (
    Disposition,
    MessageBatch,
    MessagePage,
    MessagesQuery,
    OutgoingMessage,
    PulledMessage,
    PushAck,
    PushResponse,
)
from wire.http_v1.pairing import PairingRequest, PairingResponse, RevokeResponse
from wire.http_v1.read_state import (
    ExactItem,
    FrontierItem,
    ItemKind,
    PageKey,
    ReadStateItem,
    ReadStatePage,
    ReadStateRequest,
    ReadStateUpdate,
    ReadStateWalk,
)

__all__ = [
    "BINDING_MEMBERS",
    "ERROR_CODES",
    "BindingMismatchError",
    "BindingRule",
    "Capabilities",
    "ClientAction",
    "Disposition",
    "ErrorCode",
    "ErrorResponse",
    "ExactItem",
    "FrontierItem",
    "Health",
    "HealthStatus",
    "ItemKind",
    "Member",
    "MembersDocument",
    "MessageBatch",
    "MessagePage",
    "MessagesQuery",
    "OutgoingMessage",
    "PageKey",
    "PairingRequest",
    "PairingResponse",
    "PolicyEntry",
    "PulledMessage",
    "PushAck",
    "PushResponse",
    "ReadStateItem",
    "ReadStatePage",
    "ReadStateRequest",
    "ReadStateUpdate",
    "ReadStateWalk",
    "Registration",
    "RelayError",
    "ResponseBinding",
    "RevokeResponse",
    "decode_request_body",
    "decode_response_body",
    "encode_body",
    "intermediary_failure",
    "is_retryable_status",
    "require_binding",
    "require_empty_body",
]
