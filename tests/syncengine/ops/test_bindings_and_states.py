"""Bindings (ADR 0005 "Local durability is authoritative") and the durable
state machines (specs/sync-stage1.md §2.1, §3)."""

from __future__ import annotations

import itertools

import pytest

from syncengine.local_store import Store
from syncengine.ops import states
from syncengine.ops.bindings import BindingKey, advance_binding, load_binding
from syncengine.ops.errors import BindingMismatch, StaleBinding, SyncUsageError
from syncengine.ops.states import (
    BindingEvent,
    BindingState,
    Evidence,
    IllegalTransition,
    QuarantineState,
    ReservationEvent,
    ReservationState,
)
from syncengine.ops.sync_records import SyncPullCursor
from syncengine.store import InvalidInput
from tests.syncengine.ops.helpers import new_key, prepare_none, table


def test_a_binding_is_created_active_at_revision_one_with_the_store_generation(
    store: Store, key: BindingKey
) -> None:
    binding = store.sync_bind(key)
    assert (binding.state, binding.revision) == (BindingState.ACTIVE, 1)
    assert binding.driver_generation == store.driver_generation()
    assert (binding.push_cursor, binding.transport_cursor, binding.corrupt_count) == (0, 0, 0)


def test_binding_again_is_idempotent_and_writes_nothing(store: Store, key: BindingKey) -> None:
    first = store.sync_bind(key)
    assert store.sync_bind(key) == first


def test_a_binding_row_carries_no_secret_only_identifiers_and_cursors(store: Store) -> None:
    columns = [r[1] for r in table(store.conn, "PRAGMA table_info(sync_bindings)")]
    assert not [c for c in columns if any(w in c for w in ("token", "secret", "credential", "url"))]


def test_every_binding_write_advances_the_revision(store: Store, key: BindingKey) -> None:
    store.sync_bind(key)
    store.sync_apply_pull(key, [], SyncPullCursor(3))
    store.sync_apply_pull(key, [], SyncPullCursor(4))
    assert store.sync_binding(key).revision == 3  # type: ignore[union-attr]


def test_a_stale_writer_cannot_overwrite_a_newer_binding(store: Store, key: BindingKey) -> None:
    stale = store.sync_bind(key)
    store.sync_apply_pull(key, [], SyncPullCursor(7))
    conn = store.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StaleBinding):
            advance_binding(conn, stale, transport_cursor=9)
    finally:
        conn.execute("ROLLBACK")
    assert store.sync_binding(key).transport_cursor == 7  # type: ignore[union-attr]


def test_retiring_needs_the_current_revision(store: Store, key: BindingKey) -> None:
    binding = store.sync_bind(key)
    store.sync_apply_pull(key, [], SyncPullCursor(1))
    with pytest.raises(StaleBinding):
        store.sync_retire_binding(key, binding.revision)
    retired = store.sync_retire_binding(key, binding.revision + 1)
    assert retired.state is BindingState.RETIRED


def test_a_retired_binding_refuses_every_operation_and_keeps_its_rows(
    store: Store, key: BindingKey
) -> None:
    store.sync_retire_binding(key, store.sync_bind(key).revision)
    with pytest.raises(IllegalTransition, match="retired"):
        store.sync_prepare_push(key, prepare_none(), 10)
    with pytest.raises(IllegalTransition, match="retired"):
        store.sync_apply_pull(key, [], SyncPullCursor(1))


def test_one_remote_binding_cannot_serve_two_local_teams(store: Store, key: BindingKey) -> None:
    store.create_team("ops", ["alice"])
    store.sync_bind(key)
    other = BindingKey("ops", key.server_instance_id, key.remote_team_id, 1)
    with pytest.raises(BindingMismatch):
        store.sync_bind(other)


def test_a_renamed_local_team_keeps_its_binding(store: Store, key: BindingKey) -> None:
    store.sync_bind(key)
    store.rename_team("dev", "core")
    moved = BindingKey("core", key.server_instance_id, key.remote_team_id, 1)
    assert store.sync_binding(moved) is not None


def test_a_different_server_instance_is_a_different_binding(store: Store, key: BindingKey) -> None:
    store.sync_bind(key)
    store.sync_bind(new_key())
    assert table(store.conn, "SELECT count(*) FROM sync_bindings") == [(2,)]


def test_a_binding_from_another_generation_is_corrupt(store: Store, key: BindingKey) -> None:
    from syncengine.store import CorruptStore

    store.sync_bind(key)
    store.conn.execute("UPDATE sync_bindings SET driver_generation = 'other'")
    with pytest.raises(CorruptStore, match="generation"):
        load_binding(store.conn, key)


@pytest.mark.parametrize(
    "args",
    [
        ["dev", "not-a-uuid", "01a22a08-b01c-703b-8cd8-fdedd51cf4b9", "1"],
        [
            "dev",
            "01a22a08-b01c-703b-8cd8-fdedd51cf4b9",
            "01A22A08-B01C-703B-8CD8-FDEDD51CF4B9",
            "1",
        ],
        [
            "dev",
            "01a22a08-b01c-703b-8cd8-fdedd51cf4b9",
            "01a22a08-b01c-703b-8cd8-fdedd51cf4b9",
            "01",
        ],
        [
            "dev",
            "01a22a08-b01c-703b-8cd8-fdedd51cf4b9",
            "01a22a08-b01c-703b-8cd8-fdedd51cf4b9",
            "2",
        ],
        [
            "de:v",
            "01a22a08-b01c-703b-8cd8-fdedd51cf4b9",
            "01a22a08-b01c-703b-8cd8-fdedd51cf4b9",
            "1",
        ],
        [
            "dev",
            "01a22a08-b01c-703b-8cd8-fdedd51cf4b9\r",
            "01a22a08-b01c-703b-8cd8-fdedd51cf4b9",
            "1",
        ],
    ],
)
def test_binding_arguments_are_validated_strictly(args: list[str]) -> None:
    with pytest.raises(InvalidInput):
        BindingKey.from_argv(args)


def test_binding_arguments_need_exactly_four_values() -> None:
    with pytest.raises(SyncUsageError):
        BindingKey.from_argv(["dev"])


# -- transition tables ------------------------------------------------------------------


def test_every_binding_edge_is_legal_and_every_other_is_refused() -> None:
    for state, event in itertools.product([None, *BindingState], BindingEvent):
        if (state, event) in states.BINDING_TRANSITIONS:
            assert states.binding_next(state, event) == states.BINDING_TRANSITIONS[(state, event)]
        else:
            with pytest.raises(IllegalTransition):
                states.binding_next(state, event)


def test_every_reservation_edge_is_legal_and_every_other_is_refused() -> None:
    for state, event in itertools.product([None, *ReservationState], ReservationEvent):
        if (state, event) in states.RESERVATION_TRANSITIONS:
            assert states.reservation_next(state, event) is not None
        else:
            with pytest.raises(IllegalTransition):
                states.reservation_next(state, event)


def test_no_sync_event_makes_an_acknowledged_reservation_unacknowledged() -> None:
    targets = {
        t
        for (s, e), t in states.RESERVATION_TRANSITIONS.items()
        if s is ReservationState.ACKED and e is not ReservationEvent.CONTRADICTED
    }
    assert targets == {ReservationState.ACKED}


def test_only_the_operators_repair_publishes_an_acknowledged_reservation_again() -> None:
    # specs/sync-stage1.md §8.21: resume repairs an ack a pulled page contradicted.
    leaving = {
        e
        for (s, e), t in states.RESERVATION_TRANSITIONS.items()
        if s is ReservationState.ACKED and t is not ReservationState.ACKED
    }
    assert leaving == {ReservationEvent.CONTRADICTED}
    assert (
        states.reservation_next(ReservationState.ACKED, ReservationEvent.CONTRADICTED)
        is ReservationState.RESERVED
    )
    for state in (None, ReservationState.RESERVED, ReservationState.BLOCKED):
        with pytest.raises(IllegalTransition):
            states.reservation_next(state, ReservationEvent.CONTRADICTED)


def test_a_blocked_reservation_can_only_be_acked_after_publication() -> None:
    for event in (ReservationEvent.ACK, ReservationEvent.ECHO):
        with pytest.raises(IllegalTransition):
            states.reservation_next(ReservationState.BLOCKED, event)


def test_the_quarantine_table_is_total_over_stored_kinds_and_evidence() -> None:
    for stored, evidence in itertools.product([None, *QuarantineState], Evidence):
        supplied = "pending_key" if evidence is Evidence.BLOCKING else None
        after, outcome = states.quarantine_next(stored, evidence, supplied)
        assert isinstance(after, QuarantineState) and isinstance(outcome, QuarantineState)


def test_final_quarantine_states_never_change() -> None:
    finals = [QuarantineState.IMPORTED, QuarantineState.RECONCILED, QuarantineState.CORRUPT_STATE]
    for stored, evidence in itertools.product(finals, Evidence):
        supplied = "malformed" if evidence is Evidence.BLOCKING else None
        assert states.quarantine_next(stored, evidence, supplied)[0] is stored


def test_a_mismatch_always_reports_corrupt_state() -> None:
    for stored in [None, *QuarantineState]:
        assert states.quarantine_next(stored, Evidence.MISMATCH)[1] is QuarantineState.CORRUPT_STATE


def test_a_blocking_row_imports_on_importable_evidence() -> None:
    for stored in [s for s in QuarantineState if s.blocking]:
        assert states.quarantine_next(stored, Evidence.IMPORTABLE_NEW) == (
            QuarantineState.IMPORTED,
            QuarantineState.IMPORTED,
        )


def test_blocking_evidence_without_a_blocking_status_is_refused() -> None:
    with pytest.raises(IllegalTransition):
        states.quarantine_next(None, Evidence.BLOCKING, "imported")
