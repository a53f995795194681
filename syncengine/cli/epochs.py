"""``syncengine keys epoch``: the key-epoch history of a connected team.

* ``list`` shows every epoch: revision, first sequence, key ID, number of
  recipients and whether this machine holds its identity; and the retained
  snapshot checkpoint (revision, digest, writer generation);
* ``add --key-id K --recipients-file F [--identity FILE]`` schedules a
  rotation at the relay's next sequence boundary (specs/engine.md
  §6.2). Adding a machine is a new epoch whose recipients include it;
  removing one is a new epoch without it — and revoking its credential;
* ``export --output FILE`` writes the team's epoch snapshot and prints its
  SHA-256 digest, which the operator confirms on the other machine;
* ``import --file F [--file F2 …] --confirm-digest SHA256`` appends what a
  snapshot adds. Snapshots form a chain (each names the digest of the one
  before): one that does not extend this machine's retained checkpoint — an
  older revision, another digest at the same revision, a broken link, or a
  gap — is refused, naming the revision and digest expected. Several files
  are the chain from this machine's next revision on, in order; the digest
  confirmed is the last one's, and each link proves the one before it.

Before ``add``, stop every other writer of the team (the relay does not
enforce key IDs; profile "Multi-writer cutover protocol"); afterwards export
the snapshot, import it on every machine, then resume them.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from syncengine.cli.engine_commands import _common, _deadline_option, _emit, _engine, _guarded
from syncengine.engine.epoch_checkpoint import load_checkpoint
from syncengine.engine.epoch_ops import read_snapshot
from syncengine.engine.epochs import MAX_SNAPSHOT_BYTES, EpochSnapshot
from syncengine.engine.errors import ConfigurationError
from syncengine.private_files import write_new_private_file
from syncengine.store.connection import read_transaction

__all__ = ["EXIT_CODES", "register"]

#: The engine's codes (the ``keys`` group's own 0/2 are for its file commands);
#: inherited by every ``keys epoch`` action's ``--help`` (issue #33: a wrong
#: digest exits 7 and the help once said 2).
EXIT_CODES = (
    "exit codes: 0 ok   2 usage   3 relay unreachable (try again)   4 refused by the relay   "
    "6 halted   7 not connected, or a snapshot, digest, key ID or file refused (the reason "
    "is printed)   8 another engine holds the binding   10/12/13 store errors"
)


def register(actions: Any) -> None:
    """Add ``epoch`` to the ``keys`` actions."""
    epoch = actions.add_parser(
        "epoch",
        help="the team's age-v1 key epochs: list, add, export, import",
        description=__doc__,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    steps = epoch.add_subparsers(dest="epoch_action", metavar="ACTION")
    steps.required = True

    listing = steps.add_parser("list", help="the key-epoch history")
    _common(listing)
    listing.set_defaults(handler=_list)

    add = steps.add_parser("add", help="rotate at the relay's next sequence boundary")
    add.add_argument("--key-id", required=True, metavar="K", help="a new, unused key ID")
    add.add_argument("--recipients-file", required=True, metavar="F", help="its manifest")
    add.add_argument(
        "--identity",
        metavar="FILE",
        help="this machine's identity for it (default: keep the current one if it is a recipient)",
    )
    _common(add)
    _deadline_option(add)
    add.set_defaults(handler=_add)

    export = steps.add_parser("export", help="write the epoch snapshot for another machine")
    export.add_argument("--output", required=True, metavar="FILE", help="file to create")
    _common(export)
    export.set_defaults(handler=_export)

    imported = steps.add_parser("import", help="append the epochs of a confirmed snapshot")
    imported.add_argument(
        "--file",
        required=True,
        action="append",
        metavar="F",
        help="the snapshot; repeat for a chain of them, oldest first",
    )
    imported.add_argument(
        "--confirm-digest",
        required=True,
        metavar="SHA256",
        help="the (last) snapshot's digest, confirmed live",
    )
    _common(imported)
    imported.set_defaults(handler=_import)


def _epoch_line(obj: dict[str, Any]) -> str:
    identity = obj["identity_file"] or "no identity here"
    return (
        f"{obj['revision']:>4}  from {obj['effective_from_seq']:>8}  {obj['key_id']}  "
        f"{obj['recipients']} recipient(s)  {identity}"
    )


def _list(args: argparse.Namespace) -> int:
    def action() -> int:
        with _engine(args) as engine:
            epochs = [e.to_obj() for e in engine.connection.epochs.epochs]
            with read_transaction(engine.store.conn, engine.store.path) as conn:
                checkpoint = load_checkpoint(conn, engine.connection.binding_pk)
        text = "\n".join(_epoch_line(e) for e in epochs) or "no age-v1 epoch (a plaintext team)"
        retained = None
        if checkpoint is not None:
            retained = {
                "epoch_revision": str(checkpoint.epoch_revision),
                "snapshot_sha256": checkpoint.snapshot_sha256,
                "writer_generation": str(checkpoint.writer_generation),
            }
            text += f"\ncheckpoint: snapshot {checkpoint.describe()}"
        _emit(args, {"ok": True, "epochs": epochs, "checkpoint": retained}, text)
        return 0

    return _guarded(args, action)


def _add(args: argparse.Namespace) -> int:
    def action() -> int:
        with _engine(args) as engine, engine.lock():
            epoch = engine.add_epoch(args.key_id, args.recipients_file, args.identity)
            snapshot = engine.epoch_snapshot()
        digest = snapshot.digest()
        obj = {
            "ok": True,
            "epoch": epoch.to_obj(),
            "snapshot_sha256": digest,
            "snapshot_revision": str(snapshot.epoch_revision),
        }
        text = (
            f"epoch {epoch.key_id} (revision {epoch.revision}) takes effect from sequence "
            f"{epoch.effective_from_seq}; snapshot revision {snapshot.epoch_revision}, "
            f"digest {digest}\n"
            "next: 'syncengine keys epoch export --output FILE', then on every other machine "
            "'syncengine keys epoch import --file FILE --confirm-digest DIGEST'"
        )
        if epoch.identity_path is None:
            text += "\nnote: this machine holds no identity for the new epoch"
        _emit(args, obj, text)
        return 0

    return _guarded(args, action)


def _export(args: argparse.Namespace) -> int:
    def action() -> int:
        with _engine(args) as engine:
            snapshot = engine.epoch_snapshot()
        output = Path(args.output).absolute()
        _write_new_file(output, snapshot.encode() + b"\n")
        digest = snapshot.digest()
        _emit(
            args,
            {
                "ok": True,
                "file": str(output),
                "snapshot_sha256": digest,
                "snapshot_revision": str(snapshot.epoch_revision),
                "previous_snapshot_sha256": snapshot.previous_sha256,
            },
            f"wrote {output} ({len(snapshot.epochs)} epoch(s), snapshot revision "
            f"{snapshot.epoch_revision}); sha256 {digest}",
        )
        return 0

    return _guarded(args, action)


def _import(args: argparse.Namespace) -> int:
    def action() -> int:
        chain = _confirmed_chain(args.file, args.confirm_digest)
        added: list[Any] = []
        with _engine(args) as engine, engine.lock():
            for path, digest in chain:
                added.extend(engine.import_epochs(path, digest))
        rows = [e.to_obj() for e in added]
        if not rows:
            text = "nothing to import: this machine already holds every epoch of the snapshot"
        else:
            text = "\n".join(_epoch_line(e) for e in rows)
            text += "\nrun 'syncengine reprocess' to open messages that were waiting for them"
        _emit(args, {"ok": True, "added": rows}, text)
        return 0

    return _guarded(args, action)


def _confirmed_chain(files: list[str], confirm_digest: str) -> list[tuple[str, str]]:
    """Each file with the digest it is imported under: the last one's is the
    operator's confirmed digest; every earlier one's is proven by the link
    the next one carries (its ``previous_snapshot_sha256``, one revision on).
    A file that is not the previous link of the next is refused by name."""
    if len(files) == 1:
        return [(files[0], confirm_digest)]

    last = read_snapshot(files[-1], confirm_digest)  # checks the confirmed digest
    chain: list[tuple[str, str]] = [(files[-1], last.digest())]
    after = last
    for path in reversed(files[:-1]):
        snapshot = EpochSnapshot.decode(_read_file(path))
        if after.previous_sha256 != snapshot.digest() or (
            after.epoch_revision != snapshot.epoch_revision + 1
        ):
            raise ConfigurationError(
                f"epoch snapshot {Path(path).absolute()} (revision {snapshot.epoch_revision}, "
                f"sha256 {snapshot.digest()}) is not the one the next file follows "
                f"(revision {after.epoch_revision - 1}, "
                f"sha256 {after.previous_sha256 or 'none: it is a root'})",
                remediation="Give the snapshots oldest first, each the one the next names.",
            )
        chain.append((path, snapshot.digest()))
        after = snapshot
    return list(reversed(chain))


def _read_file(path: str) -> bytes:
    source = Path(path).absolute()
    try:
        with source.open("rb") as handle:
            return handle.read(MAX_SNAPSHOT_BYTES + 1)
    except OSError as exc:
        raise ConfigurationError(f"cannot read epoch snapshot {source}: {exc.strerror}") from None


def _write_new_file(path: Path, data: bytes) -> None:
    """Create ``path`` atomically; an existing file is never replaced (the
    same link-into-place as ``keys generate``; 0600 does no harm here)."""
    if path.exists() or path.is_symlink():
        raise ConfigurationError(f"{path} already exists; choose another --output")
    try:
        write_new_private_file(path, data)
    except FileExistsError:
        raise ConfigurationError(f"{path} already exists; choose another --output") from None
