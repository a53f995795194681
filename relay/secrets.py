"""Pairing tokens, bearer credentials and server-minted identifiers.

v1.md "Pairing and per-device credentials": tokens and credentials are
opaque, cryptographically random, and the server never stores them in plain
form. Both carry 256 random bits, so a single SHA-256 (domain-separated) is
a sufficient verifier: there is nothing to brute-force that a slow KDF would
protect. Lookups are by hash, so comparing secrets never happens in Python.

UUIDv7 minting lives here because Python 3.11 has no ``uuid.uuid7``; it is a
candidate to move into :mod:`wire` (listed in the relay report).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
import uuid
from datetime import UTC, datetime

from wire.scalars import format_timestamp

PAIRING_TOKEN_PREFIX = "agmsg_pair_"
CREDENTIAL_PREFIX = "agmsg_credential_"
_HASH_DOMAIN = b"syncengine-relay-secret-v1\x00"


def new_pairing_token() -> str:
    """A fresh single-use pairing token (shown to the operator exactly once)."""
    return PAIRING_TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_credential_secret() -> str:
    """A fresh long-lived bearer secret (returned to the device exactly once)."""
    return CREDENTIAL_PREFIX + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> bytes:
    """The only form in which a token or credential is ever stored."""
    return hashlib.sha256(_HASH_DOMAIN + secret.encode("utf-8", "surrogatepass")).digest()


def new_uuid7(now_ms: int | None = None) -> str:
    """RFC 9562 UUIDv7: 48-bit Unix milliseconds, version 7, 74 random bits."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= ((rand >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    return str(uuid.UUID(int=value))


def utc_now() -> datetime:
    return datetime.now(UTC)


def timestamp(moment: datetime) -> str:
    """Canonical ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (delegates to :mod:`wire`)."""
    return format_timestamp(moment)
