"""Capability documents and policy history (v1.md "GET /v1/capabilities")."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.wire.http_v1 import samples
from wire.errors import SchemaError
from wire.http_v1 import Capabilities, PolicyEntry
from wire.limits import MAX_SEQ


def reject(doc: Any, field: str) -> SchemaError:
    with pytest.raises(SchemaError) as caught:
        Capabilities.from_obj(doc)
    assert caught.value.field == field, caught.value
    return caught.value


def test_spec_shaped_capabilities_are_accepted() -> None:
    caps = Capabilities.from_obj(samples.capabilities())
    assert caps.current_seq == 7
    assert caps.next_sequence_boundary == 8
    assert caps.current_policy.write_allowed_ciphers == ("none", "age-v1")
    assert caps.binding.team_id == samples.TEAM


def test_capabilities_round_trip_to_the_same_object() -> None:
    doc = samples.capabilities()
    assert Capabilities.from_obj(doc).to_obj() == doc


def test_missing_binding_member_is_rejected() -> None:
    doc = samples.capabilities()
    del doc["team_name"]
    reject(doc, "capabilities.team_name")


def test_protocol_version_must_be_the_integer_one() -> None:
    doc = samples.capabilities()
    doc["protocol_version"] = "1"
    reject(doc, "capabilities.protocol_version")


def test_unknown_response_member_is_ignored() -> None:
    doc = samples.capabilities()
    doc["future_field"] = {"anything": True}
    assert Capabilities.from_obj(doc).current_seq == 7


def test_next_boundary_must_be_current_plus_one() -> None:
    doc = samples.capabilities()
    doc["next_sequence_boundary"] = "9"
    reject(doc, "capabilities.next_sequence_boundary")


def test_next_boundary_null_below_maximum_is_rejected() -> None:
    doc = samples.capabilities()
    doc["next_sequence_boundary"] = None
    reject(doc, "capabilities.next_sequence_boundary")


def test_next_boundary_is_null_at_the_sequence_maximum() -> None:
    doc = samples.capabilities(str(MAX_SEQ))
    doc["next_sequence_boundary"] = None
    assert Capabilities.from_obj(doc).next_sequence_boundary is None


def test_next_boundary_beyond_maximum_is_rejected() -> None:
    doc = samples.capabilities(str(MAX_SEQ))
    doc["next_sequence_boundary"] = str(MAX_SEQ + 1)
    with pytest.raises(SchemaError):
        Capabilities.from_obj(doc)


def test_max_blob_bytes_must_be_a_string() -> None:
    doc = samples.capabilities()
    doc["max_blob_bytes"] = 1048576
    reject(doc, "capabilities.max_blob_bytes")


def test_max_blob_bytes_above_one_mebibyte_is_rejected() -> None:
    doc = samples.capabilities()
    doc["max_blob_bytes"] = "1048577"
    reject(doc, "capabilities.max_blob_bytes")


def test_max_blob_bytes_zero_is_rejected() -> None:
    doc = samples.capabilities()
    doc["max_blob_bytes"] = "0"
    reject(doc, "capabilities.max_blob_bytes")


def test_non_canonical_sequence_is_rejected() -> None:
    doc = samples.capabilities()
    doc["current_seq"] = "07"
    reject(doc, "capabilities.current_seq")


def test_floor_above_current_seq_is_rejected() -> None:
    doc = samples.capabilities()
    doc["min_available_seq"] = "8"
    reject(doc, "capabilities.min_available_seq")


def test_empty_policy_history_is_rejected() -> None:
    doc = samples.capabilities()
    doc["policy_history"] = []
    reject(doc, "capabilities.policy_history")


def test_history_must_start_at_sequence_one() -> None:
    doc = samples.capabilities()
    doc["policy_history"][0]["effective_from_seq"] = "2"
    reject(doc, "capabilities.policy_history[0].effective_from_seq")


def test_history_revisions_must_ascend() -> None:
    doc = samples.capabilities()
    doc["policy_history"][0]["policy_revision"] = "3"
    reject(doc, "capabilities.policy_history[1].policy_revision")


def test_history_boundaries_must_strictly_ascend_after_collapse() -> None:
    doc = samples.capabilities()
    doc["policy_history"][1]["effective_from_seq"] = "1"
    doc["effective_from_seq"] = "1"
    reject(doc, "capabilities.policy_history[1].effective_from_seq")


def test_history_boundary_beyond_next_sequence_is_rejected() -> None:
    doc = samples.capabilities()
    doc["policy_history"][1]["effective_from_seq"] = "9"
    doc["effective_from_seq"] = "9"
    reject(doc, "capabilities.policy_history[1].effective_from_seq")


def test_history_boundary_at_next_sequence_is_accepted() -> None:
    doc = samples.capabilities()
    doc["policy_history"][1]["effective_from_seq"] = "8"
    doc["effective_from_seq"] = "8"
    assert Capabilities.from_obj(doc).current_policy.effective_from_seq == 8


def test_history_longer_than_4096_entries_is_rejected() -> None:
    doc = samples.capabilities(str(10_000))
    doc["policy_history"] = [samples.policy(str(index), str(index + 1)) for index in range(4097)]
    doc.update(doc["policy_history"][-1])
    doc["next_sequence_boundary"] = "10001"
    reject(doc, "capabilities.policy_history")


@pytest.mark.parametrize(
    ("member", "value"),
    [
        ("policy_revision", "2"),
        ("effective_from_seq", "4"),
        ("accepted_envelope_versions", [1, 2]),
        ("write_allowed_ciphers", ["none"]),
    ],
)
def test_current_fields_must_equal_the_last_history_entry(member: str, value: Any) -> None:
    doc = samples.capabilities()
    doc[member] = value
    reject(doc, f"capabilities.{member}")


def test_duplicate_cipher_in_policy_is_rejected() -> None:
    doc = samples.capabilities()
    doc["policy_history"][0]["write_allowed_ciphers"] = ["none", "none"]
    reject(doc, "capabilities.policy_history[0].write_allowed_ciphers")


def test_malformed_cipher_name_is_rejected() -> None:
    doc = samples.capabilities()
    doc["policy_history"][0]["write_allowed_ciphers"] = ["None"]
    reject(doc, "capabilities.policy_history[0].write_allowed_ciphers[0]")


def test_empty_write_set_is_a_legal_policy() -> None:
    doc = samples.capabilities()
    doc["policy_history"][1]["write_allowed_ciphers"] = []
    doc["write_allowed_ciphers"] = []
    assert Capabilities.from_obj(doc).current_policy.write_allowed_ciphers == ()


def test_envelope_versions_must_be_non_empty() -> None:
    doc = samples.capabilities()
    doc["policy_history"][0]["accepted_envelope_versions"] = []
    reject(doc, "capabilities.policy_history[0].accepted_envelope_versions")


def test_boolean_is_not_an_envelope_version() -> None:
    doc = samples.capabilities()
    doc["policy_history"][0]["accepted_envelope_versions"] = [True]
    reject(doc, "capabilities.policy_history[0].accepted_envelope_versions[0]")


def test_policy_at_picks_the_greatest_boundary_not_after_seq() -> None:
    caps = Capabilities.from_obj(samples.capabilities())
    assert caps.policy_at(0) is None
    assert caps.policy_at(4) == caps.policy_history[0]
    assert caps.policy_at(5) == caps.policy_history[1]


@given(st.lists(st.integers(0, 5), min_size=1, max_size=40), st.integers(0, 250))
def test_policy_at_is_the_last_entry_whose_boundary_is_not_after_seq(
    gaps: list[int], seq: int
) -> None:
    caps = Capabilities.from_obj(samples.capabilities())
    history, boundary = [], 0
    for revision, gap in enumerate(gaps):
        boundary += gap + (1 if revision == 0 or gap == 0 else 0)
        history.append(PolicyEntry(revision, boundary, (1,), ("none",)))
    long = Capabilities(caps.binding, caps.current_seq, caps.max_blob_bytes, tuple(history))
    expected = [e for e in history if e.effective_from_seq <= seq]
    assert long.policy_at(seq) == (expected[-1] if expected else None)


def test_builder_refuses_inconsistent_history() -> None:
    caps = Capabilities.from_obj(samples.capabilities())
    broken = Capabilities(
        caps.binding,
        caps.current_seq,
        caps.max_blob_bytes,
        (PolicyEntry(0, 2, (1,), ("none",)),),
    )
    with pytest.raises(SchemaError) as caught:
        broken.to_obj()
    assert caught.value.field == "capabilities.policy_history[0].effective_from_seq"
