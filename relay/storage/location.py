"""Which backend a relay database location names, and opening it.

A location is either a ``postgresql://`` (or ``postgres://``) URL or a path
to the SQLite file, which stays the default. Only this module decides
between them, so the CLI and the server hold a :class:`RelayStore` and never
a concrete class. psycopg is imported only for a URL: a relay on SQLite runs
without the optional ``postgres`` extra installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from relay.errors import OperatorError
from relay.storage.base import RelayStore
from relay.storage.sqlite import SqliteRelayStore

if TYPE_CHECKING:
    from relay.storage.postgres import PostgresRelayStore

__all__ = ["display", "initialize", "is_postgres", "migrate", "open_store"]

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres(location: str) -> bool:
    return location.startswith(_POSTGRES_SCHEMES)


def _postgres() -> type[PostgresRelayStore]:
    try:
        from relay.storage.postgres import PostgresRelayStore
    except ImportError:
        raise OperatorError(
            "PostgreSQL support is not installed",
            "install the 'postgres' extra from the syncengine checkout: "
            "pip install -e '.[postgres]'",
        ) from None
    return PostgresRelayStore


def display(location: str) -> str:
    """The location as safe to print or log: a URL loses any password."""
    if not is_postgres(location):
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
    """Create a new relay database (or schema) and return its server_instance_id."""
    if is_postgres(location):
        return _postgres().initialize(location)
    return SqliteRelayStore.initialize(Path(location))


def migrate(location: str) -> tuple[int, int]:
    """Bring an existing relay database to this code's schema version."""
    if is_postgres(location):
        return _postgres().migrate(location)
    path = _existing_file(location)
    return SqliteRelayStore.migrate(path)


def open_store(
    location: str,
    *,
    busy_timeout_ms: int = 5000,
    retention_max_live_messages: int | None = None,
) -> RelayStore:
    """An open store on an existing, initialized relay database."""
    if is_postgres(location):
        return _postgres()(
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
    path = Path(location)
    if not path.exists():
        raise OperatorError(f"no relay database at {path}", "create one: syncengine relay init")
    return path
