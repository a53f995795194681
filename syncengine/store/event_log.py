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
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from syncengine.store.errors import Conflict, InvalidInput, StoreError
from syncengine.store.messages import check_body, log_tip
from syncengine.store.names import check_local_agent, check_local_team, check_message_id
from syncengine.store.read_state import advance_frontier
from syncengine.store.records import ORIGIN_IMPORTED, ORIGIN_LOCAL, dump_record
from syncengine.store.teams import member_pk, team_pk
from wire.errors import WireError
from wire.scalars import check_timestamp

__all__ = [
    "SentFields",
    "compact",
    "export_events",
    "import_events",
    "import_fresh_sent",
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


def export_events(conn: Any, destination: Path) -> int:
    """Write the whole log to ``destination`` atomically; returns the count."""
    rows = conn.execute(
        """
        SELECT 0 AS kind, m.seq AS position, m.seq AS sub, m.id, t.name, s.name, r.name,
               m.body, m.at, m.origin
        FROM messages AS m
        JOIN teams AS t ON t.team_pk = m.team_pk
        JOIN members AS s ON s.member_pk = m.sender_pk
        JOIN members AS r ON r.member_pk = m.recipient_pk
        UNION ALL
        SELECT 1, x.log_position, x.read_seq, x.id, t.name, m.id, r.name, NULL, x.at, NULL
        FROM message_reads AS x
        JOIN messages AS m ON m.seq = x.msg_seq
        JOIN teams AS t ON t.team_pk = m.team_pk
        JOIN members AS r ON r.member_pk = x.reader_pk
        ORDER BY 2, 1, 3
        """
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
                        "msg_id": row[5],
                        "team": row[4],
                        "agent": row[6],
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


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _string(record: dict[str, Any], key: str, where: str) -> str:
    value = record.get(key)
    if not isinstance(value, str):
        raise InvalidInput(f"{where}.{key}", "required string field is missing or not a string")
    return value


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


def import_events(conn: Any, data: bytes, source: str, now: str) -> tuple[int, int]:
    """Apply an exported log; returns (events added, events already present)."""
    added = skipped = 0
    touched: set[int] = set()
    for number, record in parse_jsonl(data, source):
        where = f"{source} line {number}"
        kind = record.get("type")
        if not isinstance(kind, str):
            raise InvalidInput(f"{where}.type", "every record needs a string 'type'")
        if kind == "message_sent":
            fresh = _import_sent(conn, record, where)
        elif kind == "message_read":
            fresh, reader = _import_read(conn, record, where)
            touched.add(reader)
        else:
            continue  # a later schema's record type: v1 readers skip it
        if fresh:
            added += 1
        else:
            skipped += 1
    for reader in sorted(touched):
        advance_frontier(conn, reader, None)
    return added, skipped


#: (team, agent) → (team_pk, member_pk), valid within one transaction.
NameCache = dict[tuple[str, str], tuple[int, int]]


def _resolve(
    conn: Any,
    record: dict[str, Any],
    where: str,
    agent_key: str,
    cache: NameCache | None = None,
) -> tuple[int, int]:
    team = _string(record, "team", where)
    agent = _string(record, agent_key, where)
    return _resolve_names(conn, team, agent, where, agent_key, cache)


def _resolve_names(
    conn: Any, team: str, agent: str, where: str, agent_key: str, cache: NameCache | None
) -> tuple[int, int]:
    if cache is not None and (team, agent) in cache:
        return cache[team, agent]
    check_local_team(team, f"{where}.team")
    check_local_agent(agent, f"{where}.{agent_key}")
    try:
        tkey = team_pk(conn, team)
        keys = tkey, member_pk(conn, tkey, team, agent, f"{where}.{agent_key}")
    except StoreError as exc:
        raise InvalidInput(where, str(exc)) from None
    if cache is not None:
        cache[team, agent] = keys
    return keys


_INSERT_SENT = (
    "INSERT INTO messages (id, team_pk, sender_pk, recipient_pk, body, at, origin)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def _sent_row(
    conn: Any, record: dict[str, Any], where: str, cache: NameCache | None
) -> tuple[str, int, int, int, str, str, str]:
    """Every check of a ``message_sent`` record → its ``messages`` row."""
    return _checked_row(
        conn,
        SentFields(
            _string(record, "id", where),
            _string(record, "team", where),
            _string(record, "from", where),
            _string(record, "to", where),
            record.get("body"),
            record.get("at"),
            record.get("origin", ORIGIN_LOCAL),
        ),
        where,
        cache,
    )


class SentFields(NamedTuple):
    """The members of one ``message_sent`` event, before any check."""

    id: str
    team: str
    sender: str
    recipient: str
    body: object
    at: object
    origin: object


def _checked_row(
    conn: Any, fields: SentFields, where: str, cache: NameCache | None
) -> tuple[str, int, int, int, str, str, str]:
    message_id = check_message_id(fields.id, f"{where}.id")
    tkey, sender = _resolve_names(conn, fields.team, fields.sender, where, "from", cache)
    _, recipient = _resolve_names(conn, fields.team, fields.recipient, where, "to", cache)
    body = check_body(fields.body, f"{where}.body")
    at = normalize_at(fields.at, f"{where}.at")
    origin = fields.origin
    if origin != ORIGIN_LOCAL and origin != ORIGIN_IMPORTED:
        raise InvalidInput(f"{where}.origin", "origin must be 'local' or 'imported'")
    assert isinstance(origin, str)
    return (message_id, tkey, sender, recipient, body, at, origin)


def _import_sent(
    conn: Any, record: dict[str, Any], where: str, cache: NameCache | None = None
) -> bool:
    row = _sent_row(conn, record, where, cache)
    existing = conn.execute(
        "SELECT sender_pk, recipient_pk, body, at, origin FROM messages"
        " WHERE team_pk = ? AND id = ?",
        (row[1], row[0]),
    ).fetchone()
    if existing is not None:
        if tuple(existing) != row[2:]:
            raise Conflict(f"{where}: message {row[0]!r} is already stored with other content")
        return False
    conn.execute(_INSERT_SENT, row)
    return True


def import_fresh_sent(
    conn: Any, records: Sequence[tuple[SentFields, str]], cache: NameCache
) -> list[int]:
    """Import ``(fields, where)`` pairs whose IDs were minted in this
    transaction; returns each new message's ``seq``, in order.

    The records pass every check of a file import. The lookup for an
    identical stored event is skipped because a freshly minted UUIDv7 cannot
    be stored yet (the ``(team, id)`` unique index would still refuse one),
    so a 1,000-message page is one statement rather than two per message.
    """
    rows = [_checked_row(conn, fields, where, cache) for fields, where in records]
    return [seq for (seq,) in conn.executemany(_INSERT_SENT + " RETURNING seq", rows)]


def _import_read(conn: Any, record: dict[str, Any], where: str) -> tuple[bool, int]:
    event_id = check_message_id(_string(record, "id", where), f"{where}.id")
    msg_id = check_message_id(_string(record, "msg_id", where), f"{where}.msg_id")
    tkey, reader = _resolve(conn, record, where, "agent")
    at = normalize_at(record.get("at"), f"{where}.at")
    row = conn.execute(
        "SELECT seq, recipient_pk FROM messages WHERE team_pk = ? AND id = ?", (tkey, msg_id)
    ).fetchone()
    if row is None:
        raise InvalidInput(f"{where}.msg_id", f"message {msg_id!r} is not in this team")
    if row[1] != reader:
        raise InvalidInput(f"{where}.msg_id", f"message {msg_id!r} is not addressed to this agent")
    existing = conn.execute(
        "SELECT msg_seq, reader_pk, at FROM message_reads WHERE id = ?", (event_id,)
    ).fetchone()
    if existing is not None:
        if tuple(existing) != (row[0], reader, at):
            raise Conflict(f"{where}: read event {event_id!r} is already stored with other content")
        return False, reader
    conn.execute(
        "INSERT INTO message_reads (id, msg_seq, reader_pk, at, log_position)"
        " VALUES (?, ?, ?, ?, ?)",
        (event_id, row[0], reader, at, log_tip(conn)),
    )
    return True, reader


def compact(conn: Any) -> int:
    """Coalesce duplicate read markers; returns how many events were removed."""
    conn.execute(
        """
        DELETE FROM message_reads
        WHERE read_seq NOT IN (
            SELECT min(read_seq) FROM message_reads GROUP BY reader_pk, msg_seq)
        """
    )
    removed: int = conn.changes()
    return removed
