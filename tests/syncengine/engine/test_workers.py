"""Worker processes for large age-v1 batches (syncengine/engine/workers.py):
the pool seals and opens exactly as the engine's own process would, declines
(``None``) whenever it cannot work so the caller redoes the batch in-process,
and an engine with workers moves a large backlog through the fake relay
exactly once."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from syncengine.engine import Engine
from syncengine.engine.errors import ConfigurationError
from syncengine.engine.evaluation import Verdict, judge
from syncengine.engine.identity import read_identity
from syncengine.engine.state import ConnectionRecord
from syncengine.engine.workers import (
    MAX_WORKERS,
    MIN_PARALLEL_BATCH,
    WORKERS_ENV,
    Workers,
    worker_count,
)
from syncengine.ids import new_uuid7
from syncengine.local_store import Store
from syncengine.ops.prepare_push import BlockedSeal, LocalMessage, Sealed, seal_local
from syncengine.ops.sync_records import SyncPrepare
from syncengine.store.messages import OutgoingMessage
from tests.syncengine.engine.fake_connect import FAST, connect_fake
from tests.syncengine.engine.fakerelay import FakeRelay
from tests.syncengine.engine.worker_support import (
    AT,
    KEY_ID,
    Item,
    Keys,
    judge_items,
    make_connection,
    make_keys,
    sealed_to,
)
from wire.envelope import Envelope
from wire.limits import ENVELOPE_VERSION, MAX_BLOB_BYTES
from wire.message import Message
from wire.outcome import Importable
from wire.profiles import Binding, OpenContext, open_envelope

#: Large enough for the engine to hand the batch to its workers.
BACKLOG = MIN_PARALLEL_BATCH + 50


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    return make_keys(tmp_path_factory.mktemp("keys"))


@pytest.fixture(scope="module")
def connection(keys: Keys) -> ConnectionRecord:
    """Bob's side of the epoch: his identity file opens what is sealed to it."""
    return make_connection(keys, keys.bob_file)


@pytest.fixture(scope="module")
def pool(connection: ConnectionRecord) -> Iterator[Workers]:
    workers = Workers(connection, 2)
    yield workers
    workers.close()


def local_messages(count: int, body: str = "note") -> list[LocalMessage]:
    return [
        LocalMessage(i + 1, new_uuid7(), f"{body} {i}", AT, "alice", "bob") for i in range(count)
    ]


def age_request(keys: Keys, max_blob_bytes: int = MAX_BLOB_BYTES) -> SyncPrepare:
    return SyncPrepare(ENVELOPE_VERSION, "age-v1", KEY_ID, keys.recipients, max_blob_bytes, True)


def open_as(connection: ConnectionRecord, identity: object, wire_id: str, env: Envelope) -> Any:
    """Open an envelope the way evaluation.judge does, bound to ``wire_id``."""
    ctx = OpenContext(
        binding=Binding(connection.remote_team_id, wire_id, connection.protocol_version),
        allowed_ciphers=frozenset({"age-v1"}),
        trusted_key_id=KEY_ID,
        identities={KEY_ID: identity},
        max_blob_bytes=MAX_BLOB_BYTES,
    )
    return open_envelope(env, ctx)


# -- worker_count ----------------------------------------------------------------------


def test_worker_count_zero_turns_the_pool_off() -> None:
    assert worker_count({WORKERS_ENV: "0"}) == 0


def test_worker_count_uses_the_number_set() -> None:
    assert MAX_WORKERS >= 3
    assert worker_count({WORKERS_ENV: "3"}) == 3


def test_worker_count_is_capped_at_max_workers() -> None:
    assert worker_count({WORKERS_ENV: str(MAX_WORKERS + 5)}) == MAX_WORKERS


def test_worker_count_negative_means_no_workers() -> None:
    assert worker_count({WORKERS_ENV: "-2"}) == 0


def test_worker_count_not_a_number_means_no_workers_without_raising() -> None:
    assert worker_count({WORKERS_ENV: "abc"}) == 0


def test_worker_count_unset_is_none_or_between_two_and_max_workers() -> None:
    count = worker_count({})
    assert count == 0 or 2 <= count <= MAX_WORKERS


def test_worker_count_blank_is_the_same_as_unset() -> None:
    assert worker_count({WORKERS_ENV: "  "}) == worker_count({})


# -- sealing ---------------------------------------------------------------------------


def test_sealed_on_workers_opens_to_exactly_the_original_messages_in_order(
    pool: Workers, keys: Keys, connection: ConnectionRecord
) -> None:
    messages = local_messages(37)
    items = pool.seal(messages, age_request(keys), connection.key)
    assert items is not None and all(isinstance(item, Sealed) for item in items)
    assert [item.message for item in items] == messages
    for message, item in zip(messages, items, strict=True):
        assert isinstance(item, Sealed)
        env = item.envelope
        assert (env.v, env.cipher, env.key_id) == (ENVELOPE_VERSION, "age-v1", KEY_ID)
        for identity in (keys.alice, keys.bob):  # sealed to every recipient
            outcome = open_as(connection, identity, item.wire_id, env)
            assert isinstance(outcome, Importable)
            assert outcome.message == Message(
                message.body, message.at, message.sender, message.recipient
            )


def test_sealed_on_workers_is_bound_to_its_own_wire_id(
    pool: Workers, keys: Keys, connection: ConnectionRecord
) -> None:
    items = pool.seal(local_messages(2), age_request(keys), connection.key)
    assert items is not None
    first, second = items
    assert isinstance(first, Sealed) and isinstance(second, Sealed)
    swapped = open_as(connection, keys.bob, second.wire_id, first.envelope)
    assert not isinstance(swapped, Importable)


def test_sealed_on_workers_mints_a_distinct_wire_id_for_every_message(
    pool: Workers, keys: Keys, connection: ConnectionRecord
) -> None:
    items = pool.seal(local_messages(300), age_request(keys), connection.key)
    assert items is not None
    wire_ids = [item.wire_id for item in items if isinstance(item, Sealed)]
    assert len(wire_ids) == 300 and len(set(wire_ids)) == 300


def test_a_message_too_large_is_blocked_on_workers_exactly_as_in_process(
    pool: Workers, keys: Keys, connection: ConnectionRecord
) -> None:
    messages = [
        LocalMessage(1, new_uuid7(), "short", AT, "alice", "bob"),
        LocalMessage(2, new_uuid7(), "x" * 4000, AT, "alice", "bob"),
        LocalMessage(3, new_uuid7(), "also short", AT, "alice", "bob"),
    ]
    request = age_request(keys, max_blob_bytes=2000)
    items = pool.seal(messages, request, connection.key)
    local = [seal_local(m, request, connection.key) for m in messages]
    assert items is not None
    assert [type(item) for item in items] == [Sealed, BlockedSeal, Sealed]
    assert [type(item) for item in local] == [Sealed, BlockedSeal, Sealed]
    assert items[1] == local[1]  # same message, limit and reason


# -- opening ---------------------------------------------------------------------------


def in_process(items: list[Item], connection: ConnectionRecord) -> list[Verdict]:
    assert connection.identity_path is not None
    identity = read_identity(connection, Path(connection.identity_path))
    return [
        judge(e, w, seq, allowed, connection, lambda key_id: identity)
        for e, w, seq, allowed in items
    ]


def test_verdicts_from_workers_equal_the_in_process_verdicts(
    pool: Workers, keys: Keys, connection: ConnectionRecord
) -> None:
    items = judge_items(keys, connection)
    verdicts = pool.judge(items)()
    expected = in_process(items, connection)
    assert verdicts == expected
    statuses = [status for status, _, _ in expected]
    # The batch is not vacuous: it imports, and it blocks for several reasons.
    assert statuses[:6] == ["importable"] * 6 and statuses[10] == "importable"
    assert statuses[9] == "policy_violation" and statuses[11] == "policy_violation"
    assert len(set(statuses)) >= 3


def test_verdicts_from_workers_carry_the_opened_messages_in_order(
    pool: Workers, keys: Keys, connection: ConnectionRecord
) -> None:
    items = [sealed_to(connection, f"m{i}", keys.recipients) for i in range(50)]
    verdicts = pool.judge([(e, w, 1, frozenset({"age-v1"})) for e, w in items])()
    assert verdicts is not None
    assert [(s, r) for s, r, _ in verdicts] == [("importable", None)] * 50
    assert [p.body for _, _, p in verdicts if p is not None] == [f"m{i}" for i in range(50)]


def test_an_empty_batch_gives_no_verdicts(pool: Workers) -> None:
    assert pool.judge([])() == []


def test_workers_without_an_identity_leave_age_pending_key_as_in_process(keys: Keys) -> None:
    connection = make_connection(keys, None)
    workers = Workers(connection, 2)
    try:
        items = [sealed_to(connection, f"m{i}", keys.recipients) for i in range(4)]
        allowed = frozenset({"age-v1"})
        verdicts = workers.judge([(e, w, 1, allowed) for e, w in items])()
        expected = [judge(e, w, 1, allowed, connection, lambda key_id: None) for e, w in items]
        assert verdicts == expected
        assert [status for status, _, _ in expected] == ["pending_key"] * 4
        assert workers.available
    finally:
        workers.close()


# -- degrading -------------------------------------------------------------------------


def test_workers_without_processes_are_unavailable_and_decline_every_job(
    keys: Keys, connection: ConnectionRecord
) -> None:
    workers = Workers(connection, 0)
    try:
        assert not workers.available
        assert workers.seal(local_messages(3), age_request(keys), connection.key) is None
        env, wire_id = sealed_to(connection, "x", keys.recipients)
        assert workers.judge([(env, wire_id, 1, frozenset({"age-v1"}))])() is None
    finally:
        workers.close()


def test_a_pool_that_cannot_start_declines_and_is_never_started_again(
    monkeypatch: pytest.MonkeyPatch, keys: Keys, connection: ConnectionRecord
) -> None:
    starts: list[int] = []

    def broken_start(self: Workers) -> Any:
        starts.append(1)
        raise OSError("no processes for you")

    monkeypatch.setattr(Workers, "_start", broken_start)
    workers = Workers(connection, 2)
    try:
        assert workers.available
        assert workers.seal(local_messages(3), age_request(keys), connection.key) is None
        assert not workers.available
        env, wire_id = sealed_to(connection, "x", keys.recipients)
        assert workers.judge([(env, wire_id, 1, frozenset({"age-v1"}))])() is None
        assert starts == [1]
    finally:
        workers.close()


def test_a_killed_worker_degrades_the_pool_to_none_instead_of_raising(
    keys: Keys, connection: ConnectionRecord
) -> None:
    workers = Workers(connection, 1)
    try:
        assert workers.seal(local_messages(2), age_request(keys), connection.key) is not None
        executor = workers._pool
        assert executor is not None
        for pid in list(executor._processes):  # the worker this test started
            os.kill(pid, signal.SIGKILL)
        items = [sealed_to(connection, f"m{i}", keys.recipients) for i in range(4)]
        assert workers.judge([(e, w, 1, frozenset({"age-v1"})) for e, w in items])() is None
        assert not workers.available
        assert workers.seal(local_messages(2), age_request(keys), connection.key) is None
    finally:
        workers.close()


def test_a_worker_that_cannot_read_the_identity_degrades_to_none(
    tmp_path: Path, keys: Keys
) -> None:
    connection = make_connection(keys, tmp_path / "missing.key")
    workers = Workers(connection, 2)
    try:
        items = [sealed_to(connection, f"m{i}", keys.recipients) for i in range(4)]
        assert workers.judge([(e, w, 1, frozenset({"age-v1"})) for e, w in items])() is None
        assert not workers.available
    finally:
        workers.close()


# -- the engine ------------------------------------------------------------------------


@pytest.fixture
def engines(tmp_path: Path, relay: FakeRelay) -> Iterator[Callable[..., Engine]]:
    """Connected stores (team ``crew``, members alice and bob) with engines that
    may use ``workers`` processes; built as conftest's ``make_engine`` does."""
    made: list[Engine] = []

    def make(name: str, *, workers: int, **kw: Any) -> Engine:
        directory = tmp_path / name
        directory.mkdir()
        store = directory / "store.db"
        connect_fake(relay, store, **kw)
        engine = Engine(
            store,
            transport=relay.transport(),
            client_config=FAST,
            sleep=lambda s: None,
            workers=workers,
        )
        made.append(engine)
        return engine

    yield make
    for engine in made:
        engine.close()


@pytest.fixture
def spied(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[int]]:
    """Batch sizes the engine handed to Workers.seal and Workers.judge."""
    calls: dict[str, list[int]] = {"seal": [], "judge": []}
    real_seal, real_judge = Workers.seal, Workers.judge

    def seal_spy(self: Workers, messages: Any, request: Any, key: Any) -> Any:
        calls["seal"].append(len(messages))
        return real_seal(self, messages, request, key)

    def judge_spy(self: Workers, items: Any) -> Any:
        calls["judge"].append(len(items))
        return real_judge(self, items)

    monkeypatch.setattr(Workers, "seal", seal_spy)
    monkeypatch.setattr(Workers, "judge", judge_spy)
    return calls


def write_backlog(engine: Engine, count: int = BACKLOG) -> None:
    with Store(engine.store.path) as store:
        store.send_many(
            OutgoingMessage("crew", "alice", "bob", f"backlog {i}") for i in range(count)
        )


def contents(engine: Engine) -> list[tuple[str, str, str, str]]:
    with Store(engine.store.path) as store:
        return [(m.sender, m.recipient, m.body, m.at) for m in store.history("crew")]


def test_engine_with_workers_moves_a_large_age_backlog_exactly_once(
    tmp_path: Path,
    engines: Callable[..., Engine],
    relay: FakeRelay,
    spied: dict[str, list[int]],
) -> None:
    keys = make_keys(tmp_path)
    writer = engines("a", workers=2, identity_file=str(keys.alice_file), **keys.epoch)
    reader = engines("b", workers=2, identity_file=str(keys.bob_file), **keys.epoch)
    write_backlog(writer)

    pushed = writer.push_all()
    assert (pushed.cipher, pushed.stored, pushed.duplicate) == ("age-v1", BACKLOG, 0)
    assert spied["seal"] == [BACKLOG]
    assert [m.envelope.cipher for m in relay.messages] == ["age-v1"] * BACKLOG
    assert len({m.id for m in relay.messages}) == BACKLOG

    pulled = reader.pull()
    assert pulled.outcomes == {"imported": BACKLOG}
    assert pulled.transport_cursor == BACKLOG
    assert spied["judge"] == [BACKLOG]
    assert contents(reader) == contents(writer)
    assert sorted(body for _, _, body, _ in contents(reader)) == sorted(
        f"backlog {i}" for i in range(BACKLOG)
    )
    # The echo reconciles on the writer (on its workers too); nothing twice.
    assert writer.pull().outcomes == {"reconciled": BACKLOG}
    assert reader.pull().outcomes == {}
    assert len(contents(writer)) == len(contents(reader)) == BACKLOG


def test_engine_with_workers_imports_the_same_as_an_engine_without(
    tmp_path: Path,
    engines: Callable[..., Engine],
    spied: dict[str, list[int]],
) -> None:
    keys = make_keys(tmp_path)
    writer = engines("a", workers=0, identity_file=str(keys.alice_file), **keys.epoch)
    parallel = engines("b", workers=2, identity_file=str(keys.bob_file), **keys.epoch)
    serial = engines("c", workers=0, identity_file=str(keys.bob_file), **keys.epoch)
    write_backlog(writer)
    writer.push_all()
    assert spied["seal"] == []  # sealed in-process

    assert parallel.pull().outcomes == serial.pull().outcomes == {"imported": BACKLOG}
    assert spied["judge"] == [BACKLOG]  # only the parallel engine used workers
    assert contents(parallel) == contents(serial) == contents(writer)
    assert parallel.status().sync.quarantine == serial.status().sync.quarantine


def test_engine_whose_pool_cannot_start_still_moves_the_backlog_in_process(
    tmp_path: Path,
    engines: Callable[..., Engine],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken_start(self: Workers) -> Any:
        raise OSError("no processes for you")

    monkeypatch.setattr(Workers, "_start", broken_start)
    keys = make_keys(tmp_path)
    writer = engines("a", workers=2, identity_file=str(keys.alice_file), **keys.epoch)
    reader = engines("b", workers=2, identity_file=str(keys.bob_file), **keys.epoch)
    write_backlog(writer)

    assert writer.push_all().stored == BACKLOG
    assert reader.pull().outcomes == {"imported": BACKLOG}
    assert contents(reader) == contents(writer)


def test_an_unreadable_identity_fails_the_pull_in_the_engine_and_keeps_the_cursor(
    tmp_path: Path,
    engines: Callable[..., Engine],
    spied: dict[str, list[int]],
) -> None:
    keys = make_keys(tmp_path)
    writer = engines("a", workers=2, identity_file=str(keys.alice_file), **keys.epoch)
    reader = engines("b", workers=2, identity_file=str(keys.bob_file), **keys.epoch)
    write_backlog(writer)
    writer.push_all()
    secret = keys.bob_file.read_bytes()
    keys.bob_file.unlink()  # after connect validated it, before the engine reads it

    with pytest.raises(ConfigurationError, match="no identity file"):
        reader.pull()
    status = reader.status()
    assert status.sync.binding is not None and status.sync.binding.transport_cursor == 0
    assert status.engine.last_error_code == "configuration"
    assert contents(reader) == []
    assert spied["judge"] == []  # refused before any envelope reached a worker

    keys.bob_file.write_bytes(secret)
    keys.bob_file.chmod(0o600)
    assert reader.pull().outcomes == {"imported": BACKLOG}
    assert spied["judge"] == [BACKLOG]  # and the pool was not given up on
    assert contents(reader) == contents(writer)
