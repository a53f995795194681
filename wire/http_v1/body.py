"""JSON bodies on the wire: size bound, strict decoding, one encoding.

server/spec/v1.md "Scope and conventions": request bodies are UTF-8 JSON of
at most 2 MiB counted from the streamed bytes, with no duplicate keys. We
decode every body (request or response) with the strict decoder of
:mod:`wire.jcs`, and encode every body we send in RFC 8785 form so equal
documents are equal bytes (handy for retries and fixtures alike).
"""

from __future__ import annotations

from typing import Any

from wire import jcs
from wire.errors import SchemaError
from wire.limits import MAX_REQUEST_BYTES

__all__ = ["decode_request_body", "decode_response_body", "encode_body", "require_empty_body"]


def encode_body(document: dict[str, Any]) -> bytes:
    """A built document → the bytes we put on the wire."""
    return jcs.canonicalize(document)


def decode_request_body(data: bytes) -> Any:
    """A request body → JSON value, refusing anything over 2 MiB first."""
    if len(data) > MAX_REQUEST_BYTES:
        raise SchemaError("body", f"request body exceeds {MAX_REQUEST_BYTES} bytes")
    return jcs.loads(data)


def decode_response_body(data: bytes) -> Any:
    """A response body → JSON value (strict: duplicate keys are refused)."""
    return jcs.loads(data)


def require_empty_body(data: bytes) -> None:
    """Revoke takes no body (v1.md "Pairing and per-device credentials")."""
    if data:
        raise SchemaError("body", "this request takes no body")
