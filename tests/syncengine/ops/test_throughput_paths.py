"""The faster hot paths of issue #17 write and emit exactly what the
reference paths do (issue #17 quality bar: "the wire bytes of every
envelope, request and record are unchanged").

* ``prepare_push`` seals ``none`` without a per-message binding: every
  envelope, every ``POST /v1/messages`` body and every driver record is
  byte-identical to sealing through ``wire.profiles.seal`` with the full
  ``Binding`` (the encoder the engine used before), over random messages;
* ``apply_pull`` imports a page through ``import_projected_sent`` (one
  multi-row ``INSERT``, no re-validation of the opened plaintext): the rows,
  their order and their sequences are those of ``import_fresh_sent``, and a
  name the store refuses is refused the same way, naming the same field;
* the multi-row inserts return sequences in row order across chunk edges;
* dense page loads (``BETWEEN``) find the same owners as the ``IN`` probes.

Real stores throughout; no mocks.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from syncengine.ids import new_uuid4, new_uuid7s
from syncengine.local_store import Store
from syncengine.ops.bindings import BindingKey
from syncengine.ops.prepare_push import (
    BlockedSeal,
    LocalMessage,
    Sealed,
    seal_local,
    seal_none_chunk,
)
from syncengine.ops.reconcile_push import load_seq_owners
from syncengine.ops.sync_records import SyncPullCursor, SyncPullMessage, SyncPushCandidate
from syncengine.store import OutgoingMessage
from syncengine.store.bulk import ROWS_PER_STATEMENT, insert_rows_returning
from syncengine.store.errors import InvalidInput
from syncengine.store.event_log import SentFields, import_fresh_sent, import_projected_sent
from syncengine.store.log_records import ORIGIN_IMPORTED, dump_record
from tests.syncengine.ops.helpers import RECEIVED, ack, new_key, prepare_none
from wire.envelope import Envelope
from wire.errors import WireError
from wire.http_v1.body import encode_body
from wire.http_v1.messages import MessageBatch
from wire.http_v1.messages import OutgoingMessage as WireOutgoing
from wire.message import Message
from wire.profiles import Binding, SealParams, seal

UUID4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
_NAMES = st.sampled_from(["alice", "bob", "zed", "Ünïcode-agent", "a", "x" * 128])
# Bodies: any text the store accepts (no lone surrogates), including JSON's
# escapes, non-BMP scalars and control characters.
_BODIES = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=300)
_SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_SETTINGS
@given(bodies=st.lists(st.tuples(_BODIES, _NAMES, _NAMES), min_size=1, max_size=12))
def test_prepared_none_envelopes_requests_and_records_equal_the_reference_encoder(
    tmp_path_factory: pytest.TempPathFactory, bodies: list[tuple[str, str, str]]
) -> None:
    path = tmp_path_factory.mktemp("prep") / "store.db"
    key = new_key()
    with Store(path) as store:
        store.init()
        store.send_many(OutgoingMessage("dev", s, r, b) for b, s, r in bodies)
        result = store.sync_prepare_push(key, prepare_none(), 1000)
        stored = {
            row[0]: row[1:]
            for row in store.conn.execute("SELECT seq, body, at FROM messages ORDER BY seq")
        }
    assert len(result.candidates) == len(bodies)
    reference: list[SyncPushCandidate] = []
    for candidate, (body, sender, recipient) in zip(result.candidates, bodies, strict=True):
        at = stored[candidate.local_position][1]
        params = SealParams(
            binding=Binding(key.remote_team_id, candidate.wire_id, key.protocol_version),
            key_id=None,
            recipients=(),
            max_blob_bytes=1024 * 1024,
        )
        envelope = seal(Message(body, at, sender, recipient), "none", params)
        assert envelope == candidate.envelope
        assert envelope.blob == candidate.envelope.blob
        reference.append(
            SyncPushCandidate(
                candidate.local_position, candidate.local_id, candidate.wire_id, envelope
            )
        )

    # The POST body, as the engine encodes it.
    def body_of(candidates: list[SyncPushCandidate]) -> bytes:
        batch = MessageBatch(tuple(WireOutgoing(c.wire_id, c.envelope) for c in candidates))
        return encode_body(batch.to_obj())

    assert body_of(list(result.candidates)) == body_of(reference)
    # The driver records (sync_push_candidate lines).
    assert [dump_record(c.to_obj()) for c in result.candidates] == [
        dump_record(c.to_obj()) for c in reference
    ]


def test_seal_local_none_refuses_what_the_reference_refuses(key: BindingKey) -> None:
    """An oversized or invalid plaintext blocks the message with the reason
    the full-binding seal gives."""
    big = LocalMessage(1, new_uuid7s(1)[0], "x" * 2000, "2026-01-01T00:00:00.000000Z", "a", "b")
    request = prepare_none(max_blob_bytes=1024)
    blocked = seal_local(big, request, key)
    assert isinstance(blocked, BlockedSeal)
    params = SealParams(Binding(key.remote_team_id, new_uuid4(), 1), None, (), 1024)
    with pytest.raises(WireError) as refused:
        seal(Message(big.body, big.at, big.sender, big.recipient), "none", params)
    assert blocked.reason == str(refused.value)
    bad = LocalMessage(2, new_uuid7s(1)[0], "hi", "2026-01-01T00:00:00.000000Z", "-bad", "b")
    refusal = seal_local(bad, request, key)
    assert isinstance(refusal, BlockedSeal)
    assert refusal.reason.startswith("not a valid v1 message")


def _rows(store: Store) -> list[tuple[object, ...]]:
    return [
        tuple(row)
        for row in store.conn.execute(
            "SELECT m.seq, t.name, s.name, r.name, m.body, m.at, m.origin FROM messages AS m"
            " JOIN teams AS t ON t.team_pk = m.team_pk"
            " JOIN members AS s ON s.member_pk = m.sender_pk"
            " JOIN members AS r ON r.member_pk = m.recipient_pk ORDER BY m.seq"
        )
    ]


@_SETTINGS
@given(
    items=st.lists(
        st.tuples(_BODIES, _NAMES, _NAMES), min_size=1, max_size=2 * ROWS_PER_STATEMENT + 3
    )
)
def test_projected_import_writes_the_rows_of_the_checked_import(
    tmp_path_factory: pytest.TempPathFactory, items: list[tuple[str, str, str]]
) -> None:
    root = tmp_path_factory.mktemp("import")
    at = "2026-01-01T00:00:00.000000Z"
    ids = new_uuid7s(len(items))
    with Store(root / "fast.db") as fast, Store(root / "checked.db") as checked:
        fast.init()
        checked.init()
        with fast.conn:
            seqs_fast = import_projected_sent(
                fast.conn,
                "dev",
                [
                    (i, s, r, b, at, f"pulled message {n}")
                    for (b, s, r), i, n in zip(items, ids, range(len(items)), strict=True)
                ],
                at,
            )
        with checked.conn:
            seqs_checked = import_fresh_sent(
                checked.conn,
                [
                    (SentFields(i, "dev", s, r, b, at, ORIGIN_IMPORTED), f"pulled message {n}")
                    for (b, s, r), i, n in zip(items, ids, range(len(items)), strict=True)
                ],
                {},
                at,
            )
        assert seqs_fast == seqs_checked
        assert _rows(fast) == _rows(checked)
        ids_fast = [row[0] for row in fast.conn.execute("SELECT id FROM messages ORDER BY seq")]
        assert ids_fast == ids


def test_projected_import_refuses_a_store_invalid_name_naming_the_same_field(
    tmp_path: Path,
) -> None:
    """``a:b`` is a valid v1 agent name but not a store name: both paths
    refuse the page on the same field, and nothing is written."""
    at = "2026-01-01T00:00:00.000000Z"
    (local_id,) = new_uuid7s(1)
    with Store(tmp_path / "s.db") as store:
        store.init()
        with pytest.raises(InvalidInput) as fast, store.conn:
            import_projected_sent(store.conn, "dev", [(local_id, "ok", "a:b", "x", at, "m 1")], at)
        with pytest.raises(InvalidInput) as checked, store.conn:
            import_fresh_sent(
                store.conn,
                [(SentFields(local_id, "dev", "ok", "a:b", "x", at, ORIGIN_IMPORTED), "m 1")],
                {},
                at,
            )
        assert str(fast.value) == str(checked.value)
        assert "m 1.to" in str(fast.value)
        assert store.conn.execute("SELECT count(*) FROM messages").fetchone()[0] == 0


@pytest.mark.parametrize(
    "count", [1, ROWS_PER_STATEMENT - 1, ROWS_PER_STATEMENT, ROWS_PER_STATEMENT + 1, 1000]
)
def test_multi_row_insert_returns_each_rows_sequence_in_row_order(
    tmp_path: Path, count: int
) -> None:
    with Store(tmp_path / "s.db") as store:
        store.init()
        store.send_many([OutgoingMessage("dev", "a", "b", "first")])
        ids = new_uuid7s(count)
        # Insert in an order that is not the IDs' order, so a RETURNING in
        # key order could not pass for row order.
        ids.reverse()
        with store.conn:
            team, sender = store.conn.execute("SELECT team_pk, sender_pk FROM messages").fetchone()  # type: ignore[misc]
            answers = insert_rows_returning(
                store.conn,
                "INSERT INTO messages (id, team_pk, sender_pk, recipient_pk, body, at, origin)"
                " VALUES",
                [
                    (i, team, sender, sender, f"m{n}", "2026-01-01T00:00:00.000000Z", "imported")
                    for n, i in enumerate(ids)
                ],
                "id, seq",
            )
        assert [a[0] for a in answers] == ids
        by_seq = dict(store.conn.execute("SELECT id, seq FROM messages").fetchall())  # type: ignore[arg-type, var-annotated]
        assert [a[1] for a in answers] == [by_seq[i] for i in ids]
        assert [a[1] for a in answers] == sorted(a[1] for a in answers)


def test_dense_and_sparse_sequence_loads_find_the_same_owners(
    tmp_path: Path, key: BindingKey
) -> None:
    """A page's sequences read by one range scan or by IN probes: the same map."""
    with Store(tmp_path / "s.db") as store:
        store.init()
        store.create_team("dev", ["alice", "bob"])
        store.send_many(OutgoingMessage("dev", "alice", "bob", f"m{n}") for n in range(30))
        prepared = store.sync_prepare_push(key, prepare_none(), 1000)
        store.sync_reconcile_push(
            key, [ack(c, 2 * n + 1) for n, c in enumerate(prepared.candidates[:20])]
        )
        env = seal(Message("pulled", "2026-01-01T00:00:00.000000Z", "bob", "alice"), "none")
        pulled = [
            SyncPullMessage(seq, new_uuid4(), RECEIVED, env, "malformed", 0, 0, "x", None)
            for seq in (2, 4, 6, 100)
        ]
        store.sync_apply_pull(key, pulled, SyncPullCursor(100))
        binding = store.sync_binding(key)
        assert binding is not None
        dense = list(range(1, 41))
        sparse = [1, 6, 100, 10_000_000]
        expected_dense = {2 * n + 1: c.wire_id for n, c in enumerate(prepared.candidates[:20])}
        expected_dense.update({m.server_seq: m.wire_id for m in pulled if m.server_seq <= 40})
        assert load_seq_owners(store.conn, binding.pk, dense) == expected_dense
        assert load_seq_owners(store.conn, binding.pk, sparse) == {
            1: prepared.candidates[0].wire_id,
            6: pulled[2].wire_id,
            100: pulled[3].wire_id,
        }
        assert json.dumps(sorted(load_seq_owners(store.conn, binding.pk, []).items())) == "[]"


def test_the_read_bridge_is_skipped_only_when_no_read_fact_can_reach_the_mappings(
    tmp_path: Path, key: BindingKey
) -> None:
    """``on_mappings`` skips its per-mapping statement only when no remote
    fact (floor, frontier, exact read) and no local fact (frontier, exact
    read of a roster recipient) can reach the mappings; each kind of fact
    alone makes it run (specs/read-state.md §4, projection and promotion)."""
    from syncengine.store import read_overlay

    with Store(tmp_path / "s.db") as store:
        store.init()
        store.create_team("dev", ["alice", "bob"])
        store.send_many(OutgoingMessage("dev", "alice", "bob", f"m{n}") for n in range(4))
        store.sync_prepare_push(key, prepare_none(), 1000)
        binding = store.sync_binding(key)
        assert binding is not None
        conn = store.conn
        bob = conn.execute("SELECT member_pk, member_id FROM members WHERE name = 'bob'").fetchone()
        maps = [("w3", 30, 3), ("w4", 40, 4)]

        def skipped() -> bool:
            floor = conn.execute(
                "SELECT read_floor FROM sync_bindings WHERE binding_pk = ?", (binding.pk,)
            ).fetchone()[0]
            return read_overlay._nothing_to_bridge(conn, binding.pk, floor, maps)

        assert skipped()
        facts = [
            ("UPDATE sync_bindings SET read_floor = 30 WHERE binding_pk = ?", (binding.pk,)),
            (
                "INSERT INTO read_remote_frontiers (binding_pk, member_id, server_seq)"
                " VALUES (?, ?, 30)",
                (binding.pk, bob[1]),
            ),
            (
                "INSERT INTO read_remote_exact (binding_pk, member_id, wire_id) VALUES (?, ?, ?)",
                (binding.pk, bob[1], new_uuid4()),
            ),
            (
                "INSERT INTO read_frontiers (member_pk, local_position) VALUES (?, 3)",
                (bob[0],),
            ),
            (
                "INSERT INTO message_reads (id, team_pk, reader_pk, msg_seq, msg_id, at,"
                " log_position) VALUES (?, ?, ?, 4, NULL, '2026-01-01T00:00:00.000000Z', 4)",
                ("r-1", binding.team_pk, bob[0]),
            ),
        ]
        for sql, params in facts:
            conn.execute("SAVEPOINT fact")
            conn.execute(sql, params)
            assert not skipped(), sql
            conn.execute("ROLLBACK TO fact")
            conn.execute("RELEASE fact")
            assert skipped()
        # Facts below every mapping leave the skip in place.
        conn.execute(
            "INSERT INTO read_frontiers (member_pk, local_position) VALUES (?, 2)", (bob[0],)
        )
        assert skipped()


def test_none_chunk_seals_and_refuses_exactly_as_seal_local(key: BindingKey) -> None:
    """The one-pass ``none`` sealer of a chunk gives, message by message, the
    envelope or the refusal (reason and recorded limit) of :func:`seal_local`:
    valid messages, an invalid name, a bad timestamp, a lone surrogate, a body
    over the blob limit and a legacy ``at`` spelling side by side."""
    at = "2026-01-01T00:00:00.000000Z"
    ids = new_uuid7s(8)
    chunk = [
        LocalMessage(1, ids[0], 'hello "quoted" \\ \n\u2028 ☃ 𝄞', at, "alice", "bob"),
        LocalMessage(2, ids[1], "hi", at, "-bad", "bob"),
        LocalMessage(3, ids[2], "hi", "2026-02-30T00:00:00.000000Z", "alice", "bob"),
        LocalMessage(4, ids[3], "lone \ud800 surrogate", at, "alice", "bob"),
        LocalMessage(5, ids[4], "x" * 2000, at, "alice", "bob"),
        LocalMessage(6, ids[5], "legacy at", "2026-01-01T00:00:00Z", "alice", "Ünïcode-agent"),
        LocalMessage(7, ids[6], "", at, "alice", "bob"),
        LocalMessage(8, ids[7], "last", at, "alice", "bob"),
    ]
    request = prepare_none(max_blob_bytes=1024)
    fast = seal_none_chunk(chunk, request, key)
    reference = [seal_local(message, request, key) for message in chunk]
    assert len(fast) == len(reference)
    for got, want in zip(fast, reference, strict=True):
        assert type(got) is type(want)
        assert got.message == want.message
        if isinstance(want, BlockedSeal):
            assert isinstance(got, BlockedSeal)
            assert (got.limit, got.reason) == (want.limit, want.reason)
        else:
            assert isinstance(got, Sealed) and isinstance(want, Sealed)
            assert got.envelope == want.envelope and got.envelope.blob == want.envelope.blob
            assert got.envelope.blob_data == want.envelope.blob_data
            assert got.wire_id != want.wire_id and UUID4.fullmatch(got.wire_id)
    assert [type(item).__name__ for item in fast] == [
        "Sealed", "BlockedSeal", "BlockedSeal", "BlockedSeal", "BlockedSeal", "Sealed",
        "BlockedSeal", "Sealed",
    ]  # fmt: skip
    wire_ids = [item.wire_id for item in fast if isinstance(item, Sealed)]
    assert len(set(wire_ids)) == len(wire_ids)


_KEY_IDS = st.one_of(st.none(), st.text(alphabet=st.characters(min_codepoint=0x20), min_size=1))


@_SETTINGS
@given(
    items=st.lists(
        st.tuples(
            st.sampled_from(["none", "age-v1", "x.y_z-9"]),
            _KEY_IDS,
            # Any text a stored blob column could hold, lone surrogates included
            # (st.text never draws one, so the characters are joined by hand).
            st.lists(
                st.characters() | st.sampled_from("\ud800\udfff"), min_size=1, max_size=60
            ).map("".join),
            st.integers(min_value=0, max_value=2**32 - 1),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_batch_encode_writes_the_bytes_of_the_reference_encoder(
    items: list[tuple[str, str | None, str, int]],
) -> None:
    """``MessageBatch.encode`` of a validated batch is ``encode_body(batch.to_obj())``
    byte for byte, and validate-then-encode refuses (a schema error, a lone
    surrogate) exactly what the reference refuses."""
    batch = MessageBatch(
        tuple(
            WireOutgoing(new_uuid4(), Envelope(v, cipher, key_id, blob))
            for cipher, key_id, blob, v in items
        )
    )
    try:
        reference: bytes | tuple[type[Exception], str] = encode_body(batch.to_obj())
    except WireError as exc:
        reference = (type(exc), str(exc))
    try:
        mine: bytes | tuple[type[Exception], str] = batch.validate().encode()
    except WireError as exc:
        mine = (type(exc), str(exc))
    assert mine == reference
