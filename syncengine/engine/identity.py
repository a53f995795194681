"""Reading the epoch identity file (specs/engine.md "Keys").

The engine and its worker processes both read the identity through here:
by path, validated against the epoch manifest, so the secret never crosses
a pipe and an error names the path and the rule but never a byte of the
file.
"""

from __future__ import annotations

from pathlib import Path

from syncengine.engine.errors import ConfigurationError
from syncengine.engine.state import ConnectionRecord

__all__ = ["read_identity"]


def read_identity(connection: ConnectionRecord, path: Path) -> object:
    """Read and validate an identity file against the epoch manifest; errors
    name the path and the rule, never a byte of the file."""
    from wire.age_profile import EpochManifest, install_identity
    from wire.errors import WireError

    assert connection.age_key_id is not None
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read identity file {path}: {exc.strerror}",
            remediation="Restore the identity file or install another with "
            "'syncengine security identity FILE'.",
        ) from None
    try:
        manifest = EpochManifest.from_strings(connection.age_key_id, connection.age_recipients)
        return install_identity(manifest, data)
    except WireError as exc:
        raise ConfigurationError(
            f"identity file {path} is not usable for epoch {connection.age_key_id!r}: {exc.rule}",
            remediation="Use the identity whose recipient is in the epoch's recipients file.",
        ) from None
