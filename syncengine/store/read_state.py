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

Read marks are scoped to the marking (team, agent) and nobody else
(driver-interface §2.3): marking a message addressed to another agent, or an
ID this store does not hold, is recorded for the marker and changes no other
agent's unread set — as the bundled driver does.

These functions run inside a transaction the caller opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from syncengine.ids import new_uuid7s
from syncengine.store import read_overlay
from syncengine.store.frontier import advance_frontier, frontier
from syncengine.store.messages import log_tip
from syncengine.store.names import (
    check_cursor_token,
    check_local_agent,
    check_local_team,
    check_message_id,
)
from syncengine.store.teams import find_pair, intern_pair

if TYPE_CHECKING:
    import apsw

__all__ = [
    "advance_frontier",
    "frontier",
    "mark_read",
    "read_cursor_consume",
    "read_cursor_get",
    "record_exact_reads",
]


def record_exact_reads(
    conn: apsw.Connection, tkey: int, reader: int, message_ids: list[str], now: str
) -> list[int]:
    """Record one ``message_read`` per ID the reader has not marked yet;
    returns the seqs of the held messages newly marked.

    Every ID is checked before the first write. An ID of a stored message
    of the team is linked to it, whoever it is addressed to; any other ID is
    kept by value (and linked if that message is imported later).
    Re-marking is idempotent (§2.3).
    """
    for message_id in message_ids:
        check_message_id(message_id, "id")
    position = log_tip(conn)
    rows: list[tuple[int | None, str | None]] = []
    for message_id in dict.fromkeys(message_ids):
        found = conn.execute(
            "SELECT seq FROM messages WHERE team_pk = ? AND id = ?", (tkey, message_id)
        ).fetchone()
        if found is not None:
            seq = int(found[0])
            already = conn.execute(
                "SELECT 1 FROM message_reads WHERE reader_pk = ? AND msg_seq = ? LIMIT 1",
                (reader, seq),
            ).fetchone()
            entry: tuple[int | None, str | None] = (seq, None)
        else:
            already = conn.execute(
                "SELECT 1 FROM message_reads WHERE team_pk = ? AND msg_id = ? AND reader_pk = ?"
                " LIMIT 1",
                (tkey, message_id, reader),
            ).fetchone()
            entry = (None, message_id)
        if already is None:
            rows.append(entry)
    conn.executemany(
        "INSERT INTO message_reads (id, team_pk, reader_pk, msg_seq, msg_id, at, log_position)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (event_id, tkey, reader, seq, dangling, now, position)
            for (seq, dangling), event_id in zip(rows, new_uuid7s(len(rows)), strict=True)
        ],
    )
    fresh = [seq for seq, _ in rows if seq is not None]
    # A read of a message the relay acknowledged is queued for read-state
    # sync in this same transaction (read-state-synchronization.md
    # "Wire-ID promotion and atomicity").
    read_overlay.on_local_reads(conn, tkey, reader, fresh)
    return fresh


def mark_read(
    conn: apsw.Connection, team: str, agent: str, message_ids: list[str], now: str
) -> None:
    """``mark_read_batch``: an empty ID list is a successful no-op, as in the
    bundled driver; otherwise the marks are recorded, then the frontier is
    compacted over the reader's own messages."""
    if not message_ids:
        check_local_team(team, "team")
        check_local_agent(agent, "agent")
        return
    tkey, reader = intern_pair(conn, team, agent, now)
    record_exact_reads(conn, tkey, reader, message_ids, now)
    advance_frontier(conn, reader, None)


def read_cursor_get(conn: apsw.Connection, team: str, agent: str) -> str:
    """The pair's frontier; ``0`` for a pair never seen."""
    check_local_team(team, "team")
    check_local_agent(agent, "agent")
    reader = find_pair(conn, team, agent)
    return "0" if reader is None else str(frontier(conn, reader))


def read_cursor_consume(
    conn: apsw.Connection, team: str, agent: str, cursor: str, message_ids: list[str], now: str
) -> str:
    """Record the displayed IDs, then advance through the covered prefix
    ending no later than ``cursor``; returns the resulting frontier.

    A cursor beyond the tip is bounded by the tip (driver-interface §2.2:
    "ending no later than"): no message exists past it to skip, so the
    frontier can never claim space a later send will occupy."""
    tkey, reader = intern_pair(conn, team, agent, now)
    bound = min(check_cursor_token(cursor), log_tip(conn))
    record_exact_reads(conn, tkey, reader, message_ids, now)
    return str(advance_frontier(conn, reader, bound))
