"""Kill every storage-contract and team-registry transaction at both sides of
its commit, reopen the store, and prove the guarantee of specs/store.md §3:
a crash leaves the transition wholly applied or wholly absent.

For each point in :data:`syncengine.crash.STORE_CRASH_POINTS`:

* a small store is prepared in-process in a known state;
* a child process (``python -c`` on the ``Store`` API, one method call given
  on argv) runs the operation with ``SYNCENGINE_CRASH_AT`` set and must die
  with :data:`CRASH_EXIT_CODE` without writing anything to stdout;
* after reopening, ``PRAGMA integrity_check`` is ``ok`` and
  ``before_commit`` leaves every table (``sqlite_sequence`` included) exactly
  as it was, while ``after_commit`` keeps the operation's whole effect: the
  store equals a crash-free run of the same operation on an identically
  prepared store, plus per-operation checks;
* the caller's natural recovery — running the same call again — converges to
  the crash-free run. Mark-read, consume (same cursor and IDs), import (same
  file) and compact are idempotent: after a committed crash the retry
  changes no row at all. The team operations are not: after a committed
  crash the retry is refused (``Conflict`` for create/add-member,
  ``UnknownTeam`` for the old name of a rename) and changes nothing, which
  is how a caller learns it already happened. ``send`` is not idempotent
  either: after a committed crash exactly one copy of the message exists,
  and the retry is an ordinary second send (a new ID, the next ``seq``), so
  the store equals a crash-free run of two sends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from syncengine.crash import CRASH_EXIT_CODE, STORE_CRASH_POINTS
from syncengine.ids import new_uuid7
from syncengine.local_store import Store
from syncengine.store import Conflict, UnknownTeam
from syncengine.store.errors import UnknownAgent
from syncengine.store.messages import log_tip

REPO = Path(__file__).resolve().parents[1]

#: The child: open the store, make one method call, exit.
CHILD = """
import json, sys
from syncengine.local_store import Store
with Store(sys.argv[1]) as store:
    getattr(store, sys.argv[2])(*json.loads(sys.argv[3]))
"""

AT = "2026-01-02T03:04:05.000000Z"


# -- observing a store --------------------------------------------------------------


def _raw(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, IDs and timestamps included."""
    conn = store.conn
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {
        table: sorted((tuple(r) for r in conn.execute(f'SELECT * FROM "{table}"')), key=repr)
        for table in sorted(tables)
    }


def _normalized(store: Store) -> dict[str, Any]:
    """The state without minted IDs and clock readings, comparable across stores."""
    conn = store.conn

    def rows(sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in conn.execute(sql).fetchall()]

    return {
        "teams": [(t.name, [m.name for m in t.members]) for t in store.list_teams()],
        "messages": rows(
            "SELECT m.seq, t.name, s.name, r.name, m.body, m.origin FROM messages AS m"
            " JOIN teams AS t USING (team_pk)"
            " JOIN members AS s ON s.member_pk = m.sender_pk"
            " JOIN members AS r ON r.member_pk = m.recipient_pk ORDER BY m.seq"
        ),
        "reads": rows(
            "SELECT x.read_seq, x.msg_seq, r.name, x.log_position FROM message_reads AS x"
            " JOIN members AS r ON r.member_pk = x.reader_pk ORDER BY x.read_seq"
        ),
        "frontiers": rows(
            "SELECT t.name, m.name, f.local_position FROM read_frontiers AS f"
            " JOIN members AS m USING (member_pk) JOIN teams AS t USING (team_pk)"
            " ORDER BY 1, 2"
        ),
        "tip": log_tip(conn),
    }


def _integrity_ok(store: Store) -> None:
    assert store.conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def _ids(store: Store, body: str) -> list[str]:
    return [r[0] for r in store.conn.execute("SELECT id FROM messages WHERE body = ?", (body,))]


def _read_count(store: Store) -> int:
    count: int = store.conn.execute("SELECT count(*) FROM message_reads").fetchone()[0]
    return count


# -- the operations -----------------------------------------------------------------


def _base(store: Store) -> list[str]:
    """Team ``dev`` (alice, bob) and four messages; returns their IDs by seq."""
    store.init()
    store.create_team("dev", ["alice", "bob"])
    return [
        store.send("dev", sender, recipient, body).id
        for sender, recipient, body in (
            ("alice", "bob", "one"),  # seq 1
            ("bob", "alice", "two"),  # seq 2, off bob's subscription
            ("alice", "bob", "three"),  # seq 3
            ("alice", "bob", "four"),  # seq 4
        )
    ]


def _jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


#: A fixed exported log (fixed IDs, so every prepared store imports the same events).
IMPORTED = [
    {"type": "message_sent", "id": f"01900000-0000-7000-8000-00000000000{i}", "team": "dev",
     "from": sender, "to": recipient, "body": f"imported {i}", "at": AT}
    for i, (sender, recipient) in enumerate((("alice", "bob"), ("bob", "alice"), ("alice", "bob")))
] + [
    {"type": "message_read", "id": "01900000-0000-7000-8000-0000000000a0",
     "msg_id": "01900000-0000-7000-8000-000000000000", "team": "dev", "agent": "bob", "at": AT},
]  # fmt: skip


@dataclass(frozen=True)
class Operation:
    """One Store call: how to prepare for it, its effect, its retry."""

    method: str
    #: Prepares the store; returns the call's JSON-serialisable arguments.
    setup: Callable[[Store, Path], list[Any]]
    #: Asserts the call's whole effect is in the store (after a committed crash).
    effect: Callable[[Store, list[Any]], None]
    #: Runs the retry, asserting its outcome; ``committed`` says whether the
    #: crashed call had committed.
    retry: Callable[[Store, list[Any], bool], None]
    #: A committed call's retry changes no row (otherwise it must add state).
    idempotent: bool = True


# team.create


def _create_setup(store: Store, _: Path) -> list[Any]:
    _base(store)
    return ["ops", ["carol", "dave"]]


def _create_effect(store: Store, args: list[Any]) -> None:
    team = store.team("ops")
    assert [m.name for m in team.members] == ["carol", "dave"]


def _create_retry(store: Store, args: list[Any], committed: bool) -> None:
    if committed:
        with pytest.raises(Conflict):
            store.create_team(*args)
    else:
        store.create_team(*args)


# team.add_members


def _add_setup(store: Store, _: Path) -> list[Any]:
    _base(store)
    return ["dev", ["carol", "dave"]]


def _add_effect(store: Store, args: list[Any]) -> None:
    assert [m.name for m in store.team("dev").members] == ["alice", "bob", "carol", "dave"]


def _add_retry(store: Store, args: list[Any], committed: bool) -> None:
    if committed:
        with pytest.raises(Conflict):
            store.add_members(*args)
    else:
        store.add_members(*args)


# team.rename


def _rename_setup(store: Store, _: Path) -> list[Any]:
    ids = _base(store)
    store.mark_read_batch("dev", "bob", [ids[0]])
    return ["dev", "core"]


def _rename_effect(store: Store, args: list[Any]) -> None:
    assert [t.name for t in store.list_teams()] == ["core"]
    assert [m.body for m in store.history("core")] == ["one", "two", "three", "four"]
    assert store.read_cursor_get("core", "bob") == "1"  # the read layer followed
    assert [m.body for m in store.list_unread("core", "bob")] == ["three", "four"]


def _rename_retry(store: Store, args: list[Any], committed: bool) -> None:
    if committed:
        with pytest.raises(UnknownTeam):
            store.rename_team(*args)
    else:
        store.rename_team(*args)


# store.send


def _send_setup(store: Store, _: Path) -> list[Any]:
    _base(store)
    return ["dev", "alice", "bob", "hello"]


def _send_effect(store: Store, args: list[Any]) -> None:
    assert len(_ids(store, "hello")) == 1
    assert [m.body for m in store.list_unread("dev", "bob")] == ["one", "three", "four", "hello"]


def _send_retry(store: Store, args: list[Any], committed: bool) -> None:
    before = _ids(store, "hello")
    sent = store.send(*args)
    after = _ids(store, "hello")
    assert sent.id not in before
    assert after == [*before, sent.id]  # committed: the crashed copy, then a second one


# store.mark_read


def _mark_setup(store: Store, _: Path) -> list[Any]:
    ids = _base(store)
    return ["dev", "bob", [ids[0], ids[2]]]


def _mark_effect(store: Store, args: list[Any]) -> None:
    assert _read_count(store) == 2
    assert store.read_cursor_get("dev", "bob") == "3"
    assert [m.body for m in store.list_unread("dev", "bob")] == ["four"]


def _mark_retry(store: Store, args: list[Any], committed: bool) -> None:
    store.mark_read_batch(*args)


# store.consume


def _consume_setup(store: Store, _: Path) -> list[Any]:
    ids = _base(store)
    # Cursor 2 crosses the off-subscription seq 2; seq 3 stays unread.
    return ["dev", "bob", "2", [ids[0]]]


def _consume_effect(store: Store, args: list[Any]) -> None:
    assert _read_count(store) == 1
    assert store.read_cursor_get("dev", "bob") == "2"
    assert [m.body for m in store.list_unread("dev", "bob")] == ["three", "four"]


def _consume_retry(store: Store, args: list[Any], committed: bool) -> None:
    assert store.read_cursor_consume(*args) == "2"


# store.import


def _import_setup(store: Store, directory: Path) -> list[Any]:
    _base(store)
    source = directory / "export.jsonl"
    source.write_bytes(_jsonl(IMPORTED))
    return [str(source)]


def _import_effect(store: Store, args: list[Any]) -> None:
    for record in IMPORTED:
        if record["type"] == "message_sent":
            assert len(_ids(store, record["body"])) == 1
            assert _ids(store, record["body"]) == [record["id"]]
    assert [r[0] for r in store.conn.execute("SELECT id FROM message_reads")] == [
        "01900000-0000-7000-8000-0000000000a0"
    ]
    assert store.read_cursor_get("dev", "bob") == "0"  # seq 1 ("one") is still a hole
    assert [m.body for m in store.list_unread("dev", "bob")] == [
        "one", "three", "four", "imported 2",
    ]  # fmt: skip


def _import_retry(store: Store, args: list[Any], committed: bool) -> None:
    expected = (0, len(IMPORTED)) if committed else (len(IMPORTED), 0)
    assert store.import_file(*args) == expected


# store.compact


def _compact_setup(store: Store, _: Path) -> list[Any]:
    ids = _base(store)
    store.mark_read_batch("dev", "bob", [ids[0]])
    # Exact reads repeated under other event IDs (as merged exports produce):
    # three events for seq 1, two for seq 3.
    repeats = [ids[0], ids[0], ids[2], ids[2]]
    store.import_bytes(
        _jsonl(
            [
                {"type": "message_read", "id": new_uuid7(), "msg_id": msg, "team": "dev",
                 "agent": "bob", "at": AT}
                for msg in repeats
            ]
        )
    )  # fmt: skip
    assert _read_count(store) == 5
    return []


# team.rename_member


def _rename_member_setup(store: Store, _: Path) -> list[Any]:
    ids = _base(store)
    store.mark_read_batch("dev", "bob", [ids[0]])
    return ["dev", "bob", "robert"]


def _rename_member_effect(store: Store, args: list[Any]) -> None:
    assert sorted(m.name for m in store.team("dev").members) == ["alice", "robert"]
    assert store.read_cursor_get("dev", "robert") == "1"  # reads followed the row
    assert [m.body for m in store.list_unread("dev", "robert")] == ["three", "four"]
    assert store.list_unread("dev", "bob") == []


def _rename_member_retry(store: Store, args: list[Any], committed: bool) -> None:
    if committed:
        with pytest.raises(UnknownAgent):
            store.rename_member(*args)
    else:
        store.rename_member(*args)


def _compact_effect(store: Store, args: list[Any]) -> None:
    rows = store.conn.execute("SELECT read_seq, msg_seq FROM message_reads ORDER BY 1").fetchall()
    assert [tuple(r) for r in rows] == [(1, 1), (4, 3)]  # the earliest of each kept
    assert store.read_cursor_get("dev", "bob") == "3"
    assert [m.body for m in store.list_unread("dev", "bob")] == ["four"]


def _compact_retry(store: Store, args: list[Any], committed: bool) -> None:
    assert store.compact() == (0 if committed else 3)


OPERATIONS: dict[str, Operation] = {
    "team.create": Operation("create_team", _create_setup, _create_effect, _create_retry),
    "team.add_members": Operation("add_members", _add_setup, _add_effect, _add_retry),
    "team.rename": Operation("rename_team", _rename_setup, _rename_effect, _rename_retry),
    "team.rename_member": Operation(
        "rename_member", _rename_member_setup, _rename_member_effect, _rename_member_retry
    ),
    "store.send": Operation("send", _send_setup, _send_effect, _send_retry, idempotent=False),
    "store.mark_read": Operation("mark_read_batch", _mark_setup, _mark_effect, _mark_retry),
    "store.consume": Operation(
        "read_cursor_consume", _consume_setup, _consume_effect, _consume_retry
    ),
    "store.import": Operation("import_file", _import_setup, _import_effect, _import_retry),
    "store.compact": Operation("compact", _compact_setup, _compact_effect, _compact_retry),
}


def _split(point: str) -> tuple[str, bool]:
    name, when = point.rsplit(".", 1)
    assert when in ("before_commit", "after_commit")
    return name, when == "after_commit"


def _run_child(
    path: Path, method: str, args: list[Any], armed: str
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(path), method, json.dumps(args)],
        capture_output=True,
        cwd=REPO,
        env={**os.environ, "SYNCENGINE_CRASH_AT": armed},
        timeout=60,
        check=False,
    )


def _prepare(directory: Path, op: Operation) -> tuple[Path, list[Any]]:
    directory.mkdir(parents=True)
    path = directory / "store.db"
    with Store(path) as store:
        args = op.setup(store, directory)
    return path, args


# -- the tests ----------------------------------------------------------------------


def test_the_operations_cover_exactly_the_store_crash_points() -> None:
    covered = tuple(f"{name}.{when}_commit" for name in OPERATIONS for when in ("before", "after"))
    assert covered == STORE_CRASH_POINTS


def test_a_point_of_another_transaction_does_not_fire(tmp_path: Path) -> None:
    op = OPERATIONS["store.send"]
    path, args = _prepare(tmp_path / "store", op)
    proc = _run_child(path, op.method, args, "store.compact.before_commit")
    assert proc.returncode == 0, proc.stderr.decode()
    with Store(path) as store:
        assert len(_ids(store, "hello")) == 1


@pytest.mark.parametrize("point", STORE_CRASH_POINTS)
def test_a_crash_leaves_the_transaction_whole_or_absent_and_a_retry_converges(
    tmp_path: Path, point: str
) -> None:
    name, committed = _split(point)
    op = OPERATIONS[name]

    # The crash-free run on an identically prepared store.
    ref_path, ref_args = _prepare(tmp_path / "reference", op)
    with Store(ref_path) as store:
        getattr(store, op.method)(*ref_args)
        once = _normalized(store)
        if not op.idempotent:
            getattr(store, op.method)(*ref_args)
        twice = _normalized(store)

    path, args = _prepare(tmp_path / "crashed", op)
    with Store(path) as store:
        before_raw = _raw(store)
        before = _normalized(store)
    assert before != once, "the operation must change the prepared store"

    proc = _run_child(path, op.method, args, point)
    assert proc.returncode == CRASH_EXIT_CODE, (point, proc.returncode, proc.stderr.decode())
    assert proc.stdout == b""

    with Store(path) as store:
        _integrity_ok(store)
        if committed:
            op.effect(store, args)
            assert _normalized(store) == once, "a committed transition must be whole"
        else:
            assert _raw(store) == before_raw, "a crash before commit must leave no trace"
        crashed_raw = _raw(store)

        op.retry(store, args, committed)
        _integrity_ok(store)
        recovered = _normalized(store)
        if committed and op.idempotent:
            assert _raw(store) == crashed_raw, "the retry of a committed call changes nothing"
        if committed and not op.idempotent:
            assert recovered == twice  # the crashed send, then an ordinary second one
        else:
            assert recovered == once
            op.effect(store, args)
