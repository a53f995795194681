"""In-process relay fixtures: a real store behind Starlette's TestClient, on every backend.

The relay suite is a contract suite: ``backend`` is parametrized over SQLite
and PostgreSQL, and every fixture built on it (``relay``, ``team``,
``device`` …) runs each test once per backend with a fresh database — a
temporary SQLite file, or a new database on the session's throw-away
PostgreSQL server (tests/relay/pg_server.py). A test that is about one
backend's own faults asks for ``sqlite_backend`` or ``postgres_backend``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.relay.app_relay import Device, Relay, make_relay
from tests.relay.backends import BACKENDS, Backend, require_postgres
from tests.relay.helpers import Team, provision


@pytest.fixture(scope="session", autouse=True)
def _stop_postgres_at_session_end() -> Iterator[None]:
    yield
    from tests.relay.pg_server import stop_shared_server

    stop_shared_server()


def make_backend(name: str, tmp_path: Path) -> Iterator[Backend]:
    if name == "sqlite":
        yield Backend("sqlite", str(tmp_path / "relay.db"))
        return
    yield Backend("postgres", require_postgres().clean_relay_database(), initialized=True)


@pytest.fixture
def empty_postgres_url() -> Iterator[str]:
    """A PostgreSQL database of its own with no relay schema (init and migrate tests)."""
    server = require_postgres()
    url = server.create_database()
    try:
        yield url
    finally:
        server.drop_database(url)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    yield from make_backend(str(request.param), tmp_path)


@pytest.fixture
def sqlite_backend(tmp_path: Path) -> Iterator[Backend]:
    yield from make_backend("sqlite", tmp_path)


@pytest.fixture
def postgres_backend(tmp_path: Path) -> Iterator[Backend]:
    yield from make_backend("postgres", tmp_path)


@pytest.fixture
def relay(backend: Backend) -> Iterator[Relay]:
    yield from make_relay(backend)


@pytest.fixture
def team(relay: Relay) -> Team:
    return provision(relay.store)


@pytest.fixture
def device(relay: Relay, team: Team) -> Device:
    return relay.pair(team)
