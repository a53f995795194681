"""A throw-away PostgreSQL server the test suite starts itself.

``initdb`` into a temporary directory, trust authentication for one local
superuser, a private unix-socket directory, TCP on 127.0.0.1 at a free port,
durability off (a test database is disposable). PostgreSQL refuses to run as
root, so as root the server runs as an unprivileged account (``postgres``
when the Debian package created it, else ``nobody``) via ``setpriv`` (or
``runuser``), owning the data directory. No test sees another's rows or server_instance_id.

Most tests share one initialized relay database, emptied between tests
(:meth:`PgServer.clean_relay_database`: every relay table's rows deleted,
the identity restarted, a new server_instance_id — one round trip of a few
milliseconds, where a new database costs 40-500 ms on a busy machine);
tests that need an empty database (``init``, migrations) get one of their
own from :meth:`PgServer.create_database`.

One server per session: :func:`shared_server` starts it on first use and
:func:`stop_shared_server` (a session fixture's finalizer, with ``atexit``
as a backstop) stops it and removes the directory.
"""

from __future__ import annotations

import atexit
import itertools
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from relay.secrets import new_uuid7
from relay.storage import location
from relay.storage.pg_schema import RELAY_SCHEMA, SCHEMA_VERSION

SUPERUSER = "relay_test"
_BIN_ENV = "SYNCENGINE_TEST_PG_BIN"


#: Every relay table, children before parents, for the between-tests reset.
_RELAY_TABLES = (
    "read_exact",
    "read_frontiers",
    "messages",
    "wire_ids",
    "credentials",
    "pairing_tokens",
    "registrations",
    "member_names",
    "members",
    "policy_history",
    "teams",
)


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL binaries here, or the server would not start."""


def find_bin_dir() -> Path | None:
    """``$SYNCENGINE_TEST_PG_BIN``, Debian's newest ``/usr/lib/postgresql/N/bin``, or PATH."""
    explicit = os.environ.get(_BIN_ENV)
    if explicit:
        return Path(explicit)
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if debian:
        return debian[-1].parent
    found = shutil.which("initdb")
    return Path(found).resolve().parent if found else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_user() -> tuple[list[str], int | None, int | None]:
    """Command prefix and uid/gid that drop root; empty when not root."""
    if os.geteuid() != 0:
        return [], None, None
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        if shutil.which("setpriv"):
            prefix = [
                "setpriv",
                f"--reuid={entry.pw_uid}",
                f"--regid={entry.pw_gid}",
                "--clear-groups",
            ]
        else:
            prefix = ["runuser", "-u", name, "--"]
        return prefix, entry.pw_uid, entry.pw_gid
    raise PostgresUnavailable("running as root and no unprivileged account to run postgres")


@dataclass
class PgServer:
    root: Path
    port: int
    process: subprocess.Popen[bytes]
    _names: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _shared_url: str | None = None

    def url(self, database: str) -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def admin(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(self.url("postgres"), autocommit=True)

    def create_database(self) -> str:
        """A new empty database; returns its URL."""
        name = f"relay_t{os.getpid()}_{next(self._names)}"
        with self.admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        return self.url(name)

    def clean_relay_database(self) -> str:
        """The shared relay database, initialized and emptied; returns its URL."""
        if self._shared_url is not None and self._reset(self._shared_url):
            return self._shared_url
        if self._shared_url is not None:
            self.drop_database(self._shared_url)
        self._shared_url = self.create_database()
        location.initialize(self._shared_url)
        return self._shared_url

    def _reset(self, url: str) -> bool:
        """Empty every relay table; False when the schema is not the pristine current one."""
        with psycopg.connect(url, autocommit=True) as conn:
            # A relay a test killed may leave a session behind; it must hold no lock.
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            tables = {
                str(r[0])
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                    (RELAY_SCHEMA,),
                )
            }
            if tables != {*_RELAY_TABLES, "relay_meta"}:
                return False
            row = conn.execute(
                f"SELECT value FROM {RELAY_SCHEMA}.relay_meta WHERE key = 'schema_version'"
            ).fetchone()
            if row is None or row[0] != str(SCHEMA_VERSION):
                return False
            deletes = "; ".join(f"DELETE FROM {RELAY_SCHEMA}.{t}" for t in _RELAY_TABLES)
            conn.execute(
                f"BEGIN; {deletes}; "
                f"ALTER TABLE {RELAY_SCHEMA}.teams ALTER COLUMN team_pk RESTART; "
                f"DELETE FROM {RELAY_SCHEMA}.relay_meta WHERE key = 'server_instance_id'; "
                f"INSERT INTO {RELAY_SCHEMA}.relay_meta(key, value) "
                f"VALUES ('server_instance_id', '{new_uuid7()}'); COMMIT"
            )
        return True

    def drop_database(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        with self.admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # "fast" shutdown
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)

    def restart(self) -> None:
        """Stop and start the same data directory on the same port."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(timeout=20)
        self.process = _launch(self.root, self.port)
        _wait_ready(self)

    def halt(self) -> None:
        """Stop the server but keep its data (a database outage)."""
        self.process.send_signal(signal.SIGINT)
        self.process.wait(timeout=20)

    def crash(self) -> None:
        """Kill the server as a crash would, keeping its data; :meth:`restart` recovers it.

        SIGQUIT is PostgreSQL's immediate shutdown (what ``pg_ctl stop -m
        immediate`` sends): every backend quits at once, nothing is
        checkpointed, and the next start replays the WAL. Unlike SIGKILL of
        the postmaster it leaves no orphaned backend holding the old shared
        memory, so the restart on the same directory cannot be refused.
        """
        self.process.send_signal(signal.SIGQUIT)
        self.process.wait(timeout=20)


def _launch(root: Path, port: int) -> subprocess.Popen[bytes]:
    bin_dir = find_bin_dir()
    assert bin_dir is not None
    prefix, _, _ = _as_user()
    log = open(root / "server.log", "ab")  # noqa: SIM115 - handed to the child
    try:
        return subprocess.Popen(
            [
                *prefix,
                str(bin_dir / "postgres"),
                "-D",
                str(root / "data"),
                "-k",
                str(root / "sock"),
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=200",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    finally:
        log.close()


def _wait_ready(server: PgServer, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if server.process.poll() is not None:
            log = (server.root / "server.log").read_text(errors="replace")
            raise PostgresUnavailable(f"postgres exited:\n{log[-2000:]}")
        try:
            with psycopg.connect(server.url("postgres"), connect_timeout=2):
                return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise PostgresUnavailable("postgres did not accept connections") from None
            time.sleep(0.05)


def start_server() -> PgServer:
    """initdb + postgres in a fresh temporary directory, ready for connections."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise PostgresUnavailable("no PostgreSQL binaries (initdb) found")
    prefix, uid, gid = _as_user()
    root = Path(tempfile.mkdtemp(prefix="relay-pg-"))
    if uid is not None and gid is not None:
        os.chown(root, uid, gid)
    (root / "sock").mkdir()
    if uid is not None and gid is not None:
        os.chown(root / "sock", uid, gid)
    result = subprocess.run(
        [
            *prefix,
            str(bin_dir / "initdb"),
            "-D",
            str(root / "data"),
            "-U",
            SUPERUSER,
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
            "--no-sync",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=root,
    )
    if result.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise PostgresUnavailable(f"initdb failed: {result.stderr[-2000:]}")
    last: Exception | None = None
    for _ in range(3):  # the free port can be taken between probe and bind
        port = _free_port()
        server = PgServer(root, port, _launch(root, port))
        try:
            _wait_ready(server)
            return server
        except PostgresUnavailable as exc:
            last = exc
            if server.process.poll() is None:
                server.process.kill()
                server.process.wait(timeout=10)
    shutil.rmtree(root, ignore_errors=True)
    raise PostgresUnavailable(str(last))


_shared: PgServer | None = None


def shared_server() -> PgServer:
    global _shared
    if _shared is None:
        _shared = start_server()
        atexit.register(stop_shared_server)
    return _shared


def stop_shared_server() -> None:
    global _shared
    if _shared is not None:
        _shared.stop()
        _shared = None
