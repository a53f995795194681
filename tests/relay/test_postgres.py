"""PostgreSQL-only rules: several relay processes on one database, faults, migrations.

Everything the backends share is proven by the contract suite (every other
relay test runs on both); this module holds what only a shared server
database can show: concurrent relay *processes*, a server that goes away,
an exhausted pool, a lock held elsewhere, and the versioned schema.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from starlette.testclient import TestClient

from relay.errors import OperatorError
from relay.http.app import create_app
from relay.secrets import utc_now
from relay.storage import location, pg_schema
from relay.storage.pg_schema import RELAY_SCHEMA
from relay.storage.postgres import PostgresRelayStore
from tests.relay.app_relay import make_relay
from tests.relay.backends import Backend, require_postgres
from tests.relay.forbidden_columns import FORBIDDEN_COLUMNS
from tests.relay.helpers import batch, issue_token, provision, team_headers
from tests.relay.pg_server import PgServer, start_server
from tests.support.cli import run_main
from tests.support.live_relay import LiveRelay, running_relay

RELAYS = 3
WRITERS = 8
BATCHES = 10
BATCH_SIZE = 5


def _exchange(relay: LiveRelay, token: str) -> httpx.Response:
    with relay.client() as client:
        return client.post(
            "/v1/pairing/exchange", json={"token": token}, headers={"Agmsg-Protocol-Version": "1"}
        )


@pytest.fixture
def relays(postgres_backend: Backend) -> Iterator[list[LiveRelay]]:
    with ExitStack() as stack:
        yield [
            stack.enter_context(running_relay(postgres_backend.location, "--no-access-log"))
            for _ in range(RELAYS)
        ]


def test_relay_processes_sharing_a_database_allocate_each_acked_message_once_gap_free(
    relays: list[LiveRelay], postgres_backend: Backend
) -> None:
    store = postgres_backend.open()
    try:
        team = provision(store)
        tokens = [issue_token(store, team.team_id, utc_now()) for _ in range(WRITERS)]
    finally:
        store.close()
    assert len({r.server_instance_id for r in relays}) == 1
    headers = []
    for index, token in enumerate(tokens):
        response = _exchange(relays[index % RELAYS], token)
        assert response.status_code == 200, response.text
        headers.append(team_headers(team.team_id, response.json()["credential"]))

    acked: dict[int, list[tuple[str, int]]] = {}
    errors: list[str] = []

    def write(index: int) -> None:
        out: list[tuple[str, int]] = []
        with relays[index % RELAYS].client() as client:
            for round_ in range(BATCHES):
                messages = batch(BATCH_SIZE)
                response = client.post(
                    "/v1/messages", json={"messages": messages}, headers=headers[index]
                )
                if response.status_code != 200:
                    errors.append(response.text)
                    return
                acks = response.json()["acks"]
                if round_ % 3 == 0:  # a client retrying the batch it already sent
                    again = client.post(
                        "/v1/messages", json={"messages": messages}, headers=headers[index]
                    ).json()["acks"]
                    if [(a["id"], a["server_seq"]) for a in again] != [
                        (a["id"], a["server_seq"]) for a in acks
                    ] or {a["disposition"] for a in again} != {"duplicate"}:
                        errors.append(f"retry changed its acks: {acks} -> {again}")
                out.extend((a["id"], int(a["server_seq"])) for a in acks)
        acked[index] = out

    threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    assert not errors, errors[:3]
    assert len(acked) == WRITERS
    total = WRITERS * BATCHES * BATCH_SIZE
    seqs = sorted(seq for acks in acked.values() for _, seq in acks)
    assert seqs == list(range(1, total + 1))  # gap-free, no sequence twice
    for acks in acked.values():
        mine = [seq for _, seq in acks]
        assert mine == sorted(mine)  # a writer's later commit got later sequences
    with relays[-1].client() as client:
        page = client.get(
            "/v1/messages", params={"after": "0", "limit": "1000"}, headers=headers[0]
        ).json()
    by_seq = {seq: wire_id for acks in acked.values() for wire_id, seq in acks}
    assert [(int(m["server_seq"]), m["id"]) for m in page["messages"]] == sorted(by_seq.items())
    assert not page["has_more"]


def test_one_pairing_token_exchanged_at_every_relay_at_once_pairs_exactly_once(
    relays: list[LiveRelay], postgres_backend: Backend
) -> None:
    store = postgres_backend.open()
    try:
        token = issue_token(store, provision(store).team_id, utc_now())
    finally:
        store.close()
    statuses: list[int] = []
    lock = threading.Lock()
    start = threading.Barrier(2 * RELAYS)

    def attempt(index: int) -> None:
        start.wait(timeout=30)
        status = _exchange(relays[index % RELAYS], token).status_code
        with lock:
            statuses.append(status)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(2 * RELAYS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(statuses) == [200] + [409] * (2 * RELAYS - 1)


# -- faults: always 503 with the protocol body, never a 500 ---------------------------------


def _assert_unavailable(response: Any, team_id: str | None, server_instance_id: str) -> None:
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["error"]["code"] == "unavailable"
    assert response.headers["retry-after"] == "1"
    assert response.headers["agmsg-protocol-version"] == "1"
    if team_id is not None:
        assert body["team_id"] == team_id
        assert body["server_instance_id"] == server_instance_id


def test_write_is_503_with_binding_while_another_session_holds_the_team_row(
    postgres_backend: Backend,
) -> None:
    for relay in make_relay(postgres_backend, busy_timeout_ms=200):
        device = relay.pair(provision(relay.store))
        messages = batch(2)
        with psycopg.connect(postgres_backend.location) as blocker:
            blocker.execute(f"SELECT * FROM {RELAY_SCHEMA}.teams FOR UPDATE")
            response = relay.client.post(
                "/v1/messages", json={"messages": messages}, headers=device.headers
            )
            _assert_unavailable(response, device.team.team_id, relay.store.server_instance_id)
        retried = relay.client.post(
            "/v1/messages", json={"messages": messages}, headers=device.headers
        )
        assert [a["server_seq"] for a in retried.json()["acks"]] == ["1", "2"]


def test_exhausted_pool_is_503_not_a_hang_or_a_500(postgres_backend: Backend) -> None:
    store = PostgresRelayStore(postgres_backend.location, busy_timeout_ms=200, pool_max_size=1)
    try:
        team = provision(store)
        token = issue_token(store, team.team_id, utc_now())
        with TestClient(create_app(store), base_url="http://127.0.0.1") as client:
            paired = client.post(
                "/v1/pairing/exchange",
                json={"token": token},
                headers={"Agmsg-Protocol-Version": "1"},
            ).json()
            headers = team_headers(team.team_id, paired["credential"])
            with store._pool.connection():  # the pool's only connection, held elsewhere
                response = client.get("/v1/capabilities", headers=headers)
                _assert_unavailable(response, None, store.server_instance_id)
            assert client.get("/v1/capabilities", headers=headers).status_code == 200
    finally:
        store.close()


def test_dropped_connections_are_replaced_without_an_error(postgres_backend: Backend) -> None:
    for relay in make_relay(postgres_backend):
        device = relay.pair(provision(relay.store))
        with psycopg.connect(postgres_backend.location, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        response = relay.client.post(
            "/v1/messages", json={"messages": batch(1)}, headers=device.headers
        )
        assert response.status_code == 200, response.text


def test_relay_sessions_commit_synchronously_whatever_the_server_default(
    postgres_backend: Backend,
) -> None:
    """The shared test server defaults to ``synchronous_commit=off``; an
    acknowledged message must still survive a server crash."""
    store = location.open_store(postgres_backend.location)
    try:
        with store._pool.connection() as conn:  # type: ignore[attr-defined]
            row = conn.execute("SHOW synchronous_commit").fetchone()
        assert row is not None and row[0] == "on"
    finally:
        store.close()


@pytest.fixture
def own_server() -> Iterator[PgServer]:
    """A server of this test's own, so stopping it disturbs no other test."""
    require_postgres()
    server = start_server()
    try:
        yield server
    finally:
        server.stop()


def test_database_down_is_503_everywhere_and_the_relay_recovers(own_server: PgServer) -> None:
    url = own_server.create_database()
    location.initialize(url)
    for relay in make_relay(Backend("postgres", url, initialized=True), busy_timeout_ms=300):
        device = relay.pair(provision(relay.store))
        sid = relay.store.server_instance_id
        own_server.halt()
        health = relay.client.get("/v1/health")
        assert health.status_code == 503
        assert health.json() == {
            "status": "unavailable",
            "protocol": {"supported_versions": [1]},
            "database": "unavailable",
        }
        post = relay.client.post(
            "/v1/messages", json={"messages": batch(1)}, headers=device.headers
        )
        _assert_unavailable(post, None, sid)  # authorization itself could not run
        own_server.restart()
        statuses = []
        # The pool reconnects in the background: up to a minute of tries, as
        # a busy machine (load 10+) can take many seconds to start the server.
        for _ in range(240):
            statuses.append(
                relay.client.post(
                    "/v1/messages", json={"messages": batch(1)}, headers=device.headers
                ).status_code
            )
            if statuses[-1] == 200:
                break
            time.sleep(0.25)
        assert statuses[-1] == 200 and set(statuses) <= {200, 503}


# -- schema: its own namespace, versioned, transactional migrations ----------------------------


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    return run_main(capsys, ["relay", *args])


def test_init_creates_tables_only_in_the_relay_schema_and_touches_nothing_else(
    empty_postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with psycopg.connect(empty_postgres_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.teams(note text)")
        conn.execute("INSERT INTO public.teams VALUES ('not the relay''s')")
    code, out, _ = run(capsys, "init", "--database", empty_postgres_url, "--json")
    assert code == 0
    assert json.loads(out)["server_instance_id"][14] == "7"
    with psycopg.connect(empty_postgres_url) as conn:
        tables = {
            (str(r[0]), str(r[1]))
            for r in conn.execute(
                "SELECT table_schema, table_name FROM information_schema.tables "
                "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')"
            )
        }
        assert conn.execute("SELECT note FROM public.teams").fetchall() == [("not the relay's",)]
    assert ("public", "teams") in tables
    assert {schema for schema, _ in tables} == {"public", RELAY_SCHEMA}
    assert {t for s, t in tables if s == "public"} == {"teams"}


def test_init_refuses_an_initialized_database_and_keeps_its_identity(
    empty_postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    first = location.initialize(empty_postgres_url)
    code, _, err = run(capsys, "init", "--database", empty_postgres_url)
    assert code == 2 and "already exists" in err
    store = location.open_store(empty_postgres_url)
    try:
        assert store.server_instance_id == first
    finally:
        store.close()


def test_a_database_without_the_relay_schema_is_refused_with_remediation(
    empty_postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "status", "--database", empty_postgres_url)
    assert code == 2 and "relay init" in err


def test_a_database_from_a_newer_relay_is_refused_and_left_untouched(
    empty_postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    location.initialize(empty_postgres_url)
    assert run(capsys, "migrate", "--database", empty_postgres_url, "--json")[1] == (
        json.dumps(
            {
                "db": empty_postgres_url,
                "from_version": pg_schema.SCHEMA_VERSION,
                "to_version": pg_schema.SCHEMA_VERSION,
            },
            sort_keys=True,
        )
        + "\n"
    )
    with psycopg.connect(empty_postgres_url) as conn:
        conn.execute(
            f"UPDATE {RELAY_SCHEMA}.relay_meta SET value = '99' WHERE key = 'schema_version'"
        )
    with pytest.raises(OperatorError, match="newer"):
        location.open_store(empty_postgres_url)
    for command in ("status", "migrate", "serve"):
        code, _, err = run(capsys, command, "--database", empty_postgres_url)
        assert code == 2 and "newer" in err, command
    with psycopg.connect(empty_postgres_url) as conn:
        row = conn.execute(
            f"SELECT value FROM {RELAY_SCHEMA}.relay_meta WHERE key = 'schema_version'"
        ).fetchone()
    assert row == ("99",)


def test_migrate_applies_pending_steps_in_one_transaction(
    empty_postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    location.initialize(empty_postgres_url)
    current = pg_schema.SCHEMA_VERSION
    step = current + 1
    broken = (*pg_schema.MIGRATIONS, (step, "ALTER TABLE teams ADD COLUMN note text; SELECT 1/0"))
    monkeypatch.setattr(pg_schema, "MIGRATIONS", broken)
    monkeypatch.setattr(pg_schema, "SCHEMA_VERSION", step)
    with pytest.raises(Exception):  # noqa: B017 - the step's own error, whatever it maps to
        location.migrate(empty_postgres_url)
    with psycopg.connect(empty_postgres_url) as conn:
        columns = [
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = 'teams'",
                (RELAY_SCHEMA,),
            )
        ]
        version = conn.execute(
            f"SELECT value FROM {RELAY_SCHEMA}.relay_meta WHERE key = 'schema_version'"
        ).fetchone()
    # The failed step left the previous version whole.
    assert "note" not in columns and version == (str(current),)
    with pytest.raises(OperatorError, match=f"needs {step}"):
        location.open_store(empty_postgres_url)
    working = (*pg_schema.MIGRATIONS[:-1], (step, "ALTER TABLE teams ADD COLUMN note text"))
    monkeypatch.setattr(pg_schema, "MIGRATIONS", working)
    assert location.migrate(empty_postgres_url) == (current, step)
    location.open_store(empty_postgres_url).close()


def test_no_postgres_column_or_index_can_hold_sender_recipient_body_or_client_time(
    postgres_backend: Backend,
) -> None:
    with psycopg.connect(postgres_backend.location) as conn:
        columns = {
            (str(t), str(c))
            for t, c in conn.execute(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = %s",
                (RELAY_SCHEMA,),
            )
        }
        indexed = {
            str(r[0])
            for r in conn.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey) "
                "WHERE n.nspname = %s",
                (RELAY_SCHEMA,),
            )
        }
    names = {name for _, name in columns} | indexed
    assert not names & FORBIDDEN_COLUMNS
    assert ("messages", "blob") in columns


def test_the_database_url_may_come_from_the_environment(
    postgres_backend: Backend, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SYNCENGINE_RELAY_DATABASE", postgres_backend.location)
    monkeypatch.setenv("SYNCENGINE_RELAY_DB", str(Path("/nonexistent/relay.db")))
    code, out, _ = run(capsys, "status", "--json")
    assert code == 0 and json.loads(out)["teams"] == []


def test_a_password_in_the_url_is_never_printed() -> None:
    shown = location.display("postgresql://relay:s3cret@127.0.0.1:5432/db?password=s3cret&x=1")
    assert "s3cret" not in shown and "relay" in shown and "x=1" in shown


def test_a_relay_whose_database_is_down_at_startup_exits_unavailable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"postgresql://relay@127.0.0.1:{port}/relay"
    code, out, err = run(capsys, "serve", "--database", url, "--busy-timeout-ms", "300")
    assert code == 3 and "listening" not in out
    assert "error:" in err and "Traceback" not in err


def test_only_the_bulk_appended_tables_go_without_a_reference_to_their_team(
    postgres_backend: Backend,
) -> None:
    """pg_schema migration 3 (issue #35): ``messages`` and ``wire_ids`` skip the
    per-row foreign-key trigger; every other team-owned table keeps it."""
    with psycopg.connect(postgres_backend.location) as conn:
        referencing = {
            str(row[0])
            for row in conn.execute(
                "SELECT c.conrelid::regclass::text FROM pg_constraint c "
                "JOIN pg_namespace n ON n.oid = c.connamespace "
                "WHERE n.nspname = %s AND c.contype = 'f'",
                (RELAY_SCHEMA,),
            )
        }
    tables = {name.removeprefix(f"{RELAY_SCHEMA}.") for name in referencing}
    assert tables == {
        "policy_history",
        "members",
        "member_names",
        "registrations",
        "read_frontiers",
        "read_exact",
        "pairing_tokens",
        "credentials",
    }
