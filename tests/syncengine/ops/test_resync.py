"""resync-status and resync against a real store
(retention-gap-resynchronization.md "Driver transaction and audit record";
specs/sync-stage1.md §4.5).

Status is strictly read-only. A resync records one immutable audit row and
moves only the transport cursor to the accepted floor; every reservation,
acknowledgement, mapping, quarantine row, conflict, local message and read
marker a binding holds survives it unchanged, so the binding carries on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import syncengine.store.connection as connection
from syncengine.local_store import Store
from syncengine.ops.bindings import BindingKey
from syncengine.ops.errors import BindingMismatch, StaleBinding
from syncengine.ops.resync import SyncResync, SyncResyncAudit, SyncResyncStatus
from syncengine.ops.sync_records import SyncPullCursor, SyncPushCandidate
from syncengine.store import Conflict, InvalidInput
from tests.syncengine.ops.helpers import (
    ack,
    foreign_envelope,
    new_key,
    prepare_none,
    pull_record,
    table,
)

MAX_SEQ = 2**63 - 1
#: The relay's 410 in every example: the cursor is at 42, sequences 43..100
#: were removed by retention, the stream's tip is 120.
GAP = SyncResync(42, 100, 120)
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def _at(store: Store, key: BindingKey, cursor: int) -> None:
    """Bind ``key`` with its transport cursor at ``cursor`` (an empty page)."""
    store.sync_apply_pull(key, [], SyncPullCursor(cursor))


def _everything(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's rows (order-independent), the bindings and audits aside."""
    names = [
        row[0]
        for row in table(store.conn, "SELECT name FROM sqlite_master WHERE type = 'table'")
        if row[0] not in {"sync_bindings", "sync_resync_audits"}
    ]
    return {name: sorted(table(store.conn, f"SELECT * FROM {name}"), key=repr) for name in names}


def _binding_row(store: Store) -> dict[str, Any]:
    columns = [c[1] for c in table(store.conn, "PRAGMA table_info(sync_bindings)")]
    (row,) = table(store.conn, "SELECT * FROM sync_bindings")
    return dict(zip(columns, row, strict=True))


def _audits(store: Store) -> list[tuple[Any, ...]]:
    return table(
        store.conn,
        "SELECT binding_pk, driver_generation, accepted_floor, expected_transport_cursor,"
        " gap_start, gap_end, current_seq, reason FROM sync_resync_audits"
        " ORDER BY binding_pk, accepted_floor",
    )


@dataclass
class Busy:
    """A binding that has done everything before its 410."""

    acked: list[SyncPushCandidate]
    reserved: list[SyncPushCandidate]
    imported_wire: str
    pending_wire: str
    unsupported_wire: str


def _busy(store: Store, key: BindingKey) -> Busy:
    """Local messages, two acknowledged and two reserved reservations, a
    recorded ack conflict, one import, two blocking quarantine rows, read
    markers and a read frontier; the transport cursor ends at 42."""
    for i in range(4):
        store.send("dev", "alice", "bob", f"local {i}")
    candidates = list(store.sync_prepare_push(key, prepare_none(), 10).candidates)
    store.sync_reconcile_push(key, [ack(candidates[0], 1), ack(candidates[1], 2)])
    with pytest.raises(Exception, match="conflict"):
        store.sync_reconcile_push(key, [ack(candidates[0], 3)])
    imported, env1 = foreign_envelope(key, "imported", "carol", "bob")
    pending, env2 = foreign_envelope(key, "pending", "carol", "bob")
    unsupported, env3 = foreign_envelope(key, "unsupported", "carol", "bob")
    pulled = [
        pull_record(5, imported, env1),
        pull_record(6, pending, env2, "pending_key", reason="no identity for epoch-1"),
        pull_record(7, unsupported, env3, "unsupported_cipher"),
    ]
    store.sync_apply_pull(key, pulled, SyncPullCursor(42))
    history = store.history("dev")
    store.mark_read_batch("dev", "bob", [history[0].id, history[-1].id])
    store.read_cursor_consume("dev", "bob", store.watch_tip(["dev:bob"]), [history[1].id])
    assert table(store.conn, "SELECT count(*) FROM read_frontiers") == [(1,)]
    return Busy(candidates[:2], candidates[2:], imported, pending, unsupported)


# -- resync-status --------------------------------------------------------------------


def test_status_without_a_floor_reports_generation_and_cursor_and_a_null_audit(
    store: Store, key: BindingKey
) -> None:
    _at(store, key, 42)
    status = store.sync_resync_status(key)
    assert status == SyncResyncStatus(store.driver_generation(), 42, None)
    assert status.to_obj() == {
        "type": "sync_resync_status",
        "driver_generation": store.driver_generation(),
        "transport_cursor": "42",
        "audit": None,
    }


def test_status_for_a_floor_never_accepted_reports_a_null_audit(
    store: Store, key: BindingKey
) -> None:
    _at(store, key, 42)
    assert store.sync_resync_status(key, 100).audit is None


def test_status_writes_nothing_and_leaves_every_row_as_it_was(
    store: Store, key: BindingKey
) -> None:
    _busy(store, key)
    store.sync_resync(key, SyncResync(42, 100, 120))
    before, binding, changes = _everything(store), _binding_row(store), store.conn.total_changes()
    store.sync_resync_status(key)
    store.sync_resync_status(key, 100)
    store.sync_resync_status(key, 7)
    assert store.conn.total_changes() == changes
    assert (_everything(store), _binding_row(store)) == (before, binding)


def test_status_of_a_stream_never_bound_here_answers_cursor_0_and_creates_nothing(
    store: Store, key: BindingKey
) -> None:
    """A fresh machine whose first pull met the relay's floor reads its
    status before approving the gap: the stream as it would start."""
    changes = store.conn.total_changes()
    status = store.sync_resync_status(key, 100)
    assert (status.transport_cursor, status.audit) == (0, None)
    assert status.driver_generation == store.driver_generation()
    assert store.conn.total_changes() == changes
    assert table(store.conn, "SELECT count(*) FROM sync_bindings") == [(0,)]


def test_status_for_a_local_team_never_seen_answers_cursor_0_and_interns_nothing(
    store: Store,
) -> None:
    status = store.sync_resync_status(new_key("ghost"))
    assert (status.transport_cursor, status.audit) == (0, None)
    assert table(store.conn, "SELECT count(*) FROM teams WHERE name = 'ghost'") == [(0,)]
    assert table(store.conn, "SELECT count(*) FROM sync_bindings") == [(0,)]


def test_status_reports_the_audit_of_the_requested_floor_after_a_resync(
    store: Store, key: BindingKey
) -> None:
    _at(store, key, 42)
    store.sync_resync(key, GAP)
    status = store.sync_resync_status(key, 100)
    assert status.to_obj() == {
        "type": "sync_resync_status",
        "driver_generation": store.driver_generation(),
        "transport_cursor": "100",
        "audit": {
            "expected_transport_cursor": "42",
            "accepted_floor": "100",
            "gap_start": "43",
            "gap_end": "100",
            "reason": "retention-gap-accepted",
        },
    }
    assert SyncResyncStatus.from_obj(status.to_obj(), requested_floor=100) == status


def test_status_without_a_floor_stays_null_even_when_an_audit_exists(
    store: Store, key: BindingKey
) -> None:
    _at(store, key, 42)
    store.sync_resync(key, GAP)
    assert store.sync_resync_status(key).audit is None


def test_status_for_another_floor_than_the_accepted_one_is_null(
    store: Store, key: BindingKey
) -> None:
    _at(store, key, 42)
    store.sync_resync(key, GAP)
    assert [store.sync_resync_status(key, floor).audit for floor in (99, 101, 42, 0)] == [None] * 4


def test_status_finds_an_audit_only_on_the_binding_it_belongs_to(store: Store) -> None:
    accepted, other = new_key(), new_key()
    _at(store, accepted, 42)
    _at(store, other, 42)
    store.sync_resync(accepted, GAP)
    assert store.sync_resync_status(accepted, 100).audit == SyncResyncAudit(42, 100)
    status = store.sync_resync_status(other, 100)
    assert (status.transport_cursor, status.audit) == (42, None)


def test_status_reports_the_cursor_as_it_moved_on_past_the_floor(
    store: Store, key: BindingKey
) -> None:
    _at(store, key, 42)
    store.sync_resync(key, GAP)
    _at(store, key, 150)
    status = store.sync_resync_status(key, 100)
    assert (status.transport_cursor, status.audit) == (150, SyncResyncAudit(42, 100))


# -- resync: the accepted gap ---------------------------------------------------------


def test_resync_moves_the_transport_cursor_to_the_floor_and_reports_the_gap(
    store: Store, key: BindingKey
) -> None:
    _at(store, key, 42)
    result = store.sync_resync(key, GAP)
    assert result.to_obj() == {
        "type": "sync_resync_result",
        "driver_generation": store.driver_generation(),
        "expected_transport_cursor": "42",
        "transport_cursor": "100",
        "accepted_floor": "100",
        "gap_start": "43",
        "gap_end": "100",
        "reason": "retention-gap-accepted",
    }
    assert store.sync_binding(key).transport_cursor == 100  # type: ignore[union-attr]


def test_resync_records_one_audit_row_with_the_gap_and_the_relays_tip(
    store: Store, key: BindingKey
) -> None:
    _at(store, key, 42)
    store.sync_resync(key, GAP)
    pk = _binding_row(store)["binding_pk"]
    assert _audits(store) == [
        (pk, store.driver_generation(), 100, 42, 43, 100, 120, "retention-gap-accepted")
    ]
    ((accepted_at,),) = table(store.conn, "SELECT accepted_at FROM sync_resync_audits")
    assert TIMESTAMP.fullmatch(accepted_at)


def test_resync_from_a_never_pulled_binding_accepts_the_gap_from_one(
    store: Store, key: BindingKey
) -> None:
    store.sync_bind(key)
    result = store.sync_resync(key, SyncResync(0, 5, 5))
    assert (result.audit.gap_start, result.audit.gap_end, result.transport_cursor) == (1, 5, 5)


def test_resync_changes_only_the_transport_cursor_and_revision_of_the_binding(
    store: Store, key: BindingKey
) -> None:
    _busy(store, key)
    before, binding = _everything(store), _binding_row(store)
    store.sync_resync(key, GAP)
    after = _binding_row(store)
    assert _everything(store) == before
    assert after == {**binding, "transport_cursor": 100, "revision": binding["revision"] + 1}


def test_resync_keeps_local_messages_imports_and_read_state(store: Store, key: BindingKey) -> None:
    _busy(store, key)
    unread = [m.body for m in store.list_unread("dev", "bob")]
    history = [(m.id, m.body, m.origin) for m in store.history("dev")]
    store.sync_resync(key, GAP)
    assert [m.body for m in store.list_unread("dev", "bob")] == unread == ["local 2", "local 3"]
    assert [(m.id, m.body, m.origin) for m in store.history("dev")] == history
    assert history[-1][1:] == ("imported", "imported")


def test_resync_keeps_the_push_cursor_quarantine_and_conflict_counts(
    store: Store, key: BindingKey
) -> None:
    busy = _busy(store, key)
    before = store.sync_status(key)
    store.sync_resync(key, GAP)
    after = store.sync_status(key)
    assert after.quarantine == before.quarantine
    assert before.quarantine == {"imported": 1, "pending_key": 1, "unsupported_cipher": 1}
    binding = store.sync_binding(key)
    assert binding is not None
    assert binding.push_cursor == busy.acked[-1].local_position
    assert binding.corrupt_count == 1


def test_an_unacknowledged_reservation_is_re_emitted_byte_identically_after_resync(
    store: Store, key: BindingKey
) -> None:
    busy = _busy(store, key)
    store.sync_resync(key, GAP)
    again = store.sync_prepare_push(key, prepare_none(), 10)
    assert again.state.transport_cursor == 100
    assert [c.to_obj() for c in again.candidates] == [c.to_obj() for c in busy.reserved]


def test_an_ack_below_the_floor_still_reconciles_after_resync(
    store: Store, key: BindingKey
) -> None:
    """The relay removed sequences 43..100 but keeps their wire IDs as
    tombstones, so a retry of a reservation it stored at 50 is answered
    ``duplicate`` at 50: below the floor, it still reconciles."""
    busy = _busy(store, key)
    store.sync_resync(key, GAP)
    acks = [ack(busy.reserved[0], 50, "duplicate"), ack(busy.reserved[1], 51, "duplicate")]
    result = store.sync_reconcile_push(key, acks)
    assert result.push_cursor == busy.reserved[1].local_position
    assert table(
        store.conn, "SELECT server_seq, state FROM sync_push WHERE local_position > 2"
    ) == [(50, "acked"), (51, "acked")]


def test_reprocess_still_offers_the_blocking_quarantine_after_resync(
    store: Store, key: BindingKey
) -> None:
    busy = _busy(store, key)
    store.sync_resync(key, GAP)
    page = store.sync_reprocess(key, 10)
    assert page.state.transport_cursor == 100
    assert [(c.wire_id, c.prior_status) for c in page.candidates] == [
        (busy.pending_wire, "pending_key"),
        (busy.unsupported_wire, "unsupported_cipher"),
    ]


def test_a_pull_from_the_floor_imports_after_resync(store: Store, key: BindingKey) -> None:
    _busy(store, key)
    store.sync_resync(key, GAP)
    wire, env = foreign_envelope(key, "after the gap", "carol", "bob")
    result = store.sync_apply_pull(key, [pull_record(101, wire, env)], SyncPullCursor(101))
    assert [o.status for o in result.outcomes] == ["imported"]
    assert result.result.transport_cursor == 101
    assert store.history("dev")[-1].body == "after the gap"


def test_an_empty_page_at_the_floor_is_accepted_after_resync(store: Store, key: BindingKey) -> None:
    _at(store, key, 42)
    store.sync_resync(key, GAP)
    assert store.sync_apply_pull(key, [], SyncPullCursor(100)).result.transport_cursor == 100


def test_a_pull_below_the_floor_is_refused_after_resync(store: Store, key: BindingKey) -> None:
    _at(store, key, 42)
    store.sync_resync(key, GAP)
    with pytest.raises(InvalidInput, match="backwards"):
        store.sync_apply_pull(key, [], SyncPullCursor(99))


def test_successive_gaps_each_keep_their_own_audit(store: Store, key: BindingKey) -> None:
    _at(store, key, 42)
    store.sync_resync(key, GAP)
    store.sync_resync(key, SyncResync(100, 150, 150))
    assert store.sync_resync_status(key, 100).audit == SyncResyncAudit(42, 100)
    status = store.sync_resync_status(key, 150)
    assert (status.transport_cursor, status.audit) == (150, SyncResyncAudit(100, 150))
    assert [row[2:4] for row in _audits(store)] == [(100, 42), (150, 100)]


def test_a_floor_at_the_top_of_the_signed_64_bit_range_is_stored_exactly(
    store: Store, key: BindingKey
) -> None:
    _at(store, key, MAX_SEQ - 1)
    result = store.sync_resync(key, SyncResync(MAX_SEQ - 1, MAX_SEQ, MAX_SEQ))
    assert result.transport_cursor == MAX_SEQ
    assert store.sync_resync_status(key, MAX_SEQ).audit == SyncResyncAudit(MAX_SEQ - 1, MAX_SEQ)


# -- resync: what it refuses, changing nothing ----------------------------------------


def _unchanged(store: Store) -> tuple[Any, ...]:
    return (_everything(store), table(store.conn, "SELECT * FROM sync_bindings"), _audits(store))


@pytest.mark.parametrize("expected", [41, 43, 0, 99])
def test_a_stale_expected_cursor_is_refused_and_changes_nothing(
    store: Store, key: BindingKey, expected: int
) -> None:
    _busy(store, key)
    before = _unchanged(store)
    with pytest.raises(StaleBinding, match="transport cursor is 42"):
        store.sync_resync(key, SyncResync(expected, 100, 120))
    assert _unchanged(store) == before


def test_an_approval_made_stale_by_a_pull_is_refused(store: Store, key: BindingKey) -> None:
    _at(store, key, 42)
    _at(store, key, 60)
    with pytest.raises(StaleBinding, match="stale"):
        store.sync_resync(key, GAP)
    assert store.sync_binding(key).transport_cursor == 60  # type: ignore[union-attr]


def test_a_second_resync_to_the_same_floor_fails_without_mutation(
    store: Store, key: BindingKey
) -> None:
    _busy(store, key)
    store.sync_resync(key, GAP)
    before = _unchanged(store)
    with pytest.raises(Conflict, match="already accepted"):
        store.sync_resync(key, GAP)
    assert _unchanged(store) == before


def test_a_retired_binding_cannot_be_resynced(store: Store, key: BindingKey) -> None:
    _at(store, key, 42)
    store.sync_retire_binding(key, store.sync_binding(key).revision)  # type: ignore[union-attr]
    before = _unchanged(store)
    with pytest.raises(InvalidInput, match="retired") as caught:
        store.sync_resync(key, GAP)
    assert caught.value.field == "binding"
    assert _unchanged(store) == before


def test_resync_of_a_stream_never_bound_here_binds_it_and_accepts_the_gap_from_0(
    store: Store,
) -> None:
    """A fresh machine (even a local team never seen) whose first pull met
    the floor approves the gap 1..floor; the binding is created in the
    approval's own transaction."""
    key = new_key("ghost")
    result = store.sync_resync(key, SyncResync(0, 100, 120))
    assert (result.audit.gap_start, result.audit.gap_end) == (1, 100)
    binding = store.sync_binding(key)
    assert binding is not None and binding.transport_cursor == 100
    assert len(_audits(store)) == 1


def test_resync_of_a_never_bound_stream_expecting_another_cursor_is_stale_and_writes_nothing(
    store: Store, key: BindingKey
) -> None:
    with pytest.raises(StaleBinding, match="transport cursor is 0"):
        store.sync_resync(key, GAP)
    assert table(store.conn, "SELECT count(*) FROM sync_bindings") == [(0,)]
    assert _audits(store) == []


def test_resync_of_a_stream_bound_to_another_local_team_is_refused(
    store: Store, key: BindingKey
) -> None:
    _at(store, key, 42)
    store.create_team("ops", ["carol"])
    theirs = BindingKey("ops", key.server_instance_id, key.remote_team_id, 1)
    with pytest.raises(BindingMismatch, match="another local team"):
        store.sync_resync(theirs, GAP)
    assert store.sync_binding(key).transport_cursor == 42  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "request_",
    [SyncResync(42, 42, 120), SyncResync(42, 121, 120), SyncResync(42, 100, 120, "oops")],
    ids=["floor-at-expected", "floor-beyond-current", "other-reason"],
)
def test_an_invalid_request_is_refused_before_the_store_is_touched(
    store: Store, key: BindingKey, request_: SyncResync
) -> None:
    _at(store, key, 42)
    changes = store.conn.total_changes()
    with pytest.raises(InvalidInput):
        store.sync_resync(key, request_)
    assert store.conn.total_changes() == changes


def test_a_failure_before_commit_leaves_no_audit_and_the_cursor_where_it_was(
    store: Store, key: BindingKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    _busy(store, key)
    before = _unchanged(store)

    def die(name: str) -> None:
        if name == "resync.commit.before_commit":
            raise RuntimeError("injected failure before commit")

    monkeypatch.setattr(connection, "crash_point", die)
    with pytest.raises(RuntimeError, match="injected"):
        store.sync_resync(key, GAP)
    assert _unchanged(store) == before


def test_a_failure_after_commit_leaves_an_accepted_gap_that_status_reports(
    store: Store, key: BindingKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    _at(store, key, 42)

    def die(name: str) -> None:
        if name == "resync.commit.after_commit":
            raise RuntimeError("injected failure after commit")

    monkeypatch.setattr(connection, "crash_point", die)
    with pytest.raises(RuntimeError, match="injected"):
        store.sync_resync(key, GAP)
    monkeypatch.setattr(connection, "crash_point", lambda name: None)
    status = store.sync_resync_status(key, 100)
    assert (status.transport_cursor, status.audit) == (100, SyncResyncAudit(42, 100))
    with pytest.raises(Conflict, match="resync-status"):
        store.sync_resync(key, GAP)


def test_resync_passes_exactly_its_two_commit_points(
    store: Store, key: BindingKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    _at(store, key, 42)
    points: list[str] = []
    monkeypatch.setattr(connection, "crash_point", points.append)
    store.sync_resync(key, GAP)
    assert points == ["resync.commit.before_commit", "resync.commit.after_commit"]


def test_status_passes_no_commit_point(
    store: Store, key: BindingKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    _at(store, key, 42)
    points: list[str] = []
    monkeypatch.setattr(connection, "crash_point", points.append)
    store.sync_resync_status(key, 100)
    assert points == []


# -- the audit table itself -----------------------------------------------------------


def test_an_audit_row_cannot_be_updated(store: Store, key: BindingKey) -> None:
    _at(store, key, 42)
    store.sync_resync(key, GAP)
    with pytest.raises(apsw.ConstraintError, match="immutable"):
        store.conn.execute("UPDATE sync_resync_audits SET current_seq = current_seq + 1")
    with pytest.raises(apsw.ConstraintError, match="immutable"):
        store.conn.execute("UPDATE sync_resync_audits SET accepted_at = accepted_at")
    assert [row[6] for row in _audits(store)] == [120]


def test_an_audit_row_cannot_be_deleted(store: Store, key: BindingKey) -> None:
    _at(store, key, 42)
    store.sync_resync(key, GAP)
    with pytest.raises(apsw.ConstraintError, match="immutable"):
        store.conn.execute("DELETE FROM sync_resync_audits")
    assert len(_audits(store)) == 1


@pytest.mark.parametrize(
    ("expected", "floor", "start", "end", "current", "reason"),
    [
        (100, 100, 101, 100, 120, "retention-gap-accepted"),
        (42, 100, 42, 100, 120, "retention-gap-accepted"),
        (42, 100, 43, 99, 120, "retention-gap-accepted"),
        (42, 100, 43, 100, 99, "retention-gap-accepted"),
        (-1, 100, 0, 100, 120, "retention-gap-accepted"),
        (42, 100, 43, 100, 120, "other"),
    ],
    ids=[
        "floor-not-above",
        "gap-start",
        "gap-end",
        "floor-beyond-current",
        "negative",
        "reason",
    ],
)
def test_the_audit_table_refuses_a_row_that_contradicts_the_arithmetic(
    store: Store,
    key: BindingKey,
    expected: int,
    floor: int,
    start: int,
    end: int,
    current: int,
    reason: str,
) -> None:
    _at(store, key, 42)
    pk = _binding_row(store)["binding_pk"]
    with pytest.raises(apsw.ConstraintError):
        store.conn.execute(
            "INSERT INTO sync_resync_audits VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (pk, store.driver_generation(), floor, expected, start, end, current, reason, "t"),
        )
    assert _audits(store) == []


# -- a property against a real store ---------------------------------------------------


@st.composite
def approvals(draw: st.DrawFn) -> tuple[int, int, int, int]:
    """(stored cursor, approved expected cursor, floor, current_seq)."""
    anywhere = st.integers(0, MAX_SEQ - 1) | st.sampled_from([0, 1, MAX_SEQ - 1])
    cursor = draw(anywhere)
    expected = draw(st.just(cursor) | anywhere)
    floor = draw(st.integers(expected + 1, MAX_SEQ) | st.just(expected + 1))
    current = draw(st.integers(floor, MAX_SEQ) | st.just(floor))
    return cursor, expected, floor, current


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(approval=approvals())
def test_a_resync_commits_exactly_when_the_approval_matches_the_stored_cursor(
    tmp_path_factory: pytest.TempPathFactory, approval: tuple[int, int, int, int]
) -> None:
    cursor, expected, floor, current = approval
    with Store(tmp_path_factory.mktemp("resync") / "s.db") as store:
        store.init()
        store.create_team("dev", ["alice", "bob"])
        key = new_key()
        _at(store, key, cursor)
        if expected != cursor:
            with pytest.raises(StaleBinding):
                store.sync_resync(key, SyncResync(expected, floor, current))
            assert store.sync_resync_status(key, floor) == SyncResyncStatus(
                store.driver_generation(), cursor, None
            )
            return
        result = store.sync_resync(key, SyncResync(expected, floor, current))
        assert (result.audit.gap_start, result.audit.gap_end) == (expected + 1, floor)
        status = store.sync_resync_status(key, floor)
        assert status == SyncResyncStatus(result.driver_generation, floor, result.audit)
        assert SyncResyncStatus.from_obj(status.to_obj(), requested_floor=floor) == status


@pytest.mark.parametrize(
    "request_",
    [SyncResync(42, 2**63, 2**63), SyncResync(-1, 5, 9), SyncResync(0, 5, 2**63)],
    ids=["floor-past-max", "negative-cursor", "current-past-max"],
)
def test_a_request_built_in_python_outside_the_sequence_range_is_refused_before_the_store(
    store: Store, key: BindingKey, request_: SyncResync
) -> None:
    store.sync_bind(key)
    before = store.conn.total_changes()
    with pytest.raises(InvalidInput, match="an integer in 0"):
        store.sync_resync(key, request_)
    assert store.conn.total_changes() == before


def test_status_for_a_floor_outside_the_sequence_range_is_refused(
    store: Store, key: BindingKey
) -> None:
    store.sync_bind(key)
    with pytest.raises(InvalidInput, match="accepted-floor"):
        store.sync_resync_status(key, 2**63)
