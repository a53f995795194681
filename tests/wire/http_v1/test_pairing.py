"""Pairing exchange and revoke (v1.md "Pairing and per-device credentials")."""

from __future__ import annotations

import pytest

from tests.wire.http_v1 import samples
from tests.wire.http_v1.helpers import field_of
from wire.errors import WireError
from wire.http_v1 import PairingRequest, PairingResponse, RevokeResponse


def test_pairing_request_is_strict() -> None:
    assert PairingRequest.from_obj({"token": "agmsg_pair_abc"}).token == "agmsg_pair_abc"
    assert (
        field_of(PairingRequest.from_obj, {"token": "agmsg_pair_abc", "team_id": samples.TEAM})
        == "request.team_id"
    )


def test_pairing_token_outside_the_bearer_alphabet_is_rejected_without_echo() -> None:
    with pytest.raises(WireError) as caught:
        PairingRequest.from_obj({"token": "secret value"})
    assert caught.value.field == "request.token"
    assert "secret" not in str(caught.value)


def test_pairing_response_is_accepted_and_round_trips() -> None:
    doc = samples.pairing()
    pairing = PairingResponse.from_obj(doc)
    assert pairing.capabilities.binding.team_id == pairing.remote_team_id
    assert pairing.to_obj() == doc


def test_credential_never_appears_in_repr() -> None:
    pairing = PairingResponse.from_obj(samples.pairing())
    assert "agmsg_cred" not in repr(pairing)
    assert "agmsg_pair" not in repr(PairingRequest("agmsg_pair_abc"))


@pytest.mark.parametrize(
    ("outer", "nested", "value"),
    [
        ("server_instance_id", "server_instance_id", samples.OTHER_TEAM),
        ("remote_team_id", "team_id", samples.OTHER_TEAM),
        ("remote_team_name", "team_name", "day-shift"),
    ],
)
def test_outer_binding_must_equal_nested_capabilities(outer: str, nested: str, value: str) -> None:
    doc = samples.pairing()
    doc[outer] = value
    assert field_of(PairingResponse.from_obj, doc) == f"pairing.capabilities.{nested}"


def test_pairing_response_requires_the_credential() -> None:
    doc = samples.pairing()
    del doc["credential"]
    assert field_of(PairingResponse.from_obj, doc) == "pairing.credential"


def test_nested_capabilities_are_fully_validated() -> None:
    doc = samples.pairing()
    doc["capabilities"]["next_sequence_boundary"] = "99"
    assert field_of(PairingResponse.from_obj, doc) == "pairing.capabilities.next_sequence_boundary"


def test_revoke_response_is_accepted_and_matches_its_path() -> None:
    revoke = RevokeResponse.from_obj(samples.revoke())
    revoke.check_matches(samples.CREDENTIAL_ID)
    assert revoke.to_obj() == samples.revoke()
    assert field_of(revoke.check_matches, samples.SERVER) == "revoke.credential_id"


@pytest.mark.parametrize("value", [False, "true", 1])
def test_revoke_response_must_say_revoked_true(value: object) -> None:
    doc = samples.revoke()
    doc["revoked"] = value
    assert field_of(RevokeResponse.from_obj, doc) == "revoke.revoked"


def test_revoke_response_needs_the_common_binding() -> None:
    doc = samples.revoke()
    del doc["min_available_seq"]
    assert field_of(RevokeResponse.from_obj, doc) == "revoke.min_available_seq"
