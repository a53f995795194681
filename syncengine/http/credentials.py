"""The bearer credential: an in-memory secret type and its private file store.

server/spec/v1.md "Pairing and per-device credentials": after a pairing
exchange the client persists the bearer secret in an engine-owned private
store, separately from the non-secret binding; a POSIX file store must be
mode 0600, and configuration and logs never contain the token or secret.

What this module guarantees:

- :class:`Secret` never shows its value in ``repr``, ``str`` or ``format``;
  the only way out is :meth:`Secret.reveal`, called where the header is built.
- :func:`save_credential` writes a temporary file created with ``O_EXCL`` and
  mode 0600 (``fchmod`` too, so the umask cannot matter), fsyncs it, renames
  it over the target and fsyncs the directory: the file is never readable by
  anyone else at any instant, and a crash leaves the old file or the new one.
- :func:`load_credential` refuses a symlink, a non-regular file, a file owned
  by another user, or one with any group/other permission bit.
- Both refuse a credentials folder that is not this user's and 0700 (issue
  #33): another user who can write the folder can delete or swap the file,
  one who can list it learns which teams this machine talks to. The refusal
  names the folder, the mode found and ``chmod 700 FOLDER``.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from syncengine.http.errors import CredentialStoreError
from wire import jcs
from wire.errors import WireError
from wire.http_v1.headers import check_opaque_secret
from wire.scalars import check_uuid7
from wire.schema import expect_object, expect_str

__all__ = [
    "CREDENTIAL_FILE_FORMAT",
    "Credential",
    "Secret",
    "check_credentials_folder",
    "load_credential",
    "save_credential",
]

CREDENTIAL_FILE_FORMAT = "syncengine-credential-v1"
_MAX_FILE_BYTES = 64 * 1024
_REDACTED = "<redacted>"
_PRIVATE_MODE = 0o600


class Secret:
    """An opaque bearer credential or pairing token that refuses to be printed."""

    __slots__ = ("_value",)

    def __init__(self, value: str, field: str = "secret") -> None:
        self._value = check_opaque_secret(value, field)

    @classmethod
    def from_text(cls, text: str, field: str = "secret") -> Secret:
        """A secret read from a file or stdin: one trailing LF or CRLF is dropped.

        Anything else (inner whitespace, a stray ``\\r``) is refused rather
        than trimmed: upstream #829 shows silent text damage is worse.
        """
        if text.endswith("\r\n"):
            text = text[:-2]
        elif text.endswith("\n"):
            text = text[:-1]
        return cls(text, field)

    def reveal(self) -> str:
        """The value; call only where it goes on the wire or into the 0600 file."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret({_REDACTED})"

    def __str__(self) -> str:
        return _REDACTED

    def __format__(self, spec: str) -> str:
        return _REDACTED

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __reduce__(self) -> Any:
        # Pickling would copy the value into places we do not control.
        raise TypeError("a Secret cannot be pickled")


@dataclass(frozen=True, slots=True)
class Credential:
    """One device's bearer credential, bound to one server instance and team."""

    server_instance_id: str
    team_id: str
    credential_id: str
    secret: Secret = field(repr=False)

    def __post_init__(self) -> None:
        try:
            check_uuid7(self.server_instance_id, "server_instance_id")
            check_uuid7(self.team_id, "team_id")
            check_uuid7(self.credential_id, "credential_id")
        except WireError as exc:
            raise CredentialStoreError(f"invalid credential: {exc}") from None
        if not isinstance(self.secret, Secret):
            raise CredentialStoreError("invalid credential: the secret must be a Secret")

    def to_file_bytes(self) -> bytes:
        return jcs.canonicalize(
            {
                "format": CREDENTIAL_FILE_FORMAT,
                "server_instance_id": self.server_instance_id,
                "team_id": self.team_id,
                "credential_id": self.credential_id,
                "credential": self.secret.reveal(),
            }
        )

    @classmethod
    def from_file_bytes(cls, data: bytes, where: str) -> Credential:
        # Parse errors name the field and rule only, never the file content.
        try:
            obj = expect_object(
                jcs.loads(data),
                "credential file",
                ("format", "server_instance_id", "team_id", "credential_id", "credential"),
            )
            if expect_str(obj["format"], "format") != CREDENTIAL_FILE_FORMAT:
                raise CredentialStoreError(f"{where}: unknown credential file format")
            secret = Secret(obj["credential"], "credential")
        except WireError as exc:
            raise CredentialStoreError(f"{where}: malformed credential file ({exc})") from None
        return cls(obj["server_instance_id"], obj["team_id"], obj["credential_id"], secret)


def _os_failure(where: Path, what: str, exc: OSError) -> CredentialStoreError:
    # strerror only: the OSError's own text repeats paths, never content.
    return CredentialStoreError(f"{where}: {what} ({exc.strerror})")


def check_credentials_folder(path: Path) -> None:
    """Refuse the folder holding the credential file ``path`` unless it is
    this user's and mode 0700 (no group or other bit)."""
    directory = path.parent if str(path.parent) else Path(".")
    try:
        info = os.stat(directory)
    except FileNotFoundError:
        return  # the file's own check reports it missing
    except OSError as exc:
        raise _os_failure(directory, "cannot inspect the credentials folder", exc) from None
    if info.st_uid != os.geteuid():
        raise CredentialStoreError(
            f"{directory}: the credentials folder is owned by uid {info.st_uid}, not by you; "
            "pair again with --credential-file in a folder of your own"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise CredentialStoreError(
            f"{directory}: the credentials folder is mode {stat.S_IMODE(info.st_mode):04o}; "
            f"it must be 0700 (chmod 700 {directory})"
        )


def save_credential(path: Path, credential: Credential) -> None:
    """Atomically replace ``path`` with the credential, private from the first byte."""
    directory = path.parent
    check_credentials_folder(path)
    tmp = directory / f".{path.name}.{secrets.token_hex(8)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(tmp, flags, _PRIVATE_MODE)
    except OSError as exc:
        raise _os_failure(path, "cannot create credential file", exc) from None
    try:
        try:
            os.fchmod(fd, _PRIVATE_MODE)
            data = memoryview(credential.to_file_bytes())
            while data:
                written = os.write(fd, data)
                data = data[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise _os_failure(path, "cannot write credential file", exc) from None
    _fsync_directory(directory)


def _fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise _os_failure(directory, "cannot open directory", exc) from None
    try:
        os.fsync(fd)
    except OSError as exc:
        raise _os_failure(directory, "cannot fsync directory", exc) from None
    finally:
        os.close(fd)


def load_credential(
    path: Path,
    *,
    server_instance_id: str | None = None,
    team_id: str | None = None,
) -> Credential:
    """Read a private credential file; refuse it if anyone else could read or write it.

    When the binding IDs are given, the credential must belong to them: a
    credential for one team is never presented to another.
    """
    # start-up pin: import syncengine.http.client loads no syncengine.private_files
    from syncengine.private_files import PrivateFileRefused, read_private_file

    check_credentials_folder(path)
    try:
        data = read_private_file(path, "credential file", _MAX_FILE_BYTES)
    except PrivateFileRefused as exc:
        raise CredentialStoreError(str(exc)) from None
    credential = Credential.from_file_bytes(data, str(path))
    if server_instance_id is not None and credential.server_instance_id != server_instance_id:
        raise CredentialStoreError(f"{path}: credential belongs to another server instance")
    if team_id is not None and credential.team_id != team_id:
        raise CredentialStoreError(f"{path}: credential belongs to another team")
    return credential
