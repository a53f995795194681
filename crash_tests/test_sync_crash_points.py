"""Kill a sync operation at every named crash point, restart, and prove the
contract's invariants (ADR 0005; specs/sync-stage1.md §6):

* no published wire ID is ever emitted with different bytes;
* no abandoned private wire ID ever appears anywhere;
* no local message is lost or imported twice;
* the transport cursor never passes an envelope without a durable outcome;
* the push cursor never skips an unacknowledged position;
* an accepted retention gap leaves exactly one audit row with the cursor
  at its floor, or neither;
* replaying after the crash converges to the state of a run without it.

Each crash point costs one subprocess (``crash_tests.sync_entry``, which
runs the real ``syncengine driver`` and records every minted wire ID);
set-up, recovery and the crash-free reference run in-process on small stores.
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

from syncengine.crash import CRASH_EXIT_CODE, STAGE1_CRASH_POINTS
from syncengine.local_store import Store
from syncengine.ops.bindings import BindingKey
from syncengine.ops.history_counts import history_counts, recount_history
from syncengine.ops.resync import SyncResync, SyncResyncResult
from syncengine.ops.sync_records import SyncPullCursor, SyncPullMessage, SyncPushAck, dump_line
from tests.syncengine.ops.helpers import (
    Classifier,
    FakeRelay,
    foreign_envelope,
    new_key,
    prepare_none,
)

REPO = Path(__file__).resolve().parents[1]
PREPARE_LINE = (dump_line(prepare_none().to_obj()) + "\n").encode()


@dataclass
class World:
    """One small store plus everything an operation's input needs."""

    path: Path
    key: BindingKey
    acks: list[SyncPushAck]
    page: list[SyncPullMessage]
    next_after: int

    def store(self) -> Store:
        return Store(self.path)

    def argv(self) -> list[str]:
        k = self.key
        return [k.local_team, k.server_instance_id, k.remote_team_id, str(k.protocol_version)]


def _world(directory: Path, key: BindingKey, op: str) -> World:
    """Deterministic set-up per operation (random IDs aside)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "store.db"
    acks: list[SyncPushAck] = []
    page: list[SyncPullMessage] = []
    next_after = 0
    with Store(path) as store:
        store.init()
        store.create_team("dev", ["alice", "bob"])
        for i in range(4):
            store.send("dev", "alice", "bob", f"local {i}")
        if op == "prepare":
            store.sync_prepare_push(key, prepare_none(), 1)  # one published already
        elif op in ("reconcile", "apply", "reprocess", "resync"):
            candidates = list(store.sync_prepare_push(key, prepare_none(), 10).candidates)
            relay = FakeRelay()
            acks = relay.push(candidates[:3])  # the acks are lost until we reconcile
            for body in ("foreign a", "foreign b"):
                relay.post(*foreign_envelope(key, body, "zed", "bob"))
            records, cursor = Classifier(key).page(relay, 0)
            # The engine could not open the last one yet (its key is missing).
            last = records[-1]
            records[-1] = SyncPullMessage(
                last.server_seq, last.wire_id, last.server_received_at, last.envelope,
                "pending_key", 0, 0, "no identity", None,
            )  # fmt: skip
            page, next_after = records, cursor.next_after
            if op in ("reprocess", "resync"):
                store.sync_apply_pull(key, page, cursor)
        elif op == "binding":
            store.sync_bind(key)
    return World(path, key, acks, page, next_after)


def _normalized(store: Store) -> dict[str, Any]:
    conn = store.conn

    def rows(sql: str) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in conn.execute(sql).fetchall()]

    return {
        "messages": rows("SELECT seq, body, origin FROM messages ORDER BY seq"),
        "push": rows("SELECT local_position, state, server_seq FROM sync_push ORDER BY 1"),
        "quarantine": rows(
            "SELECT server_seq, status, local_position FROM sync_quarantine ORDER BY 1"
        ),
        "bindings": rows(
            "SELECT state, push_cursor, transport_cursor, corrupt_count FROM sync_bindings"
        ),
        "conflicts": rows("SELECT kind, server_seq FROM sync_conflicts ORDER BY 1, 2"),
        "audits": rows(
            "SELECT expected_transport_cursor, accepted_floor, gap_start, gap_end, current_seq"
            " FROM sync_resync_audits ORDER BY 2"
        ),
    }


def _wire_ids_anywhere(store: Store) -> set[str]:
    conn = store.conn
    found = {r[0] for r in conn.execute("SELECT wire_id FROM sync_push WHERE wire_id IS NOT NULL")}
    found |= {r[0] for r in conn.execute("SELECT wire_id FROM sync_quarantine")}
    found |= {r[0] for r in conn.execute("SELECT wire_id FROM sync_conflicts")}
    return found


def _published(store: Store) -> dict[str, tuple[Any, ...]]:
    """Every published wire ID with its stored envelope columns."""
    return {
        r[0]: tuple(r[1:])
        for r in store.conn.execute(
            "SELECT wire_id, envelope_v, cipher, key_id, blob FROM sync_push"
            " WHERE wire_id IS NOT NULL"
        )
    }


def _check_invariants(store: Store, world: World) -> None:
    conn = store.conn
    # No local message lost; no pulled message imported twice.
    bodies = [r[0] for r in conn.execute("SELECT body FROM messages WHERE origin = 'local'")]
    assert sorted(bodies) == [f"local {i}" for i in range(4)]
    imported = [r[0] for r in conn.execute("SELECT body FROM messages WHERE origin = 'imported'")]
    assert len(imported) == len(set(imported))
    assert (
        len(imported)
        == conn.execute(
            "SELECT count(*) FROM sync_quarantine WHERE status = 'imported'"
        ).fetchone()[0]
    )
    # The totals ``status`` reads move with the rows, in the same transaction.
    for (binding_pk,) in conn.execute("SELECT binding_pk FROM sync_bindings").fetchall():
        assert history_counts(conn, binding_pk) == recount_history(conn, binding_pk)  # type: ignore[arg-type]
    for push_cursor, transport in conn.execute(
        "SELECT push_cursor, transport_cursor FROM sync_bindings"
    ):
        # The push cursor never skips an unacknowledged position …
        assert (
            conn.execute(
                "SELECT count(*) FROM sync_push WHERE local_position <= ? AND state != 'acked'",
                (push_cursor,),
            ).fetchone()[0]
            == 0
        )
        assert (
            conn.execute(
                "SELECT count(*) FROM messages AS m WHERE m.origin = 'local' AND m.seq <= ?"
                " AND NOT EXISTS (SELECT 1 FROM sync_push AS p WHERE p.local_position = m.seq)",
                (push_cursor,),
            ).fetchone()[0]
            == 0
        )
        # An accepted gap's audit and the cursor at its floor travel together.
        highest = conn.execute("SELECT max(accepted_floor) FROM sync_resync_audits").fetchone()[0]
        assert highest is None or highest <= transport
        # … and the transport cursor never passes an envelope without an outcome.
        for message in world.page:
            if message.server_seq <= transport:
                assert conn.execute(
                    "SELECT count(*) FROM sync_quarantine WHERE wire_id = ?"
                    " UNION ALL SELECT count(*) FROM sync_conflicts WHERE wire_id = ?",
                    (message.wire_id, message.wire_id),
                ).fetchall() != [(0,), (0,)]


def _crash(world: World, point: str, capture: Path, command: list[str], stdin: bytes) -> None:
    env = {**os.environ, "SYNCENGINE_CRASH_AT": point}
    proc = subprocess.run(
        [sys.executable, "-m", "crash_tests.sync_entry", str(capture), *command],
        input=stdin,
        capture_output=True,
        cwd=REPO,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == CRASH_EXIT_CODE, (point, proc.returncode, proc.stderr.decode())
    assert proc.stdout == b"", "a crashed operation must not have emitted records"


def _minted(capture: Path) -> set[str]:
    return set(capture.read_text().split()) if capture.exists() else set()


# -- the operations, as (crash command, stdin, in-process replay) ----------------------


def _prepare_cmd(w: World) -> tuple[list[str], bytes]:
    return ["driver", "--store", str(w.path), "prepare", *w.argv(), "10"], PREPARE_LINE


def _prepare_replay(store: Store, w: World) -> list[str]:
    return [dump_line(r) for r in store.sync_prepare_push(w.key, prepare_none(), 10).records()]


def _reconcile_cmd(w: World) -> tuple[list[str], bytes]:
    data = "".join(dump_line(a.to_obj()) + "\n" for a in w.acks).encode()
    return ["driver", "--store", str(w.path), "reconcile", *w.argv()], data


def _reconcile_replay(store: Store, w: World) -> list[str]:
    return [dump_line(store.sync_reconcile_push(w.key, w.acks).to_obj())]


def _apply_cmd(w: World) -> tuple[list[str], bytes]:
    lines = [dump_line(m.to_obj()) for m in w.page]
    lines.append(dump_line(SyncPullCursor(w.next_after).to_obj()))
    return ["driver", "--store", str(w.path), "apply", *w.argv()], (
        "\n".join(lines) + "\n"
    ).encode()


def _apply_replay(store: Store, w: World) -> list[str]:
    return [
        dump_line(r)
        for r in store.sync_apply_pull(w.key, w.page, SyncPullCursor(w.next_after)).records()
    ]


def _reprocess_cmd(w: World) -> tuple[list[str], bytes]:
    return ["driver", "--store", str(w.path), "reprocess", *w.argv(), "10"], b""


def _reprocess_replay(store: Store, w: World) -> list[str]:
    return [dump_line(r) for r in store.sync_reprocess(w.key, 10).records()]


def _resync_request(w: World) -> SyncResync:
    """The relay dropped three sequences past this store's cursor."""
    return SyncResync(w.next_after, w.next_after + 3, w.next_after + 5)


def _resync_cmd(w: World) -> tuple[list[str], bytes]:
    line = dump_line(_resync_request(w).to_obj()) + "\n"
    return ["driver", "--store", str(w.path), "resync", *w.argv()], line.encode()


def _resync_replay(store: Store, w: World) -> list[str]:
    # The engine's recovery rule: an audit for the floor means it committed.
    request = _resync_request(w)
    status = store.sync_resync_status(w.key, request.min_available_seq)
    if status.audit is not None:
        result = SyncResyncResult(status.driver_generation, status.audit)
    else:
        result = store.sync_resync(w.key, request)
    return [dump_line(result.to_obj())]


def _bind_cmd(w: World) -> tuple[list[str], bytes]:
    return ["bind", str(w.path), *w.argv()], b""


def _bind_replay(store: Store, w: World) -> list[str]:
    return [str(store.sync_bind(w.key).state)]


def _retire_cmd(w: World) -> tuple[list[str], bytes]:
    return ["retire", str(w.path), *w.argv(), "1"], b""


def _retire_replay(store: Store, w: World) -> list[str]:
    # Recovery after a lost answer: re-read; retire only if still active.
    binding = store.sync_binding(w.key)
    assert binding is not None
    if binding.state == "active":
        binding = store.sync_retire_binding(w.key, binding.revision)
    return [str(binding.state)]


Replay = Callable[[Store, World], list[str]]
OPERATIONS: dict[str, tuple[str, Callable[[World], tuple[list[str], bytes]], Replay]] = {
    "prepare.": ("prepare", _prepare_cmd, _prepare_replay),
    "reconcile.": ("reconcile", _reconcile_cmd, _reconcile_replay),
    "apply.": ("apply", _apply_cmd, _apply_replay),
    "reprocess.": ("reprocess", _reprocess_cmd, _reprocess_replay),
    "resync.": ("resync", _resync_cmd, _resync_replay),
    "binding.bind.": ("binding-none", _bind_cmd, _bind_replay),
    "binding.retire.": ("binding", _retire_cmd, _retire_replay),
}


def _operation(point: str) -> tuple[str, Callable[[World], tuple[list[str], bytes]], Replay]:
    return next(v for prefix, v in OPERATIONS.items() if point.startswith(prefix))


def test_every_crash_point_is_exercised_here() -> None:
    assert all(any(p.startswith(prefix) for prefix in OPERATIONS) for p in STAGE1_CRASH_POINTS)


def test_crash_points_are_inert_unless_armed() -> None:
    from syncengine import crash

    assert crash.armed_point() is None
    crash.crash_point(STAGE1_CRASH_POINTS[0])  # returns: nothing armed in this process


@pytest.mark.parametrize("point", STAGE1_CRASH_POINTS)
def test_recovery_from_a_crash_converges_to_the_crash_free_run(tmp_path: Path, point: str) -> None:
    op, command, replay = _operation(point)
    key = new_key()
    world = _world(tmp_path / "crashed", key, op)
    reference = _world(tmp_path / "reference", key, op)
    # The reference must see the same pulled page (same wire IDs and bytes).
    reference.page, reference.next_after, reference.acks = world.page, world.next_after, world.acks
    if op == "reconcile" or op == "apply":
        _align_reservations(reference, world)

    with world.store() as store:
        before = _normalized(store)
        published_before = _published(store)
    capture = tmp_path / "minted.txt"
    argv, stdin = command(world)
    _crash(world, point, capture, argv, stdin)

    with world.store() as store:
        crashed = _normalized(store)
        _check_invariants(store, world)
        if point.endswith("before_commit") or point == "prepare.sealed" or op == "reprocess":
            assert crashed == before, "a crash before commit must leave no trace"
        elif point != "prepare.begin.after_commit":  # that one had nothing to write
            assert crashed != before, "a crash after commit must keep the transition"
        published_now = _published(store)
        # A published wire ID keeps its bytes.
        for wire, envelope in published_before.items():
            assert published_now[wire] == envelope
        abandoned = _minted(capture) - set(published_now)
        first = replay(store, world)
        second = replay(store, world)
        if op in ("prepare", "reconcile", "reprocess", "resync"):
            assert first == second, "replays must be byte-identical"
        _check_invariants(store, world)
        # No abandoned private wire ID appears anywhere, even after recovery.
        assert not abandoned & _wire_ids_anywhere(store)
        assert not abandoned & {
            json.loads(line).get("id") for line in first + second if line.startswith("{")
        }
        # Published reservations are reused byte for byte by the replay.
        final_published = _published(store)
        for wire, envelope in published_now.items():
            assert final_published[wire] == envelope
        recovered = _normalized(store)

    with reference.store() as store:
        replay(store, reference)
        expected = _normalized(store)
    assert recovered == expected


def _align_reservations(reference: World, world: World) -> None:
    """Give the reference store the crashed world's published wire IDs and
    envelopes, so acks and echoes mean the same thing in both."""
    with world.store() as src, reference.store() as dst:
        rows = src.conn.execute(
            "SELECT local_position, wire_id, envelope_v, cipher, key_id, blob FROM sync_push"
        ).fetchall()
        conn = dst.conn
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "UPDATE sync_push SET wire_id = ?2, envelope_v = ?3, cipher = ?4, key_id = ?5,"
            " blob = ?6 WHERE local_position = ?1",
            rows,
        )
        conn.execute("COMMIT")
