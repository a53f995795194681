"""Key-epoch operations of one connection: rotate, export, import, identities.

specs/engine.md §6; docs/spec/age-v1-profile.md "Recipient-set
epochs", "Epoch snapshots and rollback resistance" and "Multi-writer
cutover protocol". The pure history and snapshot rules are
:mod:`syncengine.engine.epochs`; this module reads operator files and runs
each change as one store transaction with a named crash point.

The cutover on the rotating machine (its part of the profile's barrier):

1. no envelope this binding already published under an older epoch may be
   waiting for its acknowledgement — it would take a sequence at or after
   the boundary and be ``policy_violation`` everywhere (step 2, "drain");
2. a fresh capability snapshot gives ``next_sequence_boundary`` (step 5;
   null refuses);
3. one transaction re-checks (1) and appends the epoch from that boundary
   (crash point ``engine.epoch``).

Quiescing the *other* writers and revoking a removed machine's credential
are the operator's steps 1, 3 and 4 (the relay does not enforce
``key_id``) — a named deviation with its risk and procedure in
specs/age-v1.md; a machine that has not imported the new epoch holds every
envelope of it as ``pending_key`` (beyond its verified coverage) rather
than judging it by the old epoch, and imports it later with
:func:`import_epochs`.

Every change here also moves the binding's retained snapshot checkpoint,
in the same transaction (:mod:`syncengine.engine.epoch_checkpoint`): a
rotation retains the next snapshot of the chain, an import the snapshot it
took — only when that snapshot extends the checkpoint (no rollback, fork or
gap).
"""

from __future__ import annotations

import hmac
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from syncengine.engine import state as st
from syncengine.engine.epoch_checkpoint import admit, issue, load_checkpoint, save_checkpoint
from syncengine.engine.epochs import (
    MAX_SNAPSHOT_BYTES,
    EpochHistory,
    EpochSnapshot,
    KeyEpoch,
)
from syncengine.engine.errors import ConfigurationError
from syncengine.engine.security import SecurityHistory
from syncengine.private_files import PrivateFileRefused, read_private_file
from syncengine.store.connection import one_row
from wire.errors import WireError
from wire.scalars import check_profile_key_id

if TYPE_CHECKING:
    import apsw

__all__ = [
    "assign_identity",
    "import_epochs",
    "inherited_identity",
    "issue_snapshot",
    "read_recipients",
    "read_snapshot",
    "refuse_while_draining",
    "rotate",
    "snapshot_adds",
    "snapshot_of",
]


def read_recipients(key_id: str, recipients_file: str) -> tuple[str, ...]:
    """A validated manifest from a recipients file; errors name the file and rule."""
    # start-up pin (CRYPTO): only this path loads wire.age_profile
    from wire.age_profile import EpochManifest, parse_recipients_file

    try:
        check_profile_key_id(key_id, "key_id")
    except WireError as exc:
        raise ConfigurationError(f"--key-id {key_id!r}: {exc.rule}") from None
    try:
        data = Path(recipients_file).read_bytes()
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read recipients file {Path(recipients_file).absolute()}: {exc.strerror}"
        ) from None
    try:
        manifest = EpochManifest.from_strings(key_id, parse_recipients_file(data))
    except WireError as exc:
        raise ConfigurationError(
            f"recipients file {Path(recipients_file).absolute()}: {exc.field}: {exc.rule}"
        ) from None
    return tuple(r.to_string() for r in manifest.recipients)


def assign_identity(
    history: EpochHistory, identity_file: str, *, only: str | None = None
) -> EpochHistory:
    """``history`` with ``identity_file`` installed on every epoch whose
    manifest holds its recipient (or only on epoch ``only``).

    The file is read and checked against each manifest (profile: "the
    recipient derived from it must be in the epoch manifest"); one that
    matches no epoch is refused, naming the path, never a byte of it."""
    # start-up pin (CRYPTO): only this path loads wire.age_profile
    from wire.age_profile import EpochManifest, install_identity

    path = Path(identity_file).absolute()
    try:
        data = read_private_file(path, "identity file", 64 * 1024)
    except PrivateFileRefused as exc:
        raise ConfigurationError(
            str(exc), remediation="Keep the identity file private (chmod 600, owned by you)."
        ) from None
    matched: list[str] = []
    for epoch in history.epochs:
        if only is not None and epoch.key_id != only:
            continue
        try:
            install_identity(EpochManifest.from_strings(epoch.key_id, epoch.recipients), data)
        except WireError:
            continue
        matched.append(epoch.key_id)
    if not matched:
        which = f"epoch {only!r}" if only is not None else "any epoch of this team"
        raise ConfigurationError(
            f"identity file {path} is not a recipient of {which}",
            remediation="Use the identity whose recipient is in that epoch's recipients file "
            "('syncengine keys recipient FILE' prints it).",
        )
    result = history
    for key_id in matched:
        result = result.with_identity(key_id, str(path))
    return result


def read_snapshot(path: str, confirm_digest: str | None) -> EpochSnapshot:
    """Read an epoch snapshot and require the operator's confirmed digest.

    Profile "Epoch snapshots": a valid file alone is no freshness proof — the
    operator confirms its SHA-256 (printed by ``keys epoch export`` on a
    machine that holds the current history) over a live channel."""
    source = Path(path).absolute()
    if confirm_digest is None:
        raise ConfigurationError(
            "an epoch snapshot is imported only with --confirm-digest",
            remediation="Ask the machine that exported it for the digest "
            "'syncengine keys epoch export' printed, over a channel you trust.",
        )
    try:
        with source.open("rb") as handle:
            data = handle.read(MAX_SNAPSHOT_BYTES + 1)
    except OSError as exc:
        raise ConfigurationError(f"cannot read epoch snapshot {source}: {exc.strerror}") from None
    snapshot = EpochSnapshot.decode(data)
    if not hmac.compare_digest(snapshot.digest(), confirm_digest.strip().lower()):
        raise ConfigurationError(
            f"epoch snapshot {source} has digest {snapshot.digest()}, not the confirmed one",
            remediation="Export the snapshot again on a machine that holds the current "
            "history and compare the digest it prints.",
        )
    return snapshot


def snapshot_of(
    server_instance_id: str, team_id: str, epochs: EpochHistory, security: SecurityHistory
) -> EpochSnapshot:
    """A root snapshot (revision 0) of ``epochs`` and ``security``: what a
    machine that starts a key-epoch history (``connect --key-id``) retains."""
    if not epochs.configured:
        raise ConfigurationError(
            "this team has no age-v1 epoch; there is no key-epoch history to export"
        )
    return EpochSnapshot(server_instance_id, team_id, epochs.epochs, security.entries)


def issue_snapshot(
    conn: apsw.Connection, binding_pk: int, server_instance_id: str, team_id: str, now: str
) -> EpochSnapshot:
    """Inside a write transaction (crash point ``engine.checkpoint``): the
    snapshot of what this machine holds, retained as its checkpoint when it
    says something new (a security change since the last one), else the
    retained one as it is."""
    epochs = st.load_key_epochs(conn, binding_pk)
    security = st.load_security_history(conn, binding_pk)
    snapshot_of(server_instance_id, team_id, epochs, security)  # refuses a plaintext team
    return issue(conn, binding_pk, server_instance_id, team_id, epochs, security, now)


def snapshot_adds(
    conn: apsw.Connection, binding_pk: int, snapshot: EpochSnapshot
) -> tuple[KeyEpoch, ...]:
    """The epochs ``snapshot`` adds; refused, naming the expected revision and
    digest, unless it extends this machine's retained checkpoint
    (:func:`syncengine.engine.epoch_checkpoint.admit`)."""
    return admit(load_checkpoint(conn, binding_pk), snapshot, st.load_key_epochs(conn, binding_pk))


def refuse_while_draining(conn: apsw.Connection, binding_pk: int, key_id: str) -> None:
    """Refuse a rotation while published age-v1 envelopes of another epoch
    wait for their acknowledgement (the profile's drain step): rotating now
    would let them land after the boundary, sealed to the wrong epoch."""
    row = one_row(
        conn.execute(
            "SELECT count(*) FROM sync_push WHERE binding_pk = ? AND state = 'reserved'"
            " AND cipher = 'age-v1' AND key_id != ?",
            (binding_pk, key_id),
        )
    )
    if row[0]:
        raise ConfigurationError(
            f"{row[0]} envelope(s) sealed to an older epoch are published but not yet "
            "acknowledged; rotating now would let them land after the boundary",
            remediation="Run 'syncengine push' until nothing is pending, then rotate.",
        )


def inherited_identity(history: EpochHistory, candidate: EpochHistory, key_id: str) -> str | None:
    """An identity path this machine already holds that is a recipient of the
    new epoch ``key_id`` in ``candidate`` (a machine that stays in the team
    keeps its key across a rotation that only adds or removes others)."""
    for path in dict.fromkeys(e.identity_path for e in history.epochs if e.identity_path):
        try:
            assign_identity(candidate, path, only=key_id)
        except ConfigurationError:
            continue
        return path
    return None


def rotate(
    conn: apsw.Connection,
    binding_pk: int,
    key_id: str,
    recipients: tuple[str, ...],
    boundary: int | None,
    identity_path: str | None,
    now: str,
) -> EpochHistory:
    """One transaction: re-check the drain, then append the epoch from
    ``boundary`` (the fresh snapshot's ``next_sequence_boundary``)."""

    history = st.load_key_epochs(conn, binding_pk)
    refuse_while_draining(conn, binding_pk, key_id)
    epoch = replace(history.appended(key_id, recipients, boundary), identity_path=identity_path)
    st.append_key_epoch(conn, binding_pk, epoch, now)
    rotated = EpochHistory((*history.epochs, epoch))
    # The rotation is the next snapshot of this machine's chain, retained in
    # the same transaction: a crash keeps both or neither.
    server_instance_id, team_id = _binding_ids(conn, binding_pk)
    issue(
        conn,
        binding_pk,
        server_instance_id,
        team_id,
        rotated,
        st.load_security_history(conn, binding_pk),
        now,
    )
    return rotated


def _binding_ids(conn: apsw.Connection, binding_pk: int) -> tuple[str, str]:
    row = one_row(
        conn.execute(
            "SELECT server_instance_id, remote_team_id FROM sync_bindings WHERE binding_pk = ?",
            (binding_pk,),
        )
    )
    return str(row[0]), str(row[1])


def import_epochs(
    conn: apsw.Connection,
    binding_pk: int,
    snapshot: EpochSnapshot,
    identities: dict[str, str],
    now: str,
) -> tuple[EpochHistory, tuple[KeyEpoch, ...]]:
    """One transaction: append what ``snapshot`` adds to the held history
    (refused when it would roll back or rewrite it), with this machine's
    identities for the new epochs."""

    held = st.load_key_epochs(conn, binding_pk)
    checkpoint = load_checkpoint(conn, binding_pk)
    added = tuple(
        replace(e, identity_path=identities.get(e.key_id))
        for e in admit(checkpoint, snapshot, held)
    )
    for epoch in added:
        st.append_key_epoch(conn, binding_pk, epoch, now)
    if checkpoint is None or checkpoint.snapshot_sha256 != snapshot.digest():
        save_checkpoint(conn, binding_pk, snapshot, now)
    return EpochHistory((*held.epochs, *added)), added
