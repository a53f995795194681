"""Test doubles for the sync operations: a relay that behaves like the v1
team sequence (idempotent by wire ID, conflicting on different bytes), and
an engine-side classifier that opens envelopes the way the HTTP engine does
before it calls apply."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from syncengine.ids import new_uuid4, new_uuid7
from syncengine.ops.bindings import BindingKey
from syncengine.ops.sync_records import (
    SyncPrepare,
    SyncPullCursor,
    SyncPullMessage,
    SyncPushAck,
    SyncPushCandidate,
)
from wire.age_keys import X25519Identity
from wire.envelope import Envelope
from wire.message import Message
from wire.outcome import Importable
from wire.profiles import Binding, OpenContext, SealParams, open_envelope, seal

RECEIVED = "2026-08-01T10:00:00.000000Z"
CREATED = "2026-08-01T09:00:00.000000Z"


def new_key(team: str = "dev") -> BindingKey:
    return BindingKey(team, new_uuid7(), new_uuid7(), 1)


def prepare_none(allow_new: bool = True, max_blob_bytes: int = 1024 * 1024) -> SyncPrepare:
    return SyncPrepare(1, "none", None, (), max_blob_bytes, allow_new)


def prepare_age(identity: X25519Identity, key_id: str = "epoch-1") -> SyncPrepare:
    return SyncPrepare(1, "age-v1", key_id, (identity.recipient.to_string(),), 1024 * 1024, True)


def ack(candidate: SyncPushCandidate, seq: int, disposition: str = "stored") -> SyncPushAck:
    return SyncPushAck(candidate.local_position, candidate.wire_id, seq, disposition)


@dataclass
class RelayEntry:
    seq: int
    wire_id: str
    envelope: Envelope


@dataclass
class FakeRelay:
    """One team stream: sequences from 1, dedup by wire ID forever."""

    entries: list[RelayEntry] = field(default_factory=list)
    by_wire: dict[str, RelayEntry] = field(default_factory=dict)

    @property
    def tip(self) -> int:
        return self.entries[-1].seq if self.entries else 0

    def post(self, wire_id: str, envelope: Envelope) -> tuple[int, str]:
        known = self.by_wire.get(wire_id)
        if known is not None:
            assert known.envelope == envelope, "relay: same wire ID, different envelope (409)"
            return known.seq, "duplicate"
        entry = RelayEntry(self.tip + 1, wire_id, envelope)
        self.entries.append(entry)
        self.by_wire[wire_id] = entry
        return entry.seq, "stored"

    def push(self, candidates: list[SyncPushCandidate]) -> list[SyncPushAck]:
        acks = []
        for candidate in candidates:
            seq, disposition = self.post(candidate.wire_id, candidate.envelope)
            acks.append(ack(candidate, seq, disposition))
        return acks

    def page(self, after: int, limit: int = 1000) -> tuple[list[RelayEntry], int]:
        found = [e for e in self.entries if e.seq > after][:limit]
        return found, (found[-1].seq if found else after)


@dataclass
class Classifier:
    """What the engine does before apply: open each envelope under the
    binding, with the identities it currently holds."""

    key: BindingKey
    identities: dict[str, X25519Identity] = field(default_factory=dict)

    def evaluate(self, entry: RelayEntry) -> tuple[str, Message | None, str | None]:
        ctx = OpenContext(
            binding=Binding(self.key.remote_team_id, entry.wire_id, 1),
            identities=dict(self.identities),
        )
        outcome = open_envelope(entry.envelope, ctx)
        if isinstance(outcome, Importable):
            return "importable", outcome.message, None
        return outcome.state.value, None, outcome.reason

    def pull_message(self, entry: RelayEntry) -> SyncPullMessage:
        status, projection, reason = self.evaluate(entry)
        return SyncPullMessage(
            entry.seq, entry.wire_id, RECEIVED, entry.envelope, status, 0, 0, reason, projection
        )

    def page(
        self, relay: FakeRelay, after: int, limit: int = 1000
    ) -> tuple[list[SyncPullMessage], SyncPullCursor]:
        entries, next_after = relay.page(after, limit)
        return [self.pull_message(e) for e in entries], SyncPullCursor(next_after)


def foreign_envelope(
    key: BindingKey,
    body: str = "from afar",
    sender: str = "zed",
    recipient: str = "alice",
    *,
    identity: X25519Identity | None = None,
    wire_id: str | None = None,
) -> tuple[str, Envelope]:
    """A message another device sealed for the same remote team."""
    wire = wire_id or new_uuid4()
    message = Message(body, CREATED, sender, recipient)
    if identity is None:
        return wire, seal(message, "none")
    params = SealParams(
        binding=Binding(key.remote_team_id, wire, 1),
        key_id="epoch-1",
        recipients=(identity.recipient.to_string(),),
    )
    return wire, seal(message, "age-v1", params)


def pull_record(
    seq: int,
    wire_id: str,
    envelope: Envelope,
    status: str = "importable",
    projection: Message | None = None,
    reason: str | None = None,
) -> SyncPullMessage:
    if status == "importable" and projection is None:
        projection = Message.from_jcs(envelope.blob_bytes())
    return SyncPullMessage(seq, wire_id, RECEIVED, envelope, status, 0, 0, reason, projection)


def table(conn: Any, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in conn.execute(sql, params).fetchall()]
