"""Records the store returns, and their event-log schema v1 JSON form.

Field names and order follow driver-interface §2.3. The records are
``NamedTuple`` values rather than dataclasses: every bash-driver call is a
process start, and ``dataclasses`` costs its import of ``inspect`` (about
10 ms) on a path that otherwise needs neither. ``origin`` is an
optional forward-compatible extension (v1 readers ignore unknown fields): it
is written only for messages that did not originate on a local send, so the
common record is exactly the specified shape.
"""

from __future__ import annotations

import json
from typing import NamedTuple

__all__ = [
    "Member",
    "MessageRead",
    "MessageSent",
    "Team",
    "WatchResult",
    "dump_record",
]

ORIGIN_LOCAL = "local"
ORIGIN_IMPORTED = "imported"


def dump_record(record: dict[str, object]) -> str:
    """One JSONL line: compact, UTF-8 (not ASCII-escaped), keys in given order."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


class MessageSent(NamedTuple):
    """A stored message (a value: cheap to build on batched sends and reads)."""

    id: str
    team: str
    sender: str
    recipient: str
    body: str
    at: str
    origin: str = ORIGIN_LOCAL

    def to_record(self) -> dict[str, object]:
        record: dict[str, object] = {
            "type": "message_sent",
            "id": self.id,
            "team": self.team,
            "from": self.sender,
            "to": self.recipient,
            "body": self.body,
            "at": self.at,
        }
        if self.origin != ORIGIN_LOCAL:
            record["origin"] = self.origin
        return record


class MessageRead(NamedTuple):
    id: str
    msg_id: str
    team: str
    agent: str
    at: str

    def to_record(self) -> dict[str, object]:
        return {
            "type": "message_read",
            "id": self.id,
            "msg_id": self.msg_id,
            "team": self.team,
            "agent": self.agent,
            "at": self.at,
        }


class WatchResult(NamedTuple):
    """``watch_after`` output: matching messages plus the resume cursor."""

    messages: tuple[MessageSent, ...]
    cursor: str


class Member(NamedTuple):
    member_id: str
    name: str


class Team(NamedTuple):
    team_id: str
    name: str
    members: tuple[Member, ...]

    def provisioning_document(self) -> dict[str, object]:
        """The relay operator provisioning document (server/spec/v1.md
        "GET /v1/members"): team_id, team_name and the full member array,
        sorted by member_id, with no ``members_revision``."""
        return {
            "team_id": self.team_id,
            "team_name": self.name,
            "members": [
                {"member_id": m.member_id, "name": m.name, "registrations": []}
                for m in sorted(self.members, key=lambda m: m.member_id)
            ],
        }
