"""HTTP v1 header names and the grammar of every header value we send or read.

server/spec/v1.md "Scope and conventions":

- every team-scoped request carries ``Agmsg-Protocol-Version: 1`` and
  ``Agmsg-Team-ID: <UUIDv7>``; every response (errors too) carries the version
  header, and a ``/v1`` response always says ``1``;
- ``Agmsg-Client-Version`` is optional metadata of at most 64 printable ASCII
  characters (``unknown`` when the client cannot tell); a server never rejects
  a request for it, so the relay reads it with :func:`read_client_version`,
  which answers ``None`` instead of raising;
- our profile keeps the bearer-credential model (v1.md "Pairing and
  per-device credentials"): ``Authorization: Bearer <credential>`` on every
  endpoint except health and pairing exchange.

The version header is parsed in two steps because the relay must tell a
*malformed* header from an *unsupported* one: both are ``426``, but only the
latter can report ``details.requested_version``.
"""

from __future__ import annotations

import re

from wire.errors import SchemaError
from wire.http_v1.limits import MAX_CLIENT_VERSION_CHARS, MAX_SECRET_CHARS
from wire.limits import PROTOCOL_VERSION
from wire.scalars import check_uuid7

__all__ = [
    "AUTHORIZATION",
    "CACHE_CONTROL",
    "CLIENT_VERSION",
    "CLIENT_VERSION_UNKNOWN",
    "CONTENT_TYPE",
    "JSON_CONTENT_TYPE",
    "LIVE_HEADER",
    "LIVE_HEADER_VALUE",
    "NO_STORE",
    "PROTOCOL_VERSION_HEADER",
    "RETRY_AFTER",
    "SUPPORTED_PROTOCOL_VERSIONS",
    "TEAM_ID",
    "check_client_version",
    "check_opaque_secret",
    "format_bearer",
    "parse_bearer",
    "parse_protocol_version_header",
    "parse_retry_after",
    "parse_team_id_header",
    "read_client_version",
    "require_response_protocol_version",
]

PROTOCOL_VERSION_HEADER = "Agmsg-Protocol-Version"
TEAM_ID = "Agmsg-Team-ID"
CLIENT_VERSION = "Agmsg-Client-Version"
AUTHORIZATION = "Authorization"
CONTENT_TYPE = "Content-Type"
CACHE_CONTROL = "Cache-Control"
RETRY_AFTER = "Retry-After"
#: Our live wait's discovery header on ``GET /v1/capabilities`` (wire/http_v1/live.py).
LIVE_HEADER = "Syncengine-Live"
LIVE_HEADER_VALUE = "wait-v1"

JSON_CONTENT_TYPE = "application/json"
#: Capability, pairing and revoke responses must not be cached (v1.md).
NO_STORE = "no-store"
#: What a client sends when it announces itself but cannot read its version.
CLIENT_VERSION_UNKNOWN = "unknown"

#: Versions this codebase speaks; ``/v1`` responses always carry ``1``.
SUPPORTED_PROTOCOL_VERSIONS: tuple[int, ...] = (PROTOCOL_VERSION,)

_DECIMAL = re.compile(r"0|[1-9][0-9]{0,8}")
# Printable ASCII without leading/trailing space (HTTP trims header values).
_CLIENT_VERSION = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")
# RFC 6750 b64token: the only characters a bearer credential may use.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_BEARER = re.compile(r"([A-Za-z]+) (.*)", re.DOTALL)


def parse_protocol_version_header(value: str | None) -> int:
    """``Agmsg-Protocol-Version`` → integer, refusing absent or malformed text.

    The caller decides whether the number is supported; a well-formed but
    unsupported version is what ``details.requested_version`` reports.
    """
    if value is None:
        raise SchemaError(PROTOCOL_VERSION_HEADER, "header is required")
    if _DECIMAL.fullmatch(value) is None:
        raise SchemaError(PROTOCOL_VERSION_HEADER, "must be a canonical decimal version number")
    return int(value)


def require_response_protocol_version(value: str | None) -> None:
    """A ``/v1`` response must say exactly ``1`` (v1.md "Protocol negotiation")."""
    if parse_protocol_version_header(value) != PROTOCOL_VERSION:
        raise SchemaError(PROTOCOL_VERSION_HEADER, f"a /v1 response must carry {PROTOCOL_VERSION}")


def parse_team_id_header(value: str | None) -> str:
    """``Agmsg-Team-ID``: the immutable team UUIDv7, never a credential."""
    if value is None:
        raise SchemaError(TEAM_ID, "header is required on team-scoped requests")
    return check_uuid7(value, TEAM_ID)


def check_client_version(value: str) -> str:
    """What a client may send: 1–64 printable ASCII characters."""
    if not isinstance(value, str) or _CLIENT_VERSION.fullmatch(value) is None:
        raise SchemaError(CLIENT_VERSION, "must be printable ASCII without outer spaces")
    if len(value) > MAX_CLIENT_VERSION_CHARS:
        raise SchemaError(CLIENT_VERSION, f"must be at most {MAX_CLIENT_VERSION_CHARS} characters")
    return value


def read_client_version(value: str | None) -> str | None:
    """What a server does with the header: keep a valid value, ignore the rest.

    v1.md: a server MUST NOT reject a request for a missing or malformed
    client version, so this never raises.
    """
    if value is None:
        return None
    try:
        return check_client_version(value)
    except SchemaError:
        return None


def check_opaque_secret(value: object, field: str) -> str:
    """Bearer credentials and pairing tokens: 1–1024 RFC 6750 ``b64token`` chars.

    The spec keeps both opaque; we still fix their alphabet because the
    credential travels in ``Authorization: Bearer`` and must survive it
    unchanged. The rule message never echoes the value: it is a secret.
    """
    if not isinstance(value, str):
        raise SchemaError(field, "must be a string")
    if not 1 <= len(value) <= MAX_SECRET_CHARS:
        raise SchemaError(field, f"must be 1-{MAX_SECRET_CHARS} characters")
    if _B64TOKEN.fullmatch(value) is None:
        raise SchemaError(field, "must use only the RFC 6750 b64token alphabet")
    return value


def format_bearer(credential: str) -> str:
    """Credential → ``Authorization`` header value."""
    return "Bearer " + check_opaque_secret(credential, AUTHORIZATION)


def parse_bearer(value: str | None) -> str:
    """``Authorization`` header value → credential (scheme is case-insensitive)."""
    if value is None:
        raise SchemaError(AUTHORIZATION, "header is required")
    match = _BEARER.fullmatch(value)
    if match is None or match.group(1).lower() != "bearer":
        raise SchemaError(AUTHORIZATION, "must be 'Bearer <credential>'")
    return check_opaque_secret(match.group(2), AUTHORIZATION)


def parse_retry_after(value: str | None) -> int | None:
    """``Retry-After`` in delta-seconds; ``None`` when absent.

    The relay only ever sends delta-seconds; an HTTP-date from an
    intermediary is refused here and the caller falls back to its backoff.
    """
    if value is None:
        return None
    if _DECIMAL.fullmatch(value) is None:
        raise SchemaError(RETRY_AFTER, "must be a non-negative decimal number of seconds")
    return int(value)
