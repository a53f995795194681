"""The local read frontier of a member: its contiguous read prefix
(read-state-synchronization.md "Contiguous-prefix and exact-read rules";
specs/store.md §6).

The frontier only ever advances across messages that already carry an exact
read (or that are addressed to somebody else), so it never jumps a hole, and
it is max-merged, never moved backwards. :mod:`syncengine.store.read_state`
(the local layer, which re-exports these) and
:mod:`syncengine.store.read_overlay` (whose projection compacts the
frontier) both advance it, so it lives below both of them.

These functions run inside a transaction the caller opened.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from syncengine.store.connection import one_row

if TYPE_CHECKING:
    import apsw

__all__ = ["advance_frontier", "frontier"]


def frontier(conn: apsw.Connection, member: int) -> int:
    row = conn.execute(
        "SELECT local_position FROM read_frontiers WHERE member_pk = ?", (member,)
    ).fetchone()
    return 0 if row is None else int(row[0])


def _first_hole(conn: apsw.Connection, reader: int, after: int, bound: int | None) -> int | None:
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


def advance_frontier(conn: apsw.Connection, reader: int, bound: int | None) -> int:
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
        row = one_row(
            conn.execute(
                "SELECT max(seq) FROM messages WHERE recipient_pk = ? AND seq > ? AND seq <= ?",
                (reader, current, limit),
            )
        )
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
