"""The OpenAPI 3.1 description of the relay's HTTP API v1, served at ``/v1/openapi.json``.

Written by hand from server/spec/v1.md so that it documents the protocol,
not an implementation accident; ``tests/relay/test_openapi.py`` keeps it true
by validating live responses against these schemas and by checking that the
documented routes are exactly the served ones, and
``tests/relay/test_openapi_schemathesis.py`` fuzzes every operation of a live
relay against it. Response schemas are closed
(``additionalProperties: false``) for the same reason: the test then fails
when the relay grows a field the document does not mention.
"""

from __future__ import annotations

from typing import Any

from relay.limits import (
    MAX_BATCH,
    MAX_PAGE_LIMIT,
    MAX_READ_EXACT_IDS,
    MAX_READ_PAGE_LIMIT,
    MAX_READ_UPDATE_MEMBERS,
    MAX_SECRET_CHARS,
)
from wire.limits import MAX_KEY_ID_BYTES

__all__ = ["OPENAPI_PATH", "document"]

OPENAPI_PATH = "/v1/openapi.json"

_SEQ = {"type": "string", "pattern": "^(0|[1-9][0-9]{0,18})$"}
_UUID4 = {
    "type": "string",
    "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
}
_UUID7 = {
    "type": "string",
    "pattern": "^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
}
_TIMESTAMP = {
    "type": "string",
    "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z$",
}
_CIPHER = {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]{0,63}$"}
# Canonical decimal 1..MAX_PAGE_LIMIT (wire.http_v1.messages); test_openapi pins the bound.
_PAGE_LIMIT = "^([1-9][0-9]{0,2}|1000)$"
# RFC 6750 b64token, as wire.http_v1.headers.check_opaque_secret accepts it.
_SECRET = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_SECRET_CHARS,
    "pattern": "^[A-Za-z0-9._~+/-]+=*$",
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _closed(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
    }


_BINDING = {
    "protocol_version": {"const": 1},
    "server_instance_id": _UUID7,
    "team_id": _UUID7,
    "team_name": {"type": "string"},
    "min_available_seq": _SEQ,
}

_POLICY = {
    "policy_revision": _SEQ,
    "effective_from_seq": _SEQ,
    "accepted_envelope_versions": {"type": "array", "items": {"type": "integer"}},
    "write_allowed_ciphers": {"type": "array", "items": _CIPHER},
}

# Canonical padded base64 (wire.envelope.decode_blob): whole quanta, and the unused
# bits of a padded final quantum are zero.
_BLOB = (
    "^(?:[A-Za-z0-9+/]{4})*"
    "(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/][AQgw]==|[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=)$"
)

_ENVELOPE = _closed(
    {
        "v": {"type": "integer", "minimum": 0, "maximum": 2**32 - 1},
        "cipher": _CIPHER,
        "key_id": {
            "oneOf": [
                {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": MAX_KEY_ID_BYTES,
                    "pattern": "^[^\\x00-\\x1f\\x7f]+$",
                },
                {"type": "null"},
            ]
        },
        "blob": {"type": "string", "pattern": _BLOB},
    }
)

_SCHEMAS: dict[str, Any] = {
    "Envelope": _ENVELOPE,
    "Error": {
        "type": "object",
        "properties": {
            "protocol_version": {"const": 1},
            "server_instance_id": _UUID7,
            "team_id": _UUID7,
            "team_name": {"type": "string"},
            "min_available_seq": _SEQ,
            "error": _closed(
                {
                    "code": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,63}$"},
                    "message": {"type": "string"},
                    "details": {"type": "object"},
                }
            ),
        },
        "required": ["protocol_version", "error"],
        "additionalProperties": False,
    },
    "Health": _closed(
        {
            "status": {"enum": ["ok", "unavailable"]},
            "server_instance_id": _UUID7,
            "protocol": _closed(
                {"supported_versions": {"type": "array", "items": {"type": "integer"}}}
            ),
            "database": {"enum": ["ok", "unavailable"]},
        },
        ["status", "protocol", "database"],
    ),
    "PolicyEntry": _closed(_POLICY),
    "Capabilities": _closed(
        {
            **_BINDING,
            "current_seq": _SEQ,
            "next_sequence_boundary": {"oneOf": [_SEQ, {"type": "null"}]},
            **_POLICY,
            "max_blob_bytes": _SEQ,
            "policy_history": {"type": "array", "minItems": 1, "items": _ref("PolicyEntry")},
        }
    ),
    "MessageBatch": _closed(
        {
            "messages": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_BATCH,
                "items": _closed({"id": _UUID4, "envelope": _ref("Envelope")}),
            }
        }
    ),
    "PushResponse": _closed(
        {
            **_BINDING,
            "policy_revision": _SEQ,
            "acks": {
                "type": "array",
                "items": _closed(
                    {
                        "id": _UUID4,
                        "server_seq": _SEQ,
                        "disposition": {"enum": ["stored", "duplicate"]},
                    }
                ),
            },
        }
    ),
    "MessagePage": _closed(
        {
            **_BINDING,
            "messages": {
                "type": "array",
                "maxItems": MAX_PAGE_LIMIT,
                "items": _closed(
                    {
                        "server_seq": _SEQ,
                        "id": _UUID4,
                        "server_received_at": _TIMESTAMP,
                        "envelope": _ref("Envelope"),
                    }
                ),
            },
            "next_after": _SEQ,
            "has_more": {"type": "boolean"},
        }
    ),
    "Members": _closed(
        {
            **_BINDING,
            "members_revision": _SEQ,
            "members": {
                "type": "array",
                "items": _closed(
                    {
                        "member_id": _UUID7,
                        "name": {"type": "string"},
                        "registrations": {
                            "type": "array",
                            "items": _closed(
                                {
                                    "registration_id": _UUID7,
                                    "installation_id": _UUID7,
                                    "type": {"type": "string"},
                                }
                            ),
                        },
                    }
                ),
            },
        }
    ),
    "ReadKey": {
        "oneOf": [
            _closed({"member_id": _UUID7, "kind": {"const": "frontier"}}),
            _closed({"member_id": _UUID7, "kind": {"const": "exact"}, "wire_id": _UUID4}),
        ]
    },
    "ReadStateRequest": _closed(
        {
            "updates": {
                "type": "array",
                "maxItems": MAX_READ_UPDATE_MEMBERS,
                "items": _closed(
                    {
                        "member_id": _UUID7,
                        "server_seq": _SEQ,
                        "exact_wire_ids": {
                            "type": "array",
                            "maxItems": MAX_READ_EXACT_IDS,
                            "uniqueItems": True,
                            "items": _UUID4,
                        },
                    }
                ),
            },
            "page_after": {"oneOf": [_ref("ReadKey"), {"type": "null"}]},
            "page_limit": {"type": "integer", "minimum": 1, "maximum": MAX_READ_PAGE_LIMIT},
        }
    ),
    "ReadStatePage": _closed(
        {
            **_BINDING,
            "current_seq": _SEQ,
            "items": {
                "type": "array",
                "maxItems": MAX_READ_PAGE_LIMIT,
                "items": {
                    "oneOf": [
                        _closed(
                            {"kind": {"const": "frontier"}, "member_id": _UUID7, "server_seq": _SEQ}
                        ),
                        _closed(
                            {"kind": {"const": "exact"}, "member_id": _UUID7, "wire_id": _UUID4}
                        ),
                    ]
                },
            },
            "next_page_after": {"oneOf": [_ref("ReadKey"), {"type": "null"}]},
            "has_more": {"type": "boolean"},
        }
    ),
    "PairingRequest": _closed({"token": _SECRET}),
    "PairingResponse": _closed(
        {
            "protocol_version": {"const": 1},
            "server_instance_id": _UUID7,
            "remote_team_id": _UUID7,
            "remote_team_name": {"type": "string"},
            "credential_id": _UUID7,
            "credential": _SECRET,
            "capabilities": _ref("Capabilities"),
        }
    ),
    "RevokeResponse": _closed(
        {**_BINDING, "credential_id": _UUID7, "revoked": {"const": True}, "revoked_at": _TIMESTAMP}
    ),
}

_VERSION = {
    "name": "Agmsg-Protocol-Version",
    "in": "header",
    "required": True,
    "schema": {"const": "1"},
}
_TEAM = {"name": "Agmsg-Team-ID", "in": "header", "required": True, "schema": _UUID7}
_TEAM_SCOPED = [_VERSION, _TEAM]
_BEARER: list[dict[str, list[str]]] = [{"bearer": []}]


def _json(schema: str) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": _ref(schema)}}}


def _responses(ok: str, *errors: int) -> dict[str, Any]:
    out: dict[str, Any] = {"200": {"description": "success", **_json(ok)}}
    for status in errors:
        out[str(status)] = {"description": "error envelope", **_json("Error")}
    return out


_TEAM_ERRORS = (400, 401, 403, 404, 426, 500, 503)


def document() -> dict[str, Any]:
    """The OpenAPI document (a fresh copy on every call)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "syncengine relay — HTTP API v1",
            "version": "1",
            "description": "Opaque sealed-envelope relay (server/spec/v1.md, bearer profile). "
            "Every response carries Agmsg-Protocol-Version: 1 and Cache-Control: no-store.",
        },
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "paths": {
            "/v1/health": {
                "get": {
                    "summary": "Readiness and version discovery",
                    "responses": {
                        "200": {"description": "ready", **_json("Health")},
                        "503": {"description": "database unavailable", **_json("Health")},
                    },
                }
            },
            "/v1/capabilities": {
                "get": {
                    "summary": "Write policy and its complete history",
                    "parameters": _TEAM_SCOPED,
                    "security": _BEARER,
                    "responses": _responses("Capabilities", *_TEAM_ERRORS),
                }
            },
            "/v1/messages": {
                "post": {
                    "summary": "Store one atomic batch",
                    "parameters": _TEAM_SCOPED,
                    "security": _BEARER,
                    "requestBody": {"required": True, **_json("MessageBatch")},
                    "responses": _responses("PushResponse", *_TEAM_ERRORS, 409, 413, 422, 507),
                },
                "get": {
                    "summary": "One page of the team stream",
                    "parameters": [
                        *_TEAM_SCOPED,
                        {"name": "after", "in": "query", "required": True, "schema": _SEQ},
                        {
                            "name": "limit",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "string", "pattern": _PAGE_LIMIT},
                        },
                    ],
                    "security": _BEARER,
                    "responses": _responses("MessagePage", *_TEAM_ERRORS, 410),
                },
            },
            "/v1/members": {
                "get": {
                    "summary": "Current team roster",
                    "parameters": _TEAM_SCOPED,
                    "security": _BEARER,
                    "responses": _responses("Members", *_TEAM_ERRORS),
                }
            },
            "/v1/read-state/sync": {
                "post": {
                    "summary": "Max-merge frontiers, union exact reads, read one page",
                    "parameters": _TEAM_SCOPED,
                    "security": _BEARER,
                    "requestBody": {"required": True, **_json("ReadStateRequest")},
                    "responses": _responses("ReadStatePage", *_TEAM_ERRORS, 409, 413),
                }
            },
            "/v1/pairing/exchange": {
                "post": {
                    "summary": "Exchange a pairing token for a device credential",
                    "parameters": [_VERSION],
                    "requestBody": {"required": True, **_json("PairingRequest")},
                    "responses": _responses("PairingResponse", 400, 401, 409, 410, 413, 426, 503),
                }
            },
            "/v1/credentials/{credential_id}/revoke": {
                "post": {
                    "summary": "Revoke the calling device's own credential",
                    "parameters": [
                        *_TEAM_SCOPED,
                        {"name": "credential_id", "in": "path", "required": True, "schema": _UUID7},
                    ],
                    "security": _BEARER,
                    "responses": _responses("RevokeResponse", *_TEAM_ERRORS),
                }
            },
            OPENAPI_PATH: {
                "get": {
                    "summary": "This document",
                    "responses": {
                        "200": {
                            "description": "OpenAPI 3.1",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        }
                    },
                }
            },
        },
    }
