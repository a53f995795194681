"""The storage contract's first-use interning meets a renamed-away name
(specs/store.md §4.1, "Decided for the driver's storage_send"): through every
door — in process, the command, the bash driver file, the driver server — a
send naming it is refused with the contract's ``runtime_error`` status, a
one-line message naming the member that held it, and nothing written."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.syncengine.driver.contract import BashDriver, ContractFailure, PythonDriver

Driver = PythonDriver | BashDriver


def _rows(path: Path) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(path)
    try:
        return [
            *conn.execute("SELECT member_pk, name FROM members ORDER BY member_pk"),
            *conn.execute("SELECT seq, sender_pk, recipient_pk FROM messages ORDER BY seq"),
        ]
    finally:
        conn.close()


@pytest.fixture
def renamed(seed: PythonDriver, store_path: Path) -> Path:
    from syncengine.local_store import Store

    seed.send("dev", "alice", "bob", "before the rename")
    with Store(store_path) as store:
        store.rename_member("dev", "bob", "robert")
    return store_path


@pytest.mark.parametrize("names", [("bob", "alice"), ("alice", "bob")], ids=["from", "to"])
def test_a_send_naming_a_renamed_away_name_is_a_runtime_error_that_writes_nothing(
    driver: Driver, renamed: Path, names: tuple[str, str]
) -> None:
    before = _rows(renamed)
    with pytest.raises(ContractFailure) as failure:
        driver.send("dev", *names, "hello")
    assert failure.value.status == "runtime_error"
    message = failure.value.message.strip()
    assert "\n" not in message and "Traceback" not in message
    assert "reserved" in message and "'robert'" in message
    assert _rows(renamed) == before


def test_a_send_under_the_current_name_still_goes_through(driver: Driver, renamed: Path) -> None:
    before = _rows(renamed)
    driver.send("dev", "alice", "robert", "hello")
    assert len(_rows(renamed)) == len(before) + 1  # one message, no new member
