"""``relay serve --tls-certfile/--tls-keyfile``: uvicorn's own TLS on 127.0.0.1.

A throw-away self-signed certificate for 127.0.0.1 is made with
``cryptography``; a client that trusts exactly that certificate completes
``GET /v1/health``, and one that trusts only the system roots is refused.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import httpx
import pytest

from tests.relay.backends import Backend
from tests.support.live_relay import (
    Certificate,
    cli,
    database_for,
    self_signed_certificate,
    tls_relay,
)


@pytest.fixture
def certificate(tmp_path: Path) -> Certificate:
    return self_signed_certificate(tmp_path)


def _trusting(certificate: Certificate) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(certificate.certfile))


def test_https_health_completes_for_a_client_trusting_the_certificate(
    backend: Backend, tmp_path: Path, certificate: Certificate
) -> None:
    with tls_relay(database_for(backend, tmp_path), certificate) as relay:
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
        tls_relay(database_for(sqlite_backend, tmp_path), certificate) as relay,
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
