"""Pure batch admission (relay.storage.admission.plan_batch): the spec's decision order."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from relay.errors import (
    CipherPolicyViolation,
    MessageUuidConflict,
    SequenceExhausted,
    UnsupportedCipher,
)
from relay.limits import MAX_SEQ
from relay.storage.admission import ExistingId, plan_batch
from relay.storage.records import IncomingMessage, PolicyEntry
from wire.envelope import Envelope

POLICY = PolicyEntry(0, 1, (1,), ("age-v1", "none"))
IDS = [f"00000000-0000-4000-8000-{i:012d}" for i in range(8)]


def incoming(wire_id: str, payload: int, cipher: str = "none", v: int = 1) -> IncomingMessage:
    envelope = Envelope.from_blob_bytes(
        cipher, None if cipher == "none" else "k", bytes([payload + 1]), v=v
    )
    return IncomingMessage(wire_id, envelope, envelope.digest())


@given(
    st.lists(st.sampled_from(IDS), min_size=1, max_size=20),
    st.sets(st.sampled_from(IDS)),
    st.integers(min_value=0, max_value=10_000),
)
def test_acks_map_every_input_and_new_ids_take_consecutive_sequences(
    order: list[str], known: set[str], current: int
) -> None:
    existing = {w: ExistingId(incoming(w, 0).digest, i + 1) for i, w in enumerate(sorted(known))}
    plan = plan_batch([incoming(w, 0) for w in order], existing, POLICY, current)
    assert [a.wire_id for a in plan.acks] == order
    first_new = list(dict.fromkeys(w for w in order if w not in known))
    assert [m.wire_id for _, m in plan.inserts] == first_new
    assert [seq for seq, _ in plan.inserts] == list(
        range(current + 1, current + 1 + len(first_new))
    )
    assert plan.new_current_seq == current + len(first_new)
    seen: set[str] = set()
    for ack in plan.acks:
        if ack.wire_id in known:
            assert (ack.server_seq, ack.disposition) == (
                existing[ack.wire_id].team_seq,
                "duplicate",
            )
        else:
            assert ack.disposition == ("duplicate" if ack.wire_id in seen else "stored")
            seen.add(ack.wire_id)


def test_existing_digest_mismatch_is_a_conflict() -> None:
    existing = {IDS[0]: ExistingId(hashlib.sha256(b"other").digest(), 1)}
    with pytest.raises(MessageUuidConflict):
        plan_batch([incoming(IDS[0], 0)], existing, POLICY, 1)


def test_conflict_precedes_cipher_admission_and_exhaustion() -> None:
    existing = {IDS[1]: ExistingId(b"x" * 32, 1)}
    batch = [incoming(IDS[0], 0, cipher="rot13"), incoming(IDS[1], 0)]
    with pytest.raises(MessageUuidConflict):
        plan_batch(batch, existing, POLICY, MAX_SEQ)


def test_cipher_admission_precedes_exhaustion() -> None:
    with pytest.raises(UnsupportedCipher):
        plan_batch([incoming(IDS[0], 0, cipher="rot13")], {}, POLICY, MAX_SEQ)
    with pytest.raises(CipherPolicyViolation):
        plan_batch([incoming(IDS[0], 0)], {}, PolicyEntry(1, 1, (1,), ("age-v1",)), MAX_SEQ)


def test_exhaustion_counts_distinct_new_ids_only() -> None:
    batch = [incoming(IDS[0], 0), incoming(IDS[0], 0)]
    assert plan_batch(batch, {}, POLICY, MAX_SEQ - 1).new_current_seq == MAX_SEQ
    with pytest.raises(SequenceExhausted):
        plan_batch([incoming(IDS[0], 0), incoming(IDS[1], 0)], {}, POLICY, MAX_SEQ - 1)


def test_policy_does_not_apply_to_identical_replays() -> None:
    existing = {IDS[0]: ExistingId(incoming(IDS[0], 0).digest, 7)}
    closed = PolicyEntry(3, 9, (1,), ())
    plan = plan_batch([incoming(IDS[0], 0)], existing, closed, 10)
    assert plan.inserts == () and plan.acks[0].server_seq == 7
