"""Local security history and the write/read policy (pure; v1.md "GET /v1/capabilities")."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from syncengine.engine import ConfigurationError, SecurityHistory, SecurityMode
from syncengine.engine.batching import item_bytes, plan_batches
from syncengine.engine.limits import BATCH_BYTE_BUDGET, MAX_LOCAL_SECURITY_HISTORY
from syncengine.engine.security import plan_write, read_policy
from syncengine.ops.sync_records import SyncPushCandidate
from wire.envelope import Envelope
from wire.http_v1.binding import ResponseBinding
from wire.http_v1.capabilities import Capabilities, PolicyEntry

SID = "0190a1b2-c3d4-7e5f-8a6b-000000000001"
TID = "0190a1b2-c3d4-7e5f-8a6b-000000000002"
P, E = SecurityMode.PLAINTEXT_ALLOWED, SecurityMode.E2EE_REQUIRED


def caps(current: int, *history: tuple[int, tuple[str, ...]]) -> Capabilities:
    entries = tuple(PolicyEntry(i, start, (1,), c) for i, (start, c) in enumerate(history))
    return Capabilities(ResponseBinding(SID, TID, "t", 0), current, 1024 * 1024, entries)


def test_local_change_is_appended_at_the_next_sequence_boundary() -> None:
    history = SecurityHistory.initial(P).appended(E, 11)
    assert [(e.revision, e.effective_from_seq, e.mode) for e in history.entries] == [
        (0, 1, P),
        (1, 11, E),
    ]
    assert history.at(10).mode is P and history.at(11).mode is E


def test_same_boundary_changes_collapse_to_the_greatest_revision() -> None:
    history = SecurityHistory.initial(P).appended(E, 5).appended(P, 5)
    assert history.at(5).revision == 2 and history.at(5).mode is P
    assert history.distinct_boundaries() == 2


def test_a_null_boundary_refuses_the_change() -> None:
    with pytest.raises(ConfigurationError, match="exhausted"):
        SecurityHistory.initial(P).appended(E, None)


def test_a_boundary_before_the_last_one_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="precedes"):
        SecurityHistory.initial(P).appended(E, 10).appended(P, 9)


def test_local_history_is_bounded_at_4096_distinct_boundaries() -> None:
    history = SecurityHistory.initial(P)
    for boundary in range(2, MAX_LOCAL_SECURITY_HISTORY + 1):
        history = history.appended(E if boundary % 2 else P, boundary)
    assert history.distinct_boundaries() == MAX_LOCAL_SECURITY_HISTORY
    with pytest.raises(ConfigurationError, match="4096"):
        history.appended(P, MAX_LOCAL_SECURITY_HISTORY + 5)
    # A same-boundary change adds no boundary and stays allowed.
    history.appended(P, MAX_LOCAL_SECURITY_HISTORY)


@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=12), st.integers(1, 60))
def test_effective_entry_is_the_greatest_revision_whose_boundary_is_at_or_below(
    steps: list[tuple[int, bool]], seq: int
) -> None:
    history = SecurityHistory.initial(P)
    boundary = 1
    for gap, strict in steps:
        boundary += gap
        history = history.appended(E if strict else P, boundary)
    expected = max(
        (e for e in history.entries if e.effective_from_seq <= seq), key=lambda e: e.revision
    )
    assert history.at(seq) == expected


def test_write_set_prefers_age_v1_when_allowed_and_configured() -> None:
    c = caps(3, (1, ("none", "age-v1")))
    assert (
        plan_write(c, {"none", "age-v1"}, SecurityHistory.initial(P), age_configured=True).cipher
        == "age-v1"
    )
    assert (
        plan_write(c, {"none", "age-v1"}, SecurityHistory.initial(P), age_configured=False).cipher
        == "none"
    )


def test_e2ee_required_excludes_plaintext_from_the_write_set() -> None:
    c = caps(3, (1, ("none",)))
    plan = plan_write(c, {"none", "age-v1"}, SecurityHistory.initial(E), age_configured=True)
    assert plan.cipher is None and not plan.allow_new and plan.allowed == ()


def test_write_set_uses_the_local_entry_at_next_sequence_boundary() -> None:
    c = caps(9, (1, ("none", "age-v1")))
    history = SecurityHistory.initial(P).appended(E, 10)
    assert plan_write(c, {"none", "age-v1"}, history, age_configured=False).cipher is None


def test_write_set_excludes_ciphers_this_build_cannot_seal() -> None:
    c = caps(0, (1, ("future-cipher",)))
    plan = plan_write(c, {"none", "age-v1"}, SecurityHistory.initial(P), age_configured=True)
    assert not plan.allow_new and "empty" in (plan.reason or "")


def test_read_policy_intersects_server_and_local_history_at_the_sequence() -> None:
    c = caps(30, (1, ("none", "age-v1")), (20, ("age-v1",)))
    history = SecurityHistory.initial(P).appended(E, 10)
    assert read_policy(c, history, 5).allowed_ciphers == {"none", "age-v1"}
    at_15 = read_policy(c, history, 15)
    assert at_15.allowed_ciphers == {"age-v1"} and at_15.local_security_revision == 1
    at_25 = read_policy(c, history, 25)
    assert at_25.allowed_ciphers == {"age-v1"} and at_25.policy_revision == 1


def _candidate(position: int, blob_chars: int) -> SyncPushCandidate:
    blob = "A" * (blob_chars - blob_chars % 4 or 4)
    return SyncPushCandidate(position, f"l{position}", "0" * 36, Envelope(1, "none", None, blob))


@given(st.lists(st.integers(4, 600_000), max_size=60), st.integers(1, 1000))
def test_batches_are_bounded_by_count_and_bytes_and_keep_order(
    sizes: list[int], max_count: int
) -> None:
    candidates = [_candidate(i + 1, n) for i, n in enumerate(sizes)]
    batches = plan_batches(candidates, max_count=max_count)
    assert [c for b in batches for c in b] == candidates
    for batch in batches:
        assert 1 <= len(batch) <= max_count
        assert len(batch) == 1 or sum(item_bytes(c) for c in batch) <= BATCH_BYTE_BUDGET


def test_a_full_batch_stays_under_the_two_mebibyte_request_cap() -> None:
    import json

    batch = plan_batches([_candidate(i, 100_000) for i in range(1, 40)])[0]
    body = json.dumps(
        {"messages": [{"id": c.wire_id, "envelope": c.envelope.to_obj()} for c in batch]}
    )
    assert len(body.encode()) <= 2 * 1024 * 1024
