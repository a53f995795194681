"""The operator's repair of acknowledgements a pulled page contradicted
(issue #14; specs/sync-stage1.md §8.21; ops/reconcile_push.py
``repair_contradicted_acks``).

A ``duplicate`` ack at a sequence this machine has not pulled cannot be
verified when it arrives, so a lying one becomes the reservation's mapping.
The genuine page then contradicts it and apply halts. Without a repair the
durable lie halts every later sync; the repair (run inside ``resume``'s
transaction) publishes the reservation again — same wire ID, byte-identical
envelope — so the genuine page imports and the next push asks the relay
again. A mapping confirmed by a pulled echo is never touched.
"""

from __future__ import annotations

import pytest

from syncengine.local_store import Store
from syncengine.ops.bindings import BindingKey
from syncengine.ops.errors import SyncCorruptState
from syncengine.ops.reconcile_push import (
    AckRepair,
    ConflictRow,
    OwnAck,
    plan_ack_repair,
    repair_contradicted_acks,
)
from syncengine.ops.sync_records import SyncPullCursor, SyncPushCandidate
from syncengine.store.connection import write_transaction
from tests.syncengine.ops.helpers import ack, foreign_envelope, prepare_none, pull_record, table


def _sent(store: Store, key: BindingKey, count: int) -> list[SyncPushCandidate]:
    for i in range(count):
        store.send("dev", "alice", "bob", f"v{i}")
    return list(store.sync_prepare_push(key, prepare_none(), 1000).candidates)


def _repair(store: Store) -> AckRepair:
    with write_transaction(store.conn, store.path) as conn:
        pk = conn.execute("SELECT binding_pk FROM sync_bindings").fetchone()[0]
        return repair_contradicted_acks(conn, pk)


def _push_rows(store: Store) -> list[tuple[object, ...]]:
    return table(
        store.conn,
        "SELECT local_position, state, wire_id, envelope_v, cipher, key_id, blob, server_seq"
        " FROM sync_push ORDER BY local_position",
    )


def _lied_at(store: Store, key: BindingKey, seq: int) -> tuple[SyncPushCandidate, str, object]:
    """v0 acked ``duplicate`` at ``seq``; the genuine page then shows another
    writer's message there (and v0 at ``seq + 1``), and apply halts."""
    (mine,) = _sent(store, key, 1)
    store.sync_reconcile_push(key, [ack(mine, seq, "duplicate")])
    wire, envelope = foreign_envelope(key)
    page = [pull_record(seq, wire, envelope), pull_record(seq + 1, mine.wire_id, mine.envelope)]
    with pytest.raises(SyncCorruptState):
        store.sync_apply_pull(key, page, SyncPullCursor(seq + 1))
    return mine, wire, envelope


def test_a_contradicted_ack_is_published_again_with_its_exact_wire_id_and_envelope(
    store: Store, key: BindingKey
) -> None:
    mine, _, _ = _lied_at(store, key, 3)
    before = _push_rows(store)
    repair = _repair(store)
    assert [(r.wire_id, r.server_seq) for r in repair.reverted] == [(mine.wire_id, 3)]
    (row,) = _push_rows(store)
    assert row[1:7] == ("reserved", *before[0][2:7]) and row[7] is None
    (again,) = store.sync_prepare_push(key, prepare_none(), 1000).candidates
    assert again == mine  # same wire ID, byte-identical envelope: never re-sealed


def test_after_the_repair_the_genuine_page_imports_and_echoes_our_message(
    store: Store, key: BindingKey
) -> None:
    mine, wire, envelope = _lied_at(store, key, 3)
    _repair(store)
    page = [pull_record(3, wire, envelope), pull_record(4, mine.wire_id, mine.envelope)]  # type: ignore[arg-type]
    applied = store.sync_apply_pull(key, page, SyncPullCursor(4))
    assert [o.status for o in applied.outcomes] == ["imported", "reconciled"]
    assert table(store.conn, "SELECT state, server_seq FROM sync_push") == [("acked", 4)]
    assert sorted(m.body for m in store.history("dev")) == ["from afar", "v0"]


def test_the_repair_clears_the_conflicts_it_resolves_and_keeps_the_corrupt_count(
    store: Store, key: BindingKey
) -> None:
    _lied_at(store, key, 3)
    counted = store.sync_binding(key).corrupt_count  # type: ignore[union-attr]
    assert counted == 2  # seq 3 held by v0, v0 served at 4
    repair = _repair(store)
    assert len(repair.conflicts) == 2
    assert table(store.conn, "SELECT count(*) FROM sync_conflicts") == [(0,)]
    assert store.sync_binding(key).corrupt_count == counted  # type: ignore[union-attr]


def test_the_repair_moves_the_push_cursor_back_below_the_reverted_reservation(
    store: Store, key: BindingKey
) -> None:
    first, second, third = _sent(store, key, 3)
    store.sync_reconcile_push(key, [ack(first, 1), ack(second, 2, "duplicate"), ack(third, 3)])
    assert store.sync_binding(key).push_cursor == third.local_position  # type: ignore[union-attr]
    wire, envelope = foreign_envelope(key)
    with pytest.raises(SyncCorruptState):
        store.sync_apply_pull(key, [pull_record(2, wire, envelope)], SyncPullCursor(2))
    repair = _repair(store)
    assert repair.push_cursor == first.local_position
    assert store.sync_binding(key).push_cursor == first.local_position  # type: ignore[union-attr]
    assert [c.wire_id for c in store.sync_prepare_push(key, prepare_none(), 10).candidates] == [
        second.wire_id
    ]


def test_our_wire_id_served_at_another_sequence_repairs_an_ack_only_mapping(
    store: Store, key: BindingKey
) -> None:
    (mine,) = _sent(store, key, 1)
    store.sync_reconcile_push(key, [ack(mine, 5)])  # "stored at 5"; the relay has it at 1
    with pytest.raises(SyncCorruptState):
        store.sync_apply_pull(key, [pull_record(1, mine.wire_id, mine.envelope)], SyncPullCursor(1))
    repair = _repair(store)
    assert [(r.wire_id, r.server_seq) for r in repair.reverted] == [(mine.wire_id, 5)]
    store.sync_apply_pull(key, [pull_record(1, mine.wire_id, mine.envelope)], SyncPullCursor(1))
    assert table(store.conn, "SELECT state, server_seq FROM sync_push") == [("acked", 1)]


def test_a_mapping_a_pulled_echo_confirmed_is_never_repaired(store: Store, key: BindingKey) -> None:
    (mine,) = _sent(store, key, 1)
    store.sync_reconcile_push(key, [ack(mine, 1)])
    store.sync_apply_pull(key, [pull_record(1, mine.wire_id, mine.envelope)], SyncPullCursor(1))
    wire, envelope = foreign_envelope(key)
    with pytest.raises(SyncCorruptState):  # the relay now contradicts its own page
        store.sync_apply_pull(key, [pull_record(1, wire, envelope)], SyncPullCursor(1))
    before = _push_rows(store)
    repair = _repair(store)
    assert repair.reverted == () and repair.conflicts == ()
    assert _push_rows(store) == before
    assert table(store.conn, "SELECT count(*) FROM sync_conflicts") == [(1,)]


def test_the_repair_drops_read_uploads_queued_under_the_false_sequence(
    store: Store, key: BindingKey
) -> None:
    mine, _, _ = _lied_at(store, key, 3)
    pk = store.sync_binding(key).pk  # type: ignore[union-attr]
    with write_transaction(store.conn, store.path) as conn:
        conn.execute(
            "INSERT INTO read_outbox (binding_pk, member_id, wire_id, server_seq)"
            " VALUES (?, 'member-1', ?, 3)",
            (pk, mine.wire_id),
        )
    _repair(store)
    assert table(store.conn, "SELECT count(*) FROM read_outbox") == [(0,)]


def test_a_repair_with_nothing_contradicted_changes_nothing(store: Store, key: BindingKey) -> None:
    cands = _sent(store, key, 2)
    store.sync_reconcile_push(key, [ack(cands[0], 1), ack(cands[1], 2, "duplicate")])
    before = [_push_rows(store), table(store.conn, "SELECT * FROM sync_bindings")]
    assert _repair(store).reverted == ()
    assert [_push_rows(store), table(store.conn, "SELECT * FROM sync_bindings")] == before


def test_plan_ack_repair_ignores_ack_conflicts_and_reverts_each_reservation_once() -> None:
    own = [OwnAck(10, "w-mine", 3)]
    conflicts = [
        (1, ConflictRow("ack_sequence_conflict", "w-mine", 9, "", "an ack contradiction")),
        (2, ConflictRow("sequence_wire_conflict", "w-other", 3, "d", "seq 3 held")),
        (3, ConflictRow("wire_envelope_mismatch", "w-mine", 4, "d", "ours at 4")),
        (4, ConflictRow("wire_envelope_mismatch", "w-mine", 3, "d", "another envelope at 3")),
    ]
    reverted, resolved = plan_ack_repair(conflicts, own)
    assert reverted == (OwnAck(10, "w-mine", 3),)
    # an envelope mismatch at the acked sequence itself is no sequence lie
    assert resolved == (2, 3)
