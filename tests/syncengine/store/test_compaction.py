"""Compaction is idempotent, state-preserving, read-coalescing, monotonic and
cursor-safe, and never touches message_sent (driver-interface §2.7)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from syncengine.ids import new_uuid7
from syncengine.local_store import Store

AGENTS = ("alice", "bob", "carol")


def rows(store: Store) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for table in ("teams", "members", "messages", "message_reads", "read_frontiers"):
        out += [(table, *r) for r in store.conn.execute(f"SELECT * FROM {table} ORDER BY 1")]
    return out


def observable(store: Store, tmp: Path) -> dict[str, Any]:
    """Every contract read, plus the state an export re-imports to."""
    tip = int(store.watch_tip(["dev:alice"]))
    pairs = [f"dev:{a}" for a in AGENTS]
    view: dict[str, Any] = {
        "unread": {a: store.list_unread("dev", a) for a in AGENTS},
        "cursor": {a: store.read_cursor_get("dev", a) for a in AGENTS},
        "history": [store.history("dev", a, n) for a in (None, *AGENTS) for n in (None, 2)],
        "watch": [store.watch_after(str(c), pairs) for c in range(tip + 1)],
    }
    exported = tmp / f"export-{new_uuid7()}.jsonl"
    store.export(exported)
    with Store(tmp / f"replay-{new_uuid7()}.db") as replay:
        replay.init()
        replay.create_team("dev", list(AGENTS))
        replay.import_file(exported)
        view["reimported"] = {a: replay.list_unread("dev", a) for a in AGENTS}
        view["reimported_history"] = replay.history("dev")
    return view


def duplicate_markers(store: Store, tmp: Path) -> None:
    """A merged import from another copy: the same reads under new event IDs."""
    exported = tmp / f"dup-{new_uuid7()}.jsonl"
    store.export(exported)
    lines = []
    for line in exported.read_text().splitlines():
        record = json.loads(line)
        if record["type"] == "message_read":
            record["id"] = new_uuid7()
        lines.append(json.dumps(record))
    exported.write_text("\n".join(lines) + ("\n" if lines else ""))
    store.import_file(exported)


op = st.one_of(
    st.tuples(st.just("send"), st.sampled_from(AGENTS), st.sampled_from(AGENTS)),
    st.tuples(st.just("mark"), st.sampled_from(AGENTS), st.integers(0, 20)),
    st.tuples(st.just("consume"), st.sampled_from(AGENTS), st.integers(0, 20)),
    st.tuples(st.just("merge")),
)


def build(store: Store, tmp: Path, ops: list[tuple[Any, ...]]) -> None:
    store.init()
    store.create_team("dev", list(AGENTS))
    for step in ops:
        if step[0] == "send":
            store.send("dev", step[1], step[2], "body")
        elif step[0] == "merge":
            duplicate_markers(store, tmp)
        else:
            unread = store.list_unread("dev", step[1])
            if not unread:
                continue
            target = unread[step[2] % len(unread)].id
            if step[0] == "mark":
                store.mark_read_batch("dev", step[1], [target])
            else:
                store.read_cursor_consume(
                    "dev", step[1], store.watch_tip([f"dev:{step[1]}"]), [target]
                )


@settings(max_examples=20, deadline=None)
@given(st.lists(op, max_size=10))
def test_compacting_twice_leaves_exactly_what_compacting_once_leaves(
    ops: list[tuple[Any, ...]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "s.db") as store:
        build(store, Path(tmp), ops)
        store.compact()
        once = rows(store)
        assert store.compact() == 0
        assert rows(store) == once


@settings(max_examples=15, deadline=None)
@given(st.lists(op, max_size=10))
def test_every_read_answers_the_same_after_compaction_and_nothing_grows(
    ops: list[tuple[Any, ...]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "s.db") as store:
        build(store, Path(tmp), ops)
        before = observable(store, Path(tmp))
        messages_before = store.conn.execute("SELECT * FROM messages").fetchall()
        events_before = store.conn.execute("SELECT count(*) FROM message_reads").fetchone()[0]
        store.compact()
        assert observable(store, Path(tmp)) == before
        assert store.conn.execute("SELECT * FROM messages").fetchall() == messages_before
        events_after = store.conn.execute("SELECT count(*) FROM message_reads").fetchone()[0]
        assert events_after <= events_before


@settings(max_examples=15, deadline=None)
@given(st.lists(op, max_size=8), st.lists(st.sampled_from(AGENTS), min_size=1, max_size=4))
def test_a_cursor_issued_before_compaction_still_delivers_everything_after_it(
    ops: list[tuple[Any, ...]], later_recipients: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "s.db") as store:
        build(store, Path(tmp), ops)
        pairs = [f"dev:{a}" for a in AGENTS]
        cursor = store.watch_tip(pairs)
        store.compact()
        later = [store.send("dev", "alice", to, "later").id for to in later_recipients]
        store.compact()
        delivered = store.watch_after(cursor, pairs)
        assert [m.id for m in delivered.messages] == later
        assert int(delivered.cursor) == int(cursor) + len(later)


def test_compaction_coalesces_duplicate_read_markers_to_one(store: Store, tmp_path: Path) -> None:
    m = store.send("dev", "alice", "bob", "x").id
    store.mark_read_batch("dev", "bob", [m])
    duplicate_markers(store, tmp_path)
    duplicate_markers(store, tmp_path)
    count = "SELECT count(*) FROM message_reads"
    assert store.conn.execute(count).fetchone()[0] == 4  # 1, then 1 + 2 copied
    assert store.compact() == 3
    assert store.conn.execute(count).fetchone()[0] == 1
    assert store.list_unread("dev", "bob") == []
