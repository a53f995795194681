"""A machine that joined a team late (after messages it cannot read were written), as the
before_join engine tests and the seed op tests both build it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from syncengine.engine import Engine
from syncengine.local_store import Store
from wire.age_keys import X25519Identity

WRITER, OLD, NEW = (X25519Identity.generate() for _ in range(3))


def key_file(tmp_path: Path, name: str, identity: X25519Identity) -> Path:
    path = tmp_path / f"{name}.key"
    path.write_text(identity.to_secret_string() + "\n")
    path.chmod(0o600)
    return path


def recipient_list(tmp_path: Path, name: str, *members: X25519Identity) -> Path:
    path = tmp_path / f"{name}.recipients"
    path.write_text("".join(m.recipient.to_string() + "\n" for m in members))
    return path


def joined_late(
    tmp_path: Path, make_engine: Callable[..., Engine], count: int = 2
) -> tuple[Engine, Path]:
    """A writer of epoch-1 {writer, old}; a reader connected to epoch-1 with no
    identity that then rotates to epoch-2 {writer, old, new} holding NEW. The
    writer's ``count`` messages sit before epoch-2's boundary. Returns the
    reader and the OLD identity file (a recipient of epoch-1)."""
    writer_key = key_file(tmp_path, "writer", WRITER)
    old_key = key_file(tmp_path, "old", OLD)
    new_key = key_file(tmp_path, "new", NEW)
    epoch1 = recipient_list(tmp_path, "epoch-1", WRITER, OLD)
    writer = make_engine(
        "a", key_id="epoch-1", recipients_file=str(epoch1), identity_file=str(writer_key)
    )
    reader = make_engine("b", key_id="epoch-1", recipients_file=str(epoch1))
    with Store(writer.store.path) as store:
        for i in range(count):
            store.send("crew", "alice", "bob", f"before {i}")
    writer.push()
    epoch2 = recipient_list(tmp_path, "epoch-2", WRITER, OLD, NEW)
    reader.add_epoch("epoch-2", str(epoch2), identity_file=str(new_key))
    reader.pull()
    return reader, old_key
