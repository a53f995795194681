"""``GET /v1/members``: the team roster, read-only over HTTP.

server/spec/v1.md "GET /v1/members": the common binding members, a
``members_revision`` (canonical decimal), and at most 1,000 members sorted by
``member_id``, each with a ``name`` under the agent-name rules and its
registrations sorted by ``registration_id``. Every ID is a UUIDv7. Member IDs,
member names and registration IDs are unique within the team (a registration
belongs to exactly one member); an ``installation_id`` may repeat. ``type`` is
a non-empty driver type string. Strict ascending order implies uniqueness of
the sort key, so the sort checks and the duplicate checks are one rule each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from wire.errors import SchemaError
from wire.http_v1.binding import BINDING_MEMBERS, ResponseBinding
from wire.http_v1.limits import MAX_MEMBERS
from wire.scalars import check_agent_name, check_uuid7, format_seq, parse_seq
from wire.schema import expect_list, expect_object, expect_str, join_field

__all__ = ["Member", "MembersDocument", "Registration"]

#: No spec bound on a driver type string; this keeps a hostile roster finite.
_MAX_TYPE_CHARS = 128
#: Registrations per member: unbounded upstream; bounded here for the same reason.
_MAX_REGISTRATIONS = 1000


@dataclass(frozen=True, slots=True)
class Registration:
    """One installation's registration of a member (``type``: its driver type)."""

    registration_id: str
    installation_id: str
    type: str

    def validate(self, field: str) -> Registration:
        check_uuid7(self.registration_id, join_field(field, "registration_id"))
        check_uuid7(self.installation_id, join_field(field, "installation_id"))
        at = join_field(field, "type")
        expect_str(self.type, at)
        if not 1 <= len(self.type) <= _MAX_TYPE_CHARS:
            raise SchemaError(at, f"must be a non-empty string of at most {_MAX_TYPE_CHARS}")
        if any(ord(char) < 0x20 or ord(char) == 0x7F for char in self.type):
            raise SchemaError(at, "must not contain control characters")
        return self

    def to_obj(self) -> dict[str, Any]:
        return {
            "registration_id": self.registration_id,
            "installation_id": self.installation_id,
            "type": self.type,
        }

    @classmethod
    def from_obj(cls, value: Any, field: str) -> Registration:
        members = ("registration_id", "installation_id", "type")
        obj = expect_object(value, field, members, closed=False)
        return cls(obj["registration_id"], obj["installation_id"], obj["type"]).validate(field)


@dataclass(frozen=True, slots=True)
class Member:
    """One active member: immutable ``member_id``, mutable ``name``."""

    member_id: str
    name: str
    registrations: tuple[Registration, ...] = ()

    def validate(self, field: str) -> Member:
        check_uuid7(self.member_id, join_field(field, "member_id"))
        check_agent_name(self.name, join_field(field, "name"))
        at = join_field(field, "registrations")
        if len(self.registrations) > _MAX_REGISTRATIONS:
            raise SchemaError(at, f"must hold at most {_MAX_REGISTRATIONS} registrations")
        for index, registration in enumerate(self.registrations):
            registration.validate(join_field(at, index))
            if (
                index
                and registration.registration_id <= self.registrations[index - 1].registration_id
            ):
                raise SchemaError(
                    join_field(join_field(at, index), "registration_id"),
                    "registrations must be strictly ascending by registration_id",
                )
        return self

    def to_obj(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "name": self.name,
            "registrations": [registration.to_obj() for registration in self.registrations],
        }

    @classmethod
    def from_obj(cls, value: Any, field: str) -> Member:
        obj = expect_object(value, field, ("member_id", "name", "registrations"), closed=False)
        at = join_field(field, "registrations")
        items = expect_list(obj["registrations"], at, max_items=_MAX_REGISTRATIONS)
        registrations = tuple(
            Registration.from_obj(item, join_field(at, index)) for index, item in enumerate(items)
        )
        return cls(obj["member_id"], obj["name"], registrations).validate(field)


@dataclass(frozen=True, slots=True)
class MembersDocument:
    """The roster snapshot at ``members_revision``."""

    binding: ResponseBinding
    members_revision: int
    members: tuple[Member, ...]

    def validate(self, field: str = "members", *, deep: bool = True) -> MembersDocument:
        """The document's own rules; ``deep=False`` skips re-checking each
        member, which :meth:`from_obj` has just checked while parsing it."""
        self.binding.validate(field)
        format_seq(self.members_revision, join_field(field, "members_revision"))
        at = join_field(field, "members")
        if len(self.members) > MAX_MEMBERS:
            raise SchemaError(at, f"a team has at most {MAX_MEMBERS} active members")
        names: set[str] = set()
        owners: set[str] = set()
        for index, member in enumerate(self.members):
            here = join_field(at, index)
            if deep:
                member.validate(here)
            if index and member.member_id <= self.members[index - 1].member_id:
                raise SchemaError(
                    join_field(here, "member_id"), "members must be strictly ascending by member_id"
                )
            if member.name in names:
                raise SchemaError(join_field(here, "name"), "member names are unique in a team")
            names.add(member.name)
            for number, registration in enumerate(member.registrations):
                if registration.registration_id in owners:
                    raise SchemaError(
                        join_field(
                            join_field(join_field(here, "registrations"), number), "registration_id"
                        ),
                        "a registration belongs to exactly one member",
                    )
                owners.add(registration.registration_id)
        return self

    def by_id(self) -> dict[str, Member]:
        return {member.member_id: member for member in self.members}

    def to_obj(self) -> dict[str, Any]:
        self.validate()
        return {
            **self.binding.to_members(),
            "members_revision": format_seq(self.members_revision),
            "members": [member.to_obj() for member in self.members],
        }

    @classmethod
    def from_obj(cls, value: Any, field: str = "members") -> MembersDocument:
        obj = expect_object(
            value, field, (*BINDING_MEMBERS, "members_revision", "members"), closed=False
        )
        binding = ResponseBinding.from_members(obj, field)
        revision = parse_seq(obj["members_revision"], join_field(field, "members_revision"))
        at = join_field(field, "members")
        items = expect_list(obj["members"], at, max_items=MAX_MEMBERS)
        members = tuple(
            Member.from_obj(item, join_field(at, index)) for index, item in enumerate(items)
        )
        return cls(binding, revision, members).validate(field, deep=False)
