"""A name renamed away stays reserved for its team (ADR 0007 "Names never
become identity"; read-state-synchronization.md "MUST NOT … reuse a retired
name"; specs/store.md §4.1): refused to every other member through every
path that could give it to one, taken back by its own member, attributed to
its holder when a pulled or imported message names it, and recovered by
migration 16 from the plaintext envelopes a store already holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncengine.ids import new_uuid7
from syncengine.local_store import Store
from syncengine.ops.sync_records import SyncPullCursor
from syncengine.store import Conflict
from syncengine.store import migrations as mig
from syncengine.store.connection import write_transaction
from syncengine.store.reserved_names import ReservedName
from syncengine.store.teams import adopt_roster, team_pk
from tests.syncengine.ops.helpers import (
    FakeRelay,
    foreign_envelope,
    new_key,
    prepare_none,
    pull_record,
)

NOW = "2026-01-01T00:00:00.000000Z"


@pytest.fixture
def renamed(store: Store) -> Store:
    """Team dev = {alice, bob, carol}, then bob renamed to robert."""
    store.rename_member("dev", "bob", "robert")
    return store


def member_of(store: Store, name: str, team: str = "dev") -> str:
    return next(m.member_id for m in store.team(team).members if m.name == name)


def names(store: Store, team: str = "dev") -> list[str]:
    return sorted(m.name for m in store.team(team).members)


def reservations(store: Store) -> dict[str, str]:
    """reserved name → the current name of the member it is reserved for."""
    return {
        str(name): str(holder)
        for name, holder in store.conn.execute(
            "SELECT r.name, m.name FROM reserved_names r JOIN members m USING (member_pk)"
        )
    }


# -- the refusals ------------------------------------------------------------------


def test_renaming_another_member_onto_a_renamed_away_name_is_refused(renamed: Store) -> None:
    with pytest.raises(ReservedName) as refused:
        renamed.rename_member("dev", "carol", "bob")
    assert refused.value.holder == "robert"
    assert refused.value.holder_id == member_of(renamed, "robert")
    assert "reserved" in str(refused.value) and "rename-member dev robert bob" in str(refused.value)
    assert names(renamed) == ["alice", "carol", "robert"]


def test_a_reserved_name_refusal_is_a_conflict_of_the_store_hierarchy(renamed: Store) -> None:
    with pytest.raises(Conflict):
        renamed.rename_member("dev", "carol", "bob")


def test_adding_a_new_member_by_a_renamed_away_name_is_refused(renamed: Store) -> None:
    with pytest.raises(ReservedName, match="'robert'"):
        renamed.add_members("dev", ["bob"])
    assert names(renamed) == ["alice", "carol", "robert"]


def test_registering_a_team_first_seen_on_messages_refuses_its_reserved_names(
    store: Store,
) -> None:
    store.send("loose", "ann", "ben", "hello")
    store.rename_member("loose", "ben", "benjamin")
    with pytest.raises(ReservedName):
        store.create_team("loose", ["ann", "ben"])


def test_a_host_send_from_a_renamed_away_name_is_refused(renamed: Store) -> None:
    with pytest.raises(ReservedName, match="from: name 'bob'"):
        renamed.send("dev", "bob", "alice", "hi")
    assert renamed.history("dev", None, None) == []


def test_a_host_send_to_a_renamed_away_name_is_refused(renamed: Store) -> None:
    with pytest.raises(ReservedName, match="to: name 'bob'"):
        renamed.send("dev", "alice", "bob", "hi")
    assert renamed.history("dev", None, None) == []


def test_a_host_read_as_a_renamed_away_name_is_refused(renamed: Store) -> None:
    message = renamed.send("dev", "alice", "robert", "hi")
    with pytest.raises(ReservedName):
        renamed.mark_read_batch("dev", "bob", [message.id])
    assert [m.body for m in renamed.list_unread("dev", "robert")] == ["hi"]


def test_waiting_as_a_renamed_away_name_names_its_holder_not_add_member(renamed: Store) -> None:
    from syncengine.store.teams import require_reader

    with pytest.raises(ReservedName, match="'robert'"):
        require_reader(renamed.conn, "dev", "bob")


def test_a_relay_member_unknown_here_never_takes_a_reserved_name(renamed: Store) -> None:
    newcomer = new_uuid7()
    with write_transaction(renamed.conn, renamed.path) as conn:
        adopt_roster(conn, team_pk(conn, "dev"), [(newcomer, "bob")], NOW)
    ids = {m.member_id for m in renamed.team("dev").members}
    assert newcomer not in ids
    assert names(renamed) == ["alice", "carol", "robert"]


def test_the_relay_keeping_the_old_name_for_the_same_member_keeps_its_row(
    renamed: Store,
) -> None:
    """A local-first rename: the relay still calls the member by its old name;
    its row is found by ID (the read-state handshake blocks it meanwhile)."""
    robert = member_of(renamed, "robert")
    with write_transaction(renamed.conn, renamed.path) as conn:
        adopt_roster(conn, team_pk(conn, "dev"), [(robert, "bob")], NOW)
    assert member_of(renamed, "robert") == robert
    assert reservations(renamed) == {"bob": "robert"}


# -- what the member itself may do --------------------------------------------------


def test_a_member_may_take_back_its_own_former_name(renamed: Store) -> None:
    bob = member_of(renamed, "robert")
    renamed.rename_member("dev", "robert", "bob")
    assert member_of(renamed, "bob") == bob
    assert reservations(renamed) == {"robert": "bob"}  # the name it left is now the reserved one


def test_every_former_name_of_a_member_stays_reserved_for_it(renamed: Store) -> None:
    renamed.rename_member("dev", "robert", "rob")
    assert reservations(renamed) == {"bob": "rob", "robert": "rob"}
    for taken in ("bob", "robert"):
        with pytest.raises(ReservedName, match="'rob'"):
            renamed.rename_member("dev", "carol", taken)


def test_reservations_are_per_team(renamed: Store) -> None:
    renamed.create_team("ops", ["bob"])
    renamed.rename_member("ops", "bob", "bobby")
    assert names(renamed, "ops") == ["bobby"]
    renamed.create_team("lab", ["bob"])
    assert names(renamed, "lab") == ["bob"]


def test_a_refused_rename_writes_nothing(renamed: Store) -> None:
    before = renamed.conn.total_changes()
    with pytest.raises(ReservedName):
        renamed.rename_member("dev", "carol", "bob")
    assert renamed.conn.total_changes() == before
    assert reservations(renamed) == {"bob": "robert"}


# -- facts under a former name ------------------------------------------------------


def test_a_pulled_message_under_a_former_name_is_attributed_to_its_holder(
    tmp_path: Path,
) -> None:
    key = new_key()
    with Store(tmp_path / "s.db") as store:
        store.init()
        store.create_team("dev", ["alice", "bob"])
        store.rename_member("dev", "bob", "robert")
        # Sealed by a machine that still calls robert 'bob'.
        wire, env = foreign_envelope(key, "old habits", "alice", "bob")
        store.sync_apply_pull(key, [pull_record(1, wire, env)], SyncPullCursor(1))
        assert [m.body for m in store.list_unread("dev", "robert")] == ["old habits"]
        assert names(store) == ["alice", "robert"]
        assert reservations(store) == {"bob": "robert"}


def test_an_imported_event_log_under_a_former_name_is_attributed_to_its_holder(
    renamed: Store, tmp_path: Path
) -> None:
    log = tmp_path / "old.jsonl"
    sent = {
        "type": "message_sent",
        "id": new_uuid7(),
        "team": "dev",
        "from": "alice",
        "to": "bob",
        "body": "exported before the rename",
        "at": "2026-01-01T00:00:00.000000Z",
    }
    log.write_text(json.dumps(sent) + "\n")
    renamed.import_file(log)
    assert [m.body for m in renamed.list_unread("dev", "robert")] == ["exported before the rename"]


# -- the invariant ------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("abcde"), st.sampled_from("abcdefgh")), min_size=1, max_size=12
    )
)
def test_no_name_ever_passes_from_one_member_to_another(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, str]]
) -> None:
    """Whatever renames are asked, a name any member ever held is held (or
    reserved) by that member and no other, and a live name is never reserved."""
    path = tmp_path_factory.mktemp("names") / "s.db"
    with Store(path) as store:
        store.init()
        store.create_team("dev", list("abcde"))
        ids = {m.name: m.member_id for m in store.team("dev").members}
        owner = {name: member for name, member in ids.items()}  # every name ever held
        for old, new in steps:
            current = {m.name: m.member_id for m in store.team("dev").members}
            if old not in current:
                continue
            try:
                store.rename_member("dev", old, new)
            except Conflict:
                assert owner.get(new, current[old]) != current[old] or new in current
                continue
            except Exception as exc:  # the only other refusal: the same name
                assert "equals the current name" in str(exc)
                continue
            assert owner.setdefault(new, current[old]) == current[old]
        live = {m.name: m.member_id for m in store.team("dev").members}
        reserved = {
            str(n): str(mid)
            for n, mid in store.conn.execute(
                "SELECT r.name, m.member_id FROM reserved_names r JOIN members m USING (member_pk)"
            )
        }
        assert not set(live) & set(reserved)
        for name, member in {**live, **reserved}.items():
            assert owner[name] == member
        assert set(owner) == set(live) | set(reserved)


# -- migration 16 -------------------------------------------------------------------


def _rename_as_version_15(store: Store, old: str, new: str) -> None:
    """What ``team rename-member`` did before migration 16: the row alone."""
    store.conn.execute("UPDATE members SET name = ? WHERE name = ?", (new, old))


def _history(path: Path) -> None:
    """Team dev = {alice, bob, carol}: alice's two plaintext pushes to bob (one
    acknowledged) and one import from carol to alice."""
    key = new_key()
    with Store(path) as store:
        store.init()
        store.create_team("dev", ["alice", "bob", "carol"])
        store.send("dev", "alice", "bob", "m1")
        store.send("dev", "alice", "bob", "m2")
        candidates = list(store.sync_prepare_push(key, prepare_none(), 10).candidates)
        store.sync_reconcile_push(key, FakeRelay().push(candidates[:1]))
        wire, env = foreign_envelope(key, "from afar", "carol", "alice")
        store.sync_apply_pull(key, [pull_record(2, wire, env)], SyncPullCursor(2))


def test_migration_16_recovers_renames_made_before_it(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _history(path)
    from syncengine.store.connection import open_connection

    with Store(path) as store:
        _rename_as_version_15(store, "bob", "robert")  # a pushed envelope's recipient
        _rename_as_version_15(store, "carol", "caroline")  # an import's sender
        store.conn.execute("DROP TABLE reserved_names; PRAGMA user_version = 15;")
    conn = open_connection(path, create=False, busy_timeout_ms=1000)
    assert mig.migrate(conn, path) == mig.LATEST_VERSION
    rows = conn.execute(
        "SELECT r.name, m.name, r.source, r.reserved_at FROM reserved_names r"
        " JOIN members m USING (member_pk) ORDER BY r.name"
    ).fetchall()
    conn.close()
    assert [tuple(r) for r in rows] == [
        ("bob", "robert", "recovered", None),
        ("carol", "caroline", "recovered", None),
    ]
    with Store(path) as store, pytest.raises(ReservedName):
        store.rename_member("dev", "alice", "bob")


def test_migration_16_leaves_a_name_already_reused_free(tmp_path: Path) -> None:
    """The bug this closes, already happened: bob became robert, then alice
    took 'bob'. Nothing can give it back; it is not reserved."""
    path = tmp_path / "s.db"
    _history(path)
    from syncengine.store.connection import open_connection

    with Store(path) as store:
        _rename_as_version_15(store, "bob", "robert")
        _rename_as_version_15(store, "alice", "bob")
        store.conn.execute("DROP TABLE reserved_names; PRAGMA user_version = 15;")
    conn = open_connection(path, create=False, busy_timeout_ms=1000)
    mig.migrate(conn, path)
    rows = conn.execute(
        "SELECT r.name, m.name FROM reserved_names r JOIN members m USING (member_pk)"
    ).fetchall()
    conn.close()
    # alice's pushes name her 'alice' (now bob): 'alice' is reserved for her;
    # 'bob' is a live name and stays so.
    assert sorted(tuple(r) for r in rows) == [("alice", "bob")]


def test_migration_16_on_a_store_without_renames_reserves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _history(path)
    with Store(path) as store:
        assert store.conn.execute("SELECT count(*) FROM reserved_names").fetchone()[0] == 0
