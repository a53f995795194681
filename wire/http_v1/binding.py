"""The common binding members of every successful team-scoped response.

server/spec/v1.md "Common response fields": ``protocol_version`` (the JSON
integer 1), ``server_instance_id`` and ``team_id`` (UUIDv7: the immutable
cursor key), ``team_name`` (a mutable display label, never a key) and
``min_available_seq`` (the retention floor). Clients key cursors by
``(server_instance_id, team_id, protocol version)`` and MUST stop when a
response — success or error — names another stream; :func:`require_binding`
is that stop rule.

Which documents carry these members is fixed per endpoint: capabilities,
both message endpoints, members, read state and revoke do; health and the
pairing exchange's outer object do not (their own modules say why).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wire.errors import SchemaError, WireError
from wire.limits import PROTOCOL_VERSION
from wire.scalars import check_team_name, check_uuid7, format_seq, parse_seq
from wire.schema import expect_int, join_field

__all__ = [
    "BINDING_MEMBERS",
    "BindingMismatchError",
    "ResponseBinding",
    "check_protocol_version",
    "require_binding",
]

BINDING_MEMBERS = (
    "protocol_version",
    "server_instance_id",
    "team_id",
    "team_name",
    "min_available_seq",
)


class BindingMismatchError(WireError):
    """A response names a different server instance or team than the binding.

    v1.md: the client must stop rather than move a cursor that belongs to
    another stream; this is an operator-visible condition, never retried.
    """


def check_protocol_version(value: Any, field: str) -> int:
    """The ``protocol_version`` body member: the JSON integer 1, exactly."""
    version = expect_int(value, field)
    if version != PROTOCOL_VERSION:
        raise SchemaError(field, f"must be {PROTOCOL_VERSION} in a /v1 document")
    return version


@dataclass(frozen=True, slots=True)
class ResponseBinding:
    """Who answered and for which stream; ``min_available_seq`` is an integer."""

    server_instance_id: str
    team_id: str
    team_name: str
    min_available_seq: int

    def validate(self, field: str) -> ResponseBinding:
        check_uuid7(self.server_instance_id, join_field(field, "server_instance_id"))
        check_uuid7(self.team_id, join_field(field, "team_id"))
        check_team_name(self.team_name, join_field(field, "team_name"))
        format_seq(self.min_available_seq, join_field(field, "min_available_seq"))
        return self

    def to_members(self) -> dict[str, Any]:
        """The five members, ready to merge into a response object."""
        return {
            "protocol_version": PROTOCOL_VERSION,
            "server_instance_id": self.server_instance_id,
            "team_id": self.team_id,
            "team_name": self.team_name,
            "min_available_seq": format_seq(self.min_available_seq),
        }

    @classmethod
    def from_members(cls, obj: dict[str, Any], field: str) -> ResponseBinding:
        """Read the five members from an object whose shape was already checked."""
        check_protocol_version(obj["protocol_version"], join_field(field, "protocol_version"))
        floor = parse_seq(obj["min_available_seq"], join_field(field, "min_available_seq"))
        binding = cls(
            server_instance_id=obj["server_instance_id"],
            team_id=obj["team_id"],
            team_name=obj["team_name"],
            min_available_seq=floor,
        )
        return binding.validate(field)


def require_binding(
    expected_server_instance_id: str,
    expected_team_id: str,
    server_instance_id: str | None,
    team_id: str | None,
) -> None:
    """Apply v1.md's stop rule to IDs read from a success or error response.

    An absent ID (an error produced before resolution) is not a mismatch;
    a present one must equal the binding exactly.
    """
    if server_instance_id is not None and server_instance_id != expected_server_instance_id:
        raise BindingMismatchError("server_instance_id", "response names another server instance")
    if team_id is not None and team_id != expected_team_id:
        raise BindingMismatchError("team_id", "response names another team")
