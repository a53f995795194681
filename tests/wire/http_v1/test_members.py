"""Roster documents (v1.md "GET /v1/members")."""

from __future__ import annotations

import pytest

from tests.wire.http_v1 import samples
from wire.errors import WireError
from wire.http_v1 import MembersDocument


def field_of(doc: object) -> str:
    with pytest.raises(WireError) as caught:
        MembersDocument.from_obj(doc)
    return caught.value.field


def test_spec_shaped_roster_is_accepted_and_round_trips() -> None:
    doc = samples.members()
    roster = MembersDocument.from_obj(doc)
    assert roster.members_revision == 7
    assert roster.by_id()[samples.MEMBER_B].registrations == ()
    assert roster.to_obj() == doc


def test_members_must_be_sorted_by_member_id() -> None:
    doc = samples.members()
    doc["members"].reverse()
    assert field_of(doc) == "members.members[1].member_id"


def test_duplicate_member_id_is_rejected() -> None:
    doc = samples.members()
    doc["members"][1]["member_id"] = samples.MEMBER_A
    assert field_of(doc) == "members.members[1].member_id"


def test_duplicate_member_name_is_rejected() -> None:
    doc = samples.members()
    doc["members"][1]["name"] = "planner"
    assert field_of(doc) == "members.members[1].name"


def test_member_name_follows_agent_name_rules() -> None:
    doc = samples.members()
    doc["members"][0]["name"] = "../etc"
    assert field_of(doc) == "members.members[0].name"


def test_registrations_must_be_sorted_by_registration_id() -> None:
    doc = samples.members()
    doc["members"][0]["registrations"].reverse()
    assert field_of(doc) == "members.members[0].registrations[1].registration_id"


def test_registration_belongs_to_one_member_only() -> None:
    doc = samples.members()
    doc["members"][1]["registrations"] = [dict(doc["members"][0]["registrations"][0])]
    assert field_of(doc) == "members.members[1].registrations[0].registration_id"


def test_installation_may_own_several_registrations() -> None:
    roster = MembersDocument.from_obj(samples.members())
    registrations = roster.members[0].registrations
    assert registrations[0].installation_id == registrations[1].installation_id


def test_registration_type_must_be_non_empty() -> None:
    doc = samples.members()
    doc["members"][0]["registrations"][0]["type"] = ""
    assert field_of(doc) == "members.members[0].registrations[0].type"


def test_member_ids_must_be_uuid7() -> None:
    doc = samples.members()
    doc["members"][0]["member_id"] = samples.WIRE_1
    assert field_of(doc) == "members.members[0].member_id"


def test_more_than_1000_members_is_rejected() -> None:
    doc = samples.members()
    doc["members"] = [
        {
            "member_id": f"0190a1b2-c3d4-7e5f-8a6b-{index:012x}",
            "name": f"agent-{index}",
            "registrations": [],
        }
        for index in range(1001)
    ]
    assert field_of(doc) == "members.members"


def test_members_revision_must_be_canonical() -> None:
    doc = samples.members()
    doc["members_revision"] = 7
    assert field_of(doc) == "members.members_revision"
