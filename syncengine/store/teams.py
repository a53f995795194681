"""Team and agent names, and the sync layer's roster (specs/store.md §4).

The storage axis is messages only (driver-interface §2 intro): a host never
registers a team or an agent with its storage driver, so every name a
storage operation is given is *interned* on first use, in that operation's
transaction (:func:`intern_team`, :func:`intern_member`). Interned names are
not roster entries: ``teams.registered`` and ``members.roster`` mark what
``team create``/``add-member`` or the relay's authenticated roster put there,
and only those appear in :func:`get_team`/:func:`list_teams` — a name seen on
a message never becomes a member.

A team has an immutable UUIDv7 ``team_id`` minted here and a mutable display
name; a member has an immutable UUIDv7 ``member_id`` and a name unique in its
team. Every other table refers to teams and members by integer key, so a
rename is one row update inside one transaction and every dependent row
(messages, read events, frontiers) follows it atomically — the rename
discipline of read-state-synchronization.md "Store-owned composite frontier".
The name a member is renamed away from stays reserved for it
(:mod:`syncengine.store.reserved_names`): no other member of the team may
take it, through any path of this module.

These functions run inside a transaction the caller opened.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from syncengine.ids import new_uuid7
from syncengine.store.connection import Row, one_row
from syncengine.store.errors import Conflict, InvalidInput, UnknownAgent, UnknownTeam
from syncengine.store.log_records import Member, Team
from syncengine.store.names import check_local_agent, check_local_team
from syncengine.store.reserved_names import (
    FORMER_HOLDER,
    FORMER_REFUSED,
    FormerName,
    holder_of,
    record_rename,
    refusal,
    reserved_in_team,
)

if TYPE_CHECKING:
    import apsw

__all__ = [
    "MAX_MEMBERS",
    "NameCache",
    "add_members",
    "adopt_roster",
    "awaiting_acceptance",
    "create_team",
    "find_member",
    "find_pair",
    "find_team",
    "get_team",
    "intern_member",
    "intern_pair",
    "intern_team",
    "list_teams",
    "member_pk",
    "rename_member",
    "rename_team",
    "require_reader",
    "team_pk",
]

_log = logging.getLogger("syncengine.store")

#: server/spec/v1.md "GET /v1/members": at most 1,000 active members a team.
MAX_MEMBERS = 1000


def find_team(conn: apsw.Connection, name: str) -> int | None:
    """The key of a team name this store has seen, registered or not."""
    row = conn.execute("SELECT team_pk FROM teams WHERE name = ?", (name,)).fetchone()
    return None if row is None else int(row[0])


def find_member(conn: apsw.Connection, team_key: int, agent: str) -> int | None:
    """The key of an agent name seen in the team, roster member or not."""
    row = conn.execute(
        "SELECT member_pk FROM members WHERE team_pk = ? AND name = ?", (team_key, agent)
    ).fetchone()
    return None if row is None else int(row[0])


def team_pk(conn: apsw.Connection, name: str) -> int:
    """The key of a known team name (the sync layer's lookups; a storage
    operation interns instead)."""
    pk = find_team(conn, name)
    if pk is None:
        raise UnknownTeam(name)
    return pk


def member_pk(
    conn: apsw.Connection, team_key: int, team: str, agent: str, field: str = "agent"
) -> int:
    pk = find_member(conn, team_key, agent)
    if pk is None:
        raise UnknownAgent(team, agent, field)
    return pk


def require_reader(conn: apsw.Connection, team: str, agent: str) -> None:
    """Raise unless ``agent`` of ``team`` is a reader worth waiting for.

    A storage read answers "nothing" for a name it never saw, which is right
    for one call but would turn a typo into a wait that never ends. So the
    team must be one this store knows (registered, or seen on a message),
    and when it has a roster the agent must be a name seen in it — a roster
    member, or a retired or interned name that may still hold unread
    messages. A team without a roster has nothing to check the agent
    against (hosts keep their own registry), so any valid name passes.
    """
    check_local_team(team, "team")
    check_local_agent(agent, "agent")
    key = find_team(conn, team)
    if key is None:
        raise UnknownTeam(team)
    if find_member(conn, key, agent) is None:
        # A former name is not a typo: say whose it was and what it is now.
        reserved = refusal(conn, key, agent, "agent")
        if reserved is not None:
            raise reserved
        if _roster_count(conn, key):
            raise UnknownAgent(team, agent)


def intern_team(conn: apsw.Connection, name: str, now: str) -> int:
    """The team's key, recording the name on first use (not as a registration)."""
    pk = find_team(conn, name)
    if pk is not None:
        return pk
    conn.execute(
        "INSERT INTO teams (team_id, name, created_at, registered) VALUES (?, ?, ?, 0)",
        (new_uuid7(), name, now),
    )
    return int(conn.last_insert_rowid())


#: (team, agent) → (team_pk, member_pk), valid within one transaction.
NameCache = dict[tuple[str, str], tuple[int, int]]


def intern_pair(
    conn: apsw.Connection,
    team: str,
    agent: str,
    now: str,
    cache: NameCache | None = None,
    *,
    team_field: str = "team",
    agent_field: str = "agent",
    former: FormerName = FORMER_REFUSED,
) -> tuple[int, int]:
    """Check both names and return their keys, recording either on first
    use: what every storage write does with the names it is given. A
    ``cache`` spares repeated lookups within one transaction. A name some
    member was renamed away from is refused, or — for ``former="holder"``,
    a pulled or imported fact — resolves to that member
    (:func:`intern_member`)."""
    if cache is not None:
        hit = cache.get((team, agent))
        if hit is not None:
            return hit
    check_local_team(team, team_field)
    check_local_agent(agent, agent_field)
    tkey = intern_team(conn, team, now)
    keys = tkey, intern_member(conn, tkey, agent, now, former, agent_field)
    if cache is not None:
        cache[team, agent] = keys
    return keys


def find_pair(conn: apsw.Connection, team: str, agent: str) -> int | None:
    """The member key of a (team, agent) pair this store has seen, or
    ``None``: a pair never seen has no messages and has read nothing."""
    tkey = find_team(conn, team)
    return None if tkey is None else find_member(conn, tkey, agent)


def intern_member(
    conn: apsw.Connection,
    team_key: int,
    agent: str,
    now: str,
    former: FormerName = FORMER_REFUSED,
    field: str = "agent",
) -> int:
    """The agent's key in the team, recording the name on first use (not as
    a roster member).

    A name renamed away is not a first use: a host's send or read naming it
    is refused with :class:`~syncengine.store.reserved_names.ReservedName`
    (status ``runtime_error``, the storage contract's status for a refused
    request — driver-interface §1.4), since interning it would give the
    name to a new member. A pulled or imported message naming it
    (``former="holder"``) was sealed by a machine that has not followed the
    rename yet, and is the held member's: it resolves to that member."""
    pk = find_member(conn, team_key, agent)
    if pk is not None:
        return pk
    if former == FORMER_HOLDER:
        held = holder_of(conn, team_key, agent)
        if held is not None:
            return held[0]
    else:
        reserved = refusal(conn, team_key, agent, field)
        if reserved is not None:
            raise reserved
    conn.execute(
        "INSERT INTO members (team_pk, member_id, name, created_at, roster) VALUES (?, ?, ?, ?, 0)",
        (team_key, new_uuid7(), agent, now),
    )
    return int(conn.last_insert_rowid())


def _check_new_members(agents: list[str] | tuple[str, ...], field: str) -> list[str]:
    checked = [check_local_agent(agent, field) for agent in agents]
    seen: set[str] = set()
    for agent in checked:
        if agent in seen:
            raise InvalidInput(field, f"member {agent!r} is listed twice")
        seen.add(agent)
    return checked


def create_team(
    conn: apsw.Connection, name: str, agents: list[str] | tuple[str, ...], now: str
) -> Team:
    check_local_team(name, "team")
    checked = _check_new_members(agents, "member")
    if len(checked) > MAX_MEMBERS:
        raise InvalidInput("member", f"a team has at most {MAX_MEMBERS} members")
    row = conn.execute("SELECT team_pk, registered FROM teams WHERE name = ?", (name,)).fetchone()
    if row is not None and row[1]:
        raise Conflict(f"team {name!r} already exists")
    if row is None:
        conn.execute(
            "INSERT INTO teams (team_id, name, created_at) VALUES (?, ?, ?)",
            (new_uuid7(), name, now),
        )
        key = int(conn.last_insert_rowid())
    else:
        # A team first seen on messages becomes registered; its ID stays.
        key = int(row[0])
        conn.execute("UPDATE teams SET registered = 1 WHERE team_pk = ?", (key,))
    _enrol_members(conn, key, checked, now)
    return get_team(conn, name)


def _enrol_members(conn: apsw.Connection, key: int, agents: list[str], now: str) -> None:
    """Put names on the roster: a name already seen on messages keeps its key
    (and so its messages and read state); a new one is inserted."""
    for agent in agents:
        pk = find_member(conn, key, agent)
        if pk is None:
            reserved = refusal(conn, key, agent, "member")
            if reserved is not None:
                raise reserved
            conn.execute(
                "INSERT INTO members (team_pk, member_id, name, created_at) VALUES (?, ?, ?, ?)",
                (key, new_uuid7(), agent, now),
            )
        else:
            conn.execute("UPDATE members SET roster = 1 WHERE member_pk = ?", (pk,))


def _roster_count(conn: apsw.Connection, key: int) -> int:
    count: int = one_row(
        conn.execute("SELECT count(*) FROM members WHERE team_pk = ? AND roster = 1", (key,))
    )[0]
    return count


def add_members(
    conn: apsw.Connection, team: str, agents: list[str] | tuple[str, ...], now: str
) -> Team:
    check_local_team(team, "team")
    checked = _check_new_members(agents, "member")
    if not checked:
        raise InvalidInput("member", "name at least one member to add")
    key = _registered_team(conn, team)
    for agent in checked:
        if conn.execute(
            "SELECT 1 FROM members WHERE team_pk = ? AND name = ? AND roster = 1", (key, agent)
        ).fetchone():
            raise Conflict(f"team {team!r} already has a member {agent!r}")
    if _roster_count(conn, key) + len(checked) > MAX_MEMBERS:
        raise InvalidInput("member", f"a team has at most {MAX_MEMBERS} members")
    _enrol_members(conn, key, checked, now)
    return get_team(conn, team)


def _registered_team(conn: apsw.Connection, name: str) -> int:
    row = conn.execute("SELECT team_pk FROM teams WHERE name = ? AND registered = 1", (name,))
    found = row.fetchone()
    if found is None:
        raise UnknownTeam(name)
    return int(found[0])


def adopt_roster(conn: apsw.Connection, key: int, roster: list[tuple[str, str]], now: str) -> int:
    """Take the relay's authenticated roster (``GET /v1/members``) as this
    team's roster: ``(member_id, name)`` pairs. Returns how many rows changed.

    - A member known by ID keeps its row and its local name: a rename on
      the relay is resolved by the read-state layer's name check (blocked
      until the local name agrees, specs/read-state.md §10.4).
    - A name known only locally (from ``team create`` or messages) adopts
      the relay's immutable member ID, so every machine agrees on it.
    - A name already bound to *another* relay member is never rebound
      (v1: retired names are not reused): the new member is left out, with a
      warning, until an operator renames the local row.
    - A name reserved here for a member renamed away from it
      (:mod:`syncengine.store.reserved_names`) is never given to a relay
      member this store does not know by ID: it is left out, with a
      warning naming the holder, like the case above.
    - A relay-bound member absent from the roster is retired (``roster = 0``):
      its messages stay, its read-state overlay is no longer consulted.

    Members are never taken from message sender/recipient strings.

    Every cycle adopts the roster again (specs/read-state.md §8), and a
    steady roster of 1,000 members must not cost 1,000 lookups: the team's
    rows are read once, the rules above are decided against that picture
    (kept current as rows change), and only differences are written.
    """
    conn.execute("UPDATE teams SET registered = 1 WHERE team_pk = ? AND registered = 0", (key,))
    changed: int = conn.changes()
    rows = {
        int(pk): _RosterRow(member_id, name, bool(on_roster), bool(bound))
        for pk, member_id, name, on_roster, bound in conn.execute(
            "SELECT member_pk, member_id, name, roster, relay_bound FROM members WHERE team_pk = ?",
            (key,),
        )
    }
    by_id = {row.member_id: pk for pk, row in rows.items()}
    by_name = {row.name: pk for pk, row in rows.items()}
    reserved = reserved_in_team(conn, key)
    for member_id, name in roster:
        pk = by_id.get(member_id)
        if pk is not None:
            row = rows[pk]
            if not row.roster or not row.relay_bound:
                conn.execute(
                    "UPDATE members SET roster = 1, relay_bound = 1 WHERE member_pk = ?", (pk,)
                )
                row.roster = row.relay_bound = True
                changed += 1
            continue
        # Member IDs are unique across teams: one unknown here may be another team's.
        if conn.execute("SELECT 1 FROM members WHERE member_id = ?", (member_id,)).fetchone():
            raise Conflict(f"member ID {member_id} already belongs to another local team")
        pk = by_name.get(name)
        if pk is None and name in reserved:
            holder = rows.get(reserved[name])
            _log.warning(
                "relay member %s is named %r, a name reserved here for member %r, who was "
                "renamed away from it; it is left out until the relay's roster names it "
                "otherwise",
                member_id,
                name,
                None if holder is None else holder.name,
            )
            continue
        if pk is None:
            conn.execute(
                "INSERT INTO members (team_pk, member_id, name, created_at, relay_bound)"
                " VALUES (?, ?, ?, ?, 1)",
                (key, member_id, name, now),
            )
            pk = int(conn.last_insert_rowid())
            rows[pk] = _RosterRow(member_id, name, True, True)
            by_name[name] = pk
        elif rows[pk].relay_bound:
            _log.warning(
                "relay member %s is named %r, a name this store holds for another member; "
                "it is left out until the local member is renamed",
                member_id,
                name,
            )
            continue
        else:
            conn.execute(
                "UPDATE members SET member_id = ?, roster = 1, relay_bound = 1 WHERE member_pk = ?",
                (member_id, pk),
            )
            row = rows[pk]
            del by_id[row.member_id]
            row.member_id, row.roster, row.relay_bound = member_id, True, True
        by_id[member_id] = pk
        changed += 1
    listed = {member_id for member_id, _ in roster}
    retired = [
        pk
        for pk, row in rows.items()
        if row.relay_bound and row.roster and row.member_id not in listed
    ]
    if retired:
        marks = ",".join("?" * len(retired))
        conn.execute(f"UPDATE members SET roster = 0 WHERE member_pk IN ({marks})", retired)
        changed += conn.changes()
    return changed


class _RosterRow:
    """One member row as :func:`adopt_roster` sees it while it decides.

    A plain slotted class, not a dataclass: this module is on the path of
    every host ``send``, and importing :mod:`dataclasses` there costs
    ~10 ms of start-up (issue #17; tests/syncengine/cli/test_startup_imports.py).
    """

    __slots__ = ("member_id", "name", "relay_bound", "roster")

    def __init__(self, member_id: str, name: str, roster: bool, relay_bound: bool) -> None:
        self.member_id = member_id
        self.name = name
        self.roster = roster
        self.relay_bound = relay_bound


def awaiting_acceptance(conn: apsw.Connection, team: str) -> tuple[str, ...]:
    """The roster members of a *connected* team the relay has not accepted:
    on the local roster, never bound to a relay member ID (``relay_bound =
    0``). ADR 0007's ``pending_remote_acceptance``, as Stage 1 holds it
    (specs/read-state.md decision 12): they may send, but have no remote
    read overlay and upload no read state until the relay's roster lists
    them. A team with no connection has no relay to wait for: empty."""
    key = find_team(conn, team)
    if (
        key is None
        or not conn.execute("SELECT 1 FROM engine_bindings WHERE team_pk = ?", (key,)).fetchone()
    ):
        return ()
    return tuple(
        str(row[0])
        for row in conn.execute(
            "SELECT name FROM members WHERE team_pk = ? AND roster = 1 AND relay_bound = 0"
            " ORDER BY name",
            (key,),
        )
    )


def rename_member(conn: apsw.Connection, team: str, old: str, new: str, now: str) -> None:
    """Rename one agent of a team in one statement: its messages, reads,
    frontier and relay association follow the row (read-state-synchronization.md
    "a successful local rename MUST atomically migrate …"). The new name must
    be free in the team — no member's live name, and reserved for nobody but
    this member (its own former name may be taken back: a rename undone) —
    so a retired name is never reused (ADR 0007 "Names never become
    identity"). ``old`` becomes reserved for the member in the same
    transaction."""
    check_local_team(team, "team")
    check_local_agent(old, "old")
    check_local_agent(new, "new")
    key = find_team(conn, team)
    if key is None:
        raise UnknownTeam(team)
    pk = find_member(conn, key, old)
    if pk is None:
        raise UnknownAgent(team, old, "old")
    if old == new:
        raise InvalidInput("new", "the new name equals the current name")
    if find_member(conn, key, new) is not None:
        raise Conflict(f"team {team!r} already has a member named {new!r}")
    held = holder_of(conn, key, new)
    if held is not None and held[0] != pk:
        reserved = refusal(conn, key, new, "new")
        assert reserved is not None
        raise reserved
    conn.execute("UPDATE members SET name = ? WHERE member_pk = ?", (new, pk))
    record_rename(conn, key, pk, old, new, now)


def rename_team(conn: apsw.Connection, old: str, new: str) -> Team:
    check_local_team(old, "old")
    check_local_team(new, "new")
    key = _registered_team(conn, old)
    if old == new:
        raise InvalidInput("new", "the new name equals the current name")
    if conn.execute("SELECT 1 FROM teams WHERE name = ?", (new,)).fetchone():
        raise Conflict(f"team {new!r} already exists")
    conn.execute("UPDATE teams SET name = ? WHERE team_pk = ?", (new, key))
    return get_team(conn, new)


def _members_of(conn: apsw.Connection, key: int) -> tuple[Member, ...]:
    return tuple(
        Member(member_id=row[0], name=row[1])
        for row in conn.execute(
            "SELECT member_id, name FROM members WHERE team_pk = ? AND roster = 1"
            " ORDER BY member_pk",
            (key,),
        )
    )


def get_team(conn: apsw.Connection, name: str) -> Team:
    check_local_team(name, "team")
    row = conn.execute(
        "SELECT team_pk, team_id FROM teams WHERE name = ? AND registered = 1", (name,)
    ).fetchone()
    if row is None:
        raise UnknownTeam(name)
    return Team(team_id=row[1], name=name, members=_members_of(conn, row[0]))


def list_teams(conn: apsw.Connection) -> list[Team]:
    rows: list[Row] = conn.execute(
        "SELECT team_pk, team_id, name FROM teams WHERE registered = 1 ORDER BY name"
    ).fetchall()
    return [Team(team_id=r[1], name=r[2], members=_members_of(conn, r[0])) for r in rows]
