"""The message log: send, unread listing, history and watch (driver-interface
§2.1–§2.3; specs/store.md §5).

``messages.seq`` (``AUTOINCREMENT``) is the store's global message order and
the delivery-cursor space: it is never reused or renumbered, so the high-water
mark in ``sqlite_sequence`` can only move forward and every cursor handed out
stays valid forever (§2.7 "cursor-safe"). Every query here is an index range
scan whose cost grows with the page it returns, not with the log's length.

These functions run inside a transaction the caller opened.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from syncengine.ids import new_uuid7s
from syncengine.store.connection import Row
from syncengine.store.errors import CorruptStore, InvalidInput
from syncengine.store.log_records import ORIGIN_LOCAL, MessageSent
from syncengine.store.names import check_cursor_token, check_local_agent, check_local_team
from syncengine.store.teams import NameCache, find_pair, find_team, intern_pair
from wire.limits import MAX_BODY_BYTES

if TYPE_CHECKING:
    import apsw

__all__ = [
    "OutgoingMessage",
    "check_body",
    "check_pair_and_limit",
    "check_pairs",
    "history",
    "insert_messages",
    "known_team_names",
    "list_unread",
    "log_tip",
    "parse_pairs",
    "watch_after",
    "watch_position",
]

_SELECT = """
    SELECT m.id, t.name, s.name, r.name, m.body, m.at, m.origin, m.seq
    FROM messages AS m
    JOIN teams AS t ON t.team_pk = m.team_pk
    JOIN members AS s ON s.member_pk = m.sender_pk
    JOIN members AS r ON r.member_pk = m.recipient_pk
"""


class OutgoingMessage(NamedTuple):
    """One message to append: names as the caller gave them."""

    team: str
    sender: str
    recipient: str
    body: str


def check_body(body: object, field: str = "body") -> str:
    """Bodies are non-empty UTF-8 text of at most MAX_BODY_BYTES bytes — the
    same bound the v1 plaintext imposes, so a stored message can always sync."""
    if not isinstance(body, str):
        raise InvalidInput(field, "body must be a string")
    if body == "":
        raise InvalidInput(field, "body must not be empty")
    if len(body) * 4 <= MAX_BODY_BYTES and body.isascii():
        return body  # cannot exceed the limit, and ASCII always encodes
    try:
        size = len(body.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput(field, "body is not valid UTF-8 text") from None
    if size > MAX_BODY_BYTES:
        raise InvalidInput(
            field, f"body is {size} bytes; the limit is {MAX_BODY_BYTES} UTF-8 bytes"
        )
    return body


def _row_to_message(row: tuple[Any, ...]) -> MessageSent:
    return MessageSent(
        id=row[0],
        team=row[1],
        sender=row[2],
        recipient=row[3],
        body=row[4],
        at=row[5],
        origin=row[6],
    )


def log_tip(conn: apsw.Connection) -> int:
    """The message high-water mark: the greatest ``seq`` ever allocated."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'messages'").fetchone()
    return 0 if row is None else int(row[0])


def insert_messages(
    conn: apsw.Connection, outgoing: Iterable[OutgoingMessage], now: str
) -> list[MessageSent]:
    """Validate every message first, then append them all (one executemany).

    Validation completes before the first insert, so bad input anywhere in a
    batch stores nothing even before the enclosing transaction rolls back.
    """
    # Names are interned on first use, in this transaction: the host never
    # registers teams or agents with its storage driver (§2 intro).
    cache: NameCache = {}
    rows: list[tuple[str, int, int, int, str, str, str]] = []
    sent: list[MessageSent] = []

    def resolve(team: str, agent: str, field: str) -> tuple[int, int]:
        return intern_pair(conn, team, agent, now, cache, agent_field=field)

    items = list(outgoing)
    for message, message_id in zip(items, new_uuid7s(len(items)), strict=True):
        tkey, sender = resolve(message.team, message.sender, "from")
        _, recipient = resolve(message.team, message.recipient, "to")
        check_body(message.body)
        rows.append((message_id, tkey, sender, recipient, message.body, now, ORIGIN_LOCAL))
        sent.append(
            MessageSent(
                message_id, message.team, message.sender, message.recipient, message.body, now
            )
        )
    conn.executemany(
        "INSERT INTO messages (id, team_pk, sender_pk, recipient_pk, body, at, origin)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    return sent


#: The greatest ``LIMIT`` SQLite takes (a 64-bit signed integer); a larger
#: count once reached SQLite as an OverflowError traceback (issue #33).
MAX_LIMIT = 2**63 - 1


def check_limit(limit: int | None) -> int:
    """``--limit N``: a positive count; ``None`` means no limit (-1 to SQLite)."""
    if limit is None:
        return -1
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidInput("limit", "limit must be a positive integer")
    if limit > MAX_LIMIT:
        raise InvalidInput("limit", f"limit must be at most {MAX_LIMIT}")
    return limit


def known_team_names(conn: apsw.Connection) -> list[str]:
    """Every team name this store has seen: registered (``team create``, a
    relay roster) or interned by a message (the storage contract's first use)."""
    return [str(row[0]) for row in conn.execute("SELECT name FROM teams ORDER BY name")]


def _fetch_messages(conn: apsw.Connection, sql: str, params: Any) -> list[MessageSent]:
    """The rows of a ``_SELECT`` query as messages. A body that is not UTF-8
    text (the column is TEXT, but a hand edit or a damaged file can put any
    bytes there) is reported as damage naming the message, never as a
    decoding traceback; only then is the query run again, reading bodies as
    bytes, to find which message it is."""
    try:
        rows = conn.execute(sql, params).fetchall()
    except UnicodeDecodeError:
        raw: list[Row] = conn.execute(
            sql.replace("m.body", "CAST(m.body AS BLOB)", 1), params
        ).fetchall()
        for row in raw:
            try:
                bytes(row[4]).decode("utf-8")
            except UnicodeDecodeError:
                raise CorruptStore(
                    f"message {row[0]} of team {row[1]!r} has a body that is not UTF-8 text: "
                    "the store is damaged; restore it from a backup ('syncengine restore')"
                ) from None
        raise CorruptStore(
            "a message body is not UTF-8 text: the store is damaged; "
            "restore it from a backup ('syncengine restore')"
        ) from None
    return [_row_to_message(row) for row in rows]


def check_pair_and_limit(team: str, agent: str | None, limit: int | None) -> None:
    """The argument checks of a read, for when there is no store to read."""
    check_local_team(team, "team")
    if agent is not None:
        check_local_agent(agent, "agent")
    check_limit(limit)


def list_unread(
    conn: apsw.Connection, team: str, agent: str, limit: int | None
) -> list[MessageSent]:
    """Messages to ``agent`` not covered by its frontier or an exact read,
    oldest first. The frontier bounds the scan from below; between it and the
    tip only unread messages and exact exceptions are visited."""
    check_local_team(team, "team")
    check_local_agent(agent, "agent")
    sql_limit = check_limit(limit)
    reader = find_pair(conn, team, agent)
    if reader is None:
        return []  # a name never seen has no messages
    return _fetch_messages(
        conn,
        _SELECT
        + """
        WHERE m.recipient_pk = :reader
          AND m.seq > coalesce(
                (SELECT local_position FROM read_frontiers WHERE member_pk = :reader), 0)
          AND NOT EXISTS (
                SELECT 1 FROM message_reads AS x
                WHERE x.reader_pk = :reader AND x.msg_seq = m.seq)
        ORDER BY m.seq
        LIMIT :limit
        """,
        {"reader": reader, "limit": sql_limit},
    )


def history(
    conn: apsw.Connection, team: str, agent: str | None, limit: int | None
) -> list[MessageSent]:
    """The most recent ``limit`` messages of the team (or those ``agent`` sent
    or received), returned oldest→newest (driver-interface §2.1)."""
    check_local_team(team, "team")
    if agent:
        check_local_agent(agent, "agent")
    sql_limit = check_limit(limit)
    tkey = find_team(conn, team)
    if tkey is None:
        return []
    if agent:
        who = find_pair(conn, team, agent)
        if who is None:
            return []
        # Two index range scans (sent, received), each newest-first and
        # bounded by the limit, merged; never a scan of the whole team.
        selector = """
            WHERE m.seq IN (
                SELECT seq FROM (SELECT seq FROM messages WHERE sender_pk = :who
                                 ORDER BY seq DESC LIMIT :limit)
                UNION
                SELECT seq FROM (SELECT seq FROM messages WHERE recipient_pk = :who
                                 ORDER BY seq DESC LIMIT :limit))
        """
        params: dict[str, int] = {"who": who, "limit": sql_limit}
    else:
        selector = "WHERE m.team_pk = :team"
        params = {"team": tkey, "limit": sql_limit}
    return _fetch_messages(
        conn,
        "SELECT * FROM (" + _SELECT + selector + " ORDER BY m.seq DESC LIMIT :limit) ORDER BY 8",
        params,
    )


def check_pairs(pairs: Iterable[str]) -> list[tuple[str, str]]:
    """``team:agent`` subscription pairs (§2.2), each name checked; at least one."""
    checked: list[tuple[str, str]] = []
    for pair in pairs:
        if not isinstance(pair, str) or pair.count(":") != 1:
            raise InvalidInput("pair", f"subscription pair {pair!r} must be <team>:<agent>")
        team, agent = pair.split(":")
        check_local_team(team, "pair")
        check_local_agent(agent, "pair")
        checked.append((team, agent))
    if not checked:
        raise InvalidInput("pair", "name at least one <team>:<agent> pair")
    return checked


def parse_pairs(conn: apsw.Connection, pairs: Iterable[str]) -> list[int]:
    """Subscription pairs → the member keys of those this store has seen
    (a pair never seen has no messages to deliver)."""
    keys: list[int] = []
    for team, agent in check_pairs(pairs):
        key = find_pair(conn, team, agent)
        if key is not None and key not in keys:
            keys.append(key)
    return keys


def watch_position(token: object, tip: int) -> int:
    """Where a ``watch_after`` scan starts.

    Core passes back whatever it was given, so a stale token degrades to
    re-delivery and never to a skip (§2.7 "cursor-safe"): a token that is not
    a position this store issues (empty, garbled) scans from the start, as
    the bundled driver does, and one beyond the tip (a rebuilt store) scans
    from the tip — nothing lies between them to deliver.
    """
    try:
        position = check_cursor_token(token)
    except InvalidInput:
        if isinstance(token, str) and token.isascii() and token.isdigit() and token[0] != "0":
            return tip  # canonical but out of range: far beyond any tip
        return 0
    return min(position, tip)


def watch_after(
    conn: apsw.Connection, token: str, pairs: Iterable[str]
) -> tuple[list[MessageSent], str]:
    """Every message after ``token`` addressed to a subscribed pair and not
    already read by its recipient, in log order, plus the tip the caller can
    resume from. (A message under a frontier always carries its exact read,
    read_state's invariant, so the exact-read test is the whole of "read".)
    The tip is read in the same snapshot as the messages, so nothing between
    them can be skipped."""
    keys = parse_pairs(conn, pairs)
    tip = log_tip(conn)
    after = watch_position(token, tip)
    if not keys:
        return [], str(tip)
    marks = ", ".join("?" for _ in keys)
    found = _fetch_messages(
        conn,
        _SELECT
        + f""" WHERE m.recipient_pk IN ({marks}) AND m.seq > ? AND m.seq <= ?
          AND NOT EXISTS (SELECT 1 FROM message_reads AS x
                          WHERE x.reader_pk = m.recipient_pk AND x.msg_seq = m.seq)
          ORDER BY m.seq""",
        (*keys, after, tip),
    )
    return found, str(tip)
