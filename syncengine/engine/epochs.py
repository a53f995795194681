"""The sequence-effective key-epoch history of one binding, and its snapshot.

docs/spec/age-v1-profile.md "Recipient-set epochs" and "Epoch snapshots and
rollback resistance"; our decisions are specs/engine.md §6.

- A binding's age-v1 configuration is an append-only list of epochs. Epoch
  revision 0 is effective from sequence 1; each later one from the relay's
  ``next_sequence_boundary`` at the time it was added (prospective: what is
  already stored keeps its epoch). A message at sequence ``S`` belongs to
  the greatest revision whose boundary is ≤ ``S``; same-boundary entries
  collapse to the greatest revision. At most 4096 distinct boundaries.
- A ``key_id`` names one immutable recipient set: it is never reused, with
  the same or another manifest.
- The history travels between machines as an **epoch snapshot**: one
  RFC 8785 document bound to the relay instance, the remote team and the
  profile, holding the whole epoch history and the local security history.
  Its SHA-256 digest is what an operator confirms over a live channel when
  importing it; a snapshot is accepted only when it extends what the
  machine already holds (never a rollback, never a divergent past).
- Snapshots form a hash chain (profile "Epoch snapshots and rollback
  resistance"): each carries its ``epoch_revision`` (0 for a root, then one
  more per issued snapshot), the ``previous_snapshot_sha256`` of the one it
  follows (null only at revision 0), and the ``writer_generation`` and
  ``writer_roster`` it authorizes. Decision (specs/age-v1.md "Epoch
  authority"): both are derived from the current epoch, so they cannot
  disagree with it — the generation is its revision (one per rotation), the
  roster its recipients, sorted. The acceptance rule against a machine's
  retained checkpoint is :mod:`syncengine.engine.epoch_checkpoint`.

Everything here is pure: values in, decisions out.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from syncengine.engine.errors import ConfigurationError
from syncengine.engine.limits import MAX_LOCAL_SECURITY_HISTORY
from syncengine.engine.security import SecurityEntry, SecurityHistory, SecurityMode
from wire.errors import WireError

__all__ = [
    "MAX_KEY_EPOCHS",
    "SNAPSHOT_FORMAT",
    "EpochHistory",
    "EpochSnapshot",
    "KeyEpoch",
    "LegacySnapshotRefused",
]

#: The profile's bound on effective entries of one binding's key-epoch history.
MAX_KEY_EPOCHS = MAX_LOCAL_SECURITY_HISTORY

SNAPSHOT_FORMAT = "syncengine-epoch-snapshot"
_SNAPSHOT_VERSION = 2
#: Snapshots exported before the authority chain (no revision, no digest link).
_LEGACY_SNAPSHOT_VERSION = 1
_PROFILE = "age-v1"
#: A snapshot holds at most 4096 epochs of 256 recipients (~63 bytes each).
MAX_SNAPSHOT_BYTES = 80 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class KeyEpoch:
    """One epoch: revision, first sequence, ``key_id``, its recipient manifest,
    and the path of this machine's identity for it (``None``: not installed)."""

    revision: int
    effective_from_seq: int
    key_id: str
    recipients: tuple[str, ...]
    identity_path: str | None = None

    def to_obj(self) -> dict[str, object]:
        """The operator's view (``status``, ``keys epoch list``); no secret."""
        return {
            "revision": str(self.revision),
            "effective_from_seq": str(self.effective_from_seq),
            "key_id": self.key_id,
            "recipients": len(self.recipients),
            "identity_file": self.identity_path,
        }

    def same_epoch(self, other: KeyEpoch) -> bool:
        """Equal in everything the team shares (the identity is per machine)."""
        return (self.revision, self.effective_from_seq, self.key_id, self.recipients) == (
            other.revision,
            other.effective_from_seq,
            other.key_id,
            other.recipients,
        )


def _boundary(epoch: KeyEpoch) -> int:
    return epoch.effective_from_seq


@dataclass(frozen=True, slots=True)
class EpochHistory:
    """A binding's epochs, ascending by revision; may be empty (a `none` team)."""

    epochs: tuple[KeyEpoch, ...]

    def __post_init__(self) -> None:
        if not self.epochs:
            return
        first = self.epochs[0]
        if (first.revision, first.effective_from_seq) != (0, 1):
            raise ConfigurationError("the key-epoch history must start with revision 0 from 1")
        seen: set[str] = set()
        for before, epoch in zip(self.epochs, self.epochs[1:], strict=False):
            if epoch.revision != before.revision + 1:
                raise ConfigurationError("key-epoch revisions must ascend by one")
            if epoch.effective_from_seq < before.effective_from_seq:
                raise ConfigurationError("key-epoch boundaries never move backwards")
        for epoch in self.epochs:
            if epoch.key_id in seen:
                raise ConfigurationError(
                    f"key ID {epoch.key_id!r} names two epochs; a key ID is never reused"
                )
            seen.add(epoch.key_id)

    @property
    def configured(self) -> bool:
        return bool(self.epochs)

    @property
    def current(self) -> KeyEpoch | None:
        return self.epochs[-1] if self.epochs else None

    def at(self, seq: int) -> KeyEpoch | None:
        """The epoch effective at ``seq``: the greatest revision with boundary ≤ ``seq``."""
        if not self.epochs:
            return None
        index = bisect.bisect_right(self.epochs, seq, key=_boundary)
        return self.epochs[max(index, 1) - 1]

    def by_key_id(self, key_id: str) -> KeyEpoch | None:
        for epoch in self.epochs:
            if epoch.key_id == key_id:
                return epoch
        return None

    def covers(self, seq: int) -> bool:
        """Whether ``seq`` lies within what this history is known to decide.

        Before the current epoch's boundary the history is settled: a later
        rotation is prospective and cannot change it. From that boundary on,
        another machine may already have added an epoch this one has not yet
        imported (profile: "messages beyond its verified history coverage
        remain unprojected")."""
        current = self.current
        return current is not None and seq < current.effective_from_seq

    def appended(self, key_id: str, recipients: tuple[str, ...], boundary: int | None) -> KeyEpoch:
        """The next epoch, from ``boundary`` (the relay's ``next_sequence_boundary``).

        Refused atomically: a null boundary (the sequence is exhausted), a
        boundary before the current one, a reused key ID, or more than
        :data:`MAX_KEY_EPOCHS` distinct boundaries."""
        current = self.current
        if current is None:
            raise ConfigurationError(
                "this team has no age-v1 epoch to rotate from; connect it with --key-id first"
            )
        if boundary is None:
            raise ConfigurationError(
                "the team's sequence is exhausted: no boundary is left for a new epoch"
            )
        if boundary < current.effective_from_seq:
            raise ConfigurationError(
                f"boundary {boundary} precedes epoch {current.key_id!r}'s boundary "
                f"{current.effective_from_seq}: a rotation is never retroactive"
            )
        if self.by_key_id(key_id) is not None:
            raise ConfigurationError(
                f"key ID {key_id!r} already names an epoch of this team; choose a new one"
            )
        distinct = len({epoch.effective_from_seq for epoch in self.epochs})
        if boundary != current.effective_from_seq and distinct >= MAX_KEY_EPOCHS:
            raise ConfigurationError(
                f"the key-epoch history already has {MAX_KEY_EPOCHS} boundaries (profile bound)"
            )
        return KeyEpoch(current.revision + 1, boundary, key_id, recipients)

    def with_identity(self, key_id: str, path: str) -> EpochHistory:
        return EpochHistory(
            tuple(
                KeyEpoch(e.revision, e.effective_from_seq, e.key_id, e.recipients, path)
                if e.key_id == key_id
                else e
                for e in self.epochs
            )
        )


class LegacySnapshotRefused(ConfigurationError):
    """A version-1 snapshot (exported before the authority chain): it has no
    revision and no link to a previous digest, so whether it extends a
    machine's checkpoint cannot be shown (specs/age-v1.md "Epoch authority")."""


@dataclass(frozen=True, slots=True)
class EpochSnapshot:
    """The team-shared configuration one machine hands to another.

    Bound to the relay instance, the remote team and the profile; holds the
    whole key-epoch history (identities excluded: they are per machine) and
    the local security history."""

    server_instance_id: str
    team_id: str
    epochs: tuple[KeyEpoch, ...]
    security: tuple[SecurityEntry, ...]
    #: 0 for a chain's root; each snapshot issued after it is one more.
    epoch_revision: int = 0
    #: The SHA-256 of the snapshot this one follows; ``None`` only at revision 0.
    previous_sha256: str | None = None

    def __post_init__(self) -> None:
        if (self.epoch_revision == 0) != (self.previous_sha256 is None):
            raise ConfigurationError(
                "epoch snapshot: previous_snapshot_sha256 is null exactly at epoch_revision 0"
            )

    @property
    def writer_generation(self) -> int:
        """The current epoch's revision: each rotation starts a new generation
        of writers (the operator fences the old one by revoking credentials)."""
        return self.epochs[-1].revision if self.epochs else 0

    @property
    def writer_roster(self) -> tuple[str, ...]:
        """The writers of this generation: the current epoch's recipients,
        sorted (a machine that may write holds that epoch's identity)."""
        return tuple(sorted(self.epochs[-1].recipients)) if self.epochs else ()

    def same_content(self, epochs: EpochHistory, security: SecurityHistory) -> bool:
        """Whether this snapshot already says what ``epochs`` and ``security``
        say (identities aside): then issuing another would change nothing."""
        return len(self.epochs) == len(epochs.epochs) and (
            all(a.same_epoch(b) for a, b in zip(self.epochs, epochs.epochs, strict=True))
            and self.security == security.entries
        )

    def successor(self, epochs: EpochHistory, security: SecurityHistory) -> EpochSnapshot:
        """The next snapshot of this chain, holding ``epochs`` and ``security``."""
        return EpochSnapshot(
            self.server_instance_id,
            self.team_id,
            epochs.epochs,
            security.entries,
            self.epoch_revision + 1,
            self.digest(),
        )

    def to_obj(self) -> dict[str, Any]:
        return {
            "format": SNAPSHOT_FORMAT,
            "version": _SNAPSHOT_VERSION,
            "profile": _PROFILE,
            "server_instance_id": self.server_instance_id,
            "team_id": self.team_id,
            "epoch_revision": str(self.epoch_revision),
            "writer_generation": str(self.writer_generation),
            "writer_roster": list(self.writer_roster),
            "previous_snapshot_sha256": self.previous_sha256,
            "epochs": [
                {
                    "revision": str(e.revision),
                    "effective_from_seq": str(e.effective_from_seq),
                    "key_id": e.key_id,
                    "recipients": list(e.recipients),
                }
                for e in self.epochs
            ],
            "local_security_history": [
                {
                    "revision": str(s.revision),
                    "effective_from_seq": str(s.effective_from_seq),
                    "minimum_security_mode": s.mode.value,
                }
                for s in self.security
            ],
        }

    def encode(self) -> bytes:
        # start-up pin: status loads no wire.jcs
        from wire.jcs import canonicalize

        return canonicalize(self.to_obj())

    def digest(self) -> str:
        import hashlib  # only a snapshot's digest needs it (status and pull do not)

        return hashlib.sha256(self.encode()).hexdigest()

    @classmethod
    def decode(cls, data: bytes) -> EpochSnapshot:
        """Parse a snapshot strictly: canonical bytes, exact fields, valid epochs.

        Errors name the field and the rule; they are :class:`ConfigurationError`
        because a snapshot is operator input."""
        # start-up pin: status loads no wire.jcs
        from wire.jcs import loads

        if len(data) > MAX_SNAPSHOT_BYTES:
            raise ConfigurationError(f"epoch snapshot is larger than {MAX_SNAPSHOT_BYTES} bytes")
        try:
            obj = loads(data)
        except (WireError, ValueError) as exc:
            raise ConfigurationError(f"epoch snapshot is not valid JSON: {exc}") from None
        snapshot = _snapshot_from_obj(obj)
        if snapshot.encode() != data.rstrip(b"\n"):
            raise ConfigurationError(
                "epoch snapshot is not in its canonical form (RFC 8785); export it again"
            )
        return snapshot

    def extends(self, epochs: EpochHistory) -> tuple[KeyEpoch, ...]:
        """The epochs this snapshot adds to ``epochs``; refused when it would
        roll back or rewrite what this machine holds (profile "rollback
        resistance": a shorter or divergent history is never accepted)."""
        held = epochs.epochs
        if len(self.epochs) < len(held):
            raise ConfigurationError(
                f"the snapshot holds {len(self.epochs)} epochs, this machine already "
                f"{len(held)}: an older snapshot is never imported"
            )
        for mine, theirs in zip(held, self.epochs, strict=False):
            if not mine.same_epoch(theirs):
                raise ConfigurationError(
                    f"the snapshot's epoch revision {theirs.revision} ({theirs.key_id!r}) "
                    f"differs from this machine's ({mine.key_id!r}): the histories diverge"
                )
        return self.epochs[len(held) :]


def _text(obj: dict[str, Any], name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"epoch snapshot: {name} must be a non-empty string")
    return value


def _decimal(obj: dict[str, Any], name: str, minimum: int) -> int:
    text = _text(obj, name)
    if not text.isascii() or not text.isdigit() or (len(text) > 1 and text[0] == "0"):
        raise ConfigurationError(f"epoch snapshot: {name} must be a canonical decimal string")
    value = int(text)
    if value < minimum or value >= 2**63:
        raise ConfigurationError(f"epoch snapshot: {name} is out of range")
    return value


def _exact_fields(obj: Any, names: Iterable[str], what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ConfigurationError(f"epoch snapshot: {what} must be an object")
    expected = set(names)
    if set(obj) != expected:
        extra = sorted(set(obj) - expected)
        missing = sorted(expected - set(obj))
        raise ConfigurationError(
            f"epoch snapshot: {what} has unexpected fields {extra} or lacks {missing}"
        )
    return obj


def _snapshot_from_obj(obj: Any) -> EpochSnapshot:
    # start-up pin (CRYPTO): only this path loads wire.age_profile.EpochManifest
    from wire.age_profile import EpochManifest

    legacy = (SNAPSHOT_FORMAT, _LEGACY_SNAPSHOT_VERSION)
    if isinstance(obj, dict) and (obj.get("format"), obj.get("version")) == legacy:
        raise LegacySnapshotRefused(
            f"this epoch snapshot is {SNAPSHOT_FORMAT} version 1, written before "
            "snapshots carried their revision and the digest of the one before: it "
            "cannot show that it extends this machine's checkpoint",
            remediation="Export the snapshot again ('syncengine keys epoch export') on a "
            "machine running this version, and confirm the digest it prints.",
        )
    top = _exact_fields(
        obj,
        (
            "format",
            "version",
            "profile",
            "server_instance_id",
            "team_id",
            "epoch_revision",
            "writer_generation",
            "writer_roster",
            "previous_snapshot_sha256",
            "epochs",
            "local_security_history",
        ),
        "the snapshot",
    )
    if top["format"] != SNAPSHOT_FORMAT or top["version"] != _SNAPSHOT_VERSION:
        raise ConfigurationError(f"not a {SNAPSHOT_FORMAT} version {_SNAPSHOT_VERSION} file")
    if top["profile"] != _PROFILE:
        raise ConfigurationError(f"epoch snapshot: profile must be {_PROFILE!r}")
    raw_epochs = top["epochs"]
    raw_security = top["local_security_history"]
    if not isinstance(raw_epochs, list) or not raw_epochs:
        raise ConfigurationError("epoch snapshot: epochs must be a non-empty list")
    if not isinstance(raw_security, list) or not raw_security:
        raise ConfigurationError("epoch snapshot: local_security_history must be a non-empty list")
    epochs: list[KeyEpoch] = []
    for item in raw_epochs:
        fields = _exact_fields(
            item, ("revision", "effective_from_seq", "key_id", "recipients"), "an epoch"
        )
        recipients = fields["recipients"]
        if not isinstance(recipients, list) or not all(isinstance(r, str) for r in recipients):
            raise ConfigurationError("epoch snapshot: recipients must be a list of strings")
        try:
            manifest = EpochManifest.from_strings(_text(fields, "key_id"), recipients)
        except WireError as exc:
            raise ConfigurationError(f"epoch snapshot: {exc.field}: {exc.rule}") from None
        epochs.append(
            KeyEpoch(
                _decimal(fields, "revision", 0),
                _decimal(fields, "effective_from_seq", 1),
                manifest.key_id,
                tuple(r.to_string() for r in manifest.recipients),
            )
        )
    security: list[SecurityEntry] = []
    for item in raw_security:
        fields = _exact_fields(
            item,
            ("revision", "effective_from_seq", "minimum_security_mode"),
            "a local security entry",
        )
        try:
            mode = SecurityMode(fields["minimum_security_mode"])
        except ValueError:
            raise ConfigurationError(
                "epoch snapshot: minimum_security_mode must be plaintext-allowed or e2ee-required"
            ) from None
        security.append(
            SecurityEntry(
                _decimal(fields, "revision", 0), _decimal(fields, "effective_from_seq", 1), mode
            )
        )
    history = EpochHistory(tuple(epochs))  # validates order and key-ID uniqueness
    SecurityHistory(tuple(security))
    revision = _decimal(top, "epoch_revision", 0)
    previous = top["previous_snapshot_sha256"]
    if previous is not None and not _is_digest(previous):
        raise ConfigurationError(
            "epoch snapshot: previous_snapshot_sha256 must be null or 64 lowercase hex digits"
        )
    snapshot = EpochSnapshot(
        _text(top, "server_instance_id"),
        _text(top, "team_id"),
        history.epochs,
        tuple(security),
        revision,
        previous,
    )
    if _decimal(top, "writer_generation", 0) != snapshot.writer_generation:
        raise ConfigurationError(
            "epoch snapshot: writer_generation must be the current epoch's revision "
            f"({snapshot.writer_generation})"
        )
    if top["writer_roster"] != list(snapshot.writer_roster):
        raise ConfigurationError(
            "epoch snapshot: writer_roster must be the current epoch's recipients, sorted"
        )
    return snapshot


def _is_digest(value: object) -> bool:
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )
