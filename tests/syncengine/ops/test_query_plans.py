"""Costs grow with the page, not the history (agmsg #910/#912/#922): every
statement a sync operation runs is an index search — never a scan of the
messages, reservations or quarantine — proven on the query plans SQLite
chooses for the statements actually executed."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from syncengine.local_store import Store
from syncengine.ops import read_state
from syncengine.ops.bindings import BindingKey
from syncengine.ops.sync_records import SyncPullCursor
from tests.syncengine.ops.helpers import (
    FakeRelay,
    ack,
    foreign_envelope,
    prepare_none,
    pull_record,
)
from wire.age_keys import X25519Identity

#: Tables that grow with history (members grows with the roster, ≤ 1,000,
#: but a scan of it inside a per-message join is still a history scan).
_TABLES = (
    "members",
    "messages",
    "sync_push",
    "sync_quarantine",
    "sync_conflicts",
    "message_reads",
    "read_remote_exact",
    "read_outbox",
)


def _statements(store: Store, run: Callable[[], Any]) -> dict[str, Any]:
    """Every SELECT/UPDATE/INSERT/DELETE the operation ran, with the bindings
    of its first execution (so a plan is explained for real values)."""
    executed: dict[str, Any] = {}

    def trace(_cursor: Any, sql: str, bindings: Any) -> bool:
        if sql.lstrip().upper().startswith(("SELECT", "UPDATE", "INSERT", "DELETE")):
            executed.setdefault(sql, bindings)
        return True

    store.conn.exec_trace = trace
    try:
        run()
    finally:
        store.conn.exec_trace = None
    return executed


def _assert_no_scans(store: Store, statements: dict[str, Any]) -> None:
    assert statements
    for sql, bindings in statements.items():
        if sql.lstrip().upper().startswith("INSERT") and "SELECT" not in sql.upper():
            continue
        plan = [
            tuple(row)
            for row in store.conn.execute("EXPLAIN QUERY PLAN " + sql, bindings).fetchall()
        ]
        aliases = {a: t for t, a in re.findall(r"\b(\w+) AS (\w+)\b", sql)}
        for row in plan:
            scanned = re.match(r"SCAN (\w+)", str(row[-1]))
            if scanned is not None:
                name = aliases.get(scanned.group(1), scanned.group(1))
                assert name not in _TABLES, (sql, row[-1])


@pytest.fixture
def busy(store: Store, key: BindingKey) -> Store:
    """A history: acknowledged pushes, then many imports after them."""
    for i in range(40):
        store.send("dev", "alice", "bob", f"m{i}")
    relay = FakeRelay()
    store.sync_reconcile_push(
        key, relay.push(list(store.sync_prepare_push(key, prepare_none(), 100).candidates))
    )
    records = []
    for seq in range(41, 101):
        wire, env = foreign_envelope(key, f"in{seq}", "bob", "alice")
        records.append(pull_record(seq, wire, env, "importable" if seq % 3 else "pending_key"))
    store.sync_apply_pull(key, records, SyncPullCursor(100))
    store.send("dev", "alice", "bob", "fresh")
    store.conn.execute("ANALYZE")
    return store


def test_prepare_runs_only_index_searches(busy: Store, key: BindingKey) -> None:
    _assert_no_scans(
        busy, _statements(busy, lambda: busy.sync_prepare_push(key, prepare_none(), 10))
    )


def test_reconcile_runs_only_index_searches(busy: Store, key: BindingKey) -> None:
    (candidate,) = busy.sync_prepare_push(key, prepare_none(), 10).candidates
    acks = [ack(candidate, 200)]
    _assert_no_scans(busy, _statements(busy, lambda: busy.sync_reconcile_push(key, acks)))


def test_apply_runs_only_index_searches(busy: Store, key: BindingKey) -> None:
    wire, env = foreign_envelope(key, "late", "bob", "alice")
    page = [pull_record(101, wire, env)]
    _assert_no_scans(
        busy, _statements(busy, lambda: busy.sync_apply_pull(key, page, SyncPullCursor(101)))
    )


def test_apply_of_sealed_envelopes_runs_only_index_searches(
    busy: Store, key: BindingKey, age_identity: X25519Identity
) -> None:
    """The replay lookup (migration 9's head index) is a search too."""
    wire, env = foreign_envelope(key, "sealed", "bob", "alice", identity=age_identity)
    page = [pull_record(101, wire, env, "pending_key")]
    statements = _statements(busy, lambda: busy.sync_apply_pull(key, page, SyncPullCursor(101)))
    assert any("substr(blob" in sql for sql in statements)
    _assert_no_scans(busy, statements)


def test_reprocess_runs_only_index_searches(busy: Store, key: BindingKey) -> None:
    _assert_no_scans(busy, _statements(busy, lambda: busy.sync_reprocess(key, 5, None)))


def _roster(store: Store) -> list[tuple[str, str]]:
    from syncengine.ids import new_uuid7
    from syncengine.store.connection import write_transaction
    from syncengine.store.teams import adopt_roster, team_pk

    members = [(new_uuid7(), "alice"), (new_uuid7(), "bob")]
    with write_transaction(store.conn, store.path) as conn:
        adopt_roster(conn, team_pk(conn, "dev"), members, "2026-01-01T00:00:00.000000Z")
    return members


def test_read_prepare_runs_only_index_searches(busy: Store, key: BindingKey) -> None:
    from syncengine.ops.read_records import SyncReadContext

    members = _roster(busy)
    unread = busy.list_unread("dev", "alice")
    busy.mark_read_batch("dev", "alice", [unread[0].id, unread[2].id])
    context = SyncReadContext(0, 100, tuple(members), ("alice", "bob"))
    _assert_no_scans(busy, _statements(busy, lambda: busy.sync_prepare_read_state(key, context)))


def test_read_apply_runs_only_index_searches(busy: Store, key: BindingKey) -> None:
    from syncengine.ops.read_records import SyncReadExact, SyncReadFrontier, SyncReadSnapshot

    members = _roster(busy)
    # The relay already reported both members through the acknowledged
    # pushes (1..40): the measured page moves them over a range of imports.
    primed = [SyncReadFrontier(members[0][0], 40), SyncReadFrontier(members[1][0], 40)]
    busy.sync_apply_read_state(key, SyncReadSnapshot(0, 100), primed)
    items = [
        SyncReadFrontier(members[0][0], 60),
        SyncReadExact(members[0][0], busy.conn.execute(
            "SELECT wire_id FROM sync_quarantine WHERE server_seq = 80").fetchone()[0]),
        SyncReadFrontier(members[1][0], 45),
    ]  # fmt: skip
    _assert_no_scans(
        busy,
        _statements(busy, lambda: busy.sync_apply_read_state(key, SyncReadSnapshot(0, 100), items)),  # type: ignore[arg-type]
    )


def test_marking_a_message_read_runs_only_index_searches(busy: Store) -> None:
    _roster(busy)
    unread = busy.list_unread("dev", "alice")
    _assert_no_scans(
        busy, _statements(busy, lambda: busy.mark_read_batch("dev", "alice", [unread[3].id]))
    )


def _backlog(tmp_path: Path, key: BindingKey, unread: int) -> tuple[Store, int, int, int]:
    """A store where bob has ``unread`` unread messages: half our pushes,
    half imports. Returns the store, the binding, bob and the cursor."""
    store = Store(tmp_path / f"backlog-{unread}.db")
    store.init()
    store.create_team("dev", ["alice", "bob"])
    for i in range(unread // 2):
        store.send("dev", "alice", "bob", f"m{i}")
    relay = FakeRelay()
    prepared = store.sync_prepare_push(key, prepare_none(), unread)
    store.sync_reconcile_push(key, relay.push(list(prepared.candidates)))
    top = relay.tip
    records = []
    for seq in range(top + 1, top + 1 + unread - unread // 2):
        wire, env = foreign_envelope(key, f"in{seq}", "alice", "bob")
        records.append(pull_record(seq, wire, env))
    store.sync_apply_pull(key, records, SyncPullCursor(top + len(records)))
    binding = store.sync_binding(key)
    assert binding is not None
    (bob,) = store.conn.execute("SELECT member_pk FROM members WHERE name = 'bob'").fetchone()  # type: ignore[misc]
    return store, binding.pk, bob, binding.transport_cursor


def _vm_steps(store: Store, run: Callable[[], Any]) -> int:
    """SQLite virtual-machine steps ``run`` takes (a count, not a time)."""
    steps = 0

    def count() -> bool:
        nonlocal steps
        steps += 1
        return False

    store.conn.set_progress_handler(count, 10)
    try:
        run()
    finally:
        store.conn.set_progress_handler(None)
    return steps


def test_a_members_prefix_search_does_not_visit_its_unread_backlog(
    tmp_path: Path, key: BindingKey
) -> None:
    """Issue #17: an idle pull runs read-state prepare for every member; the
    search for a member's first uncovered message walks the sequences above
    its frontier and stops at that message, so a member that never reads
    costs the same with 40 unread messages as with 800. The reader-side
    search (window 0) is the cost the walk removes."""
    costs: dict[tuple[int, int], int] = {}
    for unread in (40, 800):
        store, binding, bob, top = _backlog(tmp_path, key, unread)
        with store:
            for window in (0, read_state.UNREAD_WALK_WINDOW):
                search = partial(
                    read_state._first_unread_seq, store.conn, binding, bob, 0, top, window
                )
                found: list[int | None] = []
                costs[unread, window] = _vm_steps(store, lambda: found.append(search()))  # noqa: B023
                assert found == [1]
    walk = read_state.UNREAD_WALK_WINDOW
    assert costs[800, walk] <= costs[40, walk] + 1
    assert costs[800, 0] > 10 * costs[40, 0]


def test_status_lists_blocked_messages_without_walking_acknowledged_ones(
    tmp_path: Path, key: BindingKey
) -> None:
    """Issue #17: the blocked messages ``status`` names are found through
    the open reservations' index, so the listing takes as many steps over
    800 acknowledged messages as over 40."""
    from syncengine.ops.status import sync_status

    steps = {}
    for size in (40, 800):
        store, *_ = _backlog(tmp_path, key, size)
        with store:
            store.conn.execute("DELETE FROM sync_quarantine")  # only reservations
            assert sync_status(store.conn, key).blocked == ()
            listing = [
                sql
                for sql in _statements(store, lambda: sync_status(store.conn, key))  # noqa: B023
                if "blocked_reason" in sql
            ]
            assert len(listing) == 1
            run = partial(store.conn.execute, listing[0], (1, 100))
            steps[size] = _vm_steps(store, lambda: run().fetchall())  # noqa: B023
    assert steps[800] <= steps[40] + 1


def test_status_counts_states_without_reading_the_history(tmp_path: Path, key: BindingKey) -> None:
    """Issue #17: ``status`` takes its per-state counts from the partial
    indexes of the small states and the totals the writers keep, so all its
    statements take as many steps over 800 messages as over 40."""
    from syncengine.ops.status import sync_status

    steps = {}
    for size in (40, 800):
        store, *_ = _backlog(tmp_path, key, size)
        with store:
            status = sync_status(store.conn, key)
            assert status.reservations == {"acked": size // 2}
            assert status.quarantine == {"imported": size - size // 2}
            steps[size] = _vm_steps(store, lambda: sync_status(store.conn, key))  # noqa: B023
    assert steps[800] <= steps[40] + 1
