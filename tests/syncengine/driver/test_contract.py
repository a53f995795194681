"""The storage contract (driver-interface §2), every operation, run through
all three doors — the Python API, ``syncengine driver`` and the sourced bash
file — with the same cases, on stores where no team or agent was ever
registered."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from tests.syncengine.driver.contract import (
    BashDriver,
    ContractFailure,
    PythonDriver,
    make_driver,
)
from tests.syncengine.driver.doors import DOORS

Driver = PythonDriver | BashDriver

UUID7 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
AT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def ids(records: list[dict[str, object]]) -> list[object]:
    return [r["id"] for r in records]


def snapshot(path: Path) -> list[tuple[object, ...]]:
    """Every stored row, for 'nothing changed' assertions."""
    db = sqlite3.connect(path)
    try:
        rows: list[tuple[object, ...]] = []
        for table in ("teams", "members", "messages", "message_reads", "read_frontiers"):
            rows += [(table, *r) for r in db.execute(f"SELECT * FROM {table} ORDER BY 1")]
        return rows
    finally:
        db.close()


def test_init_is_idempotent_and_store_exists_only_after_init(
    driver_kind: str, tmp_path: Path
) -> None:
    path = tmp_path / "fresh" / "store.db"
    drv = make_driver(driver_kind, path)
    assert drv.store_exists() is False
    assert not path.exists(), "store_exists must not create a store"
    drv.init()
    drv.init()
    assert drv.store_exists() is True
    drv.check()


def test_send_returns_uuid7_and_unread_record_has_the_v1_shape(driver: Driver) -> None:
    message_id = driver.send("dev", "alice", "bob", "hello\nworld $(rm -rf /) 'q' \"dq\" ✓")
    assert UUID7.fullmatch(message_id)
    [record] = driver.list_unread("dev", "bob")
    assert list(record) == ["type", "id", "team", "from", "to", "body", "at"]
    assert record["type"] == "message_sent"
    assert record["id"] == message_id
    assert (record["team"], record["from"], record["to"]) == ("dev", "alice", "bob")
    assert record["body"] == "hello\nworld $(rm -rf /) 'q' \"dq\" ✓"
    assert AT.fullmatch(str(record["at"]))


def test_list_unread_is_recipient_scoped_and_limit_returns_the_oldest(driver: Driver) -> None:
    first = driver.send("dev", "alice", "bob", "one")
    driver.send("dev", "alice", "carol", "not for bob")
    second = driver.send("dev", "carol", "bob", "two")
    driver.send("ops", "alice", "dave", "other team")
    assert ids(driver.list_unread("dev", "bob")) == [first, second]
    assert ids(driver.list_unread("dev", "bob", limit=1)) == [first]
    assert driver.list_unread("ops", "alice") == []


def test_mark_read_batch_hides_only_that_recipients_copy_and_is_idempotent(
    driver: Driver,
    seed: PythonDriver,
) -> None:
    to_bob = seed.send("dev", "alice", "bob", "b")
    to_carol = seed.send("dev", "alice", "carol", "c")
    driver.mark_read_batch("dev", "bob", to_bob)
    driver.mark_read_batch("dev", "bob", to_bob)
    assert driver.list_unread("dev", "bob") == []
    assert ids(driver.list_unread("dev", "carol")) == [to_carol]


def test_read_cursor_defaults_to_zero_and_consume_never_crosses_an_unread_hole(
    driver: Driver,
    seed: PythonDriver,
) -> None:
    assert driver.read_cursor_get("dev", "bob") == "0"
    m1 = seed.send("dev", "alice", "bob", "1")
    seed.send("dev", "alice", "bob", "2")  # never displayed: a hard gap
    m3 = seed.send("dev", "alice", "bob", "3")
    tip = driver.watch_tip("dev:bob")
    driver.read_cursor_consume("dev", "bob", tip, m1, m3)
    assert driver.read_cursor_get("dev", "bob") == "1"
    assert [r["body"] for r in driver.list_unread("dev", "bob")] == ["2"]


def test_consume_advances_across_off_subscription_traffic_to_the_cursor(
    driver: Driver, seed: PythonDriver
) -> None:
    m1 = seed.send("dev", "alice", "bob", "for bob")
    seed.send("dev", "alice", "carol", "for carol")
    seed.send("ops", "alice", "dave", "elsewhere")
    tip = driver.watch_tip("dev:bob")
    driver.read_cursor_consume("dev", "bob", tip, m1)
    assert driver.read_cursor_get("dev", "bob") == tip == "3"


def test_consume_is_a_max_merge_that_never_moves_backwards(
    driver: Driver, seed: PythonDriver
) -> None:
    m1 = seed.send("dev", "alice", "bob", "1")
    driver.read_cursor_consume("dev", "bob", "1", m1)
    driver.read_cursor_consume("dev", "bob", "0")
    assert driver.read_cursor_get("dev", "bob") == "1"


def test_watch_after_delivers_subscribed_messages_and_a_trailing_tip_cursor(
    driver: Driver,
    seed: PythonDriver,
) -> None:
    start = driver.watch_tip("dev:bob", "ops:dave")
    a = seed.send("dev", "alice", "bob", "a")
    seed.send("dev", "alice", "carol", "off")
    b = seed.send("ops", "alice", "dave", "b")
    records, cursor = driver.watch_after(start, "dev:bob", "ops:dave")
    assert ids(records) == [a, b]
    assert cursor == "3"
    assert driver.watch_after(cursor, "dev:bob") == ([], "3")


def test_watch_after_cursor_advances_when_only_off_subscription_traffic_arrived(
    driver: Driver,
    seed: PythonDriver,
) -> None:
    start = driver.watch_tip("dev:bob")
    seed.send("dev", "alice", "carol", "x")
    seed.send("dev", "carol", "alice", "y")
    records, cursor = driver.watch_after(start, "dev:bob")
    assert records == []
    assert int(cursor) > int(start)


def test_history_returns_most_recent_n_oldest_first(driver: Driver, seed: PythonDriver) -> None:
    sent = [seed.send("dev", "alice", "bob", str(i)) for i in range(4)]
    assert ids(driver.history("dev")) == sent
    assert ids(driver.history("dev", limit=2)) == sent[2:]


def test_history_for_an_agent_covers_sent_and_received_only(
    driver: Driver, seed: PythonDriver
) -> None:
    to_carol = seed.send("dev", "alice", "carol", "x")
    seed.send("dev", "alice", "bob", "y")
    from_carol = seed.send("dev", "carol", "bob", "z")
    assert ids(driver.history("dev", "carol")) == [to_carol, from_carol]
    assert ids(driver.history("dev", "carol", limit=1)) == [from_carol]
    assert len(driver.history("dev", "")) == 3


def test_export_then_import_into_a_fresh_store_reproduces_every_read(
    driver: Driver, seed: PythonDriver, driver_kind: str, tmp_path: Path
) -> None:

    m1 = seed.send("dev", "alice", "bob", "first")
    seed.send("dev", "bob", "alice", "second")
    seed.mark_read_batch("dev", "bob", m1)
    exported = tmp_path / "log.jsonl"
    driver.export(exported)
    lines = exported.read_text().splitlines()
    assert [line.split('"type":"')[1].split('"')[0] for line in lines] == [
        "message_sent",
        "message_sent",
        "message_read",
    ]
    fresh = tmp_path / "fresh.db"  # never initialized: import creates it
    other = make_driver(driver_kind, fresh)
    other.import_(exported, "dev")  # the host's <team> <file> form
    other.import_(exported)  # the spec's <file> form; replaying is idempotent
    again = PythonDriver(fresh)
    assert again.history("dev") == seed.history("dev")
    for agent in ("alice", "bob"):
        assert again.list_unread("dev", agent) == seed.list_unread("dev", agent)
    reexported = tmp_path / "again.jsonl"
    other.export(reexported, "dev")
    assert reexported.read_bytes() == exported.read_bytes(), "the event log is reproduced"


def test_compact_keeps_every_read_answer(driver: Driver, seed: PythonDriver) -> None:
    m1 = seed.send("dev", "alice", "bob", "1")
    m2 = seed.send("dev", "alice", "bob", "2")
    driver.mark_read_batch("dev", "bob", m2)
    before = (
        driver.list_unread("dev", "bob"),
        driver.history("dev"),
        driver.read_cursor_get("dev", "bob"),
    )
    driver.compact()
    driver.compact()
    after = (
        driver.list_unread("dev", "bob"),
        driver.history("dev"),
        driver.read_cursor_get("dev", "bob"),
    )
    assert before == after
    assert ids(after[0]) == [m1]


BAD_INPUT = [
    ("send", ("bad:team", "alice", "bob", "x")),
    ("send", ("dev", "alice", "a/b", "x")),
    ("send", ("dev", "alice", "bob", "")),
    ("list_unread", ("dev", "no:body")),
    ("mark_read_batch", ("dev", "bob", "line\nbreak")),
    ("read_cursor_consume", ("dev", "bob", "-1")),
    ("read_cursor_consume", ("dev", "bob", "abc")),
    ("watch_after", ("0", "devbob")),
    ("watch_tip", ("dev:gh:ost",)),
    ("history", ("-team",)),
]
#: The process doors repeat a representative subset (each call spawns one).
PROCESS_BAD_INPUT = {0, 2, 4, 5, 7}


@pytest.mark.parametrize(
    ("kind", "op", "args"),
    [("python", op, args) for op, args in BAD_INPUT]
    + [
        (kind, *BAD_INPUT[i])
        for kind in DOORS
        if kind != "python"
        for i in sorted(PROCESS_BAD_INPUT)
    ],
    ids=lambda v: v if isinstance(v, str) else "-".join(v)[:40],
)
def test_bad_input_is_a_runtime_error_and_changes_nothing(
    tmp_path: Path, kind: str, op: str, args: tuple[str, ...]
) -> None:
    from syncengine.local_store import Store

    path = tmp_path / "store.db"
    with Store(path) as store:
        store.send("dev", "alice", "bob", "existing")
    driver: Driver = make_driver(kind, path)
    before = snapshot(path)
    with pytest.raises(ContractFailure) as failure:
        getattr(driver, op)(*args)
    assert failure.value.status == "runtime_error"
    assert failure.value.message.strip()
    assert snapshot(path) == before


def test_body_over_the_limit_is_refused_by_name(
    driver: Driver, seed: PythonDriver, store_path: Path
) -> None:
    seed.send("dev", "alice", "bob", "existing")
    before = snapshot(store_path)
    with pytest.raises(ContractFailure) as failure:
        driver.send("dev", "alice", "bob", "x" * 1_000_001)
    assert failure.value.status == "runtime_error"
    assert "1000000" in failure.value.message
    assert snapshot(store_path) == before


def test_truncated_import_is_refused_and_imports_nothing(
    driver: Driver, seed: PythonDriver, store_path: Path, tmp_path: Path
) -> None:
    seed.send("dev", "alice", "bob", "m")
    exported = tmp_path / "log.jsonl"
    driver.export(exported)
    whole = exported.read_bytes()
    before = snapshot(store_path)
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_bytes(
        whole + b'{"type":"message_sent","id":"01a229f4-8606-7572-b1a5-9d920be46999","team":"d'
    )
    with pytest.raises(ContractFailure) as failure:
        driver.import_(truncated)
    assert failure.value.status == "runtime_error"
    assert "truncated" in failure.value.message
    assert snapshot(store_path) == before


def test_corrupted_database_file_reports_corrupt_state(
    driver: Driver, seed: PythonDriver, store_path: Path
) -> None:
    seed.send("dev", "alice", "bob", "m")
    for suffix in ("-wal", "-shm"):
        Path(str(store_path) + suffix).unlink(missing_ok=True)
    store_path.write_bytes(b"this is not a database file, just garbage " * 200)
    with pytest.raises(ContractFailure) as failure:
        driver.list_unread("dev", "bob")
    assert failure.value.status == "corrupt_state"
    with pytest.raises(ContractFailure) as failure:
        driver.check()
    assert failure.value.status == "corrupt_state"
