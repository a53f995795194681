"""Which backend a relay database location names, and opening it.

A location is a ``postgresql://`` (or ``postgres://``) URL, a
``placement:PATH`` naming a file that places teams across several
PostgreSQL databases (relay/storage/placement.py, specs/relay-scaling.md), or
a path to the SQLite file, which stays the default. Only this module decides
between them, so the CLI and the server hold a :class:`RelayStore` and never
a concrete class. psycopg is imported only for a URL: a relay on SQLite runs
without the optional ``postgres`` extra installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import apsw

from relay.errors import OperatorError
from relay.storage.base import RelayStore
from relay.storage.placement import PlacedRelayStore, is_placement, load_placement
from relay.storage.sqlite import SqliteRelayStore

if TYPE_CHECKING:
    from relay.storage.postgres import PostgresRelayStore

__all__ = [
    "DatabaseUnreachable",
    "display",
    "initialize",
    "is_postgres",
    "migrate",
    "open_store",
]

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(location: str) -> bool:
    """A PostgreSQL URL, or a placement (whose databases are all PostgreSQL)."""
    return location.startswith(_POSTGRES_SCHEMES) or is_placement(location)


class DatabaseUnreachable(OperatorError):
    """No PostgreSQL server answers at the URL's host and port (or it refuses
    us): the message names them and the cause, and the CLI exits with its
    "database unavailable" code rather than the operator-error one."""


def _postgres() -> type[PostgresRelayStore]:
    try:
        from relay.storage.postgres import PostgresRelayStore
    except ImportError:
        from relay.extras import install_hint

        raise OperatorError(
            "PostgreSQL support is not installed", install_hint("postgres")
        ) from None
    return PostgresRelayStore


def display(location: str) -> str:
    """The location as safe to print or log: a URL loses any password."""
    if not location.startswith(_POSTGRES_SCHEMES):
        return location
    parts = urlsplit(location)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:***@{host}" if ":" in userinfo else netloc
    query = urlencode(
        [(k, "***" if k == "password" else v) for k, v in parse_qsl(parts.query)], safe="*"
    )
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def initialize(location: str) -> str:
    """Create a new relay database (or schema) and return its server_instance_id.

    A placement's default database mints the identity and every other one
    is created with it, in the file's order; a database already holding the
    relay schema is refused as for a single URL. A failure part-way leaves the
    databases before it initialized and still empty of teams: drop their
    ``syncengine_relay`` schema, fix the cause, and run init again."""
    if is_placement(location):
        backend = _postgres()
        placement = load_placement(location)
        instance_id: str | None = None
        for name in placement.names:
            url = placement.databases[name]
            _reachable(url)
            instance_id = backend.initialize(url, instance_id)
        assert instance_id is not None
        return instance_id
    if is_postgres(location):
        backend = _postgres()
        _reachable(location)
        return backend.initialize(location)
    return SqliteRelayStore.initialize(Path(location))


def migrate(location: str) -> tuple[int, int]:
    """Bring an existing relay database to this code's schema version."""
    if is_placement(location):
        backend = _postgres()
        placement = load_placement(location)
        steps = []
        for name in placement.names:
            _reachable(placement.databases[name])
            steps.append(backend.migrate(placement.databases[name]))
        return min(a for a, _ in steps), max(b for _, b in steps)
    if is_postgres(location):
        backend = _postgres()
        _reachable(location)
        return backend.migrate(location)
    path = _existing_file(location)
    return SqliteRelayStore.migrate(path)


def open_store(
    location: str,
    *,
    busy_timeout_ms: int = 5000,
    retention_max_live_messages: int | None = None,
) -> RelayStore:
    """An open store on an existing, initialized relay database."""
    if is_placement(location):
        backend = _postgres()
        placement = load_placement(location)

        def open_one(url: str) -> RelayStore:
            _reachable(url)
            return backend(
                url,
                busy_timeout_ms=busy_timeout_ms,
                retention_max_live_messages=retention_max_live_messages,
            )

        return PlacedRelayStore(placement, open_one)
    if is_postgres(location):
        backend = _postgres()
        _reachable(location)
        return backend(
            location,
            busy_timeout_ms=busy_timeout_ms,
            retention_max_live_messages=retention_max_live_messages,
        )
    return SqliteRelayStore(
        _existing_file(location),
        busy_timeout_ms=busy_timeout_ms,
        retention_max_live_messages=retention_max_live_messages,
    )


def _existing_file(location: str) -> Path:
    """The path of an existing SQLite relay database; anything else there (a
    directory, a file that is not SQLite, a syncengine client store) is named
    for what it is instead of failing later as "internal error" (issue #33)."""
    path = Path(location)
    if not path.exists():
        raise OperatorError(f"no relay database at {path}", "create one: syncengine relay init")
    if path.is_dir():
        raise OperatorError(
            f"{path} is a directory, not a relay database", "name the database file: --db FILE"
        )
    tables = _sqlite_tables(path)
    if tables is None:
        raise OperatorError(
            f"{path} is not a relay database (not an SQLite file)",
            "check --db (or $SYNCENGINE_RELAY_DATABASE); create one with: syncengine relay init",
        )
    if "relay_meta" not in tables:
        what = (
            "a syncengine client store"
            if {"store_meta", "messages"} <= tables
            else "an SQLite file without the relay's tables"
        )
        raise OperatorError(
            f"{path} is not a relay database: it is {what}",
            "check --db (or $SYNCENGINE_RELAY_DATABASE): it names the relay's database, "
            "made by 'syncengine relay init'",
        )
    return path


def _sqlite_tables(path: Path) -> set[str] | None:
    """The table names of an SQLite file, looked at read-only; ``None`` when
    it is not an SQLite database (or cannot be read as one)."""
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return None
    try:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    except apsw.Error:
        return None
    finally:
        conn.close()
    return {str(row[0]) for row in rows}


def _reachable(url: str) -> None:
    """One plain connection before the pool: a server that is down, a wrong
    port or a refused login is reported once, naming host, port and the
    server's own words, instead of the pool's retries and "unavailable"."""
    # lazy: an optional extra (psycopg)
    import psycopg

    # lazy: an optional extra (psycopg)
    from psycopg.conninfo import conninfo_to_dict

    try:
        params = conninfo_to_dict(url)
    except psycopg.Error as exc:
        raise OperatorError(
            f"the database URL {display(url)} cannot be parsed: {_first_line(exc)}",
            "use postgresql://USER@HOST:PORT/DATABASE",
        ) from None
    host = str(params.get("host") or "the local socket")
    port = str(params.get("port") or 5432)
    try:
        psycopg.connect(url, connect_timeout=10).close()
    except psycopg.Error as exc:
        raise DatabaseUnreachable(
            f"cannot connect to PostgreSQL at {host} port {port} "
            f"(database {params.get('dbname', '?')}): {_cause(exc)}",
            "check that the server runs there and accepts connections, and that the role and "
            "database in the URL exist",
        ) from None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _cause(exc: BaseException) -> str:
    """The last reason in libpq's first line: 'connection to server at "h",
    port 1 failed: Connection refused' gives 'Connection refused'."""
    line = _first_line(exc)
    return line.rsplit("failed: ", 1)[-1].strip() or line
