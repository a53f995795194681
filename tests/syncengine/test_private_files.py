"""Secret files are read only when nobody else can read or swap them (#14
"Local hygiene"): the credential, the age identity and a ``--token @FILE``
share one rule set."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from syncengine.engine.connect import read_token
from syncengine.engine.errors import ConfigurationError
from syncengine.private_files import PrivateFileRefused, read_private_file

TOKEN = "agmsg_pair_" + "a" * 40


def private(path: Path, data: bytes = b"secret\n", mode: int = 0o600) -> Path:
    path.write_bytes(data)
    path.chmod(mode)
    return path


def test_a_private_regular_file_is_read(tmp_path: Path) -> None:
    assert read_private_file(private(tmp_path / "f"), "secret", 100) == b"secret\n"


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644, 0o666])
def test_a_file_others_can_access_is_refused_naming_the_mode(tmp_path: Path, mode: int) -> None:
    path = private(tmp_path / "f", mode=mode)
    with pytest.raises(PrivateFileRefused, match=f"mode {mode:04o}"):
        read_private_file(path, "secret", 100)


def test_a_symlink_is_refused_even_to_a_private_file(tmp_path: Path) -> None:
    target = private(tmp_path / "real")
    link = tmp_path / "link"
    link.symlink_to(target)
    with pytest.raises(PrivateFileRefused, match="symlink"):
        read_private_file(link, "secret", 100)


def test_a_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir(mode=0o700)
    with pytest.raises(PrivateFileRefused, match="not a regular file"):
        read_private_file(tmp_path / "d", "secret", 100)


def test_a_missing_file_is_named_as_missing(tmp_path: Path) -> None:
    with pytest.raises(PrivateFileRefused) as caught:
        read_private_file(tmp_path / "absent", "identity file", 100)
    assert caught.value.missing and "no identity file" in str(caught.value)


def test_an_oversized_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PrivateFileRefused, match="too large"):
        read_private_file(private(tmp_path / "f", b"x" * 101), "secret", 100)


def test_a_refusal_never_contains_the_files_bytes(tmp_path: Path) -> None:
    path = private(tmp_path / "f", b"AGE-SECRET-KEY-1SHOULDNOTLEAK\n", 0o644)
    with pytest.raises(PrivateFileRefused) as caught:
        read_private_file(path, "identity file", 1000)
    assert "SHOULDNOTLEAK" not in str(caught.value)


def test_a_world_readable_token_file_is_refused_with_a_remedy(tmp_path: Path) -> None:
    path = private(tmp_path / "token", (TOKEN + "\n").encode(), 0o644)
    with pytest.raises(ConfigurationError) as caught:
        read_token(f"@{path}", io.BytesIO())
    assert "0644" in str(caught.value) and TOKEN not in str(caught.value)
    assert "umask 077" in caught.value.remediation


def test_a_private_token_file_is_read(tmp_path: Path) -> None:
    path = private(tmp_path / "token", (TOKEN + "\n").encode())
    assert read_token(f"@{path}", io.BytesIO()).reveal() == TOKEN
