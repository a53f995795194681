"""The eight v1 endpoints and the one path that carries a parameter.

server/spec/v1.md "Scope and conventions" lists the endpoints; we keep the
pairing and revoke routes that the newest upstream copy calls superseded
(specs/http-v1.md, "Authentication model").
"""

from __future__ import annotations

import re

from wire.errors import SchemaError
from wire.scalars import check_uuid7

__all__ = [
    "CAPABILITIES",
    "HEALTH",
    "MEMBERS",
    "MESSAGES",
    "PAIRING_EXCHANGE",
    "READ_STATE_SYNC",
    "credential_revoke_path",
    "parse_credential_revoke_path",
]

HEALTH = "/v1/health"
CAPABILITIES = "/v1/capabilities"
MESSAGES = "/v1/messages"
MEMBERS = "/v1/members"
READ_STATE_SYNC = "/v1/read-state/sync"
PAIRING_EXCHANGE = "/v1/pairing/exchange"

_REVOKE = re.compile(r"/v1/credentials/([^/]*)/revoke")


def credential_revoke_path(credential_id: str) -> str:
    """``POST /v1/credentials/<credential_id>/revoke`` for one device credential."""
    return f"/v1/credentials/{check_uuid7(credential_id, 'credential_id')}/revoke"


def parse_credential_revoke_path(path: str) -> str:
    """Revoke path → its credential ID (a canonical UUIDv7)."""
    match = _REVOKE.fullmatch(path)
    if match is None:
        raise SchemaError("path", "is not /v1/credentials/<credential_id>/revoke")
    return check_uuid7(match.group(1), "credential_id")
