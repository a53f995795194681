"""The credential file: 0600 from the first byte, atomic, and refused when not private."""

from __future__ import annotations

import os
import pickle
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from syncengine.http import Credential, CredentialStoreError, Secret, load_credential
from syncengine.http import save_credential as save
from tests.syncengine.http.helpers import SECRET_TEXT, credential
from tests.wire.http_v1 import samples
from wire.errors import SchemaError


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask of 0: the file must be private by our own choice, not the umask's."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_saved_credential_is_mode_0600_even_with_an_open_umask(
    tmp_path: Path, open_umask: None
) -> None:
    path = tmp_path / "credential.json"
    save(path, credential())
    assert _mode(path) == 0o600


def test_saved_credential_loads_back_equal(tmp_path: Path) -> None:
    path = tmp_path / "credential.json"
    save(path, credential())
    assert load_credential(path, server_instance_id=samples.SERVER, team_id=samples.TEAM) == (
        credential()
    )


def test_file_is_private_before_any_byte_is_written(
    tmp_path: Path, open_umask: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    modes: list[int] = []
    real_write = os.write

    def spy(fd: int, data: bytes | memoryview) -> int:
        modes.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", spy)
    save(tmp_path / "credential.json", credential())
    assert modes and set(modes) == {0o600}


def test_rename_is_the_last_step_after_file_fsync_and_directory_is_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync-dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync-file")
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        events.append("rename")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    save(tmp_path / "credential.json", credential())
    assert events == ["fsync-file", "rename", "fsync-dir"]


def test_failed_write_keeps_the_old_file_and_leaves_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "credential.json"
    save(path, credential())
    before = path.read_bytes()

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    replacement = Credential(
        samples.SERVER, samples.TEAM, samples.CREDENTIAL_ID, Secret("another_secret_value")
    )
    with pytest.raises(CredentialStoreError):
        save(path, replacement)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["credential.json"]


@pytest.mark.parametrize("extra", [0o040, 0o004, 0o020, 0o002, 0o010, 0o001, 0o644])
def test_load_refuses_any_group_or_other_permission(tmp_path: Path, extra: int) -> None:
    path = tmp_path / "credential.json"
    save(path, credential())
    path.chmod(0o600 | extra)
    with pytest.raises(CredentialStoreError, match="0600"):
        load_credential(path)


def test_load_refuses_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    save(real, credential())
    link = tmp_path / "credential.json"
    link.symlink_to(real)
    with pytest.raises(CredentialStoreError):
        load_credential(link)


def test_load_refuses_a_directory(tmp_path: Path) -> None:
    with pytest.raises(CredentialStoreError):
        load_credential(tmp_path)


def test_load_of_a_missing_file_is_a_credential_store_error(tmp_path: Path) -> None:
    with pytest.raises(CredentialStoreError, match="no credential file"):
        load_credential(tmp_path / "absent.json")


def test_load_refuses_a_credential_of_another_team(tmp_path: Path) -> None:
    path = tmp_path / "credential.json"
    save(path, credential())
    with pytest.raises(CredentialStoreError, match="another team"):
        load_credential(path, team_id=samples.OTHER_TEAM)


@pytest.mark.parametrize(
    "content",
    [
        b"not json " + SECRET_TEXT.encode(),
        b'{"format": "syncengine-credential-v1", "credential": "' + SECRET_TEXT.encode() + b'"}',
        b'{"format": "x", "server_instance_id": "a", "team_id": "b", "credential_id": "c", '
        b'"credential": "' + SECRET_TEXT.encode() + b' with spaces"}',
    ],
)
def test_malformed_file_error_never_echoes_its_content(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "credential.json"
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(CredentialStoreError) as caught:
        load_credential(path)
    assert SECRET_TEXT not in str(caught.value)
    assert SECRET_TEXT not in repr(caught.value)


_SECRETS = st.text(
    alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/",
    min_size=1,
    max_size=64,
).map(lambda tail: "s3cr3t_" + tail)


@given(text=_SECRETS)
def test_secret_and_credential_never_print_their_value(text: str) -> None:
    secret = Secret(text)
    held = Credential(samples.SERVER, samples.TEAM, samples.CREDENTIAL_ID, secret)
    for shown in (repr(secret), str(secret), f"{secret}", f"{secret!r}", repr(held), str(held)):
        assert text not in shown
    assert secret.reveal() == text


def test_secret_cannot_be_pickled() -> None:
    with pytest.raises(TypeError):
        pickle.dumps(Secret(SECRET_TEXT))


@pytest.mark.parametrize(("raw", "value"), [("tok\n", "tok"), ("tok\r\n", "tok"), ("tok", "tok")])
def test_secret_from_text_drops_one_line_ending(raw: str, value: str) -> None:
    assert Secret.from_text(raw).reveal() == value


@pytest.mark.parametrize("raw", ["Qz9Wq\r", " Qz9Wq", "Qz9 Wq", "Qz9Wq\n\n", ""])
def test_secret_from_text_refuses_other_damage_without_echoing(raw: str) -> None:
    with pytest.raises(SchemaError) as caught:
        Secret.from_text(raw)
    assert "Qz9" not in str(caught.value)


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's owner needs root")
def test_load_refuses_a_file_owned_by_another_user(tmp_path: Path) -> None:
    path = tmp_path / "credential.json"
    save(path, credential())
    os.chown(path, 12345, 12345)
    with pytest.raises(CredentialStoreError, match="another user"):
        load_credential(path)
