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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from syncengine.ops.records import SyncPullMessage
from syncengine.store.event_log import canonical_at
from wire.message import Message

__all__ = ["adopt_own_messages", "adopting", "finish_adoption"]


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
            "SELECT m.seq, m.at, s.name, r.name"
            " FROM messages AS m INDEXED BY messages_local_by_team"
            " JOIN members AS s ON s.member_pk = m.sender_pk"
            " JOIN members AS r ON r.member_pk = m.recipient_pk"
            " LEFT JOIN sync_push AS p ON p.binding_pk = ? AND p.local_position = m.seq"
            " WHERE m.team_pk = ? AND m.origin = 'local' AND m.seq > ? AND m.body = ?"
            " AND (p.local_position IS NULL OR p.state = 'blocked')"
            " ORDER BY m.seq",
            (binding_pk, team_pk, push_cursor, projection.body),
        ).fetchall()
        match = next(
            (
                seq
                for seq, at, sender, recipient in rows
                if seq not in taken
                and (sender, recipient) == (projection.from_agent, projection.to_agent)
                and canonical_at(at) == projection.created_at
            ),
            None,
        )
        if match is None:
            continue
        env = message.envelope
        conn.execute(
            "INSERT OR REPLACE INTO sync_push (binding_pk, local_position, state, wire_id,"
            " envelope_v, cipher, key_id, blob) VALUES (?, ?, 'reserved', ?, ?, ?, ?, ?)",
            (binding_pk, match, message.wire_id, env.v, env.cipher, env.key_id, env.blob),
        )
        taken.add(match)
        adopted += 1
    return adopted
