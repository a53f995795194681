"""The local team registry: teams and their members (specs/store.md §4).

A team has an immutable UUIDv7 ``team_id`` minted here and a mutable display
name; a member has an immutable UUIDv7 ``member_id`` and a name unique in its
team. Every other table refers to teams and members by integer key, so a
rename is one row update inside one transaction and every dependent row
(messages, read events, frontiers) follows it atomically — the rename
discipline of read-state-synchronization.md "Store-owned composite frontier".

These functions run inside a transaction the caller opened.
"""

from __future__ import annotations

from typing import Any

from syncengine.ids import new_uuid7
from syncengine.store.errors import Conflict, InvalidInput, UnknownAgent, UnknownTeam
from syncengine.store.names import check_local_agent, check_local_team
from syncengine.store.records import Member, Team

__all__ = [
    "MAX_MEMBERS",
    "add_members",
    "create_team",
    "ensure_members",
    "get_team",
    "list_teams",
    "member_pk",
    "rename_team",
    "team_pk",
]

#: server/spec/v1.md "GET /v1/members": at most 1,000 active members a team.
MAX_MEMBERS = 1000


def team_pk(conn: Any, name: str) -> int:
    row = conn.execute("SELECT team_pk FROM teams WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise UnknownTeam(name)
    pk: int = row[0]
    return pk


def member_pk(conn: Any, team_key: int, team: str, agent: str, field: str = "agent") -> int:
    row = conn.execute(
        "SELECT member_pk FROM members WHERE team_pk = ? AND name = ?", (team_key, agent)
    ).fetchone()
    if row is None:
        raise UnknownAgent(team, agent, field)
    pk: int = row[0]
    return pk


def _check_new_members(agents: list[str] | tuple[str, ...], field: str) -> list[str]:
    checked = [check_local_agent(agent, field) for agent in agents]
    seen: set[str] = set()
    for agent in checked:
        if agent in seen:
            raise InvalidInput(field, f"member {agent!r} is listed twice")
        seen.add(agent)
    return checked


def create_team(conn: Any, name: str, agents: list[str] | tuple[str, ...], now: str) -> Team:
    check_local_team(name, "team")
    checked = _check_new_members(agents, "member")
    if len(checked) > MAX_MEMBERS:
        raise InvalidInput("member", f"a team has at most {MAX_MEMBERS} members")
    if conn.execute("SELECT 1 FROM teams WHERE name = ?", (name,)).fetchone():
        raise Conflict(f"team {name!r} already exists")
    team_id = new_uuid7()
    conn.execute(
        "INSERT INTO teams (team_id, name, created_at) VALUES (?, ?, ?)", (team_id, name, now)
    )
    key = conn.last_insert_rowid()
    _insert_members(conn, key, checked, now)
    return get_team(conn, name)


def _insert_members(conn: Any, key: int, agents: list[str], now: str) -> None:
    conn.executemany(
        "INSERT INTO members (team_pk, member_id, name, created_at) VALUES (?, ?, ?, ?)",
        [(key, new_uuid7(), agent, now) for agent in agents],
    )


def add_members(conn: Any, team: str, agents: list[str] | tuple[str, ...], now: str) -> Team:
    check_local_team(team, "team")
    checked = _check_new_members(agents, "member")
    if not checked:
        raise InvalidInput("member", "name at least one member to add")
    key = team_pk(conn, team)
    for agent in checked:
        if conn.execute(
            "SELECT 1 FROM members WHERE team_pk = ? AND name = ?", (key, agent)
        ).fetchone():
            raise Conflict(f"team {team!r} already has a member {agent!r}")
    count: int = conn.execute("SELECT count(*) FROM members WHERE team_pk = ?", (key,)).fetchone()[
        0
    ]
    if count + len(checked) > MAX_MEMBERS:
        raise InvalidInput("member", f"a team has at most {MAX_MEMBERS} members")
    _insert_members(conn, key, checked, now)
    return get_team(conn, team)


def ensure_members(conn: Any, key: int, team: str, agents: set[str], now: str) -> None:
    """Register every name in ``agents`` that the team does not have yet.

    Pulled messages name the remote team's members; the local registry
    learns those names instead of refusing the page (specs/sync-stage1.md
    §8). Names must pass the local rules and the member bound still holds.
    """
    missing = [
        check_local_agent(agent, "agent")
        for agent in sorted(agents)
        if conn.execute(
            "SELECT 1 FROM members WHERE team_pk = ? AND name = ?", (key, agent)
        ).fetchone()
        is None
    ]
    if not missing:
        return
    count: int = conn.execute("SELECT count(*) FROM members WHERE team_pk = ?", (key,)).fetchone()[
        0
    ]
    if count + len(missing) > MAX_MEMBERS:
        raise InvalidInput(
            "agent", f"team {team!r} would exceed {MAX_MEMBERS} members by importing new senders"
        )
    _insert_members(conn, key, missing, now)


def rename_team(conn: Any, old: str, new: str) -> Team:
    check_local_team(old, "old")
    check_local_team(new, "new")
    key = team_pk(conn, old)
    if old == new:
        raise InvalidInput("new", "the new name equals the current name")
    if conn.execute("SELECT 1 FROM teams WHERE name = ?", (new,)).fetchone():
        raise Conflict(f"team {new!r} already exists")
    conn.execute("UPDATE teams SET name = ? WHERE team_pk = ?", (new, key))
    return get_team(conn, new)


def _members_of(conn: Any, key: int) -> tuple[Member, ...]:
    return tuple(
        Member(member_id=row[0], name=row[1])
        for row in conn.execute(
            "SELECT member_id, name FROM members WHERE team_pk = ? ORDER BY member_pk", (key,)
        )
    )


def get_team(conn: Any, name: str) -> Team:
    check_local_team(name, "team")
    row = conn.execute("SELECT team_pk, team_id FROM teams WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise UnknownTeam(name)
    return Team(team_id=row[1], name=name, members=_members_of(conn, row[0]))


def list_teams(conn: Any) -> list[Team]:
    rows = conn.execute("SELECT team_pk, team_id, name FROM teams ORDER BY name").fetchall()
    return [Team(team_id=r[1], name=r[2], members=_members_of(conn, r[0])) for r in rows]
