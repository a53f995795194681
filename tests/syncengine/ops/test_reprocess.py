"""reprocess (message-synchronization.md "Three independent progress layers";
specs/sync-stage1.md §4.4)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from syncengine.local_store import Store
from syncengine.ops.bindings import BindingKey
from syncengine.ops.sync_records import SyncPullCursor, SyncReprocessPage, format_page_key
from syncengine.store import InvalidInput
from tests.syncengine.ops.helpers import foreign_envelope, new_key, pull_record, table

BLOCKING = [
    "unsupported_cipher",
    "pending_key",
    "authentication_failed",
    "malformed",
    "policy_violation",
]


def _quarantine(store: Store, key: BindingKey, statuses: list[str]) -> list[str]:
    records = []
    for seq, status in enumerate(statuses, start=1):
        wire, env = foreign_envelope(key, f"b{seq}", "alice", "bob")
        records.append(pull_record(seq, wire, env, status))
    store.sync_apply_pull(key, records, SyncPullCursor(len(statuses)))
    return [r.wire_id for r in records]


def test_reprocess_emits_state_candidates_and_exactly_one_trailing_page(
    store: Store, key: BindingKey
) -> None:
    wires = _quarantine(store, key, ["pending_key", "importable", "malformed"])
    records = store.sync_reprocess(key, 10).records()
    assert [r["type"] for r in records] == [
        "sync_state",
        "sync_reprocess_candidate",
        "sync_reprocess_candidate",
        "sync_reprocess_page",
    ]
    assert [r["id"] for r in records[1:3]] == [wires[0], wires[2]]
    assert records[1]["prior_status"] == "pending_key"
    assert records[-1] == {"type": "sync_reprocess_page", "next_after": None, "has_more": False}


def test_reprocess_pages_carry_next_after_exactly_when_there_is_more(
    store: Store, key: BindingKey
) -> None:
    wires = _quarantine(store, key, ["pending_key"] * 3)
    first = store.sync_reprocess(key, 2)
    assert first.page == SyncReprocessPage(format_page_key(2, wires[1]), True)
    second = store.sync_reprocess(key, 2, first.page.next_after)
    assert [c.wire_id for c in second.candidates] == [wires[2]]
    assert second.page == SyncReprocessPage(None, False)


def test_a_full_last_page_says_no_more(store: Store, key: BindingKey) -> None:
    _quarantine(store, key, ["pending_key"] * 2)
    assert store.sync_reprocess(key, 2).page.has_more is False


def test_reprocess_never_changes_the_transport_cursor_or_generation(
    store: Store, key: BindingKey
) -> None:
    _quarantine(store, key, ["pending_key"])
    before = table(store.conn, "SELECT * FROM sync_bindings")
    result = store.sync_reprocess(key, 10)
    assert result.state.transport_cursor == 1
    assert result.state.driver_generation == store.driver_generation()
    assert table(store.conn, "SELECT * FROM sync_bindings") == before


def test_reprocess_writes_nothing(store: Store, key: BindingKey) -> None:
    _quarantine(store, key, ["pending_key"])
    changes = store.conn.total_changes()
    store.sync_reprocess(key, 10)
    assert store.conn.total_changes() == changes


def test_conflicting_pages_add_no_reprocess_candidates_and_corrupt_rows_are_never_offered(
    store: Store, key: BindingKey
) -> None:
    wire, env = foreign_envelope(key)
    store.sync_apply_pull(key, [pull_record(1, wire, env, "pending_key")], SyncPullCursor(1))
    from syncengine.ops.errors import SyncCorruptState

    _, forged = foreign_envelope(key)
    with pytest.raises(SyncCorruptState):
        store.sync_apply_pull(key, [pull_record(2, wire, forged)], SyncPullCursor(2))
    other, env3 = foreign_envelope(key)
    with pytest.raises(SyncCorruptState):
        store.sync_apply_pull(key, [pull_record(1, other, env3)], SyncPullCursor(2))
    # A legacy corrupt row (stores before the halting rule) is not offered either.
    store.conn.execute(
        "UPDATE sync_quarantine SET status = 'corrupt_state' WHERE wire_id = ?", (wire,)
    )
    assert store.sync_reprocess(key, 10).candidates == ()


def test_outcomes_return_through_apply_without_moving_transport(
    store: Store, key: BindingKey
) -> None:
    from wire.message import Message

    (wire,) = _quarantine(store, key, ["pending_key"])
    page = store.sync_reprocess(key, 10)
    (candidate,) = page.candidates
    message = Message.from_jcs(candidate.envelope.blob_bytes())
    record = pull_record(candidate.server_seq, wire, candidate.envelope, "importable", message)
    result = store.sync_apply_pull(key, [record], SyncPullCursor(page.state.transport_cursor))
    assert [o.status for o in result.outcomes] == ["imported"]
    assert result.result.transport_cursor == page.state.transport_cursor
    assert store.sync_reprocess(key, 10).candidates == ()


def test_reprocess_without_a_binding_reports_zero_and_creates_nothing(store: Store) -> None:
    key = new_key()
    result = store.sync_reprocess(key, 10)
    assert result.state.transport_cursor == 0 and result.candidates == ()
    assert table(store.conn, "SELECT count(*) FROM sync_bindings") == [(0,)]


@pytest.mark.parametrize("bad", ["", "1", "x:y", "01:" + "0" * 36, "1:not-a-uuid", "1:a:b"])
def test_reprocess_refuses_a_malformed_page_after(store: Store, key: BindingKey, bad: str) -> None:
    with pytest.raises(InvalidInput):
        store.sync_reprocess(key, 10, bad)


@pytest.mark.parametrize("limit", [0, 1001])
def test_reprocess_refuses_a_limit_outside_one_to_a_thousand(
    store: Store, key: BindingKey, limit: int
) -> None:
    with pytest.raises(InvalidInput, match="limit"):
        store.sync_reprocess(key, limit)


def test_keyset_query_reads_the_blocking_index(store: Store, key: BindingKey) -> None:
    _quarantine(store, key, ["pending_key"])
    from syncengine.ops.reprocess import KEYSET_SQL

    plan = table(store.conn, "EXPLAIN QUERY PLAN " + KEYSET_SQL, 1, 0, "", 3)
    details = " ".join(str(r[-1]) for r in plan)
    assert "INDEX sync_quarantine_blocking" in details and "TEMP B-TREE" not in details


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    statuses=st.lists(st.sampled_from([*BLOCKING, "importable"]), min_size=0, max_size=12),
    limit=st.integers(1, 5),
    healed=st.sets(st.integers(0, 11)),
)
def test_a_walk_visits_every_blocking_row_once_in_key_order_while_rows_heal_underneath(
    tmp_path_factory: pytest.TempPathFactory, statuses: list[str], limit: int, healed: set[int]
) -> None:
    from wire.message import Message

    with Store(tmp_path_factory.mktemp("walk") / "s.db") as store:
        store.init()
        store.create_team("dev", ["alice", "bob"])
        key = new_key()
        wires = _quarantine(store, key, statuses)
        blocking = [w for w, s in zip(wires, statuses, strict=True) if s != "importable"]
        seen: list[str] = []
        after: str | None = None
        while True:
            page = store.sync_reprocess(key, limit, after)
            assert len(page.candidates) <= limit
            for candidate in page.candidates:
                seen.append(candidate.wire_id)
                if wires.index(candidate.wire_id) in healed:  # recovers mid-walk
                    message = Message.from_jcs(candidate.envelope.blob_bytes())
                    record = pull_record(
                        candidate.server_seq,
                        candidate.wire_id,
                        candidate.envelope,
                        "importable",
                        message,
                    )
                    store.sync_apply_pull(
                        key, [record], SyncPullCursor(page.state.transport_cursor)
                    )
            if not page.page.has_more:
                break
            after = page.page.next_after
        assert seen == blocking
