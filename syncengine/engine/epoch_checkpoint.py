"""The retained epoch checkpoint of one binding, and what may follow it.

docs/spec/age-v1-profile.md "Epoch snapshots and rollback resistance";
our decisions are specs/age-v1.md "Epoch authority".

Every machine keeps the latest snapshot it accepted or issued — its
``(epoch_revision, snapshot_sha256, writer_generation)`` and the snapshot's
bytes — in ``engine_epoch_checkpoints`` (migration 15), keyed by the
Stage-1 binding so a ``disconnect`` does not forget it. A snapshot is taken
only when it *extends* that checkpoint:

- a lower revision is a **rollback**;
- the same revision with another digest is a **fork**;
- the next revision must name the checkpoint's digest as its
  ``previous_snapshot_sha256`` (else a **broken chain**, another fork) and
  may not lower the writer generation;
- a revision further ahead is a **gap**: the snapshots in between are
  needed (``keys epoch import`` takes them in order, several ``--file``).

A store migrated from before the chain holds a **legacy** checkpoint
(revision 0, no digest): it is anchored by the epochs the machine holds,
as the rule was then, so the first chained snapshot it takes need only
extend those epochs; from then on the chain rules apply.

Each write happens inside the caller's transaction (connect, rotate,
import) or in its own (``engine.checkpoint``: issuing a snapshot after a
security change), so a crash leaves the old or the new checkpoint, never a
mix with the epochs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from syncengine.engine.epochs import EpochHistory, EpochSnapshot, KeyEpoch
from syncengine.engine.errors import ConfigurationError
from syncengine.engine.security import SecurityHistory

if TYPE_CHECKING:
    import apsw

__all__ = [
    "MAX_CHAIN_SNAPSHOTS",
    "Checkpoint",
    "CheckpointRefused",
    "admit",
    "issue",
    "load_checkpoint",
    "replace_checkpoint",
    "save_checkpoint",
]


#: The profile's bound on the snapshots of one binding's chain (revisions 0..4095).
MAX_CHAIN_SNAPSHOTS = 4096


class CheckpointRefused(ConfigurationError):
    """A snapshot that does not extend this machine's retained checkpoint."""

    code = "epoch-checkpoint"
    remediation = (
        "Export the team's current snapshot on the machine that issued the latest one "
        "('syncengine keys epoch export'), confirm its digest over a live channel, and "
        "import every snapshot this machine has not seen, in order."
    )


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """What a machine retains of the last snapshot it accepted or issued."""

    epoch_revision: int
    #: ``None`` for a legacy checkpoint (a store migrated from before the chain).
    snapshot_sha256: str | None
    writer_generation: int
    snapshot: bytes | None

    @property
    def legacy(self) -> bool:
        return self.snapshot_sha256 is None

    def describe(self) -> str:
        if self.snapshot_sha256 is None:
            return f"a legacy checkpoint (revision {self.epoch_revision}, no digest)"
        return f"revision {self.epoch_revision} (sha256 {self.snapshot_sha256})"

    def held(self) -> EpochSnapshot | None:
        return None if self.snapshot is None else EpochSnapshot.decode(self.snapshot)


def _got(snapshot: EpochSnapshot, digest: str) -> str:
    after = snapshot.previous_sha256 or "nothing (a root)"
    return f"revision {snapshot.epoch_revision} (sha256 {digest}, following {after})"


def admit(
    checkpoint: Checkpoint | None, snapshot: EpochSnapshot, held: EpochHistory
) -> tuple[KeyEpoch, ...]:
    """The epochs ``snapshot`` adds to ``held``; :class:`CheckpointRefused`
    (naming the expected revision and digest, and what came) unless it
    extends ``checkpoint``. Pure."""
    if snapshot.epoch_revision >= MAX_CHAIN_SNAPSHOTS:
        raise CheckpointRefused(
            f"the snapshot is revision {snapshot.epoch_revision}: a chain holds at most "
            f"{MAX_CHAIN_SNAPSHOTS} snapshots (profile bound)"
        )
    if checkpoint is not None and checkpoint.snapshot_sha256 is not None:
        digest = snapshot.digest()
        revision, expected = checkpoint.epoch_revision, checkpoint.snapshot_sha256
        successor = f"revision {revision + 1} following sha256 {expected}"
        if snapshot.epoch_revision < revision:
            raise CheckpointRefused(
                f"rollback: this machine holds epoch snapshot {checkpoint.describe()}; "
                f"the snapshot is {_got(snapshot, digest)}: an older snapshot is never imported"
            )
        if snapshot.epoch_revision == revision:
            if digest == expected:
                return ()
            raise CheckpointRefused(
                f"fork: this machine holds epoch snapshot {checkpoint.describe()}; the "
                f"snapshot is {_got(snapshot, digest)}: the same revision with another "
                "digest, the histories diverge"
            )
        if snapshot.epoch_revision > revision + 1:
            raise CheckpointRefused(
                f"gap: expected {successor}; the snapshot is {_got(snapshot, digest)}: "
                f"revisions {revision + 1}..{snapshot.epoch_revision - 1} are missing here",
                remediation="Import the snapshots in between first, in order (or give "
                "'keys epoch import' every file from the next one on, each with --file; "
                "the last one's digest confirms the chain).",
            )
        if snapshot.previous_sha256 != expected:
            raise CheckpointRefused(
                f"fork: expected {successor}; the snapshot is {_got(snapshot, digest)}: "
                "it does not follow this machine's checkpoint"
            )
        if snapshot.writer_generation < checkpoint.writer_generation:
            raise CheckpointRefused(
                f"the snapshot lowers the writer generation from "
                f"{checkpoint.writer_generation} to {snapshot.writer_generation}"
            )
    return snapshot.extends(held)


def load_checkpoint(conn: apsw.Connection, binding_pk: int) -> Checkpoint | None:
    row = conn.execute(
        "SELECT epoch_revision, snapshot_sha256, writer_generation, snapshot"
        " FROM engine_epoch_checkpoints WHERE binding_pk = ?",
        (binding_pk,),
    ).fetchone()
    if row is None:
        return None
    return Checkpoint(row[0], row[1], row[2], None if row[3] is None else bytes(row[3]))


def save_checkpoint(
    conn: apsw.Connection, binding_pk: int, snapshot: EpochSnapshot, now: str
) -> None:
    """Retain ``snapshot`` as the binding's checkpoint (the table's trigger
    refuses, as a last line, a lower revision or generation, or another
    digest at the same revision)."""
    conn.execute(
        "INSERT INTO engine_epoch_checkpoints (binding_pk, epoch_revision, snapshot_sha256,"
        " writer_generation, snapshot, recorded_at) VALUES (?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (binding_pk) DO UPDATE SET epoch_revision = excluded.epoch_revision,"
        " snapshot_sha256 = excluded.snapshot_sha256,"
        " writer_generation = excluded.writer_generation, snapshot = excluded.snapshot,"
        " recorded_at = excluded.recorded_at",
        (
            binding_pk,
            snapshot.epoch_revision,
            snapshot.digest(),
            snapshot.writer_generation,
            snapshot.encode(),
            now,
        ),
    )


def replace_checkpoint(
    conn: apsw.Connection, binding_pk: int, snapshot: EpochSnapshot, now: str
) -> None:
    """Forget the retained checkpoint and start at ``snapshot`` — only for
    ``connect --start-new-key-history``, the operator's explicit choice."""
    conn.execute("DELETE FROM engine_epoch_checkpoints WHERE binding_pk = ?", (binding_pk,))
    save_checkpoint(conn, binding_pk, snapshot, now)


def issue(
    conn: apsw.Connection,
    binding_pk: int,
    server_instance_id: str,
    team_id: str,
    epochs: EpochHistory,
    security: SecurityHistory,
    now: str,
) -> EpochSnapshot:
    """The snapshot of what this machine holds, as the next link of its chain.

    When the checkpoint already says exactly that, it is returned unchanged
    (exporting twice gives the same digest). Otherwise — a rotation, a
    security change — a successor is retained: one more revision, naming
    the checkpoint's digest. From a legacy checkpoint (or none) the chain
    starts with a root at revision 0."""
    checkpoint = load_checkpoint(conn, binding_pk)
    held = checkpoint.held() if checkpoint is not None else None
    if held is not None:
        if held.same_content(epochs, security):
            return held
        if held.epoch_revision + 1 >= MAX_CHAIN_SNAPSHOTS:
            raise CheckpointRefused(
                f"this chain already holds {MAX_CHAIN_SNAPSHOTS} snapshots (profile bound): "
                "no further change can be issued",
                remediation="Nothing was changed. The team needs a new relay team and a new "
                "key history.",
            )
        snapshot = held.successor(epochs, security)
    else:
        snapshot = EpochSnapshot(server_instance_id, team_id, epochs.epochs, security.entries)
    save_checkpoint(conn, binding_pk, snapshot, now)
    return snapshot
