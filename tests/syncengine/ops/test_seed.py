"""``seed`` (syncengine/ops/seed.py; specs/engine.md
§7.2): a teammate's backup fills in the held rows it maps to the same
sequence and envelope — all of them in one transaction, or none when one
contradicts what this machine pulled."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from syncengine.engine import Engine
from syncengine.local_store import Store
from syncengine.ops.seed import held_wire_ids, read_backup, seed_history
from syncengine.store import InvalidInput
from tests.support.before_join import OLD, WRITER, joined_late, key_file
from tests.syncengine.engine.fake_connect import engine_factory
from tests.syncengine.engine.fakerelay import FakeRelay

AT = "2026-07-20T06:30:00.000000Z"


@pytest.fixture
def make_engine(tmp_path: Path) -> Iterator[Callable[..., Engine]]:
    relay = FakeRelay()
    with engine_factory(tmp_path, relay) as make:
        yield make


def _seed(reader: Engine, backup: Path) -> Any:
    key = reader.connection.key
    with Store(backup) as source:
        found = read_backup(source.conn, key, held_wire_ids(reader.store.conn, key))
    return seed_history(reader.store.conn, reader.store.path, key, found, AT)


def _writer_backup(tmp_path: Path) -> Path:
    """The writer's backup (machine "a" of :func:`joined_late`)."""
    backup = tmp_path / "a.backup"
    with Store(tmp_path / "a" / "store.db") as store:
        store.backup(backup)
    return backup


def _rows(reader: Engine) -> list[tuple[Any, ...]]:
    return reader.store.conn.execute(
        "SELECT wire_id, status, local_position FROM sync_quarantine ORDER BY server_seq"
    ).fetchall()


def test_every_held_row_the_backup_maps_is_imported_at_its_own_position(
    tmp_path: Path, make_engine: Callable[..., Engine]
) -> None:
    reader, _ = joined_late(tmp_path, make_engine)
    result = _seed(reader, _writer_backup(tmp_path))
    assert (result.seeded, result.unmatched) == (2, 0)
    rows = _rows(reader)
    assert [status for _, status, _ in rows] == ["imported", "imported"]
    history = {m.body for m in Store(reader.store.path).history("crew")}
    assert history == {"before 0", "before 1"}
    assert all(position is not None for _, _, position in rows)


def test_a_backup_mapping_a_held_wire_id_to_another_envelope_refuses_the_whole_seed(
    tmp_path: Path, make_engine: Callable[..., Engine]
) -> None:
    reader, _ = joined_late(tmp_path, make_engine)
    backup = _writer_backup(tmp_path)
    with Store(backup):  # brought to this schema first, then tampered with
        pass
    conn = apsw.Connection(str(backup))
    conn.execute("UPDATE sync_push SET blob = blob || 'AAAA' WHERE server_seq = 2")
    conn.close()
    before = _rows(reader)
    with pytest.raises(InvalidInput, match="another sequence or envelope"):
        _seed(reader, backup)
    assert _rows(reader) == before
    assert Store(reader.store.path).history("crew") == []


def test_a_backup_of_another_stream_is_refused(
    tmp_path: Path, make_engine: Callable[..., Engine]
) -> None:
    reader, _ = joined_late(tmp_path, make_engine)
    other = tmp_path / "other.db"
    with Store(other) as store:
        store.init()
        store.create_team("crew", ["alice", "bob"])
    with pytest.raises(InvalidInput, match="holds no history of this team's stream"):
        _seed(reader, other)


def test_an_integrity_outcome_is_never_filled_in_from_a_backup(
    tmp_path: Path, make_engine: Callable[..., Engine]
) -> None:
    reader, _ = joined_late(tmp_path, make_engine)
    reader.store.conn.execute(
        "UPDATE sync_quarantine SET status = 'manifest_mismatch' WHERE server_seq = 1"
    )
    result = _seed(reader, _writer_backup(tmp_path))
    assert (result.seeded, result.unmatched) == (1, 0)
    assert [status for _, status, _ in _rows(reader)] == ["manifest_mismatch", "imported"]


def test_a_pending_key_row_of_a_recipient_is_seeded_too(
    tmp_path: Path, make_engine: Callable[..., Engine]
) -> None:
    writer_key = key_file(tmp_path, "writer", WRITER)
    recipients = tmp_path / "epoch-1.recipients"
    recipients.write_text(WRITER.recipient.to_string() + "\n" + OLD.recipient.to_string() + "\n")
    epoch = {"key_id": "epoch-1", "recipients_file": str(recipients)}
    writer = make_engine("a", identity_file=str(writer_key), **epoch)
    reader = make_engine("b", **epoch)  # a recipient without its identity file
    with Store(writer.store.path) as store:
        store.send("crew", "alice", "bob", "waiting for a key")
    writer.push()
    reader.pull()
    assert [s for _, s, _ in _rows(reader)] == ["pending_key"]
    assert _seed(reader, _writer_backup(tmp_path)).seeded == 1
    assert [m.body for m in Store(reader.store.path).history("crew")] == ["waiting for a key"]


def test_seeded_messages_are_never_push_candidates(
    tmp_path: Path, make_engine: Callable[..., Engine]
) -> None:
    reader, _ = joined_late(tmp_path, make_engine)
    _seed(reader, _writer_backup(tmp_path))
    pushed = reader.push()
    assert (pushed.candidates, pushed.stored) == (0, 0)
