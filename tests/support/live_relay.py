"""The one live relay launcher: a real relay process on 127.0.0.1, driven through the CLI.

``db`` is a SQLite file path or a PostgreSQL URL (``--database`` takes
either), so one launcher serves both backends. A path is initialized on
first use; a URL is initialized by the caller, since several relay
processes may share it. ``running_relay`` waits for health over HTTP;
``tls_relay`` is the same process serving HTTPS with a throw-away
certificate (``self_signed_certificate``). ``relay_fixture`` is the body of
every shared ``live`` fixture, so the conftest files stay one line each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Address
from pathlib import Path
from typing import Any, Protocol

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from relay.secrets import new_uuid7

PYTHON = sys.executable


Database = Path | str


def cli(
    db: Database, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "syncengine", "relay", *args, "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def provision(
    db: Database, tmp: Path, names: tuple[str, ...] = ("leader", "worker-1")
) -> dict[str, Any]:
    document = {
        "team_id": new_uuid7(),
        "team_name": "live-team",
        "members": [{"member_id": new_uuid7(), "name": n} for n in names],
    }
    path = tmp / f"team-{document['team_id']}.json"
    path.write_text(json.dumps(document))
    result = cli(db, "team", "apply", str(path), "--json")
    assert result.returncode == 0, result.stderr
    return document


def issue_token(db: Database, team_id: str) -> str:
    result = cli(db, "token", "issue", "--team", team_id, "--json")
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)["token"])


@dataclass
class LiveRelay:
    base_url: str
    db: Database
    process: subprocess.Popen[str]
    server_instance_id: str

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=30, follow_redirects=False)

    def pair(self, team_id: str) -> dict[str, str]:
        token = issue_token(self.db, team_id)
        with self.client() as client:
            response = client.post(
                "/v1/pairing/exchange",
                json={"token": token},
                headers={"Agmsg-Protocol-Version": "1"},
            )
        assert response.status_code == 200, response.text
        body = response.json()
        return {
            "Agmsg-Protocol-Version": "1",
            "Agmsg-Team-ID": team_id,
            "Authorization": f"Bearer {body['credential']}",
        }


class HasLocation(Protocol):
    """What ``database_for`` needs of a relay test backend (tests/relay/backends.py)."""

    @property
    def location(self) -> str: ...

    @property
    def is_postgres(self) -> bool: ...


def database_for(backend: HasLocation, tmp_path: Path) -> Database:
    """The database a live relay of ``backend`` serves: the shared PostgreSQL
    database of the backend, or a fresh SQLite file the launcher initializes."""
    return backend.location if backend.is_postgres else tmp_path / "relay.db"


def serve_argv(db: Database, *extra: str) -> list[str]:
    """``syncengine relay serve`` on ``db``, bound to an ephemeral loopback
    port, with ``extra`` options after the shared ones."""
    return [
        PYTHON,
        "-m",
        "syncengine",
        "relay",
        "serve",
        "--db",
        str(db),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        *extra,
    ]


@contextmanager
def _serving(
    db: Database, *extra: str, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], dict[str, Any]]]:
    """A ``relay serve`` process on an ephemeral loopback port and its
    first stdout line (the listening record); stopped by SIGTERM on exit."""
    if isinstance(db, Path) and not db.exists():
        assert cli(db, "init").returncode == 0
    process = subprocess.Popen(
        serve_argv(db, *extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(
                f"relay did not start: {process.stderr.read() if process.stderr else ''}"
            )
        yield process, json.loads(line)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@contextmanager
def running_relay(
    db: Database, *extra: str, env: dict[str, str] | None = None
) -> Iterator[LiveRelay]:
    with _serving(db, *extra, env=env) as (process, ready):
        url = f"http://127.0.0.1:{ready['port']}"
        # Generous: a relay that printed its port answers within moments on an
        # idle machine, but may need many seconds on a loaded one (load 10+).
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/v1/health", timeout=10).status_code in (200, 503):
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield LiveRelay(url, db, process, ready["server_instance_id"])


def relay_fixture(
    tmp_path_factory: pytest.TempPathFactory, *extra: str, name: str = "relay"
) -> Iterator[LiveRelay]:
    """The body of a shared ``live`` fixture: one relay process on a fresh
    SQLite file, without an access log unless ``extra`` says otherwise."""
    db = tmp_path_factory.mktemp(name) / "relay.db"
    with running_relay(db, *(extra or ("--no-access-log",))) as relay:
        yield relay


@dataclass
class Certificate:
    certfile: Path
    keyfile: Path


def self_signed_certificate(directory: Path) -> Certificate:
    """A throw-away self-signed certificate for 127.0.0.1, its key file 0600."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "syncengine test relay")])
    now = datetime.now(UTC)
    loopback = x509.SubjectAlternativeName([x509.IPAddress(IPv4Address("127.0.0.1"))])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(loopback, critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    certfile, keyfile = directory / "relay.crt", directory / "relay.key"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(keyfile, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
    return Certificate(certfile, keyfile)


@dataclass
class TlsRelay:
    port: int
    listening: dict[str, object]


@contextmanager
def tls_relay(db: Database, certificate: Certificate) -> Iterator[TlsRelay]:
    """The relay serving HTTPS with ``certificate``; it must exit 0 on SIGTERM."""
    tls = ("--tls-certfile", str(certificate.certfile), "--tls-keyfile", str(certificate.keyfile))
    with _serving(db, "--no-access-log", *tls) as (process, listening):
        yield TlsRelay(int(listening["port"]), listening)
    assert process.returncode == 0
