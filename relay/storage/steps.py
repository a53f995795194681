"""The relay's storage steps, written once for SQLite and PostgreSQL.

Each function runs inside a transaction its caller opened (a :class:`Tx`)
and issues the statements of one step — resolve the team, authenticate,
read the policy history, replace a roster, merge and page read state,
retain — in the :class:`~relay.storage.dialect.Dialect` of that transaction.
The rules themselves are cited where they are enforced; the pure ones that
need no data live in :mod:`relay.storage.rules` and :mod:`relay.storage.admission`.

Locks: a step that decides from the team row asks for it with ``lock=True``
(or a :class:`CredentialLock`), which is a row lock on PostgreSQL and nothing
on SQLite, where ``BEGIN IMMEDIATE`` has already made the transaction the only
writer. The backend decides isolation, retries and error mapping.

The read-state bounds are read from this module's globals at call time
(tests lower them here).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from relay.errors import (
    Forbidden,
    InvalidRequest,
    OperatorError,
    ProvisioningRejected,
    TeamNotFound,
    Unauthenticated,
)
from relay.limits import MAX_EXACT_PER_MEMBER, MAX_EXACT_PER_TEAM, MAX_SEQ
from relay.storage.dialect import BulkTable, Tx
from relay.storage.read_stream import exact_floor, merge_page
from relay.storage.records import (
    Access,
    Member,
    PolicyEntry,
    ProvisioningDocument,
    ReadItem,
    ReadKey,
    ReadStateRequest,
    Registration,
    RetentionResult,
    TeamBinding,
)
from relay.storage.rules import check_read_state_bounds

__all__ = [
    "MESSAGES",
    "TEAM_COLUMNS",
    "WIRE_IDS",
    "CredentialLock",
    "TeamRow",
    "active_members",
    "authenticate",
    "load_team",
    "merge_read_updates",
    "policy_history",
    "read_instance_id",
    "read_page",
    "replace_roster",
    "retain_locked",
    "team_or_operator_error",
]

TEAM_COLUMNS = (
    "team_pk, team_id, team_name, current_seq, min_available_seq, members_revision, "
    "policy_revision, read_revision"
)
_TEAM_BY_ID = f"SELECT {TEAM_COLUMNS} FROM teams WHERE team_id = ?"

#: The two tables a POST appends to in bulk (v1.md "Team sequence
#: allocation"): the stored envelopes, and the wire-ID tombstones that
#: outlive them for idempotency. Types as in relay/storage/pg_schema.py.
MESSAGES = BulkTable(
    "messages",
    ("team_pk", "team_seq", "wire_id", "server_received_at", "v", "cipher", "key_id", "blob"),
    ("int8", "int8", "text", "text", "int4", "text", "text", "text"),
)
WIRE_IDS = BulkTable(
    "wire_ids",
    ("team_pk", "wire_id", "envelope_digest", "team_seq"),
    ("int8", "text", "bytea", "int8"),
)
_TEAM_BY_ID_LOCKED = _TEAM_BY_ID + "{lock_team}"
_CREDENTIAL_BY_SECRET = (
    "SELECT credential_id, team_pk, revoked_at FROM credentials WHERE secret_hash = ?"
)

#: Retiring a member deactivates it and its registrations and cascades its
#: read state (read-state spec); each statement binds ``(team_pk, member_id)``.
_RETIRE_MEMBER = (
    "UPDATE members SET active = {false} WHERE team_pk = ? AND member_id = ?",
    "UPDATE registrations SET active = {false} WHERE team_pk = ? AND member_id = ?",
    "DELETE FROM read_frontiers WHERE team_pk = ? AND member_id = ?",
    "DELETE FROM read_exact WHERE team_pk = ? AND member_id = ?",
)


@dataclass(frozen=True, slots=True)
class TeamRow:
    """One ``teams`` row, in :data:`TEAM_COLUMNS` order."""

    pk: int
    team_id: str
    team_name: str
    current_seq: int
    min_available_seq: int
    members_revision: int
    policy_revision: int
    #: Counts the read-sync transactions that changed the team's stored read
    #: state (schema version 2); the live wait's second number (specs/live.md).
    read_revision: int

    @property
    def binding(self) -> TeamBinding:
        return TeamBinding(self.team_id, self.team_name, self.min_available_seq)


class CredentialLock(Enum):
    """How a transaction holds the bearer's credential row while it works.

    ``SHARE``: a write that must not outrun a revocation (it also takes the
    team row); ``UPDATE``: self-revocation, which changes the credential.
    The value is the credential statement with that lock's suffix.
    """

    NONE = _CREDENTIAL_BY_SECRET
    SHARE = _CREDENTIAL_BY_SECRET + "{lock_share}"
    UPDATE = _CREDENTIAL_BY_SECRET + "{lock_update}"


# -- teams and credentials -------------------------------------------------------------------
def read_instance_id(tx: Tx) -> str | None:
    """The deployment's ``server_instance_id``; ``None`` if the row is missing."""
    row = tx.one("SELECT value FROM relay_meta WHERE key = 'server_instance_id'")
    return None if row is None else str(row[0])


def load_team(tx: Tx, team_id: str, *, lock: bool = False) -> TeamRow | None:
    row = tx.one(_TEAM_BY_ID_LOCKED if lock else _TEAM_BY_ID, (team_id,))
    return None if row is None else TeamRow(*row)


def team_or_operator_error(tx: Tx, team_id: str, *, lock: bool = False) -> TeamRow:
    team = load_team(tx, team_id, lock=lock)
    if team is None:
        raise OperatorError(
            f"team {team_id} is not provisioned",
            "apply a provisioning document first: syncengine relay team apply DOC.json",
        )
    return team


def authenticate(
    tx: Tx,
    access: Access,
    *,
    lock: CredentialLock = CredentialLock.NONE,
    allow_revoked: bool = False,
) -> tuple[TeamRow, str]:
    """401, then 404 for an unprovisioned team, then 403 for another team's.

    Lock order is credential → team, the same in every transaction.
    """
    row = tx.one(lock.value, (access.secret_hash,))
    if row is None or (row[2] is not None and not allow_revoked):
        raise Unauthenticated()
    credential_id, team_pk, _revoked = row
    team = load_team(tx, access.team_id)
    if team is None:
        raise TeamNotFound(team_id=access.team_id)
    if team.pk != team_pk:
        raise Forbidden(team_id=access.team_id)
    if lock is CredentialLock.SHARE and tx.dialect.row_locks:
        locked = load_team(tx, access.team_id, lock=True)
        assert locked is not None  # team rows are never deleted
        team = locked
    return team, str(credential_id)


def policy_history(tx: Tx, team_pk: int) -> tuple[PolicyEntry, ...]:
    decode = tx.dialect.decode_json
    rows = tx.rows(
        "SELECT policy_revision, effective_from_seq, accepted_envelope_versions, "
        "write_allowed_ciphers FROM policy_history WHERE team_pk = ? "
        "ORDER BY effective_from_seq",
        (team_pk,),
    )
    return tuple(
        PolicyEntry(int(rev), int(eff), tuple(decode(versions)), tuple(decode(ciphers)))
        for rev, eff, versions, ciphers in rows
    )


def active_members(tx: Tx, team: TeamRow) -> tuple[Member, ...]:
    registrations: dict[str, list[Registration]] = {}
    for member_id, reg_id, inst_id, reg_type in tx.rows(
        "SELECT member_id, registration_id, installation_id, type FROM registrations "
        "WHERE team_pk = ? AND {active} ORDER BY registration_id",
        (team.pk,),
    ):
        registrations.setdefault(member_id, []).append(Registration(reg_id, inst_id, reg_type))
    return tuple(
        Member(member_id, name, tuple(registrations.get(member_id, ())))
        for member_id, name in tx.rows(
            "SELECT member_id, name FROM members WHERE team_pk = ? AND {active} ORDER BY member_id",
            (team.pk,),
        )
    )


# -- roster -------------------------------------------------------------------------------------
def replace_roster(tx: Tx, team: TeamRow, document: ProvisioningDocument) -> None:
    """Refuse what the roster's history forbids, then write the new roster.

    v1.md "GET /v1/members": a retired member_id or registration_id is never
    reused, a name never passes to another member_id; a member missing from
    the document is retired with its read state.
    """
    existing = {
        member_id: bool(active)
        for member_id, active in tx.rows(
            "SELECT member_id, active FROM members WHERE team_pk = ?", (team.pk,)
        )
    }
    names: dict[str, str] = {
        name: member_id
        for name, member_id in tx.rows(
            "SELECT name, member_id FROM member_names WHERE team_pk = ?", (team.pk,)
        )
    }
    regs = {
        reg_id: (member_id, bool(active))
        for reg_id, member_id, active in tx.rows(
            "SELECT registration_id, member_id, active FROM registrations WHERE team_pk = ?",
            (team.pk,),
        )
    }
    wanted = {m.member_id for m in document.members}
    for member in document.members:
        if member.member_id in existing and not existing[member.member_id]:
            raise ProvisioningRejected(
                f"member_id {member.member_id} was retired and cannot be reused",
                "mint a new member_id for a new member",
            )
        owner = names.get(member.name)
        if owner is not None and owner != member.member_id:
            raise ProvisioningRejected(
                f"name {member.name!r} already belongs to member {owner}",
                "a member name is never reassigned to another member_id",
            )
        for reg in member.registrations:
            known = regs.get(reg.registration_id)
            if known is not None and (known[0] != member.member_id or not known[1]):
                raise ProvisioningRejected(
                    f"registration_id {reg.registration_id} belongs to another member "
                    "or was retired",
                    "mint a new registration_id",
                )
    removed = [m for m, active in existing.items() if active and m not in wanted]
    for member_id in removed:
        for statement in _RETIRE_MEMBER:
            tx.run(statement, (team.pk, member_id))
    for member in document.members:
        tx.run(
            "INSERT INTO members(team_pk, member_id, name, active) VALUES (?, ?, ?, {true}) "
            "ON CONFLICT (team_pk, member_id) DO UPDATE SET name = excluded.name",
            (team.pk, member.member_id, member.name),
        )
        tx.run(
            "INSERT INTO member_names(team_pk, name, member_id) VALUES (?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (team.pk, member.name, member.member_id),
        )
        keep = {r.registration_id for r in member.registrations}
        for reg_id, (owner, active) in regs.items():
            if owner == member.member_id and active and reg_id not in keep:
                tx.run(
                    "UPDATE registrations SET active = {false} WHERE team_pk = ? "
                    "AND registration_id = ?",
                    (team.pk, reg_id),
                )
        for reg in member.registrations:
            tx.run(
                "INSERT INTO registrations(team_pk, registration_id, member_id, "
                "installation_id, type, active) VALUES (?, ?, ?, ?, ?, {true}) "
                "ON CONFLICT (team_pk, registration_id) DO UPDATE SET "
                "installation_id = excluded.installation_id, type = excluded.type",
                (team.pk, reg.registration_id, member.member_id, reg.installation_id, reg.type),
            )


# -- read state ---------------------------------------------------------------------------------
def merge_read_updates(tx: Tx, team: TeamRow, request: ReadStateRequest) -> bool:
    """Validate, max-merge, set-union, GC on proof, then enforce the bounds.

    Runs while the transaction is the team's only writer (read-state spec
    "Merge"), so merges, retention and roster changes of one team never
    interleave. Returns whether a stored frontier or exact read changed; if
    so the team's ``read_revision`` has been raised by one in this same
    transaction (the live wait's read-state number, specs/live.md).
    """
    encode_ids = tx.dialect.encode_ids
    member_ids = [u.member_id for u in request.updates]
    active = {
        row[0]
        for row in tx.rows(
            "SELECT member_id FROM members WHERE team_pk = ? AND {active} AND member_id {any}",
            (team.pk, encode_ids(member_ids)),
        )
    }
    all_exact = sorted({w for u in request.updates for w in u.exact_wire_ids})
    resolved = {
        wire_id: int(seq)
        for wire_id, seq in tx.rows(
            "SELECT wire_id, team_seq FROM wire_ids WHERE team_pk = ? AND wire_id {any}",
            (team.pk, encode_ids(all_exact)),
        )
    }
    for index, update in enumerate(request.updates):
        where = f"updates[{index}]"
        if update.member_id not in active:
            raise InvalidRequest(
                "member is not active in this team", details={"field": f"{where}.member_id"}
            )
        if update.server_seq > team.current_seq:
            raise InvalidRequest(
                "frontier is beyond the team's current_seq",
                details={"field": f"{where}.server_seq"},
            )
        for wire_id in update.exact_wire_ids:
            if wire_id not in resolved:
                raise InvalidRequest(
                    "exact wire id is not a message of this team",
                    details={"field": f"{where}.exact_wire_ids"},
                )

    added: dict[str, int] = {}
    changed = False
    for update in request.updates:
        row = tx.one(
            "SELECT server_seq FROM read_frontiers WHERE team_pk = ? AND member_id = ?",
            (team.pk, update.member_id),
        )
        stored = int(row[0]) if row is not None else 0
        frontier = max(stored, update.server_seq, team.min_available_seq)
        if row is None or frontier != stored:
            # The effective frontier a page shows is at least the floor.
            changed = changed or frontier != max(stored, team.min_available_seq)
            tx.run(
                "INSERT INTO read_frontiers(team_pk, member_id, server_seq) VALUES (?, ?, ?) "
                "ON CONFLICT (team_pk, member_id) "
                "DO UPDATE SET server_seq = excluded.server_seq",
                (team.pk, update.member_id, frontier),
            )
        collected = tx.run(
            "DELETE FROM read_exact WHERE team_pk = ? AND member_id = ? AND team_seq <= ?",
            (team.pk, update.member_id, frontier),
        )
        changed = changed or collected > 0
        fresh = 0
        for wire_id in update.exact_wire_ids:
            seq = resolved[wire_id]
            if seq <= frontier:
                continue  # already covered: never stored, nothing to collect
            fresh += tx.run(
                "INSERT INTO read_exact(team_pk, member_id, wire_id, team_seq) "
                "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (team.pk, update.member_id, wire_id, seq),
            )
        added[update.member_id] = fresh
        changed = changed or fresh > 0

    total_row = tx.one("SELECT count(*) FROM read_exact WHERE team_pk = ?", (team.pk,))
    counts = {
        member_id: int(count)
        for member_id, count in tx.rows(
            "SELECT member_id, count(*) FROM read_exact WHERE team_pk = ? "
            "AND member_id {any} GROUP BY member_id",
            (team.pk, encode_ids(sorted(added))),
        )
    }
    check_read_state_bounds(
        added,
        counts,
        int(total_row[0]) if total_row is not None else 0,
        max_per_member=MAX_EXACT_PER_MEMBER,
        max_per_team=MAX_EXACT_PER_TEAM,
    )
    if changed:
        # Saturates at the signed 64-bit maximum rather than failing a merge.
        tx.run(
            "UPDATE teams SET read_revision = read_revision + 1 "
            "WHERE team_pk = ? AND read_revision < ?",
            (team.pk, MAX_SEQ),
        )
    return changed


def read_page(
    tx: Tx, team: TeamRow, after: ReadKey | None, limit: int
) -> tuple[tuple[ReadItem, ...], bool]:
    """One keyset page of the canonical (member_id, kind, wire_id) stream:
    three ordered reads merged by :func:`relay.storage.read_stream.merge_page`."""
    frontiers = {
        member_id: int(seq)
        for member_id, seq in tx.rows(
            "SELECT member_id, server_seq FROM read_frontiers WHERE team_pk = ?", (team.pk,)
        )
    }
    members = tx.rows(
        "SELECT member_id FROM members WHERE team_pk = ? AND {active} AND member_id >= ? "
        "ORDER BY member_id",
        (team.pk, after.member_id if after is not None else ""),
    )
    exacts = tx.rows(
        "SELECT e.member_id, e.wire_id FROM read_exact e JOIN members m "
        "ON m.team_pk = e.team_pk AND m.member_id = e.member_id AND m.{active} "
        "WHERE e.team_pk = ? AND (e.member_id, e.wire_id) > (?, ?) "
        "ORDER BY e.member_id, e.wire_id LIMIT ?",
        (team.pk, *exact_floor(after), limit + 1),
    )
    return merge_page(
        [row[0] for row in members],
        frontiers,
        [(row[0], row[1]) for row in exacts],
        team.min_available_seq,
        after,
        limit,
    )


# -- retention ----------------------------------------------------------------------------------
def retain_locked(tx: Tx, team: TeamRow, through_seq: int) -> RetentionResult:
    """The one retention primitive, inside a transaction that is the team's only writer.

    Tombstones already exist (``wire_ids``), so the floor never becomes
    visible without them. Deletes the live prefix, raises the floor,
    max-merges stored read frontiers to it, and drops exact reads the
    new floor covers (read-state-synchronization.md "Retention floor").
    """
    new_floor = max(team.min_available_seq, through_seq)
    if new_floor == team.min_available_seq:
        return RetentionResult(team.team_id, team.min_available_seq, new_floor, 0)
    removed = tx.run(
        "DELETE FROM messages WHERE team_pk = ? AND team_seq <= ?", (team.pk, new_floor)
    )
    tx.run("UPDATE teams SET min_available_seq = ? WHERE team_pk = ?", (new_floor, team.pk))
    tx.run(
        "UPDATE read_frontiers SET server_seq = ? WHERE team_pk = ? AND server_seq < ?",
        (new_floor, team.pk, new_floor),
    )
    tx.run("DELETE FROM read_exact WHERE team_pk = ? AND team_seq <= ?", (team.pk, new_floor))
    return RetentionResult(team.team_id, team.min_available_seq, new_floor, removed)
