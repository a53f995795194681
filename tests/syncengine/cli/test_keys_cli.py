"""`syncengine keys`: identity files are private, atomic and never overwritten."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import run_main
from wire.age_keys import X25519Identity, parse_identity_file


def run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    return run_main(capsys, argv)


def test_generate_writes_a_0600_identity_file_and_prints_its_recipient(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "key.txt"
    code, out, err = run(capsys, ["keys", "generate", "--output", str(path)])
    assert code == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    identity = parse_identity_file(path.read_bytes())
    assert out == identity.recipient.to_string() + "\n"
    assert "AGE-SECRET-KEY" not in out + err


def test_generate_ignores_a_permissive_umask(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = os.umask(0)
    try:
        code, _, _ = run(capsys, ["keys", "generate", "--output", str(tmp_path / "k")])
    finally:
        os.umask(old)
    assert code == 0
    assert stat.S_IMODE((tmp_path / "k").stat().st_mode) == 0o600


def test_generate_refuses_to_overwrite_an_existing_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "key.txt"
    path.write_text("precious\n")
    code, out, err = run(capsys, ["keys", "generate", "--output", str(path)])
    assert code == 2
    assert "already exists" in err
    assert out == ""
    assert path.read_text() == "precious\n"


def test_generate_refuses_a_dangling_symlink(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = tmp_path / "key.txt"
    link.symlink_to(tmp_path / "elsewhere")
    code, _, err = run(capsys, ["keys", "generate", "--output", str(link)])
    assert "already exists" in err
    assert code == 2
    assert not (tmp_path / "elsewhere").exists()


def test_generate_leaves_no_temporary_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(capsys, ["keys", "generate", "--output", str(tmp_path / "key.txt")])
    run(capsys, ["keys", "generate", "--output", str(tmp_path / "key.txt")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["key.txt"]


def test_generate_into_a_missing_directory_fails_cleanly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, ["keys", "generate", "--output", str(tmp_path / "no" / "key")])
    assert code == 2
    assert "cannot write" in err


def test_recipient_prints_the_public_key_of_an_identity_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    identity = X25519Identity.generate()
    path = tmp_path / "key.txt"
    path.write_text(f"# mine\n{identity.to_secret_string()}\n")
    path.chmod(0o600)
    code, out, err = run(capsys, ["keys", "recipient", str(path)])
    assert (code, out, err) == (0, identity.recipient.to_string() + "\n", "")


def test_recipient_warns_when_others_can_read_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    identity = X25519Identity.generate()
    path = tmp_path / "key.txt"
    path.write_text(identity.to_secret_string() + "\n")
    path.chmod(0o644)
    code, out, err = run(capsys, ["keys", "recipient", str(path)])
    assert (code, out) == (0, identity.recipient.to_string() + "\n")
    assert "chmod 600" in err


def test_recipient_error_names_the_rule_but_never_the_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = X25519Identity.generate(), X25519Identity.generate()
    path = tmp_path / "key.txt"
    path.write_text(f"{first.to_secret_string()}\n{second.to_secret_string()}\n")
    path.chmod(0o600)
    code, out, err = run(capsys, ["keys", "recipient", str(path)])
    assert code == 2
    assert "exactly one identity" in err
    for secret in (first.to_secret_string(), second.to_secret_string()):
        assert secret[16:] not in (out + err).upper()


def test_recipient_of_a_missing_file_fails_cleanly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, ["keys", "recipient", str(tmp_path / "absent")])
    assert code == 2
    assert "cannot read" in err


def test_generated_file_is_accepted_by_the_age_cli_as_identity(tmp_path: Path) -> None:
    import shutil

    age = shutil.which("age")
    if age is None:
        pytest.skip("the age CLI is not installed")
    path = tmp_path / "key.txt"
    result = subprocess.run(
        [sys.executable, "-m", "syncengine", "keys", "generate", "--output", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    recipient = result.stdout.strip()
    sealed = subprocess.run([age, "-r", recipient], input=b"hi", capture_output=True, check=True)
    opened = subprocess.run(
        [age, "-d", "-i", str(path)], input=sealed.stdout, capture_output=True, check=True
    )
    assert opened.stdout == b"hi"
