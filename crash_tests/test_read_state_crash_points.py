"""Kill a stage-2 read-state operation at every named crash point, restart,
and prove the read-state contract (read-state-synchronization.md; ADR
0006–0008; syncengine/ops/read_state.py):

* a crash before commit leaves every table exactly as it was;
* a crash after commit leaves the whole transition durable;
* no read fact is lost: every message read before stays read, no exact read
  event or local frontier goes away, and no agent's unread list grows;
* no read fact is invented: every message newly read is covered by the
  operation's input (the authenticated floor, a frontier or an exact read
  of an unblocked member) or by remote facts the store already held;
* the transport cursor, the push cursor, quarantine and the push
  reservations are never touched by a read-state operation;
* replaying the operation in-process converges to the state of a crash-free
  run, and ``read-prepare``'s records are byte-identical across replays and
  identical to the crash-free run's.

Each crash point costs one subprocess (the real ``syncengine driver
read-…`` verb against the store file). Set-up, recovery and the crash-free
reference run in-process; the reference store is a file copy of the world
taken before the crash, so every random ID (member IDs, wire IDs, the
binding key, the driver generation) is the same in both.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from syncengine.crash import CRASH_EXIT_CODE, STAGE2_CRASH_POINTS
from syncengine.ids import new_uuid4, new_uuid7
from syncengine.local_store import Store
from syncengine.ops.bindings import BindingKey
from syncengine.ops.read_records import (
    REASON_LIMIT,
    REASON_NAME_MISMATCH,
    SyncReadBlock,
    SyncReadContext,
    SyncReadExact,
    SyncReadFrontier,
    SyncReadSnapshot,
    SyncReadUnblock,
)
from syncengine.ops.sync_records import SyncPullMessage, dump_line
from syncengine.store.connection import write_transaction
from syncengine.store.teams import adopt_roster
from tests.syncengine.ops.helpers import (
    Classifier,
    FakeRelay,
    foreign_envelope,
    new_key,
    prepare_none,
)

REPO = Path(__file__).resolve().parents[1]
AGENTS = ("alice", "bob", "carol", "dave")
ROSTERED_AT = "2026-08-01T08:00:00.000000Z"
#: The relay's authenticated retention floor and current sequence in every
#: request (the store starts at floor 0 and transport cursor 11).
FLOOR = 2
CURRENT = 12
#: (body, recipient) of the foreign envelopes, pulled after our own five
#: pushes come back as echoes: server_seq 7 … 11. ``foreign d`` cannot be
#: opened yet (pending_key), so it blocks every member's prefix at 10.
FOREIGN = (
    ("foreign a", "bob"),
    ("foreign b", "bob"),
    ("foreign c", "alice"),
    ("foreign d", "bob"),
    ("foreign e", "bob"),
)
PENDING = "foreign d"
#: The driver verb of each operation.
VERBS = {
    "prepare": "read-prepare",
    "apply": "read-apply",
    "block": "read-block",
    "unblock": "read-unblock",
}
#: The tables an operation may write (anything else must stay byte-identical
#: even after its commit), and those it must change in this world.
#: ``sync_bindings`` may change in its ``read_floor`` column only.
MAY_WRITE = {
    "prepare": {
        "message_reads",
        "sqlite_sequence",
        "read_frontiers",
        "read_blocks",
        "sync_bindings",
    },
    "apply": {
        "message_reads",
        "sqlite_sequence",
        "read_frontiers",
        "read_remote_frontiers",
        "read_remote_exact",
        "read_outbox",
        "sync_bindings",
    },
    "block": {"read_blocks"},
    "unblock": {"read_blocks"},
}
MUST_CHANGE = {
    "prepare": {"message_reads", "read_blocks", "sync_bindings"},
    "apply": {
        "message_reads",
        "read_remote_frontiers",
        "read_remote_exact",
        "read_outbox",
        "sync_bindings",
    },
    "block": {"read_blocks"},
    "unblock": {"read_blocks"},
}

Item = SyncReadFrontier | SyncReadExact


@dataclass
class World:
    """One store file plus every read-state operation's input."""

    path: Path
    key: BindingKey
    ids: dict[str, str]  # agent name -> the relay's member ID
    wires: dict[str, tuple[str, int]]  # body -> (wire ID, server_seq) of a held message
    ghosts: tuple[str, str]  # wire IDs the relay reports read that this store does not hold
    context: SyncReadContext
    snapshot: SyncReadSnapshot
    items: tuple[Item, ...]
    block: SyncReadBlock
    unblock: SyncReadUnblock

    def store(self) -> Store:
        return Store(self.path)

    def argv(self) -> list[str]:
        k = self.key
        return [k.local_team, k.server_instance_id, k.remote_team_id, str(k.protocol_version)]


_MAPPED = (
    "SELECT m.seq, m.body, p.wire_id, p.server_seq FROM sync_push AS p"
    " JOIN messages AS m ON m.seq = p.local_position WHERE p.state = 'acked'"
    " UNION ALL"
    " SELECT m.seq, m.body, q.wire_id, q.server_seq FROM sync_quarantine AS q"
    " JOIN messages AS m ON m.seq = q.local_position WHERE q.status = 'imported'"
)


def _mappings(store: Store) -> dict[str, tuple[str, int]]:
    """body -> (wire ID, server_seq) of every message with a durable mapping."""
    return {str(b): (str(w), int(s)) for _, b, w, s in store.conn.execute(_MAPPED)}


def _mapping_by_seq(store: Store) -> dict[int, tuple[str, int]]:
    """local seq -> (wire ID, server_seq) of every message with a durable mapping."""
    return {int(q): (str(w), int(s)) for q, _, w, s in store.conn.execute(_MAPPED)}


def _world(directory: Path, op: str) -> World:
    """Team ``dev`` = alice, bob, carol, dave, all on the relay's roster.

    Six local messages (four alice→bob, bob→alice, alice→carol) pushed and
    acknowledged (server_seq 1–6, echoed back); five foreign ones pulled
    (7–11), the fourth still waiting for its key. Bob has read ``local 0``,
    ``local 2`` and ``foreign a``, alice ``foreign c`` — all promoted to the
    read outbox. Carol is blocked for a name mismatch; in the unblock world
    bob is also blocked for the relay's limit.
    """
    directory.mkdir(parents=True)
    path = directory / "store.db"
    key = new_key()
    ids = {name: new_uuid7() for name in AGENTS}
    with Store(path) as store:
        store.init()
        store.create_team("dev", list(AGENTS))
        (team_pk,) = store.conn.execute("SELECT team_pk FROM teams WHERE name = 'dev'").fetchone()  # type: ignore[misc]
        with write_transaction(store.conn, store.path) as conn:
            adopt_roster(conn, team_pk, [(ids[name], name) for name in AGENTS], ROSTERED_AT)
        for i in range(4):
            store.send("dev", "alice", "bob", f"local {i}")
        store.send("dev", "bob", "alice", "local 4")
        store.send("dev", "alice", "carol", "local 5")
        relay = FakeRelay()
        candidates = list(store.sync_prepare_push(key, prepare_none(), 10).candidates)
        store.sync_reconcile_push(key, relay.push(candidates))
        for body, recipient in FOREIGN:
            relay.post(*foreign_envelope(key, body, "zed", recipient))
        page, cursor = Classifier(key).page(relay, 0)
        pending = len(candidates) + [b for b, _ in FOREIGN].index(PENDING)
        held = page[pending]
        page[pending] = SyncPullMessage(
            held.server_seq, held.wire_id, held.server_received_at, held.envelope,
            "pending_key", 0, 0, "no identity for epoch-1", None,
        )  # fmt: skip
        store.sync_apply_pull(key, page, cursor)
        by_body = {m.body: m.id for m in store.history("dev")}
        store.mark_read_batch(
            "dev", "bob", [by_body[b] for b in ("local 0", "local 2", "foreign a")]
        )
        store.mark_read_batch("dev", "alice", [by_body["foreign c"]])
        store.sync_block_read_state(key, SyncReadBlock(ids["carol"], REASON_NAME_MISMATCH))
        if op == "unblock":
            store.sync_block_read_state(key, SyncReadBlock(ids["bob"], REASON_LIMIT))
        wires = _mappings(store)
    ghosts = (new_uuid4(), new_uuid4())
    alice, bob, carol, dave = (ids[name] for name in AGENTS)
    context = SyncReadContext(
        FLOOR,
        CURRENT,
        # Carol's names agree again (her block clears); dave's do not.
        ((alice, "alice"), (bob, "bob"), (carol, "carol"), (dave, "david")),
        AGENTS,
    )
    items: tuple[Item, ...] = (
        SyncReadFrontier(bob, wires["foreign b"][1]),  # covers local 3 and foreign a/b
        SyncReadExact(bob, wires["foreign e"][0]),  # a held message above the hole
        SyncReadExact(bob, ghosts[0]),  # a message not pulled yet
        SyncReadExact(bob, wires["local 0"][0]),  # already under the frontier
        SyncReadFrontier(alice, 3),
        SyncReadExact(alice, wires["local 4"][0]),
        SyncReadExact(alice, ghosts[1]),
        # Carol is name-mismatch blocked: neither of these may apply.
        SyncReadFrontier(carol, wires["foreign b"][1]),
        SyncReadExact(carol, wires["local 5"][0]),
    )
    return World(
        path,
        key,
        ids,
        wires,
        ghosts,
        context,
        SyncReadSnapshot(FLOOR, CURRENT),
        items,
        SyncReadBlock(bob, REASON_LIMIT),
        SyncReadUnblock(bob),
    )


# -- snapshots of the store --------------------------------------------------------------


def _rows(store: Store, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in store.conn.execute(sql).fetchall()]


def _everything(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every table's every row, ids and timestamps included."""
    names = [r[0] for r in _rows(store, "SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {name: sorted(_rows(store, f'SELECT * FROM "{name}"'), key=repr) for name in names}


def _binding_columns(store: Store) -> list[str]:
    return [str(r[1]) for r in _rows(store, "PRAGMA table_info(sync_bindings)")]


def _normalized(store: Store) -> dict[str, Any]:
    """The read-state tables and what they must leave alone, without the
    random event IDs and wall-clock timestamps a run mints."""
    return {
        "message_reads": _rows(
            store,
            "SELECT read_seq, team_pk, reader_pk, msg_seq, msg_id, log_position"
            " FROM message_reads ORDER BY read_seq",
        ),
        "read_frontiers": _rows(store, "SELECT * FROM read_frontiers ORDER BY 1"),
        "read_remote_frontiers": _rows(store, "SELECT * FROM read_remote_frontiers ORDER BY 1, 2"),
        "read_remote_exact": _rows(store, "SELECT * FROM read_remote_exact ORDER BY 1, 2, 3"),
        "read_outbox": _rows(store, "SELECT * FROM read_outbox ORDER BY 1, 2, 3"),
        "read_blocks": _rows(
            store, "SELECT binding_pk, member_id, reason, detail FROM read_blocks ORDER BY 1, 2"
        ),
        "bindings": _rows(
            store,
            "SELECT binding_pk, state, revision, read_floor, transport_cursor, push_cursor,"
            " corrupt_count FROM sync_bindings ORDER BY 1",
        ),
        "quarantine": _rows(
            store,
            "SELECT server_seq, wire_id, status, local_position FROM sync_quarantine ORDER BY 1",
        ),
        "push": _rows(
            store, "SELECT local_position, wire_id, state, server_seq FROM sync_push ORDER BY 1"
        ),
        "messages": _rows(store, "SELECT seq, id, recipient_pk, origin FROM messages ORDER BY 1"),
        "unread": {agent: [m.id for m in store.list_unread("dev", agent)] for agent in AGENTS},
    }


def _transport(store: Store) -> dict[str, Any]:
    """What no read-state operation may touch."""
    return {
        "cursors": _rows(
            store, "SELECT binding_pk, transport_cursor, push_cursor FROM sync_bindings ORDER BY 1"
        ),
        "quarantine": _rows(
            store,
            "SELECT server_seq, wire_id, status, local_position FROM sync_quarantine ORDER BY 1",
        ),
        "push": _rows(store, "SELECT * FROM sync_push ORDER BY local_position"),
    }


def _read_by_recipient(store: Store) -> set[tuple[int, int]]:
    """(recipient_pk, seq) of every message its recipient has read (an exact
    event or the recipient's local frontier)."""
    return {
        (int(r[0]), int(r[1]))
        for r in store.conn.execute(
            "SELECT m.recipient_pk, m.seq FROM messages AS m"
            " WHERE m.seq <= coalesce((SELECT f.local_position FROM read_frontiers AS f"
            "                          WHERE f.member_pk = m.recipient_pk), 0)"
            " OR EXISTS (SELECT 1 FROM message_reads AS x"
            "            WHERE x.reader_pk = m.recipient_pk AND x.msg_seq = m.seq)"
        )
    }


@dataclass
class Facts:
    """The read facts of one moment, for the lost/invented checks."""

    events: set[tuple[Any, ...]]  # (reader_pk, msg_seq, msg_id) of every read event
    frontiers: dict[int, int]  # member_pk -> local frontier
    read: set[tuple[int, int]]  # (recipient_pk, seq) read by its recipient
    unread: dict[str, set[str]]
    floor: int
    remote_frontiers: dict[str, int]
    remote_exact: set[tuple[str, str]]
    mismatch_blocked: set[str]


def _facts(store: Store) -> Facts:
    return Facts(
        events=set(_rows(store, "SELECT reader_pk, msg_seq, msg_id FROM message_reads")),
        frontiers={int(a): int(b) for a, b in _rows(store, "SELECT * FROM read_frontiers")},
        read=_read_by_recipient(store),
        unread={a: {m.id for m in store.list_unread("dev", a)} for a in AGENTS},
        floor=int(_rows(store, "SELECT read_floor FROM sync_bindings")[0][0]),
        remote_frontiers={
            str(m): int(s)
            for m, s in _rows(store, "SELECT member_id, server_seq FROM read_remote_frontiers")
        },
        remote_exact={
            (str(m), str(w))
            for m, w in _rows(store, "SELECT member_id, wire_id FROM read_remote_exact")
        },
        mismatch_blocked={
            str(r[0])
            for r in _rows(
                store, f"SELECT member_id FROM read_blocks WHERE reason = '{REASON_NAME_MISMATCH}'"
            )
        },
    )


def _justified(world: World, op: str, before: Facts) -> Callable[[str, str, int], bool]:
    """Whether the op's input (or what the store held before it) covers the
    message with mapping (wire, server_seq) for its recipient ``member``."""
    floor = before.floor
    frontiers = dict(before.remote_frontiers)
    exact = set(before.remote_exact)
    if op == "prepare":
        floor = max(floor, world.context.min_available_seq)
    elif op == "apply":
        floor = max(floor, world.snapshot.min_available_seq)
        for item in world.items:
            if item.member_id in before.mismatch_blocked:
                continue  # a name mismatch never authorizes a read
            if isinstance(item, SyncReadFrontier):
                frontiers[item.member_id] = max(frontiers.get(item.member_id, 0), item.server_seq)
            else:
                exact.add((item.member_id, item.wire_id))

    def covered(member: str, wire: str, seq: int) -> bool:
        return seq <= max(floor, frontiers.get(member, 0)) or (member, wire) in exact

    return covered


def _check_read_facts(store: Store, world: World, op: str, before: Facts) -> None:
    now = _facts(store)
    # Nothing lost.
    assert before.events <= now.events, "a read event disappeared"
    for member, position in before.frontiers.items():
        assert now.frontiers.get(member, 0) >= position, "a local frontier moved back"
    assert before.read <= now.read, "a message read before is unread now"
    for agent in AGENTS:
        assert now.unread[agent] <= before.unread[agent], f"{agent}'s unread list grew"
    assert now.floor >= before.floor, "the read floor moved back"
    # Nothing invented: every new event is a recipient's read of a message
    # the op's input (or an older remote fact) covers.
    covered = _justified(world, op, before)
    recipients = {
        int(seq): (int(pk), str(member))
        for seq, pk, member in _rows(
            store,
            "SELECT m.seq, m.recipient_pk, r.member_id FROM messages AS m"
            " JOIN members AS r ON r.member_pk = m.recipient_pk",
        )
    }
    mapping = _mapping_by_seq(store)
    for reader, seq, msg_id in now.events - before.events:
        assert seq is not None and msg_id is None, "only held messages are projected"
        recipient, member_id = recipients[seq]
        assert reader == recipient, "a read projected onto somebody else than the recipient"
        assert seq in mapping, "a read projected onto a message with no durable mapping"
        assert covered(member_id, *mapping[seq]), (
            f"read of seq {seq} by {member_id} is not justified"
        )
    for recipient, seq in now.read - before.read:
        assert recipients[seq][0] == recipient
        assert covered(recipients[seq][1], *mapping[seq]), f"seq {seq} read without a cause"


# -- the operations ----------------------------------------------------------------------


def _stdin(world: World, op: str) -> bytes:
    records: list[dict[str, Any]]
    if op == "prepare":
        records = [world.context.to_obj()]
    elif op == "apply":
        records = [world.snapshot.to_obj(), *(item.to_obj() for item in world.items)]
    elif op == "block":
        records = [world.block.to_obj()]
    else:
        records = [world.unblock.to_obj()]
    return "".join(dump_line(r) + "\n" for r in records).encode()


def _run(store: Store, world: World, op: str) -> list[str]:
    """The operation in-process; returns the lines the driver would print."""
    records: list[dict[str, Any]]
    if op == "prepare":
        records = store.sync_prepare_read_state(world.key, world.context).records()
    elif op == "apply":
        result = store.sync_apply_read_state(world.key, world.snapshot, world.items)
        records = [result.to_obj()]
    elif op == "block":
        records = [store.sync_block_read_state(world.key, world.block).to_obj()]
    else:
        records = [store.sync_unblock_read_state(world.key, world.unblock).to_obj()]
    return [dump_line(r) for r in records]


def _operation(point: str) -> str:
    """``read.<op>.<when>_commit`` -> ``<op>``."""
    stage, name, when = point.split(".")
    assert stage == "read" and name in VERBS, point
    assert when in ("before_commit", "after_commit"), point
    return name


def _crash(world: World, op: str, point: str) -> None:
    env = {**os.environ, "SYNCENGINE_CRASH_AT": point}
    env.pop("SYNCENGINE_STORE", None)
    verb = [VERBS[op], *world.argv()]
    proc = subprocess.run(
        [sys.executable, "-m", "syncengine", "driver", "--store", str(world.path), *verb],
        input=_stdin(world, op),
        capture_output=True,
        cwd=REPO,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == CRASH_EXIT_CODE, (point, proc.returncode, proc.stderr.decode())
    assert proc.stdout == b"", "a crashed operation must not have emitted records"


# -- the tests ---------------------------------------------------------------------------


def test_every_stage2_crash_point_is_exercised_here() -> None:
    assert len(STAGE2_CRASH_POINTS) == 2 * len(VERBS)
    assert {_operation(p) for p in STAGE2_CRASH_POINTS} == set(VERBS) == set(MAY_WRITE)
    for op in VERBS:
        assert {p for p in STAGE2_CRASH_POINTS if _operation(p) == op} == {
            f"read.{op}.before_commit",
            f"read.{op}.after_commit",
        }
        assert MUST_CHANGE[op] <= MAY_WRITE[op]


def test_the_world_gives_every_operation_work_to_do(tmp_path: Path) -> None:
    """Without a crash: prepare emits frontiers, exact reads and a block and
    moves the floor; apply merges frontiers and exacts (some for wire IDs
    not held), projects reads and trims the outbox; block and unblock flip
    a block. (The crash tests below rely on each of these.)"""
    world = _world(tmp_path / "prepare", "prepare")
    alice, bob, carol, dave = (world.ids[name] for name in AGENTS)
    with world.store() as store:
        assert _rows(store, "SELECT count(*) FROM read_outbox") == [(4,)]
        unread_before = _facts(store).unread
        lines = _run(store, world, "prepare")
        assert lines == [
            dump_line(r)
            for r in (
                SyncReadFrontier(alice, 4).to_obj(),
                SyncReadFrontier(bob, 3).to_obj(),
                SyncReadFrontier(carol, 5).to_obj(),
                {"type": "sync_read_blocked", "member_id": dave, "reason": REASON_NAME_MISMATCH},
                SyncReadExact(alice, world.wires["foreign c"][0]).to_obj(),
                SyncReadExact(bob, world.wires["foreign a"][0]).to_obj(),
            )
        ]
        assert _rows(store, "SELECT read_floor FROM sync_bindings") == [(FLOOR,)]
        assert _rows(store, "SELECT member_id FROM read_blocks") == [(dave,)]
        assert _facts(store).unread["bob"] == unread_before["bob"] - {
            m.id for m in store.history("dev") if m.body == "local 1"
        }

    world = _world(tmp_path / "apply", "apply")
    alice, bob, carol, dave = (world.ids[name] for name in AGENTS)
    with world.store() as store:
        _run(store, world, "apply")
        unread = {a: sorted(m.body for m in store.list_unread("dev", a)) for a in AGENTS}
        assert unread == {"alice": [], "bob": [], "carol": ["local 5"], "dave": []}
        exact = set(_rows(store, "SELECT member_id, wire_id FROM read_remote_exact"))
        assert {(bob, world.ghosts[0]), (alice, world.ghosts[1])} <= exact
        assert _rows(store, "SELECT member_id, server_seq FROM read_outbox") == [
            (alice, world.wires["foreign c"][1])
        ]
        frontiers = set(_rows(store, "SELECT member_id, server_seq FROM read_remote_frontiers"))
        assert frontiers == {(bob, world.wires["foreign b"][1]), (alice, 3)}

    for op, blocked in (("block", {"carol", "bob"}), ("unblock", {"carol"})):
        world = _world(tmp_path / op, op)
        with world.store() as store:
            _run(store, world, op)
            members = {r[0] for r in _rows(store, "SELECT member_id FROM read_blocks")}
            assert members == {world.ids[name] for name in blocked}


@pytest.mark.parametrize("point", STAGE2_CRASH_POINTS)
def test_recovery_from_a_crash_converges_to_the_crash_free_run(tmp_path: Path, point: str) -> None:
    op = _operation(point)
    world = _world(tmp_path / "crashed", op)
    # The reference is the same world, byte for byte, before the crash.
    shutil.copytree(tmp_path / "crashed", tmp_path / "reference")
    reference = replace(world, path=tmp_path / "reference" / "store.db")

    with world.store() as store:
        before_all = _everything(store)
        before = _normalized(store)
        before_facts = _facts(store)
        transport = _transport(store)
        columns = _binding_columns(store)

    _crash(world, op, point)

    with reference.store() as store:
        expected_lines = _run(store, reference, op)
        expected = _normalized(store)

    with world.store() as store:
        crashed_all = _everything(store)
        crashed = _normalized(store)
        assert _transport(store) == transport
        _check_read_facts(store, world, op, before_facts)
        if point.endswith("before_commit"):
            assert crashed_all == before_all, "a crash before commit must leave no trace"
            assert crashed == before != expected, "the crash-free run had work to do"
        else:
            changed = {name for name, rows in crashed_all.items() if rows != before_all[name]}
            assert changed <= MAY_WRITE[op], f"{op} wrote {changed - MAY_WRITE[op]}"
            assert MUST_CHANGE[op] <= changed, f"{op} lost {MUST_CHANGE[op] - changed}"
            keep = [i for i, c in enumerate(columns) if c != "read_floor"]
            assert [[row[i] for i in keep] for row in crashed_all["sync_bindings"]] == [
                [row[i] for i in keep] for row in before_all["sync_bindings"]
            ], "a read-state operation may move only the read floor of a binding"
            assert crashed == expected, "the committed transition is the crash-free one"

        first = _run(store, world, op)
        after_first = _normalized(store)
        second = _run(store, world, op)
        recovered = _normalized(store)
        assert first == second, "replays must be byte-identical"
        assert after_first == recovered, "a second replay must change nothing"
        assert first == expected_lines, "the replay must answer what the crash-free run did"
        assert _transport(store) == transport
        _check_read_facts(store, world, op, before_facts)

    assert recovered == expected
