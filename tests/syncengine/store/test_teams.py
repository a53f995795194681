"""The local team registry (specs/store.md §4)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from syncengine.local_store import Store
from syncengine.store import Conflict, InvalidInput, UnknownTeam
from syncengine.store.teams import MAX_MEMBERS

UUID7 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def test_create_mints_uuid7_ids_for_the_team_and_every_member(store: Store) -> None:
    team = store.team("dev")
    assert UUID7.fullmatch(team.team_id)
    assert [m.name for m in team.members] == ["alice", "bob", "carol"]
    assert all(UUID7.fullmatch(m.member_id) for m in team.members)
    assert len({m.member_id for m in team.members}) == 3


def test_a_second_team_with_the_same_name_is_a_conflict(store: Store) -> None:
    with pytest.raises(Conflict, match="already exists"):
        store.create_team("dev", ["zed"])
    assert [t.name for t in store.list_teams()] == ["dev"]


@pytest.mark.parametrize(
    ("team", "members"),
    [
        ("", ["a"]),
        ("a:b", ["a"]),
        ("-x", ["a"]),
        ("t", ["a/b"]),
        ("t", ["a:b"]),
        ("t", [".."]),
        ("t", ["a", "a"]),
        ("t", ["x" * 129]),
        ("t\n", ["a"]),
    ],
)
def test_invalid_team_or_member_names_are_refused_and_nothing_is_created(
    store: Store, team: str, members: list[str]
) -> None:
    with pytest.raises(InvalidInput):
        store.create_team(team, members)
    assert [t.name for t in store.list_teams()] == ["dev"]


def test_rename_keeps_ids_messages_and_read_state_under_the_new_name(store: Store) -> None:
    before = store.team("dev")
    m1 = store.send("dev", "alice", "bob", "one")
    store.send("dev", "alice", "bob", "two")
    store.read_cursor_consume("dev", "bob", "1", [m1.id])
    store.rename_team("dev", "core")
    after = store.team("core")
    assert (after.team_id, after.members) == (before.team_id, before.members)
    assert [(m.team, m.body) for m in store.history("core")] == [("core", "one"), ("core", "two")]
    assert [m.body for m in store.list_unread("core", "bob")] == ["two"]
    assert store.read_cursor_get("core", "bob") == "1"
    assert store.history("dev") == []  # the old name holds nothing any more
    with pytest.raises(UnknownTeam):
        store.team("dev")


def test_rename_onto_an_existing_team_is_a_conflict_and_changes_nothing(store: Store) -> None:
    store.create_team("ops", ["dave"])
    with pytest.raises(Conflict):
        store.rename_team("dev", "ops")
    assert sorted(t.name for t in store.list_teams()) == ["dev", "ops"]


def test_add_member_appends_with_a_fresh_id_and_refuses_duplicates(store: Store) -> None:
    team = store.add_members("dev", ["dave"])
    assert [m.name for m in team.members][-1] == "dave"
    with pytest.raises(Conflict, match="already has"):
        store.add_members("dev", ["erin", "bob"])
    assert [m.name for m in store.team("dev").members] == ["alice", "bob", "carol", "dave"]


def test_a_team_holds_at_most_the_v1_member_bound(store: Store) -> None:
    with pytest.raises(InvalidInput, match=str(MAX_MEMBERS)):
        store.create_team("big", [f"a{i}" for i in range(MAX_MEMBERS + 1)])
    assert len(store.create_team("max", [f"a{i}" for i in range(MAX_MEMBERS)]).members) == 1000


def test_provisioning_document_lists_members_sorted_by_member_id(store: Store) -> None:
    team = store.team("dev")
    doc = team.provisioning_document()
    assert list(doc) == ["team_id", "team_name", "members"]
    assert doc["team_id"] == team.team_id and doc["team_name"] == "dev"
    members = doc["members"]
    assert isinstance(members, list)
    assert [m["member_id"] for m in members] == sorted(m.member_id for m in team.members)
    assert all(set(m) == {"member_id", "name", "registrations"} for m in members)
    assert "members_revision" not in doc


def test_team_create_of_a_name_first_seen_on_messages_registers_it_and_keeps_them(
    tmp_path: Path,
) -> None:
    with Store(tmp_path / "s.db") as s:
        sent = s.send("crew", "alice", "bob", "before any registry").id
        assert s.list_teams() == []  # names on messages are not registrations
        team = s.create_team("crew", ["bob"])
        assert [m.name for m in team.members] == ["bob"]
        assert [m.id for m in s.list_unread("crew", "bob")] == [sent]
        s.add_members("crew", ["alice"])  # a name seen on messages enrols
        with pytest.raises(Conflict):
            s.create_team("crew", [])
