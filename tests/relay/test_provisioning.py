"""Operator provisioning: atomic roster replace, IDs and names never reused."""

from __future__ import annotations

import json

import pytest

from relay.errors import ProvisioningRejected
from relay.provisioning import parse_provisioning_document
from relay.secrets import new_uuid7, timestamp
from relay.storage.records import Member, ProvisioningDocument, Registration
from tests.relay.app_relay import Device, Relay
from tests.relay.helpers import T0, Team

NOW = timestamp(T0)


def apply(relay: Relay, team: Team, members: list[Member], name: str | None = None) -> None:
    relay.store.apply_provisioning(
        ProvisioningDocument(team.team_id, name or team.team_name, tuple(members)), NOW
    )


def roster(relay: Relay, device: Device) -> dict[str, object]:
    response = relay.client.get("/v1/members", headers=device.headers)
    assert response.status_code == 200
    return response.json()  # type: ignore[no-any-return]


def test_new_team_starts_at_members_revision_zero_sorted_by_member_id(
    relay: Relay, device: Device
) -> None:
    body = roster(relay, device)
    assert body["members_revision"] == "0"
    ids = [m["member_id"] for m in body["members"]]  # type: ignore[attr-defined]
    assert ids == sorted(ids) and len(ids) == 2
    assert all(m["registrations"] == [] for m in body["members"])  # type: ignore[attr-defined]


def test_reapply_renames_in_place_and_increments_revision(relay: Relay, device: Device) -> None:
    leader, worker = device.team.members
    apply(relay, device.team, [Member(leader.member_id, "boss"), worker], name="renamed")
    body = roster(relay, device)
    assert body["members_revision"] == "1"
    assert body["team_name"] == "renamed"
    names = {m["member_id"]: m["name"] for m in body["members"]}  # type: ignore[attr-defined]
    assert names[leader.member_id] == "boss"


def test_omitted_member_is_removed_and_its_id_can_never_return(
    relay: Relay, device: Device
) -> None:
    leader, worker = device.team.members
    apply(relay, device.team, [leader])
    assert [m["member_id"] for m in roster(relay, device)["members"]] == [leader.member_id]  # type: ignore[attr-defined]
    with pytest.raises(ProvisioningRejected, match="retired"):
        apply(relay, device.team, [leader, worker])
    assert roster(relay, device)["members_revision"] == "1"


def test_a_name_never_moves_to_another_member_id(relay: Relay, device: Device) -> None:
    leader, worker = device.team.members
    apply(relay, device.team, [leader, Member(worker.member_id, "worker-2")])
    with pytest.raises(ProvisioningRejected, match="already belongs"):
        apply(
            relay,
            device.team,
            [leader, Member(worker.member_id, "worker-2"), Member(new_uuid7(), "worker-1")],
        )


def test_roster_above_one_thousand_members_is_rejected_atomically(
    relay: Relay, device: Device
) -> None:
    members = [Member(new_uuid7(), f"agent-{i}") for i in range(1001)]
    with pytest.raises(ProvisioningRejected, match="1000"):
        apply(relay, device.team, members)
    assert roster(relay, device)["members_revision"] == "0"


def test_roster_of_exactly_one_thousand_members_is_accepted(relay: Relay, device: Device) -> None:
    members = [*device.team.members, *(Member(new_uuid7(), f"agent-{i}") for i in range(998))]
    apply(relay, device.team, members)
    assert len(roster(relay, device)["members"]) == 1000  # type: ignore[arg-type]


def test_duplicate_ids_or_names_in_one_document_are_rejected(relay: Relay, device: Device) -> None:
    leader, _ = device.team.members
    with pytest.raises(ProvisioningRejected, match="duplicate member_id"):
        apply(relay, device.team, [leader, Member(leader.member_id, "other")])
    with pytest.raises(ProvisioningRejected, match="duplicate member name"):
        apply(relay, device.team, [leader, Member(new_uuid7(), leader.name)])


def test_registration_belongs_to_exactly_one_member(relay: Relay, device: Device) -> None:
    leader, worker = device.team.members
    registration = Registration(new_uuid7(), new_uuid7(), "codex")
    apply(relay, device.team, [Member(leader.member_id, leader.name, (registration,)), worker])
    body = roster(relay, device)
    regs = {m["member_id"]: m["registrations"] for m in body["members"]}  # type: ignore[attr-defined]
    assert regs[leader.member_id] == [
        {
            "registration_id": registration.registration_id,
            "installation_id": registration.installation_id,
            "type": "codex",
        }
    ]
    with pytest.raises(ProvisioningRejected, match="registration_id"):
        apply(relay, device.team, [leader, Member(worker.member_id, worker.name, (registration,))])


def test_document_parser_rejects_members_revision_and_unknown_fields() -> None:
    base = {"team_id": new_uuid7(), "team_name": "t", "members": []}
    parse_provisioning_document(json.dumps(base).encode())
    for extra in ({"members_revision": "3"}, {"owner": "x"}):
        with pytest.raises(ProvisioningRejected):
            parse_provisioning_document(json.dumps({**base, **extra}).encode())


def test_document_parser_normalizes_names_to_nfc_then_checks_them() -> None:
    doc = {
        "team_id": new_uuid7(),
        "team_name": "t",
        "members": [{"member_id": new_uuid7(), "name": "Cafe\u0301"}],
    }
    parsed = parse_provisioning_document(json.dumps(doc).encode())
    assert parsed.members[0].name == "Caf\u00e9"
    for bad in ("-x", "a.b", "..", "a/b", "x\u0007"):
        doc["members"] = [{"member_id": new_uuid7(), "name": bad}]
        with pytest.raises(ProvisioningRejected):
            parse_provisioning_document(json.dumps(doc).encode())
