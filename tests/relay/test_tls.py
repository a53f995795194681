"""``relay serve --tls-certfile/--tls-keyfile``: uvicorn's own TLS on 127.0.0.1.

A throw-away self-signed certificate for 127.0.0.1 is made with
``cryptography``; a client that trusts exactly that certificate completes
``GET /v1/health``, and one that trusts only the system roots is refused.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Address
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.relay.backends import Backend
from tests.relay.live import Database, cli


@dataclass
class Certificate:
    certfile: Path
    keyfile: Path


@pytest.fixture
def certificate(tmp_path: Path) -> Certificate:
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
    certfile, keyfile = tmp_path / "relay.crt", tmp_path / "relay.key"
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
    if isinstance(db, Path) and not db.exists():
        assert cli(db, "init").returncode == 0
    process = subprocess.Popen(
        [
            sys.executable,
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
            "--no-access-log",
            "--tls-certfile",
            str(certificate.certfile),
            "--tls-keyfile",
            str(certificate.keyfile),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line, process.stderr.read() if process.stderr else ""
        listening = json.loads(line)
        yield TlsRelay(int(listening["port"]), listening)
    finally:
        process.terminate()
        assert process.wait(timeout=15) == 0


def _trusting(certificate: Certificate) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(certificate.certfile))


def _database(backend: Backend, tmp_path: Path) -> Database:
    return backend.location if backend.is_postgres else tmp_path / "relay.db"


def test_https_health_completes_for_a_client_trusting_the_certificate(
    backend: Backend, tmp_path: Path, certificate: Certificate
) -> None:
    with tls_relay(_database(backend, tmp_path), certificate) as relay:
        assert relay.listening["tls"] is True
        with httpx.Client(verify=_trusting(certificate), timeout=10) as client:
            response = client.get(f"https://127.0.0.1:{relay.port}/v1/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    assert response.headers["agmsg-protocol-version"] == "1"


def test_https_refuses_a_client_that_does_not_trust_the_certificate(
    sqlite_backend: Backend, tmp_path: Path, certificate: Certificate
) -> None:
    with (
        tls_relay(_database(sqlite_backend, tmp_path), certificate) as relay,
        httpx.Client(timeout=10) as client,
        pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        client.get(f"https://127.0.0.1:{relay.port}/v1/health")


def test_a_certificate_without_its_key_is_refused_before_listening(
    tmp_path: Path, certificate: Certificate
) -> None:
    db = tmp_path / "relay.db"
    assert cli(db, "init").returncode == 0
    result = cli(db, "serve", "--port", "0", "--tls-certfile", str(certificate.certfile))
    assert result.returncode == 2
    assert "listening" not in result.stdout
    assert "--tls-keyfile" in result.stderr


def test_an_unreadable_key_is_an_operator_error_naming_no_key_material(
    tmp_path: Path, certificate: Certificate
) -> None:
    db = tmp_path / "relay.db"
    assert cli(db, "init").returncode == 0
    wrong = tmp_path / "wrong.key"
    wrong.write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    result = cli(
        db,
        "serve",
        "--port",
        "0",
        "--tls-certfile",
        str(certificate.certfile),
        "--tls-keyfile",
        str(wrong),
    )
    assert result.returncode == 2
    assert "listening" not in result.stdout
    assert "TLS certificate or key" in result.stderr
    assert "not a key" not in result.stderr
