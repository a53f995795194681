"""Local read state: exact read events plus a contiguous frontier per member
(driver-interface §2.2–§2.3; read-state-synchronization.md "Local consume
contract", "Contiguous-prefix and exact-read rules"; specs/store.md §6).

Two facts make a message read for its recipient:

* an exact ``message_read`` event naming it, or
* its ``seq`` being at or below the member's ``local_position``.

The frontier only ever advances across messages that already carry an exact
read (or that are addressed to somebody else), so it never jumps a hole: a
missing unread message pins it, and later reads stay exact exceptions until
the hole is filled. It is max-merged and never moves backwards. Because every
message at or below the frontier has its exact event, the event log alone
reproduces read state on export/import, and compaction never needs to move a
frontier.

These functions run inside a write transaction the caller opened.
"""

from __future__ import annotations

from typing import Any

from syncengine.ids import new_uuid7
from syncengine.store.errors import InvalidInput, UnknownMessage
from syncengine.store.messages import check_issued_cursor, log_tip
from syncengine.store.names import check_local_agent, check_local_team, check_message_id
from syncengine.store.teams import member_pk, team_pk

__all__ = [
    "advance_frontier",
    "frontier",
    "mark_read",
    "read_cursor_consume",
    "read_cursor_get",
    "record_exact_reads",
]


def frontier(conn: Any, member: int) -> int:
    row = conn.execute(
        "SELECT local_position FROM read_frontiers WHERE member_pk = ?", (member,)
    ).fetchone()
    return 0 if row is None else int(row[0])


def _resolve_pair(conn: Any, team: str, agent: str) -> tuple[int, int]:
    check_local_team(team, "team")
    check_local_agent(agent, "agent")
    tkey = team_pk(conn, team)
    return tkey, member_pk(conn, tkey, team, agent)


def record_exact_reads(
    conn: Any, tkey: int, reader: int, message_ids: list[str], now: str
) -> list[int]:
    """Record one ``message_read`` per ID not already read by ``reader``.

    Every ID must name a message of this team addressed to this reader —
    read-marking is recipient-scoped (§2.3) — and all are checked before the
    first write. Re-marking is idempotent. Returns the message seqs.
    """
    seqs: list[int] = []
    for message_id in message_ids:
        check_message_id(message_id, "id")
        row = conn.execute(
            "SELECT seq, recipient_pk FROM messages WHERE team_pk = ? AND id = ?",
            (tkey, message_id),
        ).fetchone()
        if row is None:
            raise UnknownMessage(message_id, "is not a message of this team")
        if row[1] != reader:
            raise UnknownMessage(message_id, "is not addressed to this agent")
        seqs.append(int(row[0]))
    position = log_tip(conn)
    for seq in dict.fromkeys(seqs):
        already = conn.execute(
            "SELECT 1 FROM message_reads WHERE reader_pk = ? AND msg_seq = ? LIMIT 1",
            (reader, seq),
        ).fetchone()
        if already is None:
            conn.execute(
                "INSERT INTO message_reads (id, msg_seq, reader_pk, at, log_position)"
                " VALUES (?, ?, ?, ?, ?)",
                (new_uuid7(), seq, reader, now, position),
            )
    return seqs


def _first_hole(conn: Any, reader: int, after: int, bound: int | None) -> int | None:
    """The lowest seq above ``after`` (and at most ``bound``) addressed to
    ``reader`` with no exact read: the hole the frontier must stop before."""
    row = conn.execute(
        """
        SELECT m.seq FROM messages AS m
        WHERE m.recipient_pk = :reader AND m.seq > :after AND m.seq <= :bound
          AND NOT EXISTS (SELECT 1 FROM message_reads AS x
                          WHERE x.reader_pk = :reader AND x.msg_seq = m.seq)
        ORDER BY m.seq LIMIT 1
        """,
        {"reader": reader, "after": after, "bound": 2**63 - 1 if bound is None else bound},
    ).fetchone()
    return None if row is None else int(row[0])


def advance_frontier(conn: Any, reader: int, bound: int | None) -> int:
    """Max-merge the frontier through the contiguous covered prefix.

    With a ``bound`` (a delivery cursor the caller scanned up to) the prefix
    may run to the bound itself, crossing off-subscription traffic. Without
    one (plain mark-read) it stops at the last covered message addressed to
    the reader, never claiming log space nobody scanned.
    """
    current = frontier(conn, reader)
    hole = _first_hole(conn, reader, current, bound)
    if bound is not None:
        target = bound if hole is None else hole - 1
    else:
        limit = 2**63 - 1 if hole is None else hole - 1
        row = conn.execute(
            "SELECT max(seq) FROM messages WHERE recipient_pk = ? AND seq > ? AND seq <= ?",
            (reader, current, limit),
        ).fetchone()
        target = current if row[0] is None else int(row[0])
    if target > current:
        conn.execute(
            "INSERT INTO read_frontiers (member_pk, local_position) VALUES (?, ?)"
            " ON CONFLICT (member_pk) DO UPDATE SET local_position ="
            " max(local_position, excluded.local_position)",
            (reader, target),
        )
        return target
    return current


def mark_read(conn: Any, team: str, agent: str, message_ids: list[str], now: str) -> None:
    tkey, reader = _resolve_pair(conn, team, agent)
    if not message_ids:
        raise InvalidInput("id", "name at least one message id")
    record_exact_reads(conn, tkey, reader, message_ids, now)
    advance_frontier(conn, reader, None)


def read_cursor_get(conn: Any, team: str, agent: str) -> str:
    _, reader = _resolve_pair(conn, team, agent)
    return str(frontier(conn, reader))


def read_cursor_consume(
    conn: Any, team: str, agent: str, cursor: str, message_ids: list[str], now: str
) -> str:
    """Record the displayed IDs, then advance through the covered prefix
    ending no later than ``cursor``; returns the resulting frontier."""
    tkey, reader = _resolve_pair(conn, team, agent)
    bound = check_issued_cursor(conn, cursor)
    record_exact_reads(conn, tkey, reader, message_ids, now)
    return str(advance_frontier(conn, reader, bound))
