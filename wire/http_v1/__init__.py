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

from typing import TYPE_CHECKING

from wire.lazy import lazy_exports

if TYPE_CHECKING:
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

_EXPORTS: dict[str, str] = {
    "BINDING_MEMBERS": "wire.http_v1.binding",
    "BindingMismatchError": "wire.http_v1.binding",
    "ResponseBinding": "wire.http_v1.binding",
    "require_binding": "wire.http_v1.binding",
    "decode_request_body": "wire.http_v1.body",
    "decode_response_body": "wire.http_v1.body",
    "encode_body": "wire.http_v1.body",
    "require_empty_body": "wire.http_v1.body",
    "Capabilities": "wire.http_v1.capabilities",
    "PolicyEntry": "wire.http_v1.capabilities",
    "ERROR_CODES": "wire.http_v1.errors",
    "BindingRule": "wire.http_v1.errors",
    "ClientAction": "wire.http_v1.errors",
    "ErrorCode": "wire.http_v1.errors",
    "ErrorResponse": "wire.http_v1.errors",
    "RelayError": "wire.http_v1.errors",
    "intermediary_failure": "wire.http_v1.errors",
    "is_retryable_status": "wire.http_v1.errors",
    "Health": "wire.http_v1.health",
    "HealthStatus": "wire.http_v1.health",
    "Member": "wire.http_v1.members",
    "MembersDocument": "wire.http_v1.members",
    "Registration": "wire.http_v1.members",
    "Disposition": "wire.http_v1.messages",
    "MessageBatch": "wire.http_v1.messages",
    "MessagePage": "wire.http_v1.messages",
    "MessagesQuery": "wire.http_v1.messages",
    "OutgoingMessage": "wire.http_v1.messages",
    "PulledMessage": "wire.http_v1.messages",
    "PushAck": "wire.http_v1.messages",
    "PushResponse": "wire.http_v1.messages",
    "PairingRequest": "wire.http_v1.pairing",
    "PairingResponse": "wire.http_v1.pairing",
    "RevokeResponse": "wire.http_v1.pairing",
    "ExactItem": "wire.http_v1.read_state",
    "FrontierItem": "wire.http_v1.read_state",
    "ItemKind": "wire.http_v1.read_state",
    "PageKey": "wire.http_v1.read_state",
    "ReadStateItem": "wire.http_v1.read_state",
    "ReadStatePage": "wire.http_v1.read_state",
    "ReadStateRequest": "wire.http_v1.read_state",
    "ReadStateUpdate": "wire.http_v1.read_state",
    "ReadStateWalk": "wire.http_v1.read_state",
}

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


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
