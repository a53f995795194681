"""The remote read overlay and its two bridges to the local read layer
(read-state-synchronization.md "Store-owned composite frontier", "Wire-ID
promotion and atomicity", "Retention floor"; specs/read-state.md §4).

A message is read for its recipient when the local layer covers it (its
frontier or an exact read), or when the active binding's overlay covers its
*durable mapping*: the acknowledged ``server_seq`` at or below the member's
effective frontier ``max(stored, read_floor)``, or its wire ID among the
member's exact remote reads. A local message with no acknowledged mapping is
never covered remotely.

Two bridges keep the layers consistent inside the caller's transaction:

* **projection** — remote coverage of an imported or acknowledged message
  becomes a local exact read of its recipient (then the local frontier is
  compacted), so every local query keeps reading one layer. It runs when
  remote facts arrive (apply) and when a mapping becomes durable (import,
  echo, acknowledgement), so a fact that arrived before its message applies
  the moment the message is projected;
* **promotion** — a local read of a message with an acknowledged mapping is
  queued in ``read_outbox`` under its wire ID and sequence for upload. It
  runs when the read is recorded and when the mapping becomes durable, so
  nothing is ever queued for a wire ID the relay has not acknowledged.

Only roster members (the relay's member IDs) have an overlay; reads are
synchronized for the recipient of a message, the one whose unread set they
change. Every function here runs inside a transaction the caller opened.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from syncengine.ids import new_uuid7s
from syncengine.store.connection import Row, one_row
from syncengine.store.frontier import advance_frontier
from syncengine.store.messages import log_tip

if TYPE_CHECKING:
    import apsw

__all__ = [
    "Mapping",
    "active_bindings",
    "compact_readers",
    "effective_frontier",
    "mapping_of_local",
    "on_local_reads",
    "on_mappings",
    "project_range",
    "project_wire_reads",
]

#: (wire_id, server_seq, local_position) of one durable mapping.
Mapping = tuple[str, int, int]


def active_bindings(conn: apsw.Connection, team_pk: int) -> list[int]:
    return [
        int(row[0])
        for row in conn.execute(
            "SELECT binding_pk FROM sync_bindings WHERE team_pk = ? AND state = 'active'",
            (team_pk,),
        )
    ]


def effective_frontier(conn: apsw.Connection, binding_pk: int, member_id: str) -> int:
    """``max(stored remote frontier, authenticated floor)``."""
    floor = one_row(
        conn.execute("SELECT read_floor FROM sync_bindings WHERE binding_pk = ?", (binding_pk,))
    )
    stored = conn.execute(
        "SELECT server_seq FROM read_remote_frontiers WHERE binding_pk = ? AND member_id = ?",
        (binding_pk, member_id),
    ).fetchone()
    return max(int(floor[0]), 0 if stored is None else int(stored[0]))


def _is_read(conn: apsw.Connection, reader: int, seq: int) -> bool:
    row = conn.execute(
        "SELECT local_position FROM read_frontiers WHERE member_pk = ?", (reader,)
    ).fetchone()
    if row is not None and seq <= int(row[0]):
        return True
    found = conn.execute(
        "SELECT 1 FROM message_reads WHERE reader_pk = ? AND msg_seq = ? LIMIT 1", (reader, seq)
    ).fetchone()
    return found is not None


def mapping_of_local(conn: apsw.Connection, binding_pk: int, seq: int) -> tuple[str, int] | None:
    """The acknowledged ``(wire_id, server_seq)`` of local message ``seq``:
    an acknowledged push of ours, or the envelope it was imported from."""
    row = conn.execute(
        "SELECT wire_id, server_seq FROM sync_push"
        " WHERE binding_pk = ? AND local_position = ? AND state = 'acked'",
        (binding_pk, seq),
    ).fetchone()
    if row is None:
        row = conn.execute(
            "SELECT wire_id, server_seq FROM sync_quarantine"
            " WHERE binding_pk = ? AND local_position = ? AND status = 'imported'",
            (binding_pk, seq),
        ).fetchone()
    return None if row is None else (str(row[0]), int(row[1]))


def _mark(
    conn: apsw.Connection, team_pk: int, pairs: Iterable[tuple[int, int]], now: str
) -> set[int]:
    """Insert a local exact read for each (reader, seq) not read yet;
    returns the readers whose frontier may now compact."""
    fresh = [
        (reader, seq) for reader, seq in dict.fromkeys(pairs) if not _is_read(conn, reader, seq)
    ]
    if not fresh:
        return set()
    position = log_tip(conn)
    conn.executemany(
        "INSERT INTO message_reads (id, team_pk, reader_pk, msg_seq, msg_id, at, log_position)"
        " VALUES (?, ?, ?, ?, NULL, ?, ?)",
        [
            (event_id, team_pk, reader, seq, now, position)
            for (reader, seq), event_id in zip(fresh, new_uuid7s(len(fresh)), strict=True)
        ],
    )
    return {reader for reader, _ in fresh}


def compact_readers(conn: apsw.Connection, readers: Iterable[int]) -> None:
    for reader in sorted(set(readers)):
        advance_frontier(conn, reader, None)


def _team_of_binding(conn: apsw.Connection, binding_pk: int) -> int:
    row = one_row(
        conn.execute("SELECT team_pk FROM sync_bindings WHERE binding_pk = ?", (binding_pk,))
    )
    return int(row[0])


def project_range(
    conn: apsw.Connection, binding_pk: int, low: int, high: int, member_id: str | None, now: str
) -> set[int]:
    """Project remote coverage of the mapped messages with ``low < server_seq
    <= high`` onto their recipients (only ``member_id``'s when given; every
    roster member's for a floor). Returns the readers to compact."""
    if high <= low:
        return set()
    clause = "" if member_id is None else " AND r.member_id = :member"
    params = {"binding": binding_pk, "low": low, "high": high, "member": member_id}
    pairs: list[tuple[int, int]] = []
    for source, condition in (
        ("sync_push", "x.state = 'acked'"),
        ("sync_quarantine", "x.status = 'imported' AND x.local_position IS NOT NULL"),
    ):
        pairs.extend(
            (int(row[0]), int(row[1]))
            for row in conn.execute(
                # CROSS JOIN fixes the order: the sequence range first, so
                # the cost is the range, never a member's whole history.
                f"SELECT m.recipient_pk, m.seq FROM {source} AS x"
                " CROSS JOIN messages AS m CROSS JOIN members AS r"
                " WHERE m.seq = x.local_position AND r.member_pk = m.recipient_pk"
                " AND r.roster = 1"
                " AND x.binding_pk = :binding AND x.server_seq > :low"
                f" AND x.server_seq <= :high AND {condition}{clause}",
                params,
            )
        )
    return _mark(conn, _team_of_binding(conn, binding_pk), pairs, now)


def project_wire_reads(
    conn: apsw.Connection, binding_pk: int, reads: Sequence[tuple[str, str]], now: str
) -> set[int]:
    """Project exact remote reads ``(member_id, wire_id)`` whose message is
    already held (mapped) and addressed to that member."""
    pairs: list[tuple[int, int]] = []
    for member_id, wire_id in reads:
        for source, condition in (
            ("sync_push", "x.state = 'acked'"),
            ("sync_quarantine", "x.status = 'imported'"),
        ):
            row = conn.execute(
                f"SELECT m.recipient_pk, m.seq FROM {source} AS x"
                " CROSS JOIN messages AS m CROSS JOIN members AS r"
                " WHERE m.seq = x.local_position AND r.member_pk = m.recipient_pk"
                f" AND r.roster = 1 AND x.binding_pk = ? AND x.wire_id = ? AND {condition}"
                " AND r.member_id = ?",
                (binding_pk, wire_id, member_id),
            ).fetchone()
            if row is not None:
                pairs.append((int(row[0]), int(row[1])))
                break
    return _mark(conn, _team_of_binding(conn, binding_pk), pairs, now)


def _queue(
    conn: apsw.Connection, binding_pk: int, member_id: str, wire_id: str, server_seq: int
) -> None:
    """Queue one promoted read unless the relay's facts already cover it."""
    if server_seq <= effective_frontier(conn, binding_pk, member_id):
        return
    known = conn.execute(
        "SELECT 1 FROM read_remote_exact WHERE binding_pk = ? AND member_id = ? AND wire_id = ?",
        (binding_pk, member_id, wire_id),
    ).fetchone()
    if known is None:
        conn.execute(
            "INSERT OR IGNORE INTO read_outbox (binding_pk, member_id, wire_id, server_seq)"
            " VALUES (?, ?, ?, ?)",
            (binding_pk, member_id, wire_id, server_seq),
        )


#: The mappings of one call as a relation ``maps(wire, seq, pos)``, joined in a
#: fixed order (CROSS JOIN) so each mapping costs index probes, never a scan.
_MAPPED = """
    WITH maps(wire, seq, pos) AS (
        SELECT value ->> 0, value ->> 1, value ->> 2 FROM json_each(:maps))
    SELECT m.recipient_pk, r.member_id, maps.wire, maps.seq, maps.pos,
           maps.seq <= max(:floor, coalesce(
               (SELECT f.server_seq FROM read_remote_frontiers AS f
                WHERE f.binding_pk = :b AND f.member_id = r.member_id), 0))
           OR EXISTS (SELECT 1 FROM read_remote_exact AS e
                      WHERE e.binding_pk = :b AND e.member_id = r.member_id
                        AND e.wire_id = maps.wire) AS covered,
           maps.pos <= coalesce((SELECT local_position FROM read_frontiers
                                 WHERE member_pk = m.recipient_pk), 0)
           OR EXISTS (SELECT 1 FROM message_reads AS x
                      WHERE x.reader_pk = m.recipient_pk AND x.msg_seq = maps.pos) AS read
    FROM maps CROSS JOIN messages AS m CROSS JOIN members AS r
    WHERE m.seq = maps.pos AND r.member_pk = m.recipient_pk AND r.roster = 1
"""


def _nothing_to_bridge(
    conn: apsw.Connection, binding_pk: int, floor: int, mappings: Sequence[Mapping]
) -> bool:
    """Whether no read fact, remote or local, can reach any of ``mappings`` —
    then :func:`on_mappings` would classify every one as neither covered nor
    read and write nothing, and its per-mapping statement is skipped
    (issue #17: a page of fresh imports usually meets no read fact at all).

    Sound by construction, from a handful of index probes: every sequence is
    above the floor and above every stored remote frontier of the binding,
    the binding holds no exact remote read, and no roster member of the
    binding's team (the recipients the statement considers) has a local
    frontier at or beyond the lowest position or an exact local read within
    the positions' range. Any doubt answers ``False``: the full statement runs.
    """
    low_seq = min(m[1] for m in mappings)
    low_pos = min(m[2] for m in mappings)
    high_pos = max(m[2] for m in mappings)
    if low_seq <= floor:
        return False
    top = one_row(
        conn.execute(
            "SELECT max(server_seq) FROM read_remote_frontiers WHERE binding_pk = ?",
            (binding_pk,),
        )
    )[0]
    if top is not None and low_seq <= top:
        return False
    if conn.execute(
        "SELECT 1 FROM read_remote_exact WHERE binding_pk = ? LIMIT 1", (binding_pk,)
    ).fetchone():
        return False
    team_pk = _team_of_binding(conn, binding_pk)
    frontier = one_row(
        conn.execute(
            "SELECT max(f.local_position) FROM members AS r INDEXED BY members_roster"
            " CROSS JOIN read_frontiers AS f"
            " WHERE r.team_pk = ? AND r.roster = 1 AND f.member_pk = r.member_pk",
            (team_pk,),
        )
    )[0]
    if frontier is not None and low_pos <= frontier:
        return False
    return not conn.execute(
        "SELECT 1 FROM members AS r INDEXED BY members_roster CROSS JOIN message_reads AS x"
        " WHERE r.team_pk = ? AND r.roster = 1 AND x.reader_pk = r.member_pk"
        " AND x.msg_seq BETWEEN ? AND ? LIMIT 1",
        (team_pk, low_pos, high_pos),
    ).fetchone()


def on_mappings(
    conn: apsw.Connection, binding_pk: int, mappings: Sequence[Mapping], now: str
) -> None:
    """New durable mappings (imports, echoes, acknowledgements): project
    remote coverage onto each message, or promote its existing local read.
    One set-based statement per call classifies the whole batch; only the
    rare covered or already-read messages cost further writes."""
    if not mappings:
        return

    floor = one_row(
        conn.execute("SELECT read_floor FROM sync_bindings WHERE binding_pk = ?", (binding_pk,))
    )[0]
    if _nothing_to_bridge(conn, binding_pk, floor, mappings):
        return
    rows: list[Row] = conn.execute(
        _MAPPED,
        {"maps": json.dumps([list(m) for m in mappings]), "floor": floor, "b": binding_pk},
    ).fetchall()
    covered = [(int(r[0]), int(r[4])) for r in rows if r[5]]
    for _, member_id, wire_id, server_seq, _, is_covered, is_read in rows:
        if not is_covered and is_read:
            _queue(conn, binding_pk, str(member_id), str(wire_id), int(server_seq))
    if covered:
        compact_readers(conn, _mark(conn, _team_of_binding(conn, binding_pk), covered, now))


def on_local_reads(conn: apsw.Connection, team_pk: int, reader: int, seqs: Sequence[int]) -> None:
    """Local reads just recorded: promote those of the reader's own messages
    that already have an acknowledged mapping, on every active binding."""
    if not seqs:
        return
    bindings = active_bindings(conn, team_pk)
    if not bindings:
        return
    row = conn.execute(
        "SELECT member_id FROM members WHERE member_pk = ? AND roster = 1", (reader,)
    ).fetchone()
    if row is None:
        return
    member_id = str(row[0])
    for seq in seqs:
        owner = conn.execute("SELECT recipient_pk FROM messages WHERE seq = ?", (seq,)).fetchone()
        if owner is None or int(owner[0]) != reader:
            continue
        for binding_pk in bindings:
            mapped = mapping_of_local(conn, binding_pk, seq)
            if mapped is not None:
                _queue(conn, binding_pk, member_id, mapped[0], mapped[1])
