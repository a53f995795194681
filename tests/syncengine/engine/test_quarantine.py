"""Blocked envelopes made visible (issue #15, item 4): ``quarantine list``,
a ``status`` that is not ``ok`` while messages are blocked, and the remedy."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from syncengine.cli import main
from syncengine.cli.engine_commands import QUARANTINE_STATUSES
from syncengine.engine import Engine
from syncengine.local_store import Store
from syncengine.ops.quarantine import BLOCKING_STATUSES
from syncengine.store import InvalidInput
from tests.syncengine.engine.fakerelay import FakeRelay
from wire.age_keys import X25519Identity


def _sealed_reader(
    tmp_path: Path, make_engine: Callable[..., Engine], count: int = 3
) -> tuple[Engine, Path]:
    """A reader without its identity, after pulling ``count`` age-v1 messages."""
    alice, bob = X25519Identity.generate(), X25519Identity.generate()
    recipients = tmp_path / "recipients.txt"
    recipients.write_text(f"{alice.recipient.to_string()}\n{bob.recipient.to_string()}\n")
    key = tmp_path / "alice.key"
    key.write_text(alice.to_secret_string() + "\n")
    key.chmod(0o600)
    bob_key = tmp_path / "bob.key"
    bob_key.write_text(bob.to_secret_string() + "\n")
    bob_key.chmod(0o600)
    epoch = {"key_id": "epoch-1", "recipients_file": str(recipients)}
    writer = make_engine("a", identity_file=str(key), **epoch)
    reader = make_engine("b", **epoch)
    with Store(writer.store.path) as store:
        for i in range(count):
            store.send("crew", "alice", "bob", f"secret {i}")
    writer.push()
    reader.pull()
    return reader, bob_key


def test_each_blocked_envelope_is_listed_oldest_first_with_its_status(
    tmp_path: Path, make_engine: Callable[..., Engine], relay: FakeRelay
) -> None:
    reader, _ = _sealed_reader(tmp_path, make_engine)
    rows = reader.quarantine()
    assert [r.server_seq for r in rows] == [1, 2, 3]
    assert {r.status for r in rows} == {"pending_key"}
    assert [r.wire_id for r in rows] == [m.id for m in relay.messages]
    assert all(r.cipher == "age-v1" and r.key_id == "epoch-1" for r in rows)


def test_the_list_pages_by_server_seq(tmp_path: Path, make_engine: Callable[..., Engine]) -> None:
    reader, _ = _sealed_reader(tmp_path, make_engine)
    first = reader.quarantine(limit=2)
    rest = reader.quarantine(after=first[-1].server_seq, limit=2)
    assert [r.server_seq for r in first + rest] == [1, 2, 3]


def test_a_status_filter_outside_the_blocking_statuses_is_refused(
    tmp_path: Path, make_engine: Callable[..., Engine]
) -> None:
    reader, _ = _sealed_reader(tmp_path, make_engine, count=1)
    with pytest.raises(InvalidInput, match="status"):
        reader.quarantine(status="imported")
    assert reader.quarantine(status="authentication_failed") == ()


def test_status_is_blocked_not_ok_while_messages_wait_and_names_the_remedy(
    tmp_path: Path, make_engine: Callable[..., Engine]
) -> None:
    reader, bob_key = _sealed_reader(tmp_path, make_engine)
    obj = reader.status().to_obj()
    assert obj["state"] == "blocked"
    (blocked,) = obj["messages_blocked"]
    assert (blocked["status"], blocked["count"]) == ("pending_key", 3)
    assert "epoch epoch-1" in blocked["remediation"] and "reprocess" in blocked["remediation"]
    reader.set_identity(bob_key)
    assert reader.reprocess().outcomes == {"imported": 3}
    after = reader.status().to_obj()
    assert after["state"] == "ok" and after["messages_blocked"] == []


def test_quarantine_list_through_the_cli_shows_rows_and_the_remedy(
    tmp_path: Path,
    make_engine: Callable[..., Engine],
    capsys: pytest.CaptureFixture[str],
) -> None:
    reader, _ = _sealed_reader(tmp_path, make_engine, count=2)
    store = str(reader.store.path)
    assert main(["quarantine", "list", "--store", store, "--json", "--limit", "1"]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert [row["server_seq"] for row in obj["blocked"]] == ["1"]
    assert obj["next_after"] == "1"
    assert "pending_key" in obj["remediation"]
    assert main(["quarantine", "list", "--store", store, "--after", "1"]) == 0
    text = capsys.readouterr().out
    assert "pending_key" in text and "syncengine security identity" in text


def test_the_cli_offers_exactly_the_blocking_statuses() -> None:
    assert QUARANTINE_STATUSES == BLOCKING_STATUSES


def test_the_blocked_count_matches_the_listed_envelopes(
    tmp_path: Path, make_engine: Callable[..., Engine]
) -> None:
    from syncengine.ops.quarantine import count_blocked
    from syncengine.store.connection import read_transaction

    reader, _ = _sealed_reader(tmp_path, make_engine)
    listed = len(reader.quarantine())
    with read_transaction(reader.store.conn, reader.store.path) as conn:
        assert count_blocked(conn, reader.connection.binding_pk) == listed == 3
