"""reconcile_push (message-synchronization.md "Reconcile push"; specs/sync-stage1.md §4.2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from syncengine.ops.bindings import BindingKey
from syncengine.ops.errors import SyncCorruptState
from syncengine.ops.records import SyncPushAck, SyncPushCandidate
from syncengine.store import InvalidInput, Store
from tests.syncengine.ops.helpers import (
    FakeRelay,
    ack,
    foreign_envelope,
    prepare_none,
    pull_record,
    table,
)


def _candidates(store: Store, key: BindingKey, count: int) -> list[SyncPushCandidate]:
    for i in range(count):
        store.send("dev", "alice", "bob", f"m{i}")
    return list(store.sync_prepare_push(key, prepare_none(), 1000).candidates)


def _snapshot(store: Store) -> list[object]:
    return [
        table(store.conn, "SELECT * FROM sync_push ORDER BY local_position"),
        table(store.conn, "SELECT * FROM sync_bindings"),
        table(store.conn, "SELECT * FROM sync_conflicts"),
    ]


def test_reconcile_records_server_seq_and_advances_the_push_cursor(
    store: Store, key: BindingKey
) -> None:
    cands = _candidates(store, key, 2)
    result = store.sync_reconcile_push(key, [ack(cands[0], 5), ack(cands[1], 6)])
    assert result.push_cursor == cands[1].local_position
    assert table(store.conn, "SELECT server_seq, state FROM sync_push ORDER BY local_position") == [
        (5, "acked"),
        (6, "acked"),
    ]


def test_a_later_ack_cannot_skip_an_earlier_unacknowledged_position(
    store: Store, key: BindingKey
) -> None:
    cands = _candidates(store, key, 3)
    result = store.sync_reconcile_push(key, [ack(cands[1], 7), ack(cands[2], 8)])
    assert result.push_cursor == 0
    result = store.sync_reconcile_push(key, [ack(cands[0], 9)])
    assert result.push_cursor == cands[2].local_position


def test_the_push_cursor_stops_just_below_the_first_gap(store: Store, key: BindingKey) -> None:
    cands = _candidates(store, key, 4)
    result = store.sync_reconcile_push(key, [ack(cands[0], 1), ack(cands[1], 2), ack(cands[3], 4)])
    assert result.push_cursor == cands[1].local_position


def test_replaying_the_same_acks_is_idempotent(store: Store, key: BindingKey) -> None:
    cands = _candidates(store, key, 2)
    acks = [ack(c, i + 1) for i, c in enumerate(cands)]
    first = store.sync_reconcile_push(key, acks)
    before = _snapshot(store)
    assert store.sync_reconcile_push(key, acks) == first
    assert _snapshot(store) == before


def test_reconcile_with_no_acks_reports_the_current_push_cursor(
    store: Store, key: BindingKey
) -> None:
    cands = _candidates(store, key, 1)
    store.sync_reconcile_push(key, [ack(cands[0], 1)])
    assert store.sync_reconcile_push(key, []).push_cursor == cands[0].local_position


def test_an_ack_for_an_unknown_position_is_refused_and_changes_nothing(
    store: Store, key: BindingKey
) -> None:
    cands = _candidates(store, key, 1)
    before = _snapshot(store)
    bad = SyncPushAck(cands[0].local_position + 99, cands[0].wire_id, 1, "stored")
    with pytest.raises(InvalidInput, match="no published reservation"):
        store.sync_reconcile_push(key, [ack(cands[0], 1), bad])
    assert _snapshot(store) == before


def test_an_ack_whose_wire_id_differs_from_the_reservation_is_refused(
    store: Store, key: BindingKey
) -> None:
    cands = _candidates(store, key, 2)
    before = _snapshot(store)
    swapped = SyncPushAck(cands[0].local_position, cands[1].wire_id, 1, "stored")
    with pytest.raises(InvalidInput, match="wire ID differs"):
        store.sync_reconcile_push(key, [swapped])
    assert _snapshot(store) == before


def test_a_conflicting_server_seq_is_durable_corrupt_state(store: Store, key: BindingKey) -> None:
    cands = _candidates(store, key, 1)
    store.sync_reconcile_push(key, [ack(cands[0], 1)])
    with pytest.raises(SyncCorruptState) as caught:
        store.sync_reconcile_push(key, [ack(cands[0], 2)])
    assert caught.value.status.label == "corrupt_state"
    assert table(store.conn, "SELECT kind, server_seq FROM sync_conflicts") == [
        ("ack_sequence_conflict", 2)
    ]
    assert table(store.conn, "SELECT server_seq FROM sync_push") == [(1,)]
    assert store.sync_binding(key).corrupt_count == 1  # type: ignore[union-attr]


def test_a_sequence_owned_by_another_wire_id_is_durable_corrupt_state(
    store: Store, key: BindingKey
) -> None:
    cands = _candidates(store, key, 2)
    store.sync_reconcile_push(key, [ack(cands[0], 1)])
    with pytest.raises(SyncCorruptState):
        store.sync_reconcile_push(key, [ack(cands[1], 1)])
    assert table(store.conn, "SELECT kind FROM sync_conflicts") == [("ack_wire_conflict",)]
    assert table(store.conn, "SELECT state FROM sync_push ORDER BY local_position") == [
        ("acked",),
        ("reserved",),
    ]


def test_a_sequence_held_by_a_pulled_wire_id_is_corrupt_state_for_an_ack(
    store: Store, key: BindingKey
) -> None:
    wire, envelope = foreign_envelope(key)
    store.sync_apply_pull(key, [pull_record(1, wire, envelope)], _cursor(1))
    cands = _candidates(store, key, 1)
    with pytest.raises(SyncCorruptState):
        store.sync_reconcile_push(key, [ack(cands[0], 1)])


def test_a_conflict_recorded_twice_counts_once(store: Store, key: BindingKey) -> None:
    cands = _candidates(store, key, 1)
    store.sync_reconcile_push(key, [ack(cands[0], 1)])
    for _ in range(2):
        with pytest.raises(SyncCorruptState):
            store.sync_reconcile_push(key, [ack(cands[0], 2)])
    assert store.sync_binding(key).corrupt_count == 1  # type: ignore[union-attr]


def test_duplicate_disposition_acks_reconcile_like_stored_ones(
    store: Store, key: BindingKey
) -> None:
    cands = _candidates(store, key, 1)
    relay = FakeRelay()
    relay.push(cands)
    (again,) = relay.push(cands)
    assert again.disposition == "duplicate"
    assert store.sync_reconcile_push(key, [again]).push_cursor == cands[0].local_position


def _cursor(n: int) -> object:
    from syncengine.ops.records import SyncPullCursor

    return SyncPullCursor(n)


def test_first_gap_query_uses_the_open_reservation_index(store: Store, key: BindingKey) -> None:
    _candidates(store, key, 1)
    plan = table(
        store.conn,
        "EXPLAIN QUERY PLAN SELECT min(local_position) FROM sync_push"
        " WHERE binding_pk = 1 AND state != 'acked'",
    )
    details = " ".join(str(row[-1]) for row in plan)
    assert "USING" in details and "INDEX sync_push_open" in details and "SCAN" not in details


def test_push_cursor_queries_never_scan_the_reservations(store: Store, key: BindingKey) -> None:
    _candidates(store, key, 1)
    for sql in (
        "SELECT max(local_position) FROM sync_push WHERE binding_pk = 1 AND local_position < 5",
        "SELECT max(local_position) FROM sync_push WHERE binding_pk = 1",
    ):
        details = " ".join(str(r[-1]) for r in table(store.conn, "EXPLAIN QUERY PLAN " + sql))
        assert "SCAN" not in details, details


def test_reconcile_stays_on_indexes_with_100000_reservations(tmp_path: Path) -> None:
    """agmsg #910/#912: reconcile was quadratic. Build 100,000 reservations in
    bulk and prove the statements reconcile runs are index searches."""
    from syncengine.ids import new_uuid4
    from syncengine.ops import reconcile_push as rp

    with Store(tmp_path / "big.db") as store:
        store.init()
        store.create_team("dev", ["alice", "bob"])
        conn = store.conn
        team, alice, bob = 1, 1, 2
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO messages (seq, id, team_pk, sender_pk, recipient_pk, body, at, origin)"
            " VALUES (?, ?, ?, ?, ?, 'b', '2026-01-01T00:00:00.000000Z', 'local')",
            ((n, f"id-{n}", team, alice, bob) for n in range(1, 100_001)),
        )
        conn.execute("COMMIT")
        key = BindingKey("dev", *_ids())
        store.sync_bind(key)
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO sync_push (binding_pk, local_position, state, wire_id, envelope_v, cipher,"
            " key_id, blob, server_seq) VALUES (1, ?, ?, ?, 1, 'none', NULL, 'eyJ9', ?)",
            (
                (n, "acked" if n < 50_000 else "reserved", new_uuid4(), n if n < 50_000 else None)
                for n in range(1, 100_001)
            ),
        )
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        executed: list[str] = []
        conn.exec_trace = lambda _c, sql, _b: executed.append(sql) or True
        row = conn.execute(
            "SELECT wire_id FROM sync_push WHERE binding_pk = 1 AND local_position = 50000"
        ).fetchone()
        result = store.sync_reconcile_push(key, [SyncPushAck(50_000, row[0], 50_000, "stored")])
        conn.exec_trace = None
        assert result.push_cursor == 50_000
        checked = {s for s in executed if "sync_push" in s and s.lstrip().startswith("SELECT")}
        assert len(checked) >= 3  # facts, first gap, highest acked below it
        for sql in checked:
            plan = table(conn, "EXPLAIN QUERY PLAN " + sql, *([1] * sql.count("?")))
            details = " ".join(str(r[-1]) for r in plan)
            assert "SCAN sync_push" not in details, (sql, details)
        assert rp.contiguous_push_cursor(conn, 1, 0) == 50_000


def _ids() -> tuple[str, str]:
    from syncengine.ids import new_uuid7

    return new_uuid7(), new_uuid7()
