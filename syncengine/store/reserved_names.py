"""Member names renamed away, kept reserved for their team (specs/store.md §4.1).

ADR 0007 "Names never become identity": a removal or a rename does not free
the old name for silent reuse, and read-state-synchronization.md forbids a
local rename that reuses a retired name. The relay keeps the same rule on
its side (server/spec/v1.md "GET /v1/members": a name never passes to
another ``member_id``). So when ``team rename-member`` moves a member off a
name, that name is written to ``reserved_names`` for the member, in the
rename's own transaction, and from then on no *other* member of the team
may take it — not by a rename, not by ``team create``/``add-member``, not
by a host's send or read interning it as a new name, not by adopting a
relay roster. The member itself may take it back (a rename undone).

Where a name arrives as a fact rather than a request — a pulled message or
an imported event log sealed by a machine that has not followed the rename
yet — it names the member that held it, and is attributed to that member
(:data:`FORMER_HOLDER`): refusing would stall a pull for every member, and
the relay guarantees the name meant that member.

This module is on the path of every host ``send``: it imports nothing
heavier than :mod:`syncengine.crash` (issue #17, start-up).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Literal

from syncengine.crash import crash_point
from syncengine.store.connection import one_row
from syncengine.store.errors import Conflict

if TYPE_CHECKING:
    import apsw

__all__ = [
    "FORMER_HOLDER",
    "FORMER_REFUSED",
    "RESERVED_NAMES_TABLE",
    "FormerName",
    "ReservedName",
    "holder_of",
    "record_rename",
    "reserved_in_team",
    "seed_from_history",
]

#: What a name someone was renamed away from does when met again.
FormerName = Literal["refuse", "holder"]
#: A request (a rename, a registration, a host's send or read): refused.
FORMER_REFUSED: FormerName = "refuse"
#: A fact (a pulled or imported message): attributed to the member that held it.
FORMER_HOLDER: FormerName = "holder"

#: Migration 16 (``_v16_reserved_names``). ``source`` says how the row came
#: to be: ``rename`` (written by ``team rename-member``, ``reserved_at`` set)
#: or ``recovered`` (seeded by the migration from envelopes the store holds,
#: when the rename happened is unknown).
RESERVED_NAMES_TABLE = """
CREATE TABLE reserved_names (
    team_pk     INTEGER NOT NULL REFERENCES teams (team_pk),
    name        TEXT NOT NULL,
    member_pk   INTEGER NOT NULL REFERENCES members (member_pk),
    source      TEXT NOT NULL CHECK (source IN ('rename', 'recovered')),
    reserved_at TEXT,
    PRIMARY KEY (team_pk, name),
    CHECK ((source = 'rename') = (reserved_at IS NOT NULL))
) STRICT;
CREATE INDEX reserved_names_by_member ON reserved_names (member_pk);
"""


class ReservedName(Conflict):
    """A name renamed away is asked for by another member: refused, naming
    the member that held it and the two ways out."""

    def __init__(self, field: str, team: str, name: str, holder: str, holder_id: str) -> None:
        super().__init__(
            f"{field}: name {name!r} is reserved in team {team!r}: member {holder!r} "
            f"({holder_id}) was renamed away from it, and a former name is never given "
            f"to another member (ADR 0007); use another name (that member is {holder!r} "
            f"now), or give it back with 'syncengine team rename-member {team} {holder} {name}'"
        )
        self.field = field
        self.team = team
        self.name = name
        self.holder = holder
        self.holder_id = holder_id


def holder_of(conn: apsw.Connection, team_key: int, name: str) -> tuple[int, str, str] | None:
    """``(member_pk, current name, member_id)`` of the member ``name`` is
    reserved for in the team, or ``None`` when nobody renamed away from it."""
    row = conn.execute(
        "SELECT r.member_pk, m.name, m.member_id FROM reserved_names AS r"
        " JOIN members AS m ON m.member_pk = r.member_pk"
        " WHERE r.team_pk = ? AND r.name = ?",
        (team_key, name),
    ).fetchone()
    return None if row is None else (int(row[0]), str(row[1]), str(row[2]))


def refusal(conn: apsw.Connection, team_key: int, name: str, field: str) -> ReservedName | None:
    """The error a request for ``name`` by a new or different member meets,
    or ``None`` when the name is free of reservations."""
    held = holder_of(conn, team_key, name)
    if held is None:
        return None
    (team,) = one_row(conn.execute("SELECT name FROM teams WHERE team_pk = ?", (team_key,)))
    return ReservedName(field, str(team), name, held[1], held[2])


def reserved_in_team(conn: apsw.Connection, team_key: int) -> dict[str, int]:
    """Every reserved name of the team and the member it is reserved for
    (one query: roster adoption decides a whole roster against it)."""
    return {
        str(name): int(pk)
        for name, pk in conn.execute(
            "SELECT name, member_pk FROM reserved_names WHERE team_pk = ?", (team_key,)
        )
    }


def record_rename(
    conn: apsw.Connection, team_key: int, member_key: int, old: str, new: str, now: str
) -> None:
    """Inside the rename's transaction, after the member row took ``new``:
    ``old`` becomes reserved for the member, and ``new`` — when it was one
    of the member's own former names — is live again, so no longer reserved.

    The crash point ``team.rename_member.reserved`` sits between the row
    update and the reservation: a crash there must leave neither (proven by
    crash_tests/test_reserved_name_crash_points.py)."""
    conn.execute(
        "DELETE FROM reserved_names WHERE team_pk = ? AND name = ? AND member_pk = ?",
        (team_key, new, member_key),
    )
    crash_point("team.rename_member.reserved")
    conn.execute(
        "INSERT INTO reserved_names (team_pk, name, member_pk, source, reserved_at)"
        " VALUES (?, ?, ?, 'rename', ?)",
        (team_key, old, member_key, now),
    )


def _envelope_names(blob: object) -> tuple[str, str] | None:
    """``(from_agent, to_agent)`` of a ``none``-profile blob (base64 of the
    canonical plaintext), or ``None`` when it is not plainly one."""
    # start-up pin: send loads no base64
    import base64

    # start-up pin: send loads no binascii
    import binascii

    if not isinstance(blob, str):
        return None
    try:
        message = json.loads(base64.b64decode(blob, validate=True))
    except (binascii.Error, ValueError):
        return None
    if not isinstance(message, dict):
        return None
    sender, recipient = message.get("from_agent"), message.get("to_agent")
    if isinstance(sender, str) and isinstance(recipient, str):
        return sender, recipient
    return None


#: Plaintext envelopes tied to a local message: our acknowledged or
#: published pushes, and the imports they were projected from. Each row is
#: (team_pk, sender_pk, recipient_pk, blob).
_HISTORY = (
    "SELECT m.team_pk, m.sender_pk, m.recipient_pk, p.blob FROM sync_push AS p"
    " JOIN messages AS m ON m.seq = p.local_position"
    " WHERE p.cipher = 'none' AND p.blob IS NOT NULL",
    "SELECT m.team_pk, m.sender_pk, m.recipient_pk, q.blob FROM sync_quarantine AS q"
    " JOIN messages AS m ON m.seq = q.local_position"
    " WHERE q.cipher = 'none' AND q.local_position IS NOT NULL",
)


def seed_from_history(conn: apsw.Connection) -> int:
    """Migration 16: reserve every former name the store can still prove.

    Renames before this version left no record of their own, but a
    ``none``-profile envelope carries the sender's and recipient's names as
    they were when it was sealed (a push) or imported (a pull), and the
    local message it belongs to points at the member rows by key. A row
    whose name now differs from its envelope's was renamed away from that
    name. Each such name is reserved for that member unless it is some
    member's live name today (reused already: nothing to protect) or the
    envelopes name two different members with it (ambiguous: left free).
    ``age-v1`` envelopes cannot be read without their keys, so renames seen
    only through them are not recoverable. Returns the rows written.

    The crash point ``store.migrate.reserved_names`` fires after the seeds
    are written and before the migration commits."""
    names = {int(pk): str(name) for pk, name in conn.execute("SELECT member_pk, name FROM members")}
    live = {(int(t), str(n)) for t, n in conn.execute("SELECT team_pk, name FROM members")}
    found: dict[tuple[int, str], set[int]] = {}
    for sql in _HISTORY:
        for team_key, sender, recipient, blob in conn.execute(sql):
            seen = _envelope_names(blob)
            if seen is None:
                continue
            for member_key, former in ((int(sender), seen[0]), (int(recipient), seen[1])):
                if names.get(member_key) != former:
                    found.setdefault((int(team_key), former), set()).add(member_key)
    rows = [
        (team_key, former, next(iter(holders)))
        for (team_key, former), holders in sorted(found.items())
        if len(holders) == 1 and (team_key, former) not in live
    ]
    conn.executemany(
        "INSERT INTO reserved_names (team_pk, name, member_pk, source)"
        " VALUES (?, ?, ?, 'recovered')",
        rows,
    )
    crash_point("store.migrate.reserved_names")
    return len(rows)
