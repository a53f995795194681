"""Adopting our own messages after a restore (issue #15, item 5).

A store brought back from a backup may hold local messages that were
published *after* the backup was taken: in the backup they have no
reservation, so a push would seal them again under new wire IDs and the
relay would store each a second time — and the pull would bring the first
copy back as an import. While a binding is *adopting* (``sync_bindings.
adopt_own``, set in every backup file by ``syncengine backup``), apply_pull
first looks, for each importable page message whose wire ID this binding
does not hold, for a local message nobody reserved (or one blocked by a
size limit) with the same sender, recipient, body and creation time, and
reserves it under the pulled wire ID and envelope. The plan then sees the
echo of our own push (``reservation_next(…, ECHO)``): the reservation is
acknowledged at the pulled sequence and nothing is imported. The engine
pushes nothing while a binding adopts, pulls to the relay's head, then
clears the flag (:func:`finish_adoption`): whatever is still unreserved was
never published.

Two genuinely distinct local messages identical in all four fields pair
with the relay's copies one to one, oldest first — as good as any order,
since nothing distinguishes them.

A *new* binding of a team that already holds messages (``connect`` to a
relay rebuilt from nothing, after ``disconnect``) adopts its own messages
the same way, and its earlier imports for as long as they take to arrive:
the other machines re-publish their own messages to the new relay whenever
they rebind, so ``connect`` lists every pulled message no quarantine row of
the new binding points at in ``sync_adoptable`` (by content digest), and
an importable page message matching one is recorded as imported *onto*
it, never a second copy (:func:`mark_adoptable`, :func:`adopt_held_imports`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from syncengine.ops.history_counts import add_history
from syncengine.store.event_log import canonical_at
from wire.message import Message

if TYPE_CHECKING:
    # Only annotations: the engine's adoption check at the end of an idle
    # pull never defines the Stage-1 records (issue #17, start-up).
    from syncengine.ops.records import SyncPullMessage

__all__ = [
    "adopt_held_imports",
    "adopt_own_messages",
    "adopting",
    "content_digest",
    "finish_adoption",
    "mark_adoptable",
]


def adopting(conn: Any, binding_pk: int) -> bool:
    row = conn.execute(
        "SELECT adopt_own FROM sync_bindings WHERE binding_pk = ?", (binding_pk,)
    ).fetchone()
    return bool(row and row[0])


def finish_adoption(conn: Any, binding_pk: int) -> bool:
    """The pull reached the relay's head: stop adopting; True if it was."""
    conn.execute(
        "UPDATE sync_bindings SET adopt_own = 0 WHERE binding_pk = ? AND adopt_own = 1",
        (binding_pk,),
    )
    return bool(conn.changes())


def adopt_own_messages(
    conn: Any,
    binding_pk: int,
    team_pk: int,
    push_cursor: int,
    messages: Sequence[SyncPullMessage],
    held_wire_ids: set[str],
) -> int:
    """Reserve matching local messages under the page's wire IDs; returns how
    many were adopted (inside the caller's apply transaction)."""
    wanted = [
        m
        for m in messages
        if m.status == "importable"
        and isinstance(m.projection, Message)
        and m.wire_id not in held_wire_ids
    ]
    if not wanted:
        return 0
    taken: set[int] = set()
    adopted = 0
    for message in wanted:
        projection = message.projection
        assert isinstance(projection, Message)
        rows = conn.execute(
            "SELECT m.seq, m.at, s.name, r.name, p.local_position IS NULL"
            " FROM messages AS m INDEXED BY messages_local_by_team"
            " JOIN members AS s ON s.member_pk = m.sender_pk"
            " JOIN members AS r ON r.member_pk = m.recipient_pk"
            " LEFT JOIN sync_push AS p ON p.binding_pk = ? AND p.local_position = m.seq"
            " WHERE m.team_pk = ? AND m.origin = 'local' AND m.seq > ? AND m.body = ?"
            " AND (p.local_position IS NULL OR p.state = 'blocked')"
            " ORDER BY m.seq",
            (binding_pk, team_pk, push_cursor, projection.body),
        ).fetchall()
        found = next(
            (
                (seq, bool(fresh))
                for seq, at, sender, recipient, fresh in rows
                if seq not in taken
                and (sender, recipient) == (projection.from_agent, projection.to_agent)
                and canonical_at(at) == projection.created_at
            ),
            None,
        )
        if found is None:
            continue
        match, fresh_row = found
        env = message.envelope
        conn.execute(
            "INSERT OR REPLACE INTO sync_push (binding_pk, local_position, state, wire_id,"
            " envelope_v, cipher, key_id, blob) VALUES (?, ?, 'reserved', ?, ?, ?, ?, ?)",
            (binding_pk, match, message.wire_id, env.v, env.cipher, env.key_id, env.blob),
        )
        if fresh_row:  # a blocked row is replaced, not added
            add_history(conn, binding_pk, push=1)
        taken.add(match)
        adopted += 1
    return adopted


def content_digest(sender: str, recipient: str, body: str, created_at: str) -> bytes:
    """SHA-256 of the four plaintext fields in their v1 form (RFC 8785 JCS of
    the ``none`` plaintext object), so a held message and a pulled one with
    the same content meet on one index key."""
    import hashlib

    return hashlib.sha256(Message(body, created_at, sender, recipient).to_jcs()).digest()


def mark_adoptable(conn: Any, binding_pk: int, team_pk: int) -> int:
    """A new binding over an existing history: every pulled message of the
    team that no quarantine row of this binding points at becomes adoptable
    (inside connect's transaction); returns how many."""
    rows = conn.execute(
        "SELECT m.seq, s.name, r.name, m.body, m.at FROM messages AS m"
        " JOIN members AS s ON s.member_pk = m.sender_pk"
        " JOIN members AS r ON r.member_pk = m.recipient_pk"
        " WHERE m.team_pk = ? AND m.origin = 'imported'"
        " AND NOT EXISTS (SELECT 1 FROM sync_quarantine AS q"
        "   WHERE q.binding_pk = ? AND q.local_position = m.seq)",
        (team_pk, binding_pk),
    ).fetchall()
    conn.executemany(
        "INSERT OR IGNORE INTO sync_adoptable (binding_pk, local_position, content_digest)"
        " VALUES (?, ?, ?)",
        [
            (binding_pk, seq, content_digest(sender, recipient, body, canonical_at(at)))
            for seq, sender, recipient, body, at in rows
        ],
    )
    return len(rows)


def adopt_held_imports(
    conn: Any,
    binding_pk: int,
    messages: Sequence[SyncPullMessage],
    held_wire_ids: set[str],
) -> list[tuple[SyncPullMessage, int]]:
    """The page messages this store already holds (``sync_adoptable``), each
    with the local message it is, taken off the list (inside the caller's
    apply transaction; the caller records them as imported onto it). One
    indexed probe per page message, and none at all for a binding with
    nothing adoptable."""
    if (
        conn.execute(
            "SELECT 1 FROM sync_adoptable WHERE binding_pk = ? LIMIT 1", (binding_pk,)
        ).fetchone()
        is None
    ):
        return []
    found: list[tuple[SyncPullMessage, int]] = []
    for message in messages:
        projection = message.projection
        if (
            message.status != "importable"
            or not isinstance(projection, Message)
            or message.wire_id in held_wire_ids
        ):
            continue
        digest = content_digest(
            projection.from_agent, projection.to_agent, projection.body, projection.created_at
        )
        row = conn.execute(
            "SELECT local_position FROM sync_adoptable WHERE binding_pk = ? AND content_digest = ?"
            " ORDER BY local_position LIMIT 1",
            (binding_pk, digest),
        ).fetchone()
        if row is None:
            continue
        conn.execute(
            "DELETE FROM sync_adoptable WHERE binding_pk = ? AND local_position = ?",
            (binding_pk, row[0]),
        )
        found.append((message, int(row[0])))
    return found
