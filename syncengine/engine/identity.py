"""Reading the epoch identity file (specs/engine.md §6.1).

The engine and its worker processes both read the identity through here:
by path, validated against the epoch manifest, so the secret never crosses
a pipe and an error names the path and the rule but never a byte of the
file. Like the credential file it must be private: a regular file of this
user, mode 0600 or stricter, not a symlink (:mod:`syncengine.private_files`).
"""

from __future__ import annotations

from pathlib import Path

from syncengine.engine.errors import ConfigurationError
from syncengine.engine.state import ConnectionRecord
from syncengine.private_files import PrivateFileRefused, read_private_file
from wire.errors import WireError

__all__ = ["read_identity"]

#: An identity file holds one or a few secret keys; anything larger is not one.
_MAX_IDENTITY_BYTES = 64 * 1024


def read_identity(connection: ConnectionRecord, path: Path, key_id: str | None = None) -> object:
    """Read and validate an identity file against the manifest of epoch
    ``key_id`` (default: the current epoch); errors name the path and the
    rule, never a byte of the file."""
    # start-up pin (CRYPTO): only age-v1 loads wire.age_profile
    from wire.age_profile import EpochManifest, install_identity

    epoch = connection.epochs.current if key_id is None else connection.epochs.by_key_id(key_id)
    assert epoch is not None
    try:
        data = read_private_file(path, "identity file", _MAX_IDENTITY_BYTES)
    except PrivateFileRefused as exc:
        raise ConfigurationError(
            str(exc),
            remediation="Keep the identity file private (chmod 600, owned by you, not a "
            "symlink), or install another with 'syncengine security identity FILE'.",
        ) from None
    try:
        manifest = EpochManifest.from_strings(epoch.key_id, epoch.recipients)
        return install_identity(manifest, data)
    except WireError as exc:
        raise ConfigurationError(
            f"identity file {path} is not usable for epoch {epoch.key_id!r}: {exc.rule}",
            remediation="Use the identity whose recipient is in the epoch's recipients file.",
        ) from None
