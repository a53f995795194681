"""The narrow storage interface the HTTP layer and the admin CLI depend on.

Every method is exactly one storage transaction (crash safety: a state
transition either commits whole or not at all). Data-plane methods take an
:class:`Access` and re-authenticate inside their own transaction, so a
credential revoked concurrently can never write after its revocation commits.

Implementations: :mod:`relay.storage.sqlite` (the default, one file) and
:mod:`relay.storage.postgres`, which provides the same semantics with a
``SELECT … FOR NO KEY UPDATE`` on the team row where SQLite relies on its
single-writer lock; :mod:`relay.storage.placement` routes every operation
by team over several PostgreSQL stores (specs/relay-scaling.md);
:mod:`relay.storage.location` picks one from ``--database``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from relay.storage.records import (
    Access,
    CapabilitySnapshot,
    CredentialInfo,
    ExchangeResult,
    IncomingMessage,
    IssuedToken,
    LiveHead,
    MessagePage,
    PolicyEntry,
    PoolState,
    PostResult,
    ProvisioningDocument,
    ReadStatePage,
    ReadStateRequest,
    RetentionResult,
    RevokeResult,
    Roster,
    StoreCounts,
    StoreStatus,
    TeamBinding,
    TeamSummary,
)

#: What a :class:`LiveFeed` calls with a team whose head or read state moved
#: in another process, or with ``None`` when wakes may have been lost (its
#: connection dropped and came back): then every waited team is re-read.
WakeCallback = Callable[[str | None], None]


class LiveFeed(Protocol):
    """Wakes from other relay processes sharing the database (the live wait)."""

    def start(self, wake: WakeCallback) -> None:
        """Begin listening; ``wake`` is called from the feed's own thread."""
        ...

    def close(self) -> None: ...


class RelayStore(Protocol):
    """Storage for one relay deployment (one ``server_instance_id``)."""

    @property
    def server_instance_id(self) -> str:
        """The immutable deployment ID, read once when the store opened."""
        ...

    # -- readiness --------------------------------------------------------
    def probe(self) -> str:
        """Open and read the database afresh; return its server_instance_id.

        Raises :class:`relay.errors.Unavailable` when the database cannot be
        opened or read (v1.md "GET /v1/health").
        """
        ...

    # -- data plane -------------------------------------------------------
    def authorize(self, access: Access) -> TeamBinding:
        """401/404/403 before a body is read; the operation re-checks."""
        ...

    def capabilities(self, access: Access) -> CapabilitySnapshot: ...

    def post_messages(
        self, access: Access, batch: Sequence[IncomingMessage], received_at: str
    ) -> PostResult: ...

    def page_messages(self, access: Access, after: int, limit: int) -> MessagePage: ...

    def members(self, access: Access) -> Roster: ...

    def live_head(self, access: Access) -> LiveHead:
        """Authenticate (401/404/403) and read the team's head in one read."""
        ...

    def live_heads(self, team_ids: Sequence[str]) -> dict[str, LiveHead]:
        """Several teams' heads in one read, without authentication (wake refresh)."""
        ...

    def live_feed(self) -> LiveFeed | None:
        """Cross-process wakes, or ``None`` where one process owns the database."""
        ...

    def sync_read_state(self, access: Access, request: ReadStateRequest) -> ReadStatePage: ...

    def exchange_pairing_token(
        self, token_hash: bytes, credential_id: str, credential_hash: bytes, now: str
    ) -> ExchangeResult: ...

    def revoke_own_credential(self, access: Access, credential_id: str, now: str) -> RevokeResult:
        """Self-revocation; a revoked bearer may repeat it (idempotent)."""
        ...

    # -- operator control plane --------------------------------------------
    def apply_provisioning(self, document: ProvisioningDocument, now: str) -> TeamSummary: ...

    def issue_pairing_token(
        self, team_id: str, token_hash: bytes, device_name: str | None, now: str, expires_at: str
    ) -> IssuedToken: ...

    def list_credentials(self, team_id: str | None) -> tuple[CredentialInfo, ...]: ...

    def revoke_credential(self, team_id: str, credential_id: str, now: str) -> CredentialInfo: ...

    def set_policy(self, team_id: str, write_allowed_ciphers: Sequence[str]) -> PolicyEntry: ...

    def retain(self, team_id: str, through_seq: int) -> RetentionResult: ...

    def status(self) -> StoreStatus: ...

    # -- operations (/metrics) ------------------------------------------------
    def counts(self) -> StoreCounts:
        """Teams and messages in one aggregate over the team rows (never per message)."""
        ...

    def pool_state(self) -> PoolState:
        """The connection pool's current measures; no database round trip."""
        ...

    def close(self) -> None: ...
