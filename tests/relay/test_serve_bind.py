"""``relay serve`` that cannot listen says where and why in one line (#33).

A busy port, a port out of range, a host that is not an address of this
machine, and a host name that does not resolve each end with exit 2 (an
operator error, as ``relay serve --help`` and README document), an
``error:`` line naming host, port and cause, a remedy, and no traceback.
Binding to a non-local address sends nothing on any network: the kernel
refuses it at once.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncengine.cli import main
from tests.relay.backends import Backend


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "relay.db"
    assert main(["relay", "init", "--db", str(path)]) == 0
    return path


@pytest.fixture
def busy_port() -> Iterator[int]:
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    try:
        yield holder.getsockname()[1]
    finally:
        holder.close()


def serve(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SYNCENGINE_CRASH_AT"}
    return subprocess.run(
        [sys.executable, "-m", "syncengine", "relay", "serve", "--db", str(db), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def assert_one_line(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    assert "remedy: " in result.stderr
    assert '"event": "listening"' not in result.stdout


def test_serve_on_a_busy_port_names_the_address_and_that_it_is_in_use(
    db: Path, busy_port: int
) -> None:
    result = serve(db, "--host", "127.0.0.1", "--port", str(busy_port))
    assert_one_line(result, f"127.0.0.1:{busy_port}", "already in use")


def test_serve_on_a_port_out_of_range_names_the_valid_range(db: Path) -> None:
    result = serve(db, "--host", "127.0.0.1", "--port", "99999")
    assert_one_line(result, "127.0.0.1:99999", "0-65535")


def test_serve_on_a_host_that_is_not_an_address_of_this_machine_says_so(db: Path) -> None:
    result = serve(db, "--host", "192.0.2.1", "--port", "0")  # TEST-NET-1, never local
    assert_one_line(result, "192.0.2.1:0", "not an address of this machine")


def test_serve_on_a_host_name_that_does_not_resolve_says_so(db: Path) -> None:
    result = serve(db, "--host", "no-such-host.invalid", "--port", "0")
    assert_one_line(result, "no-such-host.invalid:0", "does not resolve")


def test_a_worker_group_on_a_port_out_of_range_is_the_same_one_line(
    postgres_backend: Backend,
) -> None:
    """The supervisor binds for the whole group (#35): its bind errors are a
    single relay's, and no worker is started."""
    env = {k: v for k, v in os.environ.items() if k != "SYNCENGINE_CRASH_AT"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "syncengine",
            "relay",
            "serve",
            "--db",
            postgres_backend.location,
            "--workers",
            "2",
            "--port",
            "99999",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert_one_line(result, "127.0.0.1:99999", "0-65535")
