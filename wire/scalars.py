"""Canonical scalars of the protocol (server/spec/v1.md "Scope and conventions").

Every scalar that crosses the wire has exactly one accepted spelling, so two
implementations can never disagree about equality: sequences are canonical
decimal strings that fit a signed 64-bit integer, identifiers are lowercase
canonical UUIDs of a fixed version, timestamps carry exactly six fractional
digits in UTC, and names are NFC with a bounded length and no path- or
quote-breaking characters. Checks return the value unchanged (or its
integer) and raise :class:`ScalarError` naming the field and rule.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from datetime import UTC, datetime

from wire.errors import ScalarError
from wire.limits import MAX_KEY_ID_BYTES, MAX_NAME_SCALARS, MAX_SEQ

__all__ = [
    "check_agent_name",
    "check_cipher",
    "check_key_id",
    "check_profile_key_id",
    "check_team_name",
    "check_timestamp",
    "check_uuid4",
    "check_uuid7",
    "format_seq",
    "format_timestamp",
    "normalize_agent_name",
    "parse_seq",
    "parse_timestamp",
]

_SEQ = re.compile(r"0|[1-9][0-9]*")
_UUID4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
_UUID7 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")
_CIPHER = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
# Characters no name may hold: C0 controls, DEL and lone surrogates.
_CONTROL = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")
# Agent names additionally refuse path and quoting characters.
_AGENT_FORBIDDEN = re.compile(r'[./\\"\[\]]')


def parse_seq(text: object, field: str) -> int:
    """Canonical decimal sequence string → integer (``0|[1-9][0-9]*``, ≤ 2^63−1)."""
    if not isinstance(text, str):
        raise ScalarError(field, "sequence must be a decimal string")
    if _SEQ.fullmatch(text) is None:
        raise ScalarError(field, "sequence must be canonical decimal 0|[1-9][0-9]*")
    if len(text) > 19 or int(text) > MAX_SEQ:
        raise ScalarError(field, "sequence exceeds the signed 64-bit maximum")
    return int(text)


def format_seq(value: int, field: str = "seq") -> str:
    """Integer → canonical sequence string; refuses values outside 0..2^63−1."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_SEQ:
        raise ScalarError(field, "sequence must be an integer in 0..2^63-1")
    return str(value)


def check_uuid4(text: object, field: str) -> str:
    """Wire message IDs: lowercase canonical UUIDv4 (random, never time-based)."""
    if not isinstance(text, str) or _UUID4.fullmatch(text) is None:
        raise ScalarError(field, "must be a lowercase canonical UUIDv4")
    return text


def check_uuid7(text: object, field: str) -> str:
    """Team, server-instance, member and credential IDs: lowercase canonical UUIDv7."""
    if not isinstance(text, str) or _UUID7.fullmatch(text) is None:
        raise ScalarError(field, "must be a lowercase canonical UUIDv7")
    return text


def check_timestamp(text: object, field: str) -> str:
    """``YYYY-MM-DDTHH:MM:SS.ffffffZ`` naming a real UTC instant (no leap seconds)."""
    parse_timestamp(text, field)
    assert isinstance(text, str)
    return text


def parse_timestamp(text: object, field: str) -> datetime:
    if not isinstance(text, str) or _TIMESTAMP.fullmatch(text) is None:
        raise ScalarError(field, "timestamp must be YYYY-MM-DDTHH:MM:SS.ffffffZ")
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise ScalarError(field, "timestamp is not a real calendar instant") from None


def format_timestamp(moment: datetime) -> str:
    """Aware datetime → canonical UTC timestamp with six fractional digits."""
    if moment.tzinfo is None:
        raise ScalarError("timestamp", "datetime must be timezone-aware")
    try:
        utc = moment.astimezone(UTC)
    except OverflowError:
        raise ScalarError("timestamp", "instant falls outside years 0001-9999 in UTC") from None
    return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ").rjust(27, "0")


def _check_name_common(text: object, field: str, what: str) -> str:
    if not isinstance(text, str):
        raise ScalarError(field, f"{what} must be a string")
    if not 1 <= len(text) <= MAX_NAME_SCALARS:
        raise ScalarError(field, f"{what} must have 1-{MAX_NAME_SCALARS} Unicode scalar values")
    if _CONTROL.search(text) is not None:
        raise ScalarError(field, f"{what} must not contain control characters or surrogates")
    if not unicodedata.is_normalized("NFC", text):
        raise ScalarError(field, f"{what} must be NFC-normalized")
    return text


def check_agent_name(text: object, field: str) -> str:
    """Agent/member names: NFC, 1–128 scalars, no leading ``-``, not ``.``/``..``,
    none of ``. / \\ " [ ]``, no C0 controls or DEL (v1.md conventions).

    The check is on the already-normalized form: a non-NFC string on the
    wire is non-canonical and refused, so equality is always byte equality.
    """
    if type(text) is str:
        # A team repeats a handful of names on every message of every page:
        # the verdict for an exact ``str`` is a pure function of its value.
        problem = _agent_name_problem(text)
        if problem is not None:
            raise ScalarError(field, problem)
        return text
    _check_name_common(text, field, "agent name")
    assert isinstance(text, str)
    return check_agent_name(str.__str__(text), field)


@functools.lru_cache(maxsize=4096)
def _agent_name_problem(text: str) -> str | None:
    try:
        _check_name_common(text, "", "agent name")
    except ScalarError as exc:
        return exc.rule
    if text[0] == "-":
        return "agent name must not start with '-'"
    if _AGENT_FORBIDDEN.search(text) is not None:
        return 'agent name must not contain any of . / \\ " [ ]'
    return None


def normalize_agent_name(text: str, field: str) -> str:
    """User input → canonical agent name (NFC first, then every rule)."""
    return check_agent_name(unicodedata.normalize("NFC", text), field)


def check_team_name(text: object, field: str) -> str:
    """Relay team display names: NFC, 1–128 scalars, no control characters.

    v1.md makes ``team_name`` a mutable display label; it never identifies
    cursor state, so only its size and normalization are constrained.
    """
    return _check_name_common(text, field, "team name")


def check_cipher(text: object, field: str) -> str:
    """Cipher scheme identifiers: ``[a-z0-9][a-z0-9._-]{0,63}``."""
    if not isinstance(text, str) or _CIPHER.fullmatch(text) is None:
        raise ScalarError(field, "cipher must match [a-z0-9][a-z0-9._-]{0,63}")
    return text


def check_key_id(text: object, field: str) -> str | None:
    """Envelope ``key_id``: null, or an NFC string of 1–256 UTF-8 bytes without
    C0 controls or DEL (v1.md "Message representation"). Profiles narrow it."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise ScalarError(field, "key_id must be null or a string")
    if unicodedata.normalize("NFC", text) != text:
        raise ScalarError(field, "key_id must be NFC-normalized")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ScalarError(field, "key_id must not contain surrogates") from None
    if not 1 <= size <= MAX_KEY_ID_BYTES:
        raise ScalarError(field, f"key_id must be 1-{MAX_KEY_ID_BYTES} UTF-8 bytes")
    if any(ord(char) < 0x20 or ord(char) == 0x7F for char in text):
        raise ScalarError(field, "key_id must not contain control characters")
    return text


def check_profile_key_id(text: object, field: str) -> str:
    """Encrypted-profile epoch names (age-v1): ``[a-z0-9][a-z0-9._-]{0,63}``."""
    if not isinstance(text, str) or _CIPHER.fullmatch(text) is None:
        raise ScalarError(field, "key_id must match [a-z0-9][a-z0-9._-]{0,63}")
    return text
