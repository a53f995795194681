"""The read-only helpers ``syncengine wait`` needs: the change counter moves
exactly when another connection commits, and ``require_reader`` refuses only
names a wait could never be answered for."""

from __future__ import annotations

import pytest

from syncengine.local_store import Store
from syncengine.store import UnknownAgent, UnknownTeam


def test_data_version_is_unchanged_until_another_connection_commits(store: Store) -> None:
    first = store.data_version()
    assert store.data_version() == first
    with Store(store.path) as other:
        other.send("dev", "alice", "bob", "hi")
    assert store.data_version() != first


def test_data_version_takes_no_lock_that_blocks_a_writer(store: Store) -> None:
    store.data_version()
    with Store(store.path, busy_timeout_ms=0) as other:
        other.send("dev", "alice", "bob", "hi")  # would raise StoreBusy if locked


def test_require_reader_refuses_a_team_the_store_never_saw(store: Store) -> None:
    with pytest.raises(UnknownTeam):
        store.require_reader("nope", "alice")


def test_require_reader_refuses_a_name_absent_from_a_teams_roster(store: Store) -> None:
    with pytest.raises(UnknownAgent):
        store.require_reader("dev", "zed")


def test_require_reader_accepts_a_name_seen_in_a_roster_team_off_the_roster(
    store: Store,
) -> None:
    """An interned name may hold unread messages, so it can be waited for."""
    store.send("dev", "alice", "visitor", "hi")
    store.require_reader("dev", "visitor")


def test_require_reader_accepts_any_valid_name_in_a_team_without_roster(store: Store) -> None:
    store.send("host", "a1", "a2", "hi")
    store.require_reader("host", "someone-new")
