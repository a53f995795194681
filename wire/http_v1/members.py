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
from wire.schema import expect_list, expect_object, expect_str, join_field, rebased

__all__ = ["Member", "MembersDocument", "Registration"]

#: No spec bound on a driver type string; this keeps a hostile roster finite.
_MAX_TYPE_CHARS = 128
#: Registrations per member: unbounded upstream; bounded here for the same reason.
_MAX_REGISTRATIONS = 1000
_REGISTRATION_MEMBERS = ("registration_id", "installation_id", "type")
_MEMBER_MEMBERS = ("member_id", "name", "registrations")


@dataclass(frozen=True, slots=True)
class Registration:
    """One installation's registration of a member (``type``: its driver type)."""

    registration_id: str
    installation_id: str
    type: str

    def validate(self, field: str) -> Registration:
        try:
            self._check()
        except SchemaError as exc:
            raise rebased(exc, field) from None
        return self

    def _check(self) -> None:
        """Every rule, under relative names (the caller rebases a failure)."""
        check_uuid7(self.registration_id, "registration_id")
        check_uuid7(self.installation_id, "installation_id")
        expect_str(self.type, "type")
        if not 1 <= len(self.type) <= _MAX_TYPE_CHARS:
            raise SchemaError("type", f"must be a non-empty string of at most {_MAX_TYPE_CHARS}")
        if any(ord(char) < 0x20 or ord(char) == 0x7F for char in self.type):
            raise SchemaError("type", "must not contain control characters")

    def to_obj(self) -> dict[str, Any]:
        return {
            "registration_id": self.registration_id,
            "installation_id": self.installation_id,
            "type": self.type,
        }

    @classmethod
    def from_obj(cls, value: Any, field: str) -> Registration:
        try:
            return cls._from_obj(value)
        except SchemaError as exc:
            raise rebased(exc, field) from None

    @classmethod
    def _from_obj(cls, value: Any) -> Registration:
        obj = expect_object(value, "", _REGISTRATION_MEMBERS, closed=False)
        registration = cls(obj["registration_id"], obj["installation_id"], obj["type"])
        registration._check()
        return registration


@dataclass(frozen=True, slots=True)
class Member:
    """One active member: immutable ``member_id``, mutable ``name``."""

    member_id: str
    name: str
    registrations: tuple[Registration, ...] = ()

    def validate(self, field: str) -> Member:
        try:
            self._check()
        except SchemaError as exc:
            raise rebased(exc, field) from None
        return self

    def _check(self) -> None:
        """Every rule, under relative names (the caller rebases a failure)."""
        check_uuid7(self.member_id, "member_id")
        check_agent_name(self.name, "name")
        if len(self.registrations) > _MAX_REGISTRATIONS:
            raise SchemaError(
                "registrations", f"must hold at most {_MAX_REGISTRATIONS} registrations"
            )
        previous: str | None = None
        for index, registration in enumerate(self.registrations):
            try:
                registration._check()
                if previous is not None and registration.registration_id <= previous:
                    raise SchemaError(
                        "registration_id",
                        "registrations must be strictly ascending by registration_id",
                    )
            except SchemaError as exc:
                raise rebased(exc, join_field("registrations", index)) from None
            previous = registration.registration_id

    def to_obj(self) -> dict[str, Any]:
        return {
            "member_id": self.member_id,
            "name": self.name,
            "registrations": [registration.to_obj() for registration in self.registrations],
        }

    @classmethod
    def from_obj(cls, value: Any, field: str) -> Member:
        try:
            return cls._from_obj(value)
        except SchemaError as exc:
            raise rebased(exc, field) from None

    @classmethod
    def _from_obj(cls, value: Any) -> Member:
        obj = expect_object(value, "", _MEMBER_MEMBERS, closed=False)
        raw = expect_list(obj["registrations"], "registrations", max_items=_MAX_REGISTRATIONS)
        registrations: tuple[Registration, ...] = ()
        if raw:
            parsed: list[Registration] = []
            for index, item in enumerate(raw):
                try:
                    parsed.append(Registration._from_obj(item))
                except SchemaError as exc:
                    raise rebased(exc, join_field("registrations", index)) from None
            registrations = tuple(parsed)
        member = cls(obj["member_id"], obj["name"], registrations)
        member._check()
        return member


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
        previous: str | None = None
        for index, member in enumerate(self.members):
            # Checked under relative names; the member's path is built on failure only.
            try:
                if deep:
                    member._check()
                if previous is not None and member.member_id <= previous:
                    raise SchemaError(
                        "member_id", "members must be strictly ascending by member_id"
                    )
                if member.name in names:
                    raise SchemaError("name", "member names are unique in a team")
                for number, registration in enumerate(member.registrations):
                    if registration.registration_id in owners:
                        raise SchemaError(
                            join_field(join_field("registrations", number), "registration_id"),
                            "a registration belongs to exactly one member",
                        )
                    owners.add(registration.registration_id)
            except SchemaError as exc:
                raise rebased(exc, join_field(at, index)) from None
            previous = member.member_id
            names.add(member.name)
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
        members: list[Member] = []
        for index, item in enumerate(items):
            try:
                members.append(Member._from_obj(item))
            except SchemaError as exc:
                raise rebased(exc, join_field(at, index)) from None
        return cls(binding, revision, tuple(members)).validate(field, deep=False)
