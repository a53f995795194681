"""JSON bodies on the wire: size bound, strict decoding, one encoding.

server/spec/v1.md "Scope and conventions": request bodies are UTF-8 JSON of
at most 2 MiB counted from the streamed bytes, with no duplicate keys. We
decode every body (request or response) with the strict decoder of
:mod:`wire.jcs`, and encode every body we send deterministically (sorted
members, no whitespace) so equal documents are equal bytes, which retries of
the exact durable batch rely on. Protocol documents hold only ASCII member
names, strings, integers, booleans and null, for which the standard
library's C encoder produces exactly the RFC 8785 bytes at a fraction of the
cost of the general canonicalizer (a 1,000-envelope batch is ~1.4 MB).
"""

from __future__ import annotations

import json
from typing import Any

from wire import jcs
from wire.errors import CanonicalJsonError, SchemaError
from wire.http_v1.limits import MAX_JSON_STRUCTURE
from wire.limits import MAX_REQUEST_BYTES

__all__ = [
    "check_structure",
    "decode_request_body",
    "decode_response_body",
    "encode_body",
    "require_empty_body",
]


_ENCODER = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
)


def encode_body(document: dict[str, Any]) -> bytes:
    """A built document → the bytes we put on the wire."""
    try:
        return _ENCODER.encode(document).encode("utf-8")
    except UnicodeEncodeError:
        raise CanonicalJsonError("body", "string contains a lone surrogate") from None
    except ValueError as exc:
        raise CanonicalJsonError("body", str(exc)) from None


def decode_request_body(data: bytes) -> Any:
    """A request body → JSON value, refusing anything over 2 MiB first."""
    if len(data) > MAX_REQUEST_BYTES:
        raise SchemaError("body", f"request body exceeds {MAX_REQUEST_BYTES} bytes")
    check_structure(data)
    return jcs.loads(data)


def decode_response_body(data: bytes) -> Any:
    """A response body → JSON value (strict: duplicate keys are refused)."""
    check_structure(data)
    return jcs.loads(data)


def check_structure(data: bytes) -> None:
    """Refuse a body whose decoded form would dwarf its bytes — before decoding.

    A byte bound alone does not bound memory: each ``[]`` is three bytes of
    text and about 64 bytes as a Python list. Counting ``[``, ``{`` and ``,``
    (C-speed ``bytes.count``) bounds the values a body can decode to.
    """
    structure = data.count(b"[") + data.count(b"{") + data.count(b",")
    if structure > MAX_JSON_STRUCTURE:
        raise CanonicalJsonError(
            "body",
            f"{structure} arrays, objects and separators exceed the {MAX_JSON_STRUCTURE} "
            "a v1 document may hold",
        )


def require_empty_body(data: bytes) -> None:
    """Revoke takes no body (v1.md "Pairing and per-device credentials")."""
    if data:
        raise SchemaError("body", "this request takes no body")
