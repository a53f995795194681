"""The stage-2 read-state JSONL records (read-state-synchronization.md
"Optional read-state driver operations"; UPSTREAM-RECORDS §2.7).

Strict like every sync record (:mod:`syncengine.ops.sync_records`): exact member
sets, canonical decimal sequences, UUIDv7 member IDs, UUIDv4 wire IDs, and
the bounds of HTTP v1 (at most 1,000 members and 1,000 local agents in a
context). A failure names the line and the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from syncengine.ops.record_fields import bad as _bad
from syncengine.ops.record_fields import record_fields as _fields
from syncengine.ops.record_fields import seq_field as _seq
from syncengine.ops.record_fields import wire_id_field as _wire_id
from syncengine.ops.record_fields import wrapped as _wrap
from wire.http_v1.limits import MAX_READ_UPDATE_MEMBERS
from wire.scalars import check_agent_name, check_uuid7, format_seq
from wire.schema import expect_list, expect_object

__all__ = [
    "BLOCK_REASONS",
    "CAPABILITY_STAGE2_READ_STATE",
    "REASON_LIMIT",
    "REASON_NAME_MISMATCH",
    "SyncReadApplyResult",
    "SyncReadBlock",
    "SyncReadBlocked",
    "SyncReadContext",
    "SyncReadExact",
    "SyncReadFrontier",
    "SyncReadSnapshot",
    "SyncReadUnblock",
    "SyncReadUnblocked",
    "parse_read_item",
]

CAPABILITY_STAGE2_READ_STATE = "stage2-read-state"
REASON_NAME_MISMATCH = "member-name-mismatch"
REASON_LIMIT = "read-state-limit-exceeded"
BLOCK_REASONS = frozenset({REASON_NAME_MISMATCH, REASON_LIMIT})


def _member_id(value: Any, field: str) -> str:
    result: str = _wrap(check_uuid7, value, field)
    return result


def _floor_and_current(obj: dict[str, Any], where: str) -> tuple[int, int]:
    floor = _seq(obj["min_available_seq"], f"{where}.min_available_seq")
    current = _seq(obj["current_seq"], f"{where}.current_seq")
    if floor > current:
        raise _bad(f"{where}.min_available_seq", "the floor cannot lie beyond current_seq")
    return floor, current


@dataclass(frozen=True, slots=True)
class SyncReadContext:
    """``sync_read_context``: one authenticated snapshot (floor, current
    sequence, the relay's roster) plus the local agents, a separate authority."""

    min_available_seq: int
    current_seq: int
    members: tuple[tuple[str, str], ...]
    local_agents: tuple[str, ...]

    def to_obj(self) -> dict[str, Any]:
        return {
            "type": "sync_read_context",
            "min_available_seq": format_seq(self.min_available_seq),
            "current_seq": format_seq(self.current_seq),
            "members": [{"member_id": m, "name": n} for m, n in self.members],
            "local_agents": list(self.local_agents),
        }

    @classmethod
    def from_obj(cls, value: dict[str, Any], where: str = "sync_read_context") -> SyncReadContext:
        obj = _fields(
            value,
            where,
            "sync_read_context",
            ("min_available_seq", "current_seq", "members", "local_agents"),
        )
        floor, current = _floor_and_current(obj, where)
        raw_members = _wrap(
            expect_list, obj["members"], f"{where}.members", max_items=MAX_READ_UPDATE_MEMBERS
        )
        members: list[tuple[str, str]] = []
        ids: set[str] = set()
        names: set[str] = set()
        for index, raw in enumerate(raw_members):
            at = f"{where}.members[{index}]"
            item = _wrap(expect_object, raw, at, ("member_id", "name"))
            member_id = _member_id(item["member_id"], f"{at}.member_id")
            name = _wrap(check_agent_name, item["name"], f"{at}.name")
            if member_id in ids:
                raise _bad(f"{at}.member_id", "a member appears twice")
            if name in names:
                raise _bad(f"{at}.name", "two members share a name")
            ids.add(member_id)
            names.add(name)
            members.append((member_id, name))
        raw_agents = _wrap(
            expect_list,
            obj["local_agents"],
            f"{where}.local_agents",
            max_items=MAX_READ_UPDATE_MEMBERS,
        )
        agents: list[str] = []
        for index, raw in enumerate(raw_agents):
            agents.append(_wrap(check_agent_name, raw, f"{where}.local_agents[{index}]"))
        if len(set(agents)) != len(agents):
            raise _bad(f"{where}.local_agents", "local agent names must be distinct")
        return cls(floor, current, tuple(members), tuple(agents))


@dataclass(frozen=True, slots=True)
class SyncReadFrontier:
    """``sync_read_frontier``: a member's contiguous ``server_seq`` prefix."""

    member_id: str
    server_seq: int

    def to_obj(self) -> dict[str, Any]:
        return {
            "type": "sync_read_frontier",
            "member_id": self.member_id,
            "server_seq": format_seq(self.server_seq),
        }

    @classmethod
    def from_obj(cls, value: dict[str, Any], where: str = "sync_read_frontier") -> SyncReadFrontier:
        obj = _fields(value, where, "sync_read_frontier", ("member_id", "server_seq"))
        return cls(
            _member_id(obj["member_id"], f"{where}.member_id"),
            _seq(obj["server_seq"], f"{where}.server_seq"),
        )


@dataclass(frozen=True, slots=True)
class SyncReadExact:
    """``sync_read_exact``: an out-of-order read of one wire ID."""

    member_id: str
    wire_id: str

    def to_obj(self) -> dict[str, Any]:
        return {"type": "sync_read_exact", "member_id": self.member_id, "wire_id": self.wire_id}

    @classmethod
    def from_obj(cls, value: dict[str, Any], where: str = "sync_read_exact") -> SyncReadExact:
        obj = _fields(value, where, "sync_read_exact", ("member_id", "wire_id"))
        return cls(
            _member_id(obj["member_id"], f"{where}.member_id"),
            _wire_id(obj["wire_id"], f"{where}.wire_id"),
        )


def _reason(value: Any, field: str) -> str:
    if value not in BLOCK_REASONS:
        raise _bad(field, f"must be one of {', '.join(sorted(BLOCK_REASONS))}")
    return str(value)


@dataclass(frozen=True, slots=True)
class SyncReadBlocked:
    """``sync_read_blocked``: a member excluded from read-state mutations."""

    member_id: str
    reason: str

    def to_obj(self) -> dict[str, Any]:
        return {"type": "sync_read_blocked", "member_id": self.member_id, "reason": self.reason}

    @classmethod
    def from_obj(cls, value: dict[str, Any], where: str = "sync_read_blocked") -> SyncReadBlocked:
        obj = _fields(value, where, "sync_read_blocked", ("member_id", "reason"))
        return cls(
            _member_id(obj["member_id"], f"{where}.member_id"),
            _reason(obj["reason"], f"{where}.reason"),
        )


@dataclass(frozen=True, slots=True)
class SyncReadSnapshot:
    """``sync_read_snapshot``: the floor and current sequence of one response."""

    min_available_seq: int
    current_seq: int

    def to_obj(self) -> dict[str, Any]:
        return {
            "type": "sync_read_snapshot",
            "min_available_seq": format_seq(self.min_available_seq),
            "current_seq": format_seq(self.current_seq),
        }

    @classmethod
    def from_obj(cls, value: dict[str, Any], where: str = "sync_read_snapshot") -> SyncReadSnapshot:
        obj = _fields(value, where, "sync_read_snapshot", ("min_available_seq", "current_seq"))
        return cls(*_floor_and_current(obj, where))


def parse_read_item(value: dict[str, Any], where: str) -> SyncReadFrontier | SyncReadExact:
    """One page item after the snapshot: a frontier or an exact read."""
    kind = value.get("type")
    if kind == "sync_read_frontier":
        return SyncReadFrontier.from_obj(value, where)
    if kind == "sync_read_exact":
        return SyncReadExact.from_obj(value, where)
    raise _bad(f"{where}.type", "expected a 'sync_read_frontier' or 'sync_read_exact' record")


@dataclass(frozen=True, slots=True)
class SyncReadApplyResult:
    """``sync_read_apply_result``: the merged floor and how many members the page named."""

    min_available_seq: int
    member_count: int

    def to_obj(self) -> dict[str, Any]:
        return {
            "type": "sync_read_apply_result",
            "min_available_seq": format_seq(self.min_available_seq),
            "member_count": self.member_count,
        }


@dataclass(frozen=True, slots=True)
class SyncReadBlock:
    """``sync_read_block``: durably exclude a member (e.g. after a 409)."""

    member_id: str
    reason: str = REASON_LIMIT

    def to_obj(self) -> dict[str, Any]:
        return {"type": "sync_read_block", "member_id": self.member_id, "reason": self.reason}

    @classmethod
    def from_obj(cls, value: dict[str, Any], where: str = "sync_read_block") -> SyncReadBlock:
        obj = _fields(value, where, "sync_read_block", ("member_id", "reason"))
        return cls(
            _member_id(obj["member_id"], f"{where}.member_id"),
            _reason(obj["reason"], f"{where}.reason"),
        )


@dataclass(frozen=True, slots=True)
class SyncReadUnblock:
    """``sync_read_unblock``: the operator's explicit clearing of a block."""

    member_id: str

    def to_obj(self) -> dict[str, Any]:
        return {"type": "sync_read_unblock", "member_id": self.member_id}

    @classmethod
    def from_obj(cls, value: dict[str, Any], where: str = "sync_read_unblock") -> SyncReadUnblock:
        obj = _fields(value, where, "sync_read_unblock", ("member_id",))
        return cls(_member_id(obj["member_id"], f"{where}.member_id"))


@dataclass(frozen=True, slots=True)
class SyncReadUnblocked:
    member_id: str

    def to_obj(self) -> dict[str, Any]:
        return {"type": "sync_read_unblocked", "member_id": self.member_id}
