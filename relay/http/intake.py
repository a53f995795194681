"""Request intake: headers, query strings and streamed bodies (v1.md conventions).

Everything here runs before storage is touched, so every refusal is unbound
(no ``server_instance_id``/``team_id`` in the error), except body errors,
which the caller binds once the team is resolved. Grammar of header values
comes from :mod:`wire.http_v1.headers`; this module decides which HTTP error
each grammar failure becomes.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl

from starlette.requests import Request

from relay.errors import (
    InvalidRequest,
    RequestTooLarge,
    Unauthenticated,
    UnsupportedProtocolVersion,
)
from relay.limits import MAX_REQUEST_BYTES, PROTOCOL_VERSION, SUPPORTED_VERSIONS
from wire.errors import WireError
from wire.http_v1.body import decode_request_body
from wire.http_v1.headers import (
    AUTHORIZATION,
    PROTOCOL_VERSION_HEADER,
    TEAM_ID,
    parse_bearer,
    parse_protocol_version_header,
    parse_team_id_header,
)

_JSON_TYPES = frozenset({"application/json", "application/json;charset=utf-8"})


def _single_header(request: Request, name: str) -> str | None:
    """A header that must appear at most once; repeated means malformed."""
    values = request.headers.getlist(name)
    if len(values) > 1:
        return "\x00repeated"
    return values[0] if values else None


def require_protocol_version(request: Request) -> None:
    """426 unless ``Agmsg-Protocol-Version`` is exactly the path version."""
    raw = _single_header(request, PROTOCOL_VERSION_HEADER)
    try:
        version = parse_protocol_version_header(raw)
    except WireError:
        raise UnsupportedProtocolVersion(
            details={"requested_version": None, "supported_versions": list(SUPPORTED_VERSIONS)}
        ) from None
    if version != PROTOCOL_VERSION:
        raise UnsupportedProtocolVersion(
            details={"requested_version": version, "supported_versions": list(SUPPORTED_VERSIONS)}
        )


def require_team_id(request: Request) -> str:
    """400 unless ``Agmsg-Team-ID`` is one canonical UUIDv7."""
    try:
        return parse_team_id_header(_single_header(request, TEAM_ID))
    except WireError as exc:
        raise InvalidRequest(
            "Agmsg-Team-ID must be one canonical lowercase UUIDv7",
            details={"field": exc.field},
        ) from None


def require_bearer(request: Request) -> str:
    """401 unless ``Authorization: Bearer <credential>`` is present once and well formed.

    The credential value never appears in the error.
    """
    try:
        return parse_bearer(_single_header(request, AUTHORIZATION))
    except WireError:
        raise Unauthenticated() from None


def query_params(request: Request, allowed: frozenset[str]) -> dict[str, str]:
    """Strict query string: no unknown or repeated parameters."""
    raw = request.scope.get("query_string", b"").decode("latin-1")
    if not raw:
        return {}
    try:
        pairs = parse_qsl(raw, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise InvalidRequest("malformed query string") from None
    params: dict[str, str] = {}
    for name, value in pairs:
        if name not in allowed:
            raise InvalidRequest("unknown query parameter", details={"field": name})
        if name in params:
            raise InvalidRequest("repeated query parameter", details={"field": name})
        params[name] = value
    return params


def _content_length(request: Request) -> int | None:
    raw = _single_header(request, "content-length")
    if raw is None:
        return None
    if not raw.isdigit():
        raise InvalidRequest("malformed Content-Length")
    return int(raw)


def require_no_body(request: Request) -> None:
    """Body-less endpoints (GETs and revoke) refuse any request body."""
    length = _content_length(request)
    if (length is not None and length > 0) or "transfer-encoding" in request.headers:
        raise InvalidRequest("this endpoint takes no request body")


@dataclass(frozen=True, slots=True)
class JsonBody:
    value: object
    size: int


async def read_json_body(request: Request) -> JsonBody:
    """Stream the body with a hard 2 MiB cap, then decode strict JSON.

    The cap counts streamed bytes: a lying or absent ``Content-Length`` never
    lets more than 2 MiB into memory. Only ``application/json`` (UTF-8) with
    identity encoding is accepted; duplicate keys, lone surrogates, NaN and
    trailing data are refused by :func:`wire.jcs.loads`, and a body whose
    decoded form would dwarf its bytes by
    :func:`wire.http_v1.body.check_structure`.
    """
    content_type = _single_header(request, "content-type")
    if content_type is None or content_type.replace(" ", "").lower() not in _JSON_TYPES:
        raise InvalidRequest("Content-Type must be application/json (UTF-8)")
    encoding = _single_header(request, "content-encoding")
    if encoding is not None and encoding.strip().lower() != "identity":
        raise InvalidRequest("Content-Encoding must be identity")
    length = _content_length(request)
    if length is not None and length > MAX_REQUEST_BYTES:
        raise RequestTooLarge(details={"max_bytes": MAX_REQUEST_BYTES})
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_REQUEST_BYTES:
            raise RequestTooLarge(details={"max_bytes": MAX_REQUEST_BYTES})
        chunks.append(chunk)
    data = b"".join(chunks)
    if data.startswith(b"\xef\xbb\xbf"):
        raise InvalidRequest("request body must not start with a byte-order mark")
    try:
        return JsonBody(decode_request_body(data), size)
    except WireError as exc:
        raise InvalidRequest(f"request body is not strict JSON: {exc.rule}") from None
