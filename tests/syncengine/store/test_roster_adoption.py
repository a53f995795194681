"""``adopt_roster``: the relay's authenticated roster taken as the team's, every
cycle (specs/read-state.md §2 and §8), deciding from one read of the team's rows."""

from __future__ import annotations

import pytest

from syncengine.ids import new_uuid7
from syncengine.local_store import Store
from syncengine.store import Conflict
from syncengine.store.connection import write_transaction
from syncengine.store.teams import adopt_roster, team_pk

NOW = "2026-01-01T00:00:00.000000Z"


def adopt(store: Store, roster: list[tuple[str, str]], team: str = "dev") -> int:
    with write_transaction(store.conn, store.path) as conn:
        return adopt_roster(conn, team_pk(conn, team), roster, NOW)


def rows(store: Store) -> dict[str, tuple[str, int, int]]:
    """name → (member_id, roster, relay_bound) of team dev."""
    return {
        name: (member_id, roster, bound)
        for name, member_id, roster, bound in store.conn.execute(
            "SELECT m.name, m.member_id, m.roster, m.relay_bound FROM members m"
            " JOIN teams t USING (team_pk) WHERE t.name = 'dev'"
        )
    }


@pytest.fixture
def relay_roster(store: Store) -> list[tuple[str, str]]:
    """The relay's IDs for alice, bob and carol, adopted once."""
    roster = [(new_uuid7(), name) for name in ("alice", "bob", "carol")]
    adopt(store, roster)
    return roster


def test_local_names_adopt_the_relays_member_ids(
    store: Store, relay_roster: list[tuple[str, str]]
) -> None:
    assert rows(store) == {name: (mid, 1, 1) for mid, name in relay_roster}


def test_a_steady_roster_is_adopted_again_without_a_single_write(
    store: Store, relay_roster: list[tuple[str, str]]
) -> None:
    before = store.conn.total_changes()
    assert adopt(store, relay_roster) == 0
    assert store.conn.total_changes() == before


def test_a_relay_rename_keeps_the_members_row_and_its_local_name(
    store: Store, relay_roster: list[tuple[str, str]]
) -> None:
    bob = relay_roster[1][0]
    renamed = [(mid, "robert" if mid == bob else name) for mid, name in relay_roster]
    assert adopt(store, renamed) == 0
    assert rows(store)["bob"] == (bob, 1, 1) and "robert" not in rows(store)


def test_a_member_missing_from_the_roster_is_retired_and_returns_when_listed_again(
    store: Store, relay_roster: list[tuple[str, str]]
) -> None:
    assert adopt(store, relay_roster[:2]) == 1
    assert rows(store)["carol"][1:] == (0, 1)
    assert adopt(store, relay_roster) == 1
    assert rows(store)["carol"][1:] == (1, 1)


def test_a_new_relay_member_gets_a_row_of_its_own(
    store: Store, relay_roster: list[tuple[str, str]]
) -> None:
    dave = new_uuid7()
    assert adopt(store, [*relay_roster, (dave, "dave")]) == 1
    assert rows(store)["dave"] == (dave, 1, 1)


def test_a_relay_bound_name_is_never_rebound_to_a_newcomer(
    store: Store, relay_roster: list[tuple[str, str]]
) -> None:
    bob = relay_roster[1][0]
    newcomer = new_uuid7()
    others = [(mid, name) for mid, name in relay_roster if mid != bob]
    assert adopt(store, [*others, (newcomer, "bob")]) == 1  # bob retired, newcomer left out
    assert rows(store)["bob"] == (bob, 0, 1)
    assert store.conn.execute(
        "SELECT count(*) FROM members WHERE member_id = ?", (newcomer,)
    ).fetchone() == (0,)


def test_a_member_id_of_another_local_team_is_a_conflict_and_changes_nothing(
    store: Store, relay_roster: list[tuple[str, str]]
) -> None:
    store.create_team("ops", ["erin"])
    before = rows(store)
    with pytest.raises(Conflict):
        adopt(store, [(relay_roster[0][0], "erin")], team="ops")
    assert rows(store) == before


def test_an_id_freed_by_an_adoption_in_the_same_roster_is_not_matched_again(
    store: Store,
) -> None:
    """A local ID replaced earlier in the loop no longer names that row."""
    local_bob = rows(store)["bob"][0]
    relay_bob = new_uuid7()
    # bob adopts relay_bob; then the relay also lists bob's former local ID
    # under a new name: that is a new member, not bob's row again.
    assert adopt(store, [(relay_bob, "bob"), (local_bob, "zed")]) == 2
    assert rows(store)["bob"] == (relay_bob, 1, 1)
    assert rows(store)["zed"] == (local_bob, 1, 1)
