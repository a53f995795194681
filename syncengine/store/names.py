"""Validation of names and identifiers at the store boundary.

Agent names follow the v1 agent-name rules (``wire.scalars.check_agent_name``);
team names the v1 display-name rules (``check_team_name``). Locally both must
also be usable inside a ``team:agent`` subscription pair (driver-interface
§2.2), so neither may contain ``:``, and a team name may not start with ``-``
so it can never be mistaken for an option on a command line.

Message and event IDs are UUIDv7 for our own writes. Every other ID is
opaque (driver-interface §2.5): legacy decimal IDs, the bundled driver's
``read-cursor-v1:…`` adoption markers, whatever a host hands to
``mark_read_batch``. An opaque ID only has to be one safe argv token and
one JSON string: 1–512 characters, none of them a control character.
"""

from __future__ import annotations

import re

from syncengine.store.errors import InvalidInput
from wire.errors import WireError
from wire.scalars import check_agent_name, check_team_name, check_uuid7, parse_seq

__all__ = [
    "check_cursor_token",
    "check_local_agent",
    "check_local_team",
    "check_message_id",
]

#: Printable text: no C0/C1 control characters, DEL, or lone surrogates.
_OPAQUE_ID = re.compile(r"[^\x00-\x1f\x7f-\x9f\ud800-\udfff]{1,512}")


def check_local_team(text: object, field: str = "team") -> str:
    try:
        check_team_name(text, field)
    except WireError as exc:
        raise InvalidInput(field, exc.rule) from None
    assert isinstance(text, str)
    if ":" in text:
        raise InvalidInput(field, "team name must not contain ':'")
    if text.startswith("-"):
        raise InvalidInput(field, "team name must not start with '-'")
    if text != text.strip():
        raise InvalidInput(field, "team name must not start or end with whitespace")
    return text


def check_local_agent(text: object, field: str = "agent") -> str:
    try:
        check_agent_name(text, field)
    except WireError as exc:
        raise InvalidInput(field, exc.rule) from None
    assert isinstance(text, str)
    if ":" in text:
        raise InvalidInput(field, "agent name must not contain ':'")
    return text


def check_message_id(text: object, field: str = "id") -> str:
    """A message or event ID: opaque, 1–512 printable characters."""
    if isinstance(text, str) and _OPAQUE_ID.fullmatch(text):
        return text
    raise InvalidInput(field, "an id must be 1-512 characters with no control characters")


def check_new_message_id(text: object, field: str = "id") -> str:
    try:
        return check_uuid7(text, field)
    except WireError as exc:
        raise InvalidInput(field, exc.rule) from None


def check_cursor_token(text: object, field: str = "cursor") -> int:
    """Our delivery cursors are canonical decimal log positions."""
    try:
        return parse_seq(text, field)
    except WireError:
        if isinstance(text, str) and text.isascii() and text.isdigit() and text[0] != "0":
            raise InvalidInput(field, "cursor is out of range") from None
        raise InvalidInput(
            field, "cursor must be a token issued by this store (decimal position)"
        ) from None
