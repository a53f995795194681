"""Strict JSONL record parsing and exact output shapes (UPSTREAM-RECORDS §2.1–§2.5)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncengine.ops import sync_records as r
from syncengine.store import InvalidInput
from tests.syncengine.ops.helpers import foreign_envelope, new_key, pull_record
from wire.age_keys import X25519Identity

PREPARE: dict[str, Any] = {
    "type": "sync_prepare",
    "envelope_v": 1,
    "cipher": "none",
    "key_id": None,
    "recipients": [],
    "max_blob_bytes": 1048576,
    "allow_new": True,
}
WIRE = "9f1e0c4a-1b2c-4d3e-8f40-123456789abc"


def test_sync_prepare_parses_the_exact_key_set() -> None:
    assert r.SyncPrepare.from_obj(dict(PREPARE)).to_obj() == PREPARE


@pytest.mark.parametrize("missing", sorted(set(PREPARE) - {"type"}))
def test_sync_prepare_refuses_a_missing_member(missing: str) -> None:
    obj = {k: v for k, v in PREPARE.items() if k != missing}
    with pytest.raises(InvalidInput, match=missing):
        r.SyncPrepare.from_obj(obj)


def test_sync_prepare_refuses_an_unknown_member() -> None:
    with pytest.raises(InvalidInput, match="unknown member"):
        r.SyncPrepare.from_obj({**PREPARE, "token": "x"})


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("envelope_v", 2, "envelope version"),
        ("envelope_v", "1", "integer"),
        ("cipher", "rot13", "not implemented"),
        ("cipher", "NONE", "cipher"),
        ("key_id", "epoch-1", "null"),
        ("recipients", ["age1x"], r"\[\]"),
        ("max_blob_bytes", 0, "at least"),
        ("max_blob_bytes", 1048577, "at most"),
        ("max_blob_bytes", "1048576", "integer"),
        ("allow_new", 1, "true or false"),
    ],
)
def test_sync_prepare_refuses_bad_values_naming_the_field(field: str, value: Any, why: str) -> None:
    with pytest.raises(InvalidInput, match=why) as caught:
        r.SyncPrepare.from_obj({**PREPARE, field: value})
    assert field in str(caught.value)


def test_sync_prepare_for_age_needs_a_valid_recipient_manifest(
    age_identity: X25519Identity,
) -> None:
    good = {
        **PREPARE,
        "cipher": "age-v1",
        "key_id": "epoch-1",
        "recipients": [age_identity.recipient.to_string()],
    }
    assert r.SyncPrepare.from_obj(good).recipients == (age_identity.recipient.to_string(),)
    for bad in ([], ["age1notakey"], [good["recipients"][0]] * 2):
        with pytest.raises(InvalidInput, match="recipients"):
            r.SyncPrepare.from_obj({**good, "recipients": bad})
    with pytest.raises(InvalidInput, match="key_id"):
        r.SyncPrepare.from_obj({**good, "key_id": None})


def test_push_ack_round_trips_and_refuses_non_canonical_sequences() -> None:
    obj = {
        "type": "sync_push_ack",
        "local_position": "7",
        "id": WIRE,
        "server_seq": "42",
        "disposition": "stored",
    }
    assert r.SyncPushAck.from_obj(obj).to_obj() == obj
    for field, bad in [
        ("server_seq", "042"),
        ("server_seq", 42),
        ("server_seq", "0"),
        ("local_position", "-1"),
    ]:
        with pytest.raises(InvalidInput, match=field):
            r.SyncPushAck.from_obj({**obj, field: bad})
    with pytest.raises(InvalidInput, match="disposition"):
        r.SyncPushAck.from_obj({**obj, "disposition": "maybe"})
    with pytest.raises(InvalidInput, match="UUIDv4"):
        r.SyncPushAck.from_obj({**obj, "id": WIRE.upper()})


def test_a_wire_id_with_a_stray_carriage_return_is_refused() -> None:
    """agmsg #829: a trailing CR corrupted wire IDs for days."""
    obj = {
        "type": "sync_push_ack",
        "local_position": "7",
        "id": WIRE + "\r",
        "server_seq": "4",
        "disposition": "stored",
    }
    with pytest.raises(InvalidInput):
        r.SyncPushAck.from_obj(obj)


def test_pull_message_requires_a_projection_exactly_when_importable() -> None:
    key = new_key()
    wire, env = foreign_envelope(key)
    importable = pull_record(3, wire, env).to_obj()
    assert r.SyncPullMessage.from_obj(importable).to_obj() == importable
    del importable["projection"]
    with pytest.raises(InvalidInput, match="projection"):
        r.SyncPullMessage.from_obj(importable)
    blocked = pull_record(3, wire, env, "pending_key").to_obj()
    blocked["projection"] = {
        "body": "x",
        "created_at": "2026-01-01T00:00:00.000000Z",
        "from_agent": "a",
        "to_agent": "b",
    }
    with pytest.raises(InvalidInput, match="no projection"):
        r.SyncPullMessage.from_obj(blocked)


def test_pull_message_projection_is_validated_as_a_v1_message() -> None:
    wire, env = foreign_envelope(new_key())
    obj = pull_record(3, wire, env).to_obj()
    obj["projection"]["created_at"] = "2026-01-01T00:00:00Z"
    with pytest.raises(InvalidInput, match="created_at"):
        r.SyncPullMessage.from_obj(obj)
    obj = pull_record(3, wire, env).to_obj()
    obj["projection"]["kind"] = "member_joined"
    with pytest.raises(InvalidInput, match="unknown member"):
        r.SyncPullMessage.from_obj(obj)


@pytest.mark.parametrize(
    ("mutate", "why"),
    [
        (lambda e: e.update(cipher=7), "cipher"),
        (lambda e: e.update(blob=["x"]), "blob"),
        (lambda e: e.update(blob="eyJ"), "blob"),
        (lambda e: e.update(v="1"), "envelope.v"),
        (lambda e: e.pop("key_id"), "key_id"),
        (lambda e: e.update(extra=1), "unknown member"),
    ],
)
def test_pull_message_envelope_must_be_a_valid_envelope(mutate: Any, why: str) -> None:
    """agmsg #1042: non-string cipher/blob reached apply; here nothing passes."""
    wire, env = foreign_envelope(new_key())
    obj = pull_record(3, wire, env, "malformed").to_obj()
    mutate(obj["envelope"])
    with pytest.raises(InvalidInput, match=why):
        r.SyncPullMessage.from_obj(obj)


def test_pull_message_status_must_be_importable_or_blocking() -> None:
    wire, env = foreign_envelope(new_key())
    obj = pull_record(3, wire, env, "malformed").to_obj()
    for bad in ("imported", "corrupt_state", "reconciled", "ok"):
        with pytest.raises(InvalidInput, match="status"):
            r.SyncPullMessage.from_obj({**obj, "status": bad})


def test_jsonl_refuses_duplicate_members_crlf_blank_lines_and_truncation() -> None:
    with pytest.raises(InvalidInput, match="duplicate"):
        list(r.parse_jsonl(b'{"type":"a","type":"b"}\n'))
    with pytest.raises(InvalidInput, match="carriage return"):
        list(r.parse_jsonl(b'{"type":"a"}\r\n'))
    with pytest.raises(InvalidInput, match="blank"):
        list(r.parse_jsonl(b'{"type":"a"}\n\n'))
    with pytest.raises(InvalidInput, match="truncated"):
        list(r.parse_jsonl(b'{"type":"a"}'))
    with pytest.raises(InvalidInput, match="object"):
        list(r.parse_jsonl(b"[1]\n"))
    with pytest.raises(InvalidInput, match="trailing"):
        list(r.parse_jsonl(b'{"type":"a"} {"type":"b"}\n'))


def test_reprocess_page_next_after_is_non_null_exactly_when_has_more() -> None:
    with pytest.raises(ValueError):
        r.SyncReprocessPage(None, True)
    with pytest.raises(ValueError):
        r.SyncReprocessPage("1:" + WIRE, False)
    with pytest.raises(InvalidInput):
        r.SyncReprocessPage.from_obj(
            {"type": "sync_reprocess_page", "next_after": None, "has_more": True}
        )


def test_output_records_have_the_upstream_field_shapes() -> None:
    wire, env = foreign_envelope(new_key())
    shapes = {
        "sync_state": r.SyncState("g", 41).to_obj(),
        "sync_push_candidate": r.SyncPushCandidate(1207, "l", wire, env).to_obj(),
        "sync_reconcile_result": r.SyncReconcileResult(1207).to_obj(),
        "sync_apply_result": r.SyncApplyResult(44, 0).to_obj(),
        "sync_apply_outcome": r.SyncApplyOutcome(wire, 43, "imported").to_obj(),
        "sync_reprocess_candidate": r.SyncReprocessCandidate(
            44, wire, "2026-01-01T00:00:00.000000Z", env, "pending_key"
        ).to_obj(),
        "sync_reprocess_page": r.SyncReprocessPage(None, False).to_obj(),
        "sync_driver_capabilities": r.SyncDriverCapabilities(("stage1-sync",)).to_obj(),
    }
    assert {k: list(v) for k, v in shapes.items()} == {
        "sync_state": ["type", "driver_generation", "transport_cursor"],
        "sync_push_candidate": ["type", "local_position", "local_id", "id", "envelope"],
        "sync_reconcile_result": ["type", "push_cursor"],
        "sync_apply_result": ["type", "transport_cursor", "corrupt_count"],
        "sync_apply_outcome": ["type", "id", "server_seq", "status"],
        "sync_reprocess_candidate": [
            "type",
            "server_seq",
            "id",
            "server_received_at",
            "envelope",
            "prior_status",
        ],
        "sync_reprocess_page": ["type", "next_after", "has_more"],
        "sync_driver_capabilities": ["type", "capabilities"],
    }
    assert shapes["sync_state"]["transport_cursor"] == "41"
    assert shapes["sync_apply_result"]["corrupt_count"] == 0


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_yield_records_or_a_named_input_error(data: bytes) -> None:
    try:
        for where, value in r.parse_jsonl(data):
            r.SyncPushAck.from_obj(value, where)
    except InvalidInput as exc:
        assert exc.field


@settings(max_examples=40, deadline=None)
@given(seq=st.integers(1, 2**63 - 1), position=st.integers(1, 2**63 - 1))
def test_acks_round_trip_through_their_canonical_strings(seq: int, position: int) -> None:
    ack = r.SyncPushAck(position, WIRE, seq, "duplicate")
    assert r.SyncPushAck.from_obj(ack.to_obj()) == ack
