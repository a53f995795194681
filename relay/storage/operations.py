"""The relay's storage operations, one transaction each, for both SQL backends.

:class:`SqlRelayStore` implements every operation of
:class:`relay.storage.base.RelayStore` that is the same on SQLite and
PostgreSQL — which is all of them but readiness, lifecycle and the pool —
as a body over a :class:`~relay.storage.dialect.Tx` handed to the backend's
``_run``. A backend subclasses it and keeps only what is truly its own:
opening and committing transactions (isolation, retries, error mapping to
503/500), the one step where its locking needs another statement
(:meth:`SqlRelayStore._claim_team`), the per-team status counts it reads in
its own way, and its schema.

Every write transaction is named (``relay.post``, ``relay.pairing``, …);
:func:`commit` passes ``<name>.before_commit`` / ``<name>.after_commit``
around its COMMIT, where ``SYNCENGINE_CRASH_AT`` can kill the process
(relay/crash.py lists them all; crash_tests/test_relay_crash_points.py
proves each one).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TypeVar

from relay.crash import crash_point
from relay.errors import (
    CredentialScopeViolation,
    InvalidPairingToken,
    OperatorError,
    PairingTokenConsumed,
    PairingTokenExpired,
    ProvisioningRejected,
    ResyncRequired,
)
from relay.limits import (
    ACCEPTED_ENVELOPE_VERSIONS,
    DEFAULT_WRITE_ALLOWED_CIPHERS,
    MAX_BLOB_BYTES,
    MAX_POLICY_HISTORY,
    MAX_SEQ,
    STORABLE_CIPHERS,
)
from relay.storage import steps
from relay.storage.admission import ExistingId, plan_batch
from relay.storage.dialect import SqlConnection, Tx
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
    PostResult,
    ProvisioningDocument,
    ReadStatePage,
    ReadStateRequest,
    RetentionResult,
    RevokeResult,
    Roster,
    StoreCounts,
    StoredMessage,
    StoreStatus,
    TeamBinding,
    TeamStatus,
    TeamSummary,
)
from relay.storage.rules import check_document_shape, log_retention
from relay.storage.steps import CredentialLock, TeamRow

__all__ = ["SqlRelayStore", "commit"]

T = TypeVar("T")


def commit(conn: SqlConnection, name: str | None) -> None:
    """COMMIT ``conn``'s transaction; a named one passes its two crash points."""
    if name is not None:
        crash_point(f"{name}.before_commit")
    conn.execute("COMMIT")
    if name is not None:
        crash_point(f"{name}.after_commit")


class SqlRelayStore(ABC):
    """The shared operations; a backend supplies transactions and its own steps."""

    _retention_max_live: int | None

    # -- what each backend provides -----------------------------------------------------------
    @abstractmethod
    def _run(self, write: bool, body: Callable[[Tx], T], name: str | None = None) -> T:
        """Run ``body`` as one transaction (a write one named ``name``)."""

    @abstractmethod
    def _read_instance_id(self, tx: Tx) -> str:
        """The deployment ID; a missing row is the backend's own 503."""

    @abstractmethod
    def _claim_team(self, tx: Tx, document: ProvisioningDocument, now: str) -> tuple[TeamRow, bool]:
        """The document's team row, inserted if new, held for the rest of the apply.

        Returns ``(team, created)``.
        """

    @abstractmethod
    def _team_counts(self, tx: Tx, team_pk: int) -> tuple[int, int, int]:
        """Live messages, active members and live credentials of one team."""

    @abstractmethod
    def _announce(self, tx: Tx, team_id: str) -> None:
        """Tell other relay processes, at this transaction's commit, that the
        team's head or read state moved (the live wait's cross-process wake)."""

    # -- shared reads ---------------------------------------------------------------------------
    @staticmethod
    def _snapshot(tx: Tx, team: TeamRow) -> CapabilitySnapshot:
        return CapabilitySnapshot(
            team.binding, team.current_seq, steps.policy_history(tx, team.pk), MAX_BLOB_BYTES
        )

    # -- data plane ---------------------------------------------------------------------------
    def authorize(self, access: Access) -> TeamBinding:
        return self._run(False, lambda tx: steps.authenticate(tx, access)[0].binding)

    def capabilities(self, access: Access) -> CapabilitySnapshot:
        def body(tx: Tx) -> CapabilitySnapshot:
            team, _ = steps.authenticate(tx, access)
            return self._snapshot(tx, team)

        return self._run(False, body)

    def post_messages(
        self, access: Access, batch: Sequence[IncomingMessage], received_at: str
    ) -> PostResult:
        """v1.md "Team sequence allocation": admit, allocate, store, then auto-retain."""

        def body(tx: Tx) -> PostResult:
            team, _ = steps.authenticate(tx, access, lock=CredentialLock.SHARE)
            ids = tx.dialect.encode_ids(sorted({m.wire_id for m in batch}))
            existing = {
                wire_id: ExistingId(bytes(digest), int(seq))
                for wire_id, digest, seq in tx.rows(
                    "SELECT wire_id, envelope_digest, team_seq FROM wire_ids "
                    "WHERE team_pk = ? AND wire_id {any}",
                    (team.pk, ids),
                )
            }
            policy = steps.policy_history(tx, team.pk)[-1]
            plan = plan_batch(batch, existing, policy, team.current_seq)
            if plan.inserts:
                tx.insert_rows(
                    steps.MESSAGES,
                    [
                        (
                            team.pk,
                            seq,
                            m.wire_id,
                            received_at,
                            m.envelope.v,
                            m.envelope.cipher,
                            m.envelope.key_id,
                            m.envelope.blob,
                        )
                        for seq, m in plan.inserts
                    ],
                )
                tx.insert_rows(
                    steps.WIRE_IDS,
                    [(team.pk, m.wire_id, m.digest, seq) for seq, m in plan.inserts],
                )
                tx.run(
                    "UPDATE teams SET current_seq = ? WHERE team_pk = ?",
                    (plan.new_current_seq, team.pk),
                )
                self._announce(tx, team.team_id)
            retention = None
            floor = team.min_available_seq
            if self._retention_max_live is not None:
                target = plan.new_current_seq - self._retention_max_live
                if target > floor:
                    retention = steps.retain_locked(tx, team, target)
                    floor = retention.new_floor
            binding = TeamBinding(team.team_id, team.team_name, floor)
            return PostResult(binding, policy.policy_revision, plan.acks, retention)

        result = self._run(True, body, "relay.post")
        if result.retention is not None:
            log_retention(result.retention, automatic=True)
        return result

    def page_messages(self, access: Access, after: int, limit: int) -> MessagePage:
        def body(tx: Tx) -> MessagePage:
            team, _ = steps.authenticate(tx, access)
            if after < team.min_available_seq:
                raise ResyncRequired(
                    details={
                        "after": str(after),
                        "min_available_seq": str(team.min_available_seq),
                    },
                    team_id=team.team_id,
                    extra={
                        "team_name": team.team_name,
                        "min_available_seq": team.min_available_seq,
                    },
                )
            rows = tx.rows(
                "SELECT team_seq, wire_id, server_received_at, v, cipher, key_id, blob "
                "FROM messages WHERE team_pk = ? AND team_seq > ? ORDER BY team_seq LIMIT ?",
                (team.pk, after, limit + 1),
            )
            has_more = len(rows) > limit
            messages = tuple(StoredMessage(*row) for row in rows[:limit])
            next_after = messages[-1].server_seq if messages else after
            return MessagePage(team.binding, messages, next_after, has_more)

        return self._run(False, body)

    def live_head(self, access: Access) -> LiveHead:
        """Authenticate and read the team's head in one read (the live wait's check)."""

        def body(tx: Tx) -> LiveHead:
            team, _ = steps.authenticate(tx, access)
            return LiveHead(team.binding, team.current_seq, team.read_revision)

        return self._run(False, body)

    def live_heads(self, team_ids: Sequence[str]) -> dict[str, LiveHead]:
        """The heads of several teams in one read, unauthenticated (a wake's refresh)."""

        def body(tx: Tx) -> dict[str, LiveHead]:
            rows = tx.rows(
                f"SELECT {steps.TEAM_COLUMNS} FROM teams WHERE team_id {{any}}",
                (tx.dialect.encode_ids(sorted(set(team_ids))),),
            )
            teams = [TeamRow(*row) for row in rows]
            return {t.team_id: LiveHead(t.binding, t.current_seq, t.read_revision) for t in teams}

        return self._run(False, body)

    def members(self, access: Access) -> Roster:
        def body(tx: Tx) -> Roster:
            team, _ = steps.authenticate(tx, access)
            return Roster(team.binding, team.members_revision, steps.active_members(tx, team))

        return self._run(False, body)

    def sync_read_state(self, access: Access, request: ReadStateRequest) -> ReadStatePage:
        write = bool(request.updates)
        lock = CredentialLock.SHARE if write else CredentialLock.NONE

        def body(tx: Tx) -> ReadStatePage:
            team, _ = steps.authenticate(tx, access, lock=lock)
            if write and steps.merge_read_updates(tx, team, request):
                self._announce(tx, team.team_id)
            items, has_more = steps.read_page(tx, team, request.page_after, request.page_limit)
            return ReadStatePage(team.binding, team.current_seq, items, has_more)

        return self._run(write, body, "relay.read_state")

    # -- pairing and credentials ----------------------------------------------------------------
    def exchange_pairing_token(
        self, token_hash: bytes, credential_id: str, credential_hash: bytes, now: str
    ) -> ExchangeResult:
        def body(tx: Tx) -> ExchangeResult:
            # Where rows are locked, a concurrent exchange waits on the token
            # row, then re-reads it as consumed: one token, one credential.
            row = tx.one(
                "SELECT t.team_pk, t.device_name, t.expires_at, t.consumed_at, teams.team_id "
                "FROM pairing_tokens t JOIN teams USING (team_pk) WHERE t.token_hash = ?"
                "{lock_token}",
                (token_hash,),
            )
            if row is None:
                raise InvalidPairingToken()
            team_pk, device_name, expires_at, consumed_at, team_id = row
            if consumed_at is not None:
                raise PairingTokenConsumed(team_id=team_id)
            if now >= expires_at:
                raise PairingTokenExpired(team_id=team_id, details={"expired_at": expires_at})
            tx.run(
                "INSERT INTO credentials(credential_id, team_pk, secret_hash, device_name, "
                "paired_at) VALUES (?, ?, ?, ?, ?)",
                (credential_id, team_pk, credential_hash, device_name, now),
            )
            tx.run(
                "UPDATE pairing_tokens SET consumed_at = ?, credential_id = ? WHERE token_hash = ?",
                (now, credential_id, token_hash),
            )
            team = steps.load_team(tx, team_id)
            assert team is not None
            return ExchangeResult(credential_id, self._snapshot(tx, team))

        return self._run(True, body, "relay.pairing")

    def revoke_own_credential(self, access: Access, credential_id: str, now: str) -> RevokeResult:
        """Self-revocation; a revoked bearer may repeat it (idempotent)."""

        def body(tx: Tx) -> RevokeResult:
            team, own_id = steps.authenticate(
                tx, access, lock=CredentialLock.UPDATE, allow_revoked=True
            )
            if credential_id != own_id:
                raise CredentialScopeViolation(team_id=team.team_id)
            tx.run(
                "UPDATE credentials SET revoked_at = ? WHERE credential_id = ? "
                "AND revoked_at IS NULL",
                (now, own_id),
            )
            row = tx.one("SELECT revoked_at FROM credentials WHERE credential_id = ?", (own_id,))
            assert row is not None
            return RevokeResult(team.binding, own_id, str(row[0]))

        return self._run(True, body, "relay.revoke")

    # -- operator control plane -----------------------------------------------------------------
    def apply_provisioning(self, document: ProvisioningDocument, now: str) -> TeamSummary:
        """Atomic replace of one team's roster (v1.md "GET /v1/members")."""
        check_document_shape(document)

        def body(tx: Tx) -> TeamSummary:
            team, created = self._claim_team(tx, document, now)
            if created:
                tx.run(
                    "INSERT INTO policy_history(team_pk, effective_from_seq, policy_revision, "
                    "accepted_envelope_versions, write_allowed_ciphers) VALUES (?, 1, 0, ?, ?)",
                    (
                        team.pk,
                        tx.dialect.encode_json(list(ACCEPTED_ENVELOPE_VERSIONS)),
                        tx.dialect.encode_json(sorted(DEFAULT_WRITE_ALLOWED_CIPHERS)),
                    ),
                )
            elif team.members_revision >= MAX_SEQ:
                raise ProvisioningRejected("members_revision is at its maximum")
            steps.replace_roster(tx, team, document)
            revision = team.members_revision if created else team.members_revision + 1
            tx.run(
                "UPDATE teams SET team_name = ?, members_revision = ? WHERE team_pk = ?",
                (document.team_name, revision, team.pk),
            )
            return TeamSummary(
                document.team_id, document.team_name, revision, len(document.members), created
            )

        return self._run(True, body, "relay.provision")

    def issue_pairing_token(
        self, team_id: str, token_hash: bytes, device_name: str | None, now: str, expires_at: str
    ) -> IssuedToken:
        def body(tx: Tx) -> IssuedToken:
            team = steps.team_or_operator_error(tx, team_id)
            tx.run(
                "INSERT INTO pairing_tokens(token_hash, team_pk, device_name, issued_at, "
                "expires_at) VALUES (?, ?, ?, ?, ?)",
                (token_hash, team.pk, device_name, now, expires_at),
            )
            return IssuedToken(team_id, device_name, now, expires_at)

        return self._run(True, body, "relay.token_issue")

    def list_credentials(self, team_id: str | None) -> tuple[CredentialInfo, ...]:
        def body(tx: Tx) -> tuple[CredentialInfo, ...]:
            listing = (
                "SELECT c.credential_id, t.team_id, c.device_name, c.paired_at, "
                "c.revoked_at FROM credentials c JOIN teams t USING (team_pk) "
            )
            if team_id is None:
                rows = tx.rows(listing + "ORDER BY c.credential_id")
            else:
                team = steps.team_or_operator_error(tx, team_id)
                rows = tx.rows(listing + "WHERE c.team_pk = ? ORDER BY c.credential_id", (team.pk,))
            return tuple(CredentialInfo(*row) for row in rows)

        return self._run(False, body)

    def revoke_credential(self, team_id: str, credential_id: str, now: str) -> CredentialInfo:
        def body(tx: Tx) -> CredentialInfo:
            team = steps.team_or_operator_error(tx, team_id)
            # Where rows are locked, the UPDATE waits out a write holding the
            # credential FOR SHARE; once it commits, no later write can
            # authenticate.
            tx.run(
                "UPDATE credentials SET revoked_at = ? WHERE credential_id = ? AND team_pk = ? "
                "AND revoked_at IS NULL",
                (now, credential_id, team.pk),
            )
            row = tx.one(
                "SELECT credential_id, device_name, paired_at, revoked_at FROM credentials "
                "WHERE credential_id = ? AND team_pk = ?",
                (credential_id, team.pk),
            )
            if row is None:
                raise OperatorError(
                    f"no credential {credential_id} in team {team_id}",
                    "list them with: syncengine relay credential list --team TEAM_ID",
                )
            return CredentialInfo(row[0], team_id, row[1], row[2], row[3])

        return self._run(True, body, "relay.credential_revoke")

    def set_policy(self, team_id: str, write_allowed_ciphers: Sequence[str]) -> PolicyEntry:
        """Append a policy revision effective from ``current_seq + 1``.

        Same-boundary revisions collapse to the newest (only the greatest
        revision at a boundary is ever effective); a new distinct boundary
        beyond 4,096 entries, or a revision/boundary past the signed 64-bit
        maximum, fails atomically. The team row is held while the boundary is
        chosen, so no write can commit between choosing it and recording it.
        """
        ciphers = tuple(sorted(set(write_allowed_ciphers)))
        unknown = [c for c in ciphers if c not in STORABLE_CIPHERS]
        if unknown:
            raise ProvisioningRejected(
                f"cipher {unknown[0]!r} is not storable by this relay",
                f"choose from: {', '.join(STORABLE_CIPHERS)} (or none of them)",
            )

        def body(tx: Tx) -> PolicyEntry:
            team = steps.team_or_operator_error(tx, team_id, lock=True)
            if team.current_seq >= MAX_SEQ or team.policy_revision >= MAX_SEQ:
                raise ProvisioningRejected("policy change would exceed the signed 64-bit maximum")
            boundary = team.current_seq + 1
            revision = team.policy_revision + 1
            history = steps.policy_history(tx, team.pk)
            if history[-1].effective_from_seq != boundary and len(history) >= MAX_POLICY_HISTORY:
                raise ProvisioningRejected(
                    f"policy history already has {MAX_POLICY_HISTORY} effective entries",
                    "a team's policy history is bounded for its lifetime",
                )
            tx.run(
                "INSERT INTO policy_history(team_pk, effective_from_seq, policy_revision, "
                "accepted_envelope_versions, write_allowed_ciphers) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (team_pk, effective_from_seq) DO UPDATE SET "
                "policy_revision = excluded.policy_revision, "
                "accepted_envelope_versions = excluded.accepted_envelope_versions, "
                "write_allowed_ciphers = excluded.write_allowed_ciphers",
                (
                    team.pk,
                    boundary,
                    revision,
                    tx.dialect.encode_json(list(ACCEPTED_ENVELOPE_VERSIONS)),
                    tx.dialect.encode_json(list(ciphers)),
                ),
            )
            tx.run("UPDATE teams SET policy_revision = ? WHERE team_pk = ?", (revision, team.pk))
            return PolicyEntry(revision, boundary, ACCEPTED_ENVELOPE_VERSIONS, ciphers)

        return self._run(True, body, "relay.policy")

    def retain(self, team_id: str, through_seq: int) -> RetentionResult:
        def body(tx: Tx) -> RetentionResult:
            team = steps.team_or_operator_error(tx, team_id, lock=True)
            if through_seq > team.current_seq:
                raise ProvisioningRejected(
                    f"--through {through_seq} is beyond current_seq {team.current_seq}",
                    "retention can only cover sequences that exist",
                )
            return steps.retain_locked(tx, team, through_seq)

        result = self._run(True, body, "relay.retain")
        log_retention(result, automatic=False)
        return result

    def status(self) -> StoreStatus:
        def body(tx: Tx) -> StoreStatus:
            teams = []
            for row in tx.rows(f"SELECT {steps.TEAM_COLUMNS} FROM teams ORDER BY team_id"):
                team = TeamRow(*row)
                live, members, creds = self._team_counts(tx, team.pk)
                policy = steps.policy_history(tx, team.pk)[-1]
                teams.append(
                    TeamStatus(
                        team.team_id,
                        team.team_name,
                        team.current_seq,
                        team.min_available_seq,
                        live,
                        team.members_revision,
                        members,
                        policy.policy_revision,
                        policy.write_allowed_ciphers,
                        creds,
                    )
                )
            return StoreStatus(self._read_instance_id(tx), tuple(teams))

        return self._run(False, body)

    def counts(self) -> StoreCounts:
        """One aggregate over the team rows (records.StoreCounts says why it equals the rows)."""

        def body(tx: Tx) -> StoreCounts:
            row = tx.one(
                "SELECT count(*), coalesce(sum(current_seq - min_available_seq), 0), "
                "coalesce(sum(current_seq), 0) FROM teams"
            )
            assert row is not None
            return StoreCounts(int(row[0]), int(row[1]), int(row[2]))

        return self._run(False, body)
