"""Costs grow with the page, not the history (agmsg #910/#912/#922): every
statement a sync operation runs is an index search — never a scan of the
messages, reservations or quarantine — proven on the query plans SQLite
chooses for the statements actually executed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from syncengine.ops.bindings import BindingKey
from syncengine.ops.records import SyncPullCursor
from syncengine.store import Store
from tests.syncengine.ops.helpers import (
    FakeRelay,
    ack,
    foreign_envelope,
    prepare_none,
    pull_record,
    table,
)

_TABLES = ("messages", "sync_push", "sync_quarantine", "sync_conflicts")


def _statements(store: Store, run: Callable[[], Any]) -> set[str]:
    executed: list[str] = []

    def trace(_cursor: Any, sql: str, _bindings: Any) -> bool:
        executed.append(sql)
        return True

    store.conn.exec_trace = trace
    try:
        run()
    finally:
        store.conn.exec_trace = None
    return {s for s in executed if s.lstrip().upper().startswith(("SELECT", "UPDATE", "INSERT"))}


def _assert_no_scans(store: Store, statements: set[str]) -> None:
    assert statements
    for sql in statements:
        if sql.lstrip().upper().startswith("INSERT") and "SELECT" not in sql.upper():
            continue
        params = [1] * sql.count("?")
        for number in range(1, 10):
            if f"?{number}" in sql:
                params = [1] * max(number, len(params))
        plan = table(store.conn, "EXPLAIN QUERY PLAN " + sql, *params)
        details = " ".join(str(row[-1]) for row in plan)
        for name in _TABLES:
            assert f"SCAN {name}" not in details and "SCAN m " not in details, (sql, details)


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


def test_reprocess_runs_only_index_searches(busy: Store, key: BindingKey) -> None:
    _assert_no_scans(busy, _statements(busy, lambda: busy.sync_reprocess(key, 5, None)))
