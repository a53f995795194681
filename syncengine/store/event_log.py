"""Export, import and compaction of the event log (driver-interface §2.3,
§2.7; specs/store.md §7).

Export writes event-log schema v1 as JSONL: every ``message_sent`` in ``seq``
order, with each ``message_read`` placed after the message high-water that
existed when it was recorded — the order the events happened in. The file is
written beside its destination, flushed to disk and renamed into place, so a
crash never leaves half an export under the requested name.

Import is all-or-nothing in one transaction: every line must be a complete
JSON object ending in a newline (a missing final newline means a truncated
file), known types are checked strictly, unknown types and unknown fields are
ignored (the v1 forward-compatibility rule). Replaying an export is
idempotent: an event whose ID is already stored with the same content is
skipped, a different one under the same ID is a conflict.

Compaction removes redundant ``message_read`` events (same reader, same
message), keeping the earliest. It never touches ``message_sent`` rows or
frontiers, so every read operation answers the same afterwards and every
cursor stays valid.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from syncengine.store.bulk import insert_rows_returning
from syncengine.store.connection import Row, one_row
from syncengine.store.errors import Conflict, InvalidInput
from syncengine.store.log_records import ORIGIN_IMPORTED, ORIGIN_LOCAL, dump_record
from syncengine.store.messages import check_body, log_tip
from syncengine.store.names import check_message_id
from syncengine.store.read_state import advance_frontier
from syncengine.store.reserved_names import FORMER_HOLDER
from syncengine.store.teams import NameCache, intern_pair
from wire.errors import WireError
from wire.scalars import check_timestamp

if TYPE_CHECKING:
    import apsw

__all__ = [
    "SentFields",
    "canonical_at",
    "check_at",
    "compact",
    "export_events",
    "import_events",
    "import_fresh_sent",
    "import_projected_sent",
    "link_dangling_reads",
    "normalize_at",
]

_AT = re.compile(
    r"(?P<head>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.(?P<frac>[0-9]{1,6}))?Z"
)


_CANONICAL_AT_CHARS = len("2026-05-30T19:00:00.000000Z")


def normalize_at(value: object, field: str) -> str:
    """ISO-8601 UTC with ``Z`` and 0–6 fractional digits → the canonical
    six-digit form (older stores wrote whole seconds)."""
    if isinstance(value, str):
        try:
            if len(value) == _CANONICAL_AT_CHARS:
                # Already canonical: every timestamp this store writes is.
                return check_timestamp(value, field)
            match = _AT.fullmatch(value)
            if match is not None:
                text = f"{match['head']}.{(match['frac'] or '').ljust(6, '0')}Z"
                return check_timestamp(text, field)
        except WireError as exc:
            raise InvalidInput(field, exc.rule) from None
    raise InvalidInput(field, "must be an ISO-8601 UTC timestamp like 2026-05-30T19:00:00Z")


def check_at(value: object, field: str) -> str:
    """An event's ``at`` as written: ISO-8601 UTC with ``Z`` and 0–6
    fractional digits (the bundled driver writes whole seconds, we write
    six). Kept verbatim, so an export re-imports to the same bytes; sealing
    uses :func:`canonical_at`."""
    normalize_at(value, field)
    assert isinstance(value, str)
    return value


def canonical_at(value: str) -> str:
    """A stored ``at`` in the v1 wire form (exactly six fractional digits),
    as the sealed plaintext requires (stage-1: "normalised before sealing")."""
    if len(value) == _CANONICAL_AT_CHARS:
        return value  # the v1 plaintext check still validates it
    try:
        return normalize_at(value, "at")
    except InvalidInput:
        return value  # not ours to fix here: sealing refuses and blocks it


def export_events(conn: apsw.Connection | None, destination: Path) -> int:
    """Write the whole log to ``destination`` atomically; returns the count.
    With no store (``conn`` is ``None``) the log is empty."""
    rows: Iterable[Row] = (
        []
        if conn is None
        else conn.execute(
            """
        SELECT 0 AS kind, m.seq AS position, m.seq AS sub, m.id, t.name, s.name, r.name,
               m.body, m.at, m.origin
        FROM messages AS m
        JOIN teams AS t ON t.team_pk = m.team_pk
        JOIN members AS s ON s.member_pk = m.sender_pk
        JOIN members AS r ON r.member_pk = m.recipient_pk
        UNION ALL
        SELECT 1, x.log_position, x.read_seq, x.id, t.name, coalesce(m.id, x.msg_id), r.name,
               NULL, x.at, NULL
        FROM message_reads AS x
        LEFT JOIN messages AS m ON m.seq = x.msg_seq
        JOIN teams AS t ON t.team_pk = x.team_pk
        JOIN members AS r ON r.member_pk = x.reader_pk
        ORDER BY 2, 1, 3
        """
        )
    )
    directory = destination.parent if str(destination.parent) else Path(".")
    if not directory.is_dir():
        raise InvalidInput("file", f"directory {directory} does not exist")
    count = 0
    fd, temp_name = tempfile.mkstemp(prefix=".syncengine-export-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            for row in rows:
                if row[0] == 0:
                    record: dict[str, object] = {
                        "type": "message_sent",
                        "id": row[3],
                        "team": row[4],
                        "from": row[5],
                        "to": row[6],
                        "body": row[7],
                        "at": row[8],
                    }
                    if row[9] != ORIGIN_LOCAL:
                        record["origin"] = row[9]
                else:
                    record = {
                        "type": "message_read",
                        "id": row[3],
                        "team": row[4],
                        "agent": row[6],
                        "msg_id": row[5],
                        "at": row[8],
                    }
                out.write(dump_record(record))
                out.write("\n")
                count += 1
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp_name, destination)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        raise
    return count


def _string(record: dict[str, Any], key: str, where: str) -> str:
    value = record.get(key)
    if not isinstance(value, str):
        raise InvalidInput(f"{where}.{key}", "required string field is missing or not a string")
    return value


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def parse_jsonl(data: bytes, source: str) -> list[tuple[int, dict[str, Any]]]:
    """Strict JSONL: UTF-8, one object per newline-terminated line."""
    if not data:
        return []
    if not data.endswith(b"\n"):
        raise InvalidInput(source, "input is truncated: the last line has no newline")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(source, f"input is not UTF-8 (byte {exc.start})") from None
    records: list[tuple[int, dict[str, Any]]] = []
    for number, line in enumerate(text.split("\n")[:-1], start=1):
        if line.endswith("\r"):
            raise InvalidInput(f"{source} line {number}", "carriage return before newline")
        try:
            value = json.loads(line, object_pairs_hook=_no_duplicate_keys)
        except ValueError as exc:
            raise InvalidInput(f"{source} line {number}", f"not valid JSON ({exc})") from None
        if not isinstance(value, dict):
            raise InvalidInput(f"{source} line {number}", "each line must be a JSON object")
        records.append((number, value))
    return records


def import_events(conn: apsw.Connection, data: bytes, source: str, now: str) -> tuple[int, int]:
    """Apply an exported log; returns (events added, events already present).

    Team and agent names are interned on first use (the storage axis is
    messages only); a read may name a message of another recipient or one
    this store does not hold, and is kept as it was written. A read that
    arrived before its message is linked once the message is imported."""
    added = skipped = 0
    touched: set[int] = set()
    cache: NameCache = {}
    imported: list[tuple[int, str, int]] = []
    for number, record in parse_jsonl(data, source):
        where = f"{source} line {number}"
        kind = record.get("type")
        if not isinstance(kind, str):
            raise InvalidInput(f"{where}.type", "every record needs a string 'type'")
        if kind == "message_sent":
            message = _import_sent(conn, record, where, cache, now)
            if message is not None:
                imported.append(message)
            fresh = message is not None
        elif kind == "message_read":
            reader, fresh = _import_read(conn, record, where, cache, now)
            touched.add(reader)
        else:
            continue  # a later schema's record type: v1 readers skip it
        if fresh:
            added += 1
        else:
            skipped += 1
    touched.update(link_dangling_reads(conn, imported))
    for reader in sorted(touched):
        advance_frontier(conn, reader, None)
    return added, skipped


def link_dangling_reads(
    conn: apsw.Connection, imported: Sequence[tuple[int, str, int]]
) -> set[int]:
    """Attach reads recorded before their message existed here to the
    messages just imported, given as ``(team_pk, id, seq)``; returns the
    readers whose frontier may move. One probe when no read is dangling."""
    if not imported:
        return set()
    probe = "SELECT 1 FROM message_reads WHERE msg_id IS NOT NULL LIMIT 1"
    if conn.execute(probe).fetchone() is None:
        return set()
    readers: set[int] = set()
    for tkey, message_id, seq in imported:
        for (reader,) in conn.execute(
            "UPDATE message_reads SET msg_seq = ?, msg_id = NULL"
            " WHERE team_pk = ? AND msg_id = ? RETURNING reader_pk",
            (seq, tkey, message_id),
        ):
            readers.add(int(reader))
    return readers


def _resolve_names(
    conn: apsw.Connection,
    team: str,
    agent: str,
    where: str,
    agent_key: str,
    cache: NameCache,
    now: str,
) -> tuple[int, int]:
    return intern_pair(
        conn,
        team,
        agent,
        now,
        cache,
        team_field=f"{where}.team",
        agent_field=f"{where}.{agent_key}",
        former=FORMER_HOLDER,  # a fact sealed under a former name is its holder's
    )


_INSERT_SENT_HEAD = (
    "INSERT INTO messages (id, team_pk, sender_pk, recipient_pk, body, at, origin) VALUES"
)
_INSERT_SENT = _INSERT_SENT_HEAD + " (?, ?, ?, ?, ?, ?, ?)"


class SentFields(NamedTuple):
    """The members of one ``message_sent`` event, before any check."""

    id: str
    team: str
    sender: str
    recipient: str
    body: object
    at: object
    origin: object


def _sent_fields(record: dict[str, Any], where: str) -> SentFields:
    return SentFields(
        _string(record, "id", where),
        _string(record, "team", where),
        _string(record, "from", where),
        _string(record, "to", where),
        record.get("body"),
        record.get("at"),
        record.get("origin", ORIGIN_LOCAL),
    )


def _checked_row(
    conn: apsw.Connection, fields: SentFields, where: str, cache: NameCache, now: str
) -> tuple[str, int, int, int, str, str, str]:
    """Every check of a ``message_sent`` event → its ``messages`` row."""
    message_id = check_message_id(fields.id, f"{where}.id")
    tkey, sender = _resolve_names(conn, fields.team, fields.sender, where, "from", cache, now)
    _, recipient = _resolve_names(conn, fields.team, fields.recipient, where, "to", cache, now)
    body = check_body(fields.body, f"{where}.body")
    at = check_at(fields.at, f"{where}.at")
    origin = fields.origin
    if origin != ORIGIN_LOCAL and origin != ORIGIN_IMPORTED:
        raise InvalidInput(f"{where}.origin", "origin must be 'local' or 'imported'")
    assert isinstance(origin, str)
    return (message_id, tkey, sender, recipient, body, at, origin)


def _import_sent(
    conn: apsw.Connection, record: dict[str, Any], where: str, cache: NameCache, now: str
) -> tuple[int, str, int] | None:
    """Store one ``message_sent`` unless already present; returns
    ``(team_pk, id, seq)`` of a new message, ``None`` for a replay."""
    row = _checked_row(conn, _sent_fields(record, where), where, cache, now)
    existing = conn.execute(
        "SELECT sender_pk, recipient_pk, body, at, origin FROM messages"
        " WHERE team_pk = ? AND id = ?",
        (row[1], row[0]),
    ).fetchone()
    if existing is not None:
        if tuple(existing) != row[2:]:
            raise Conflict(f"{where}: message {row[0]!r} is already stored with other content")
        return None
    (seq,) = one_row(conn.execute(_INSERT_SENT + " RETURNING seq", row))
    return row[1], row[0], int(seq)


def import_fresh_sent(
    conn: apsw.Connection, records: Sequence[tuple[SentFields, str]], cache: NameCache, now: str
) -> list[int]:
    """Import ``(fields, where)`` pairs whose IDs were minted in this
    transaction; returns each new message's ``seq``, in order.

    The records pass every check of a file import. The lookup for an
    identical stored event is skipped because a freshly minted UUIDv7 cannot
    be stored yet (the ``(team, id)`` unique index would still refuse one),
    so a 1,000-message page is one statement rather than two per message.
    """
    rows = [_checked_row(conn, fields, where, cache, now) for fields, where in records]
    return [seq for (seq,) in conn.executemany(_INSERT_SENT + " RETURNING seq", rows)]


#: One pulled message already validated as a v1 plaintext: (fresh local ID,
#: sender, recipient, body, canonical created_at, where — the record's name
#: in an error, as :func:`import_fresh_sent` takes it).
ProjectedSent = tuple[str, str, str, str, str, str]


def import_projected_sent(
    conn: apsw.Connection, team: str, messages: Sequence[ProjectedSent], now: str
) -> list[int]:
    """Import pulled messages whose fields already passed the v1 plaintext
    rules at the boundary (``wire.message.Message``); returns each new
    message's ``seq``, in order — multi-row ``INSERT`` statements of
    :data:`~syncengine.store.bulk.ROWS_PER_STATEMENT` rows, not one per row.

    The v1 rules for ``body`` (a non-empty string of at most
    ``MAX_BODY_BYTES`` UTF-8 bytes, no lone surrogate) and ``created_at``
    (the canonical six-digit timestamp) are exactly what :func:`check_body`
    and :func:`check_at` would verify again, and a freshly minted UUIDv7
    passes :func:`check_message_id`; so only the names go through the
    store's own rules (:func:`intern_pair`: no ``:`` in an agent name, say),
    in the same order and with the same field names as
    :func:`import_fresh_sent`, once per distinct name. The rows are the ones
    :func:`import_fresh_sent` would write, origin ``imported`` (agmsg #949).
    """
    cache: NameCache = {}
    rows = []
    for local_id, sender, recipient, body, at, where in messages:
        keys = cache.get((team, sender))
        if keys is None:
            keys = _resolve_names(conn, team, sender, where, "from", cache, now)
        tkey, sender_pk = keys
        keys = cache.get((team, recipient))
        if keys is None:
            keys = _resolve_names(conn, team, recipient, where, "to", cache, now)
        rows.append((local_id, tkey, sender_pk, keys[1], body, at, ORIGIN_IMPORTED))
    return [int(seq) for _, seq in insert_rows_returning(conn, _INSERT_SENT_HEAD, rows, "id, seq")]


def _import_read(
    conn: apsw.Connection, record: dict[str, Any], where: str, cache: NameCache, now: str
) -> tuple[int, bool]:
    """Store one ``message_read`` unless its event ID is already stored with
    the same content; returns (reader key, whether it was new)."""
    event_id = check_message_id(_string(record, "id", where), f"{where}.id")
    msg_id = check_message_id(_string(record, "msg_id", where), f"{where}.msg_id")
    tkey, reader = _resolve_names(
        conn,
        _string(record, "team", where),
        _string(record, "agent", where),
        where,
        "agent",
        cache,
        now,
    )
    at = check_at(record.get("at"), f"{where}.at")
    found = conn.execute(
        "SELECT seq FROM messages WHERE team_pk = ? AND id = ?", (tkey, msg_id)
    ).fetchone()
    msg_seq = None if found is None else int(found[0])
    dangling = msg_id if msg_seq is None else None
    existing = conn.execute(
        "SELECT x.team_pk, x.reader_pk, coalesce(m.id, x.msg_id), x.at FROM message_reads AS x"
        " LEFT JOIN messages AS m ON m.seq = x.msg_seq WHERE x.id = ?",
        (event_id,),
    ).fetchone()
    if existing is not None:
        if tuple(existing) != (tkey, reader, msg_id, at):
            raise Conflict(f"{where}: read event {event_id!r} is already stored with other content")
        return reader, False
    conn.execute(
        "INSERT INTO message_reads (id, team_pk, reader_pk, msg_seq, msg_id, at, log_position)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (event_id, tkey, reader, msg_seq, dangling, at, log_tip(conn)),
    )
    return reader, True


def compact(conn: apsw.Connection) -> int:
    """Coalesce duplicate read markers — the same reader and the same message
    (stored or only named) — keeping the earliest; returns how many went."""
    conn.execute(
        """
        DELETE FROM message_reads
        WHERE read_seq NOT IN (
            SELECT min(read_seq) FROM message_reads GROUP BY reader_pk, msg_seq, msg_id)
        """
    )
    removed: int = conn.changes()
    return removed
