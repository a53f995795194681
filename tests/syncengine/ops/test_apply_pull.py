"""apply_pull (message-synchronization.md "Apply pull"; ADR 0005 failure
scenarios; specs/sync-stage1.md §4.3)."""

from __future__ import annotations

from typing import Any

import pytest

from syncengine.ids import new_uuid4, new_uuid7
from syncengine.local_store import Store
from syncengine.ops.bindings import BindingKey
from syncengine.ops.sync_records import SyncPullCursor, SyncPullMessage, SyncPushCandidate
from syncengine.store import InvalidInput
from tests.syncengine.ops.helpers import (
    RECEIVED,
    Classifier,
    FakeRelay,
    ack,
    foreign_envelope,
    prepare_age,
    prepare_none,
    pull_record,
    table,
)
from wire.age_keys import X25519Identity
from wire.envelope import Envelope
from wire.message import Message


def _state(store: Store) -> list[object]:
    return [
        table(store.conn, "SELECT * FROM messages ORDER BY seq"),
        table(store.conn, "SELECT * FROM members ORDER BY member_pk"),
        table(store.conn, "SELECT * FROM sync_quarantine ORDER BY server_seq"),
        table(store.conn, "SELECT * FROM sync_push ORDER BY local_position"),
        table(store.conn, "SELECT * FROM sync_bindings"),
        table(store.conn, "SELECT * FROM sync_conflicts"),
    ]


def _apply(store: Store, key: BindingKey, messages: list[SyncPullMessage], after: int) -> list[str]:
    result = store.sync_apply_pull(key, messages, SyncPullCursor(after))
    return [o.status for o in result.outcomes]


def _own(store: Store, key: BindingKey, body: str = "mine") -> SyncPushCandidate:
    store.send("dev", "alice", "bob", body)
    return store.sync_prepare_push(key, prepare_none(), 10).candidates[-1]


def _bodies(store: Store) -> list[tuple[str, str]]:
    return [(m.body, m.origin) for m in store.history("dev")]


def test_an_unmapped_importable_message_is_imported_once_with_a_new_local_id(
    store: Store, key: BindingKey
) -> None:
    wire, env = foreign_envelope(key, "hello", "alice", "bob")
    assert _apply(store, key, [pull_record(1, wire, env)], 1) == ["imported"]
    (message,) = store.history("dev")
    assert (message.body, message.origin) == ("hello", "imported")
    assert message.id != wire and message.id[14] == "7"
    assert _apply(store, key, [pull_record(1, wire, env)], 1) == ["reconciled"]
    assert len(store.history("dev")) == 1


def test_an_import_keeps_the_senders_created_at(store: Store, key: BindingKey) -> None:
    wire, env = foreign_envelope(key, "hello", "alice", "bob")
    _apply(store, key, [pull_record(1, wire, env)], 1)
    assert store.history("dev")[0].at == Message.from_jcs(env.blob_bytes()).created_at


def test_importing_never_marks_anything_read(store: Store, key: BindingKey) -> None:
    wire, env = foreign_envelope(key, "hello", "alice", "bob")
    _apply(store, key, [pull_record(1, wire, env)], 1)
    assert [m.body for m in store.list_unread("dev", "bob")] == ["hello"]
    assert table(store.conn, "SELECT count(*) FROM message_reads") == [(0,)]


def test_a_pulled_sender_name_is_stored_but_never_joins_the_roster(
    store: Store, key: BindingKey
) -> None:
    wire, env = foreign_envelope(key, "hi", "zed", "alice")
    _apply(store, key, [pull_record(1, wire, env)], 1)
    assert [m.name for m in store.team("dev").members] == ["alice", "bob"]
    assert [(m.sender, m.body) for m in store.list_unread("dev", "alice")] == [("zed", "hi")]
    assert [m.body for m in store.history("dev", "zed")] == ["hi"]


def test_every_unchanged_envelope_is_quarantined_keyed_by_wire_id(
    store: Store, key: BindingKey
) -> None:
    wire, env = foreign_envelope(key)
    _apply(store, key, [pull_record(3, wire, env, "pending_key", reason="no identity")], 3)
    assert table(
        store.conn,
        "SELECT wire_id, server_seq, server_received_at, envelope_v, cipher, key_id, blob, status,"
        " reason FROM sync_quarantine",
    ) == [(wire, 3, RECEIVED, 1, "none", None, env.blob, "pending_key", "no identity")]


@pytest.mark.parametrize(
    "status",
    ["unsupported_cipher", "pending_key", "authentication_failed", "malformed", "policy_violation"],
)
def test_blocking_states_stay_durable_and_import_nothing(
    store: Store, key: BindingKey, status: str
) -> None:
    wire, env = foreign_envelope(key)
    assert _apply(store, key, [pull_record(1, wire, env, status)], 1) == [status]
    assert store.history("dev") == []
    assert store.sync_status(key).quarantine == {status: 1}


def test_the_transport_cursor_moves_to_next_after_with_the_outcomes(
    store: Store, key: BindingKey
) -> None:
    wire, env = foreign_envelope(key)
    result = store.sync_apply_pull(key, [pull_record(4, wire, env)], SyncPullCursor(9))
    assert result.result.transport_cursor == 9
    prepared = store.sync_prepare_push(key, prepare_none(), 1).state
    assert prepared.transport_cursor == 9


def test_an_empty_page_moves_the_transport_cursor(store: Store, key: BindingKey) -> None:
    assert store.sync_apply_pull(key, [], SyncPullCursor(5)).result.transport_cursor == 5


def test_apply_refuses_to_move_the_transport_cursor_backwards(
    store: Store, key: BindingKey
) -> None:
    store.sync_apply_pull(key, [], SyncPullCursor(5))
    before = _state(store)
    with pytest.raises(InvalidInput, match="backwards"):
        store.sync_apply_pull(key, [], SyncPullCursor(4))
    assert _state(store) == before


def test_apply_refuses_a_message_beyond_next_after(store: Store, key: BindingKey) -> None:
    wire, env = foreign_envelope(key)
    with pytest.raises(InvalidInput, match="beyond"):
        store.sync_apply_pull(key, [pull_record(6, wire, env)], SyncPullCursor(5))


def test_apply_refuses_a_page_repeating_a_wire_id_or_sequence(
    store: Store, key: BindingKey
) -> None:
    wire, env = foreign_envelope(key)
    other, env2 = foreign_envelope(key)
    with pytest.raises(InvalidInput, match="twice"):
        _apply(store, key, [pull_record(1, wire, env), pull_record(2, wire, env)], 2)
    with pytest.raises(InvalidInput, match="twice"):
        _apply(store, key, [pull_record(1, wire, env), pull_record(1, other, env2)], 2)


def test_a_failing_page_writes_nothing_at_all(
    store: Store, key: BindingKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    import syncengine.ops.apply_pull as ap

    store.sync_bind(key)
    before = _state(store)
    wire, env = foreign_envelope(key)

    def boom(*args: Any) -> int:
        raise RuntimeError("injected failure after the imports")

    monkeypatch.setattr(ap.read_overlay, "on_mappings", boom)  # type: ignore[attr-defined]
    with pytest.raises(RuntimeError):
        _apply(store, key, [pull_record(1, wire, env)], 1)
    assert _state(store) == before


def test_echo_after_ack_reconciles_without_a_new_local_event(store: Store, key: BindingKey) -> None:
    mine = _own(store, key)
    relay = FakeRelay()
    store.sync_reconcile_push(key, relay.push([mine]))
    (echo,), cursor = Classifier(key).page(relay, 0)
    assert _apply(store, key, [echo], cursor.next_after) == ["reconciled"]
    assert _bodies(store) == [("mine", "local")]


def test_echo_before_ack_records_the_server_seq_on_the_reservation(
    store: Store, key: BindingKey
) -> None:
    mine = _own(store, key)
    relay = FakeRelay()
    (lost_ack,) = relay.push([mine])
    (echo,), cursor = Classifier(key).page(relay, 0)
    assert _apply(store, key, [echo], cursor.next_after) == ["reconciled"]
    assert table(store.conn, "SELECT state, server_seq FROM sync_push") == [("acked", 1)]
    assert store.sync_prepare_push(key, prepare_none(), 10).candidates == ()
    # The late ack then agrees with the echo: idempotent, one local event.
    assert store.sync_reconcile_push(key, [lost_ack]).push_cursor == mine.local_position
    assert _bodies(store) == [("mine", "local")]


def test_echo_before_ack_advances_the_push_cursor(store: Store, key: BindingKey) -> None:
    mine = _own(store, key)
    relay = FakeRelay()
    relay.push([mine])
    (echo,), cursor = Classifier(key).page(relay, 0)
    _apply(store, key, [echo], cursor.next_after)
    assert store.sync_binding(key).push_cursor == mine.local_position  # type: ignore[union-attr]


def test_a_late_ack_disagreeing_with_the_echo_is_corrupt_state(
    store: Store, key: BindingKey
) -> None:
    from syncengine.ops.errors import SyncCorruptState

    mine = _own(store, key)
    _apply(store, key, [pull_record(1, mine.wire_id, mine.envelope)], 1)
    with pytest.raises(SyncCorruptState):
        store.sync_reconcile_push(key, [ack(mine, 2)])


def test_an_echo_with_a_blocking_status_keeps_that_status_and_imports_nothing(
    store: Store, key: BindingKey
) -> None:
    mine = _own(store, key)
    record = pull_record(1, mine.wire_id, mine.envelope, "policy_violation")
    assert _apply(store, key, [record], 1) == ["policy_violation"]
    assert _bodies(store) == [("mine", "local")]
    assert table(store.conn, "SELECT server_seq FROM sync_push") == [(1,)]


def _refused(store: Store, key: BindingKey, records: list[Any], next_after: int) -> None:
    """The page is an integrity violation: it raises, records its conflict,
    and neither imports anything nor moves the cursor."""
    from syncengine.ops.errors import SyncCorruptState

    cursor = store.sync_binding(key).transport_cursor  # type: ignore[union-attr]
    with pytest.raises(SyncCorruptState, match="nothing applied"):
        store.sync_apply_pull(key, records, SyncPullCursor(next_after))
    assert store.sync_binding(key).transport_cursor == cursor  # type: ignore[union-attr]


def test_a_different_envelope_under_our_wire_id_halts_the_page_and_is_never_imported(
    store: Store, key: BindingKey
) -> None:
    mine = _own(store, key)
    _, other = foreign_envelope(key, "forged", "alice", "bob")
    _refused(store, key, [pull_record(1, mine.wire_id, other)], 1)
    assert _bodies(store) == [("mine", "local")]
    assert table(store.conn, "SELECT kind FROM sync_conflicts") == [("wire_envelope_mismatch",)]
    assert table(store.conn, "SELECT state FROM sync_push") == [("reserved",)]


def test_a_different_envelope_under_a_pulled_wire_id_halts_the_page(
    store: Store, key: BindingKey
) -> None:
    wire, env = foreign_envelope(key, "first", "alice", "bob")
    _apply(store, key, [pull_record(1, wire, env)], 1)
    _, forged = foreign_envelope(key, "second", "alice", "bob")
    _refused(store, key, [pull_record(2, wire, forged)], 2)
    assert store.sync_binding(key).corrupt_count == 1  # type: ignore[union-attr]
    assert [m.body for m in store.history("dev")] == ["first"]


def test_a_sequence_held_by_another_wire_id_halts_the_page(store: Store, key: BindingKey) -> None:
    wire, env = foreign_envelope(key, "first", "alice", "bob")
    _apply(store, key, [pull_record(1, wire, env)], 1)
    other, env2 = foreign_envelope(key, "second", "alice", "bob")
    _refused(store, key, [pull_record(1, other, env2)], 1)
    assert [m.body for m in store.history("dev")] == ["first"]
    assert table(store.conn, "SELECT kind FROM sync_conflicts") == [("sequence_wire_conflict",)]


def test_a_known_message_re_served_at_the_next_sequence_never_moves_the_cursor_past_it(
    store: Store, key: BindingKey
) -> None:
    """#14: a relay re-serving a message we hold at the next sequence must not
    make the client skip the genuine message stored there."""
    wire, env = foreign_envelope(key, "first", "alice", "bob")
    _apply(store, key, [pull_record(1, wire, env)], 1)
    genuine, genuine_env = foreign_envelope(key, "second", "alice", "bob")
    _refused(store, key, [pull_record(2, wire, env)], 2)  # the replay at seq 2
    assert _apply(store, key, [pull_record(2, genuine, genuine_env)], 2) == ["imported"]
    assert [m.body for m in store.history("dev")] == ["first", "second"]


def test_a_conflict_anywhere_in_a_page_applies_none_of_it(store: Store, key: BindingKey) -> None:
    wire, env = foreign_envelope(key, "first", "alice", "bob")
    _apply(store, key, [pull_record(1, wire, env)], 1)
    fine, fine_env = foreign_envelope(key, "fine", "alice", "bob")
    _, forged = foreign_envelope(key, "forged", "alice", "bob")
    _refused(store, key, [pull_record(2, fine, fine_env), pull_record(3, wire, forged)], 3)
    assert [m.body for m in store.history("dev")] == ["first"]


def test_a_sequence_acknowledged_to_our_reservation_cannot_import_a_foreign_wire_id(
    store: Store, key: BindingKey
) -> None:
    mine = _own(store, key)
    store.sync_reconcile_push(key, [ack(mine, 1)])
    wire, env = foreign_envelope(key, "intruder", "alice", "bob")
    _refused(store, key, [pull_record(1, wire, env)], 1)
    assert _bodies(store) == [("mine", "local")]


def test_corrupt_count_is_cumulative_for_the_binding_and_replays_do_not_inflate_it(
    store: Store, key: BindingKey
) -> None:
    wire, env = foreign_envelope(key, "first", "alice", "bob")
    _apply(store, key, [pull_record(1, wire, env)], 1)
    _, forged = foreign_envelope(key, "second", "alice", "bob")
    for _ in range(2):
        _refused(store, key, [pull_record(1, wire, forged)], 1)
    assert store.sync_binding(key).corrupt_count == 1  # type: ignore[union-attr]


def test_a_pending_key_row_evaluated_importable_later_is_imported_once(
    store: Store, key: BindingKey, age_identity: X25519Identity
) -> None:
    wire, env = foreign_envelope(key, "secret", "alice", "bob", identity=age_identity)
    _apply(store, key, [pull_record(1, wire, env, "pending_key")], 1)
    assert store.history("dev") == []
    (entry,) = [e for e in _relay_of(wire, env).entries]
    record = Classifier(key, {"epoch-1": age_identity}).pull_message(entry)
    assert _apply(store, key, [record], 1) == ["imported"]
    assert _apply(store, key, [record], 1) == ["reconciled"]
    assert _bodies(store) == [("secret", "imported")]


def test_an_imported_message_recovered_from_quarantine_is_never_pushed_as_new(
    store: Store, key: BindingKey, age_identity: X25519Identity
) -> None:
    """agmsg #949: recovered messages were pushed again under new wire IDs."""
    wire, env = foreign_envelope(key, "recovered", "alice", "bob", identity=age_identity)
    _apply(store, key, [pull_record(1, wire, env, "pending_key")], 1)
    page = store.sync_reprocess(key, 10)
    assert [c.wire_id for c in page.candidates] == [wire]
    record = Classifier(key, {"epoch-1": age_identity}).pull_message(
        _relay_of(wire, env).entries[0]
    )
    store.sync_apply_pull(key, [record], SyncPullCursor(page.state.transport_cursor))
    assert store.sync_prepare_push(key, prepare_none(), 1000).candidates == ()
    assert table(store.conn, "SELECT count(*) FROM sync_push") == [(0,)]


def test_an_importable_projection_must_match_its_none_envelope(
    store: Store, key: BindingKey
) -> None:
    from syncengine.ops.sync_records import SyncPullMessage

    wire, env = foreign_envelope(key, "real", "alice", "bob")
    obj = pull_record(1, wire, env).to_obj()
    obj["projection"]["body"] = "forged"
    with pytest.raises(InvalidInput, match="projection"):
        SyncPullMessage.from_obj(obj)


def test_an_envelope_with_an_empty_blob_is_refused_by_the_driver(key: BindingKey) -> None:
    wire, env = foreign_envelope(key)
    obj = pull_record(1, wire, env, "malformed").to_obj()
    obj["envelope"]["blob"] = ""
    with pytest.raises(InvalidInput, match="blob"):
        SyncPullMessage.from_obj(obj)


def test_an_agent_name_the_local_store_cannot_hold_refuses_the_page_untouched(
    store: Store, key: BindingKey
) -> None:
    wire, env = foreign_envelope(key, "hi", "x:y", "alice")
    store.sync_bind(key)
    before = _state(store)
    with pytest.raises(InvalidInput, match="':'"):
        _apply(store, key, [pull_record(1, wire, env)], 1)
    assert _state(store) == before


def _relay_of(wire: str, env: Envelope) -> FakeRelay:
    relay = FakeRelay()
    relay.post(wire, env)
    return relay


def _roster_record(key: BindingKey, seq: int) -> dict[str, Any]:
    """A roster control record as a host's engine projects it (no body)."""
    from wire import jcs
    from wire.envelope import Envelope as Env

    projection = {
        "kind": "member_joined",
        "mutation_id": new_uuid7(),
        "member_id": new_uuid7(),
        "name": "carol",
        "occurred_at": "2026-08-01T10:00:00.000000Z",
    }
    envelope = Env.from_blob_bytes("none", None, jcs.canonicalize(projection))
    return {
        "type": "sync_pull_message",
        "server_seq": str(seq),
        "id": new_uuid4(),
        "server_received_at": "2026-08-01T10:00:00.123456Z",
        "envelope": envelope.to_obj(),
        "status": "importable",
        "policy_revision": "0",
        "local_security_revision": "0",
        "projection": projection,
    }


def test_a_roster_control_record_is_imported_without_a_chat_message(
    store: Store, key: BindingKey
) -> None:
    record = SyncPullMessage.from_obj(_roster_record(key, 1))
    result = store.sync_apply_pull(key, [record], SyncPullCursor(1))
    assert [o.status for o in result.outcomes] == ["imported"]
    assert store.history("dev") == []
    again = store.sync_apply_pull(key, [record], SyncPullCursor(1))
    assert [o.status for o in again.outcomes] == ["reconciled"]
    assert store.history("dev") == []


def test_a_projection_with_neither_body_nor_a_roster_kind_is_refused(key: BindingKey) -> None:
    record = _roster_record(key, 1)
    record["projection"]["kind"] = "team_dissolved"
    with pytest.raises(InvalidInput, match="roster record"):
        SyncPullMessage.from_obj(record)


def _sealed(key: BindingKey, identity: X25519Identity, body: str) -> tuple[str, Envelope, Message]:
    wire, env = foreign_envelope(key, body, "alice", "bob", identity=identity)
    return wire, env, Message(body, "2026-08-01T09:00:00.000000Z", "alice", "bob")


def test_a_sealed_envelope_already_pulled_under_another_wire_id_is_a_replay_and_halts(
    store: Store, key: BindingKey, age_identity: X25519Identity
) -> None:
    """#14: the relay re-served an old age-v1 envelope under a new wire ID at
    the sequence of a genuine message: it became a second copy of the old
    message and the cursor passed the genuine one."""
    wire, env, message = _sealed(key, age_identity, "once")
    _apply(store, key, [pull_record(1, wire, env, projection=message)], 1)
    _refused(store, key, [pull_record(2, new_uuid4(), env, projection=message)], 2)
    assert _bodies(store) == [("once", "imported")]
    (reason,) = table(store.conn, "SELECT reason FROM sync_conflicts")
    assert f"already held under wire ID {wire}" in reason[0]


def test_our_own_sealed_envelope_re_served_under_another_wire_id_is_a_replay(
    store: Store, key: BindingKey, age_identity: X25519Identity
) -> None:
    store.send("dev", "alice", "bob", "mine")
    (mine,) = store.sync_prepare_push(key, prepare_age(age_identity), 10).candidates
    projection = store.history("dev")[0]
    copy = pull_record(
        1,
        new_uuid4(),
        mine.envelope,
        projection=Message(projection.body, projection.at, "alice", "bob"),
    )
    _refused(store, key, [copy], 1)
    assert _bodies(store) == [("mine", "local")]


def test_one_sealed_envelope_twice_in_a_page_under_two_wire_ids_is_refused(
    store: Store, key: BindingKey, age_identity: X25519Identity
) -> None:
    wire, env, message = _sealed(key, age_identity, "once")
    _apply(store, key, [], 0)  # the binding exists
    records = [
        pull_record(1, wire, env, projection=message),
        pull_record(2, new_uuid4(), env, projection=message),
    ]
    _refused(store, key, records, 2)
    assert store.history("dev") == []


def test_identical_plaintext_envelopes_under_two_wire_ids_are_two_messages(
    store: Store, key: BindingKey
) -> None:
    """``none`` is deterministic: one sender saying the same thing twice within
    one timestamp yields identical envelopes, and both are genuine."""
    wire, env = foreign_envelope(key, "ok", "alice", "bob")
    assert _apply(store, key, [pull_record(1, wire, env)], 1) == ["imported"]
    assert _apply(store, key, [pull_record(2, new_uuid4(), env)], 2) == ["imported"]
    assert _bodies(store) == [("ok", "imported"), ("ok", "imported")]
