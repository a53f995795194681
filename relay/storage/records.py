"""Plain records that cross the storage interface.

The storage layer speaks integers for sequences and revisions (UPSTREAM-RECORDS
§9.10: never compare sequences as text); canonical strings are produced only at
the HTTP edge. None of these records has a field for a sender, recipient,
body or client timestamp: the relay cannot store what it cannot name
(docs/spec/server-opaque-envelope.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from wire.envelope import Envelope
from wire.http_v1.capabilities import PolicyEntry as PolicyEntry

Disposition = Literal["stored", "duplicate"]
ReadKind = Literal["frontier", "exact"]


@dataclass(frozen=True, slots=True)
class Access:
    """What a data-plane request presents: the team header and the bearer hash.

    Only the hash of the bearer secret ever reaches storage.
    """

    team_id: str
    secret_hash: bytes


@dataclass(frozen=True, slots=True)
class TeamBinding:
    """The common success fields of every team-scoped response (v1.md)."""

    team_id: str
    team_name: str
    min_available_seq: int


@dataclass(frozen=True, slots=True)
class LiveHead:
    """What the live wait compares and answers, read from one team row.

    ``current_seq`` is the committed head; ``read_revision`` counts the
    read-state changes committed so far (specs/live.md). Both only grow.
    """

    binding: TeamBinding
    current_seq: int
    read_revision: int

    def passes(self, after: int, read_after: int) -> bool:
        """Whether the team has moved past what a client holds."""
        return self.current_seq > after or self.read_revision > read_after


@dataclass(frozen=True, slots=True)
class CapabilitySnapshot:
    """Binding, sequence boundary and complete policy history from one snapshot."""

    binding: TeamBinding
    current_seq: int
    policy_history: tuple[PolicyEntry, ...]
    max_blob_bytes: int

    @property
    def current_policy(self) -> PolicyEntry:
        return self.policy_history[-1]


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """One validated batch element: wire ID, envelope and its idempotency digest."""

    wire_id: str
    envelope: Envelope
    digest: bytes


@dataclass(frozen=True, slots=True)
class Ack:
    wire_id: str
    server_seq: int
    disposition: Disposition


@dataclass(frozen=True, slots=True)
class RetentionResult:
    """What one retention transaction did; logged without any envelope."""

    team_id: str
    old_floor: int
    new_floor: int
    rows_removed: int


@dataclass(frozen=True, slots=True)
class PostResult:
    binding: TeamBinding
    policy_revision: int
    acks: tuple[Ack, ...]
    retention: RetentionResult | None = None


@dataclass(frozen=True, slots=True)
class StoredMessage:
    server_seq: int
    wire_id: str
    server_received_at: str
    v: int
    cipher: str
    key_id: str | None
    blob: str


@dataclass(frozen=True, slots=True)
class MessagePage:
    binding: TeamBinding
    messages: tuple[StoredMessage, ...]
    next_after: int
    has_more: bool


@dataclass(frozen=True, slots=True)
class Registration:
    registration_id: str
    installation_id: str
    type: str


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    name: str
    registrations: tuple[Registration, ...] = ()


@dataclass(frozen=True, slots=True)
class Roster:
    binding: TeamBinding
    members_revision: int
    members: tuple[Member, ...]


@dataclass(frozen=True, slots=True)
class ReadUpdate:
    member_id: str
    server_seq: int
    exact_wire_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True, order=True)
class ReadKey:
    """Keyset position in the read-state item stream.

    Ordering is ``(member_id, kind_order, wire_id)`` with frontier (0) before
    exact (1) and an empty wire component for frontiers, exactly the sort the
    spec fixes, so ``ReadKey`` comparisons are the pagination rule.
    """

    member_id: str
    kind_order: int
    wire_id: str = ""

    @property
    def kind(self) -> ReadKind:
        return "frontier" if self.kind_order == 0 else "exact"


@dataclass(frozen=True, slots=True)
class ReadStateRequest:
    updates: tuple[ReadUpdate, ...]
    page_after: ReadKey | None
    page_limit: int


@dataclass(frozen=True, slots=True)
class ReadItem:
    key: ReadKey
    server_seq: int | None = None


@dataclass(frozen=True, slots=True)
class ReadStatePage:
    binding: TeamBinding
    current_seq: int
    items: tuple[ReadItem, ...]
    has_more: bool

    @property
    def next_page_after(self) -> ReadKey | None:
        return self.items[-1].key if self.has_more else None


@dataclass(frozen=True, slots=True)
class ExchangeResult:
    credential_id: str
    capabilities: CapabilitySnapshot


@dataclass(frozen=True, slots=True)
class RevokeResult:
    binding: TeamBinding
    credential_id: str
    revoked_at: str


@dataclass(frozen=True, slots=True)
class ProvisioningDocument:
    """Operator roster document: the complete desired state of one team."""

    team_id: str
    team_name: str
    members: tuple[Member, ...]


@dataclass(frozen=True, slots=True)
class TeamSummary:
    team_id: str
    team_name: str
    members_revision: int
    active_members: int
    created: bool


@dataclass(frozen=True, slots=True)
class IssuedToken:
    team_id: str
    device_name: str | None
    issued_at: str
    expires_at: str


@dataclass(frozen=True, slots=True)
class CredentialInfo:
    credential_id: str
    team_id: str
    device_name: str | None
    paired_at: str
    revoked_at: str | None


@dataclass(frozen=True, slots=True)
class TeamStatus:
    team_id: str
    team_name: str
    current_seq: int
    min_available_seq: int
    live_messages: int
    members_revision: int
    active_members: int
    policy_revision: int
    write_allowed_ciphers: tuple[str, ...]
    active_credentials: int


@dataclass(frozen=True, slots=True)
class StoreStatus:
    server_instance_id: str
    teams: tuple[TeamStatus, ...] = field(default=())


@dataclass(frozen=True, slots=True)
class StoreCounts:
    """Deployment-wide totals for ``/metrics``, read from the team rows alone.

    Sequences are gap-free and retention deletes exactly the prefix at or
    below the floor, so a team's live rows number ``current_seq -
    min_available_seq``: the sum over team rows equals ``count(*)`` over
    ``messages`` without touching a message row.
    """

    teams: int
    messages_stored: int
    messages_sequenced: int


@dataclass(frozen=True, slots=True)
class PoolState:
    """The store's connections as ``/metrics`` shows them; ``None`` where it does not apply.

    PostgreSQL reports psycopg_pool's measures; SQLite has one connection per
    worker thread and no checkout queue, so it reports only ``size``.
    """

    size: int
    max_size: int | None = None
    available: int | None = None
    waiting: int | None = None
