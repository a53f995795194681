"""Relay configuration: database location and retention, validated up front.

The database is a location string (relay/storage/location.py): a
``postgresql://`` URL or the SQLite file path. ``$SYNCENGINE_RELAY_DATABASE``
names either; the older ``$SYNCENGINE_RELAY_DB`` (a file path) still works.

The retention setting follows retention-gap-resynchronization.md
"Reference-server retention configuration": unset disables it; otherwise a
canonical positive decimal no greater than the signed 64-bit maximum, and an
invalid value fails startup before the relay listens.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

from relay.errors import OperatorError
from relay.limits import MAX_CONNECTIONS_PER_PEER, REQUEST_READ_TIMEOUT_SECONDS
from wire.errors import WireError
from wire.scalars import parse_seq

DB_ENV = "SYNCENGINE_RELAY_DB"
DATABASE_ENV = "SYNCENGINE_RELAY_DATABASE"
RETENTION_ENV = "SYNCENGINE_RELAY_RETENTION_MAX_LIVE_MESSAGES"
#: ``relay serve``'s connection bounds when no option sets them (#33).
MAX_CONNECTIONS_PER_PEER_ENV = "SYNCENGINE_RELAY_MAX_CONNECTIONS_PER_PEER"
REQUEST_READ_TIMEOUT_ENV = "SYNCENGINE_RELAY_REQUEST_READ_TIMEOUT"
#: ``relay serve --workers`` when the option is not given (#35).
WORKERS_ENV = "SYNCENGINE_RELAY_WORKERS"
#: ``relay serve --shutdown-timeout`` default: after SIGTERM, in-flight
#: requests get this long to finish before uvicorn cancels them.
DEFAULT_SHUTDOWN_TIMEOUT_S = 10


def default_db_path(env: Mapping[str, str] | None = None) -> Path:
    """``$SYNCENGINE_RELAY_DB``, else ``$XDG_DATA_HOME/syncengine/relay.db``."""
    environ = os.environ if env is None else env
    explicit = environ.get(DB_ENV)
    if explicit:
        return Path(explicit)
    data_home = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "syncengine" / "relay.db"


def default_database(env: Mapping[str, str] | None = None) -> str:
    """``$SYNCENGINE_RELAY_DATABASE`` (URL or path), else :func:`default_db_path`."""
    environ = os.environ if env is None else env
    return environ.get(DATABASE_ENV) or str(default_db_path(environ))


def parse_retention(value: str | None) -> int | None:
    """Max live messages per team, or ``None`` when retention is disabled."""
    if value is None or value == "":
        return None
    try:
        count = parse_seq(value, RETENTION_ENV)
    except WireError:
        raise OperatorError(
            "retention max live messages must be a canonical positive decimal",
            f"set {RETENTION_ENV} (or --retention-max-live-messages) to e.g. 100000, or unset it",
        ) from None
    if count == 0:
        raise OperatorError(
            "retention max live messages must be positive",
            f"unset {RETENTION_ENV} to disable automatic retention",
        )
    return count


def max_connections_per_peer(env: Mapping[str, str] | None = None) -> int:
    """``$SYNCENGINE_RELAY_MAX_CONNECTIONS_PER_PEER``, else
    :data:`~relay.limits.MAX_CONNECTIONS_PER_PEER`."""
    raw = (os.environ if env is None else env).get(MAX_CONNECTIONS_PER_PEER_ENV, "").strip()
    if not raw:
        return MAX_CONNECTIONS_PER_PEER
    if not raw.isdigit() or int(raw) < 1:
        raise OperatorError(
            f"{MAX_CONNECTIONS_PER_PEER_ENV} must be a whole number of connections, 1 or more",
            f"set it to e.g. {MAX_CONNECTIONS_PER_PEER}, or unset it",
        )
    return int(raw)


def request_read_timeout(env: Mapping[str, str] | None = None) -> float:
    """``$SYNCENGINE_RELAY_REQUEST_READ_TIMEOUT`` (seconds), else
    :data:`~relay.limits.REQUEST_READ_TIMEOUT_SECONDS`."""
    raw = (os.environ if env is None else env).get(REQUEST_READ_TIMEOUT_ENV, "").strip()
    if not raw:
        return REQUEST_READ_TIMEOUT_SECONDS
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise OperatorError(
            f"{REQUEST_READ_TIMEOUT_ENV} must be a positive number of seconds",
            f"set it to e.g. {REQUEST_READ_TIMEOUT_SECONDS:g}, or unset it",
        )
    return seconds


def workers(env: Mapping[str, str] | None = None) -> int:
    """``$SYNCENGINE_RELAY_WORKERS``, else 1 (one process, no supervisor)."""
    raw = (os.environ if env is None else env).get(WORKERS_ENV, "").strip()
    if not raw:
        return 1
    if not raw.isdigit() or int(raw) < 1:
        raise OperatorError(
            f"{WORKERS_ENV} must be a whole number of processes, 1 or more",
            "set it to e.g. 4 (with a PostgreSQL database), or unset it for one process",
        )
    return int(raw)
