"""``read-prepare`` / ``read-apply`` / ``read-block`` / ``read-unblock``: the
stage-2 read-state operations (read-state-synchronization.md; ADR 0006–0008;
specs/read-state.md §5).

Each is one storage transaction with named crash points. None of them
touches the transport cursor, quarantine or import state; the local layer
changes only through the projection of remote coverage
(:mod:`syncengine.store.read_overlay`).

**prepare** max-merges the authenticated floor into the overlay, then for
each roster member computes the largest safe contiguous ``server_seq``
prefix — it stops before the first blocking (or corrupt) quarantine entry,
whose recipient nobody knows, before the first mapped message addressed to
that member that local read state does not cover, and at the transport
cursor, beyond which outcomes are not yet durable — and lists the member's
promoted local reads above it. Messages to other members are vacuously
covered. A member whose local name differs from the relay's name for its ID
is durably blocked (``member-name-mismatch``) until the names agree again.

**apply** takes one response snapshot and its page: frontiers max-merge,
exact reads set-union (kept by wire ID even before their message arrives),
coverage is projected onto messages already held, and exact facts are
garbage-collected only when a durable mapping proves their sequence lies
under the merged frontier — never by wire ID alone.

The decisions are pure and tested on their own: :func:`check_snapshot`,
:func:`judge_member` and :func:`safe_prefix` (prepare), :func:`plan_read_apply`
(apply). The shells load the facts they need, write what the plans say and
commit, in the same transactions and crash points as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syncengine.ops.bindings import BindingKey, SyncBinding, open_binding, sync_transaction
from syncengine.ops.read_records import (
    REASON_LIMIT,
    REASON_NAME_MISMATCH,
    SyncReadApplyResult,
    SyncReadBlock,
    SyncReadBlocked,
    SyncReadContext,
    SyncReadExact,
    SyncReadFrontier,
    SyncReadSnapshot,
    SyncReadUnblock,
    SyncReadUnblocked,
)
from syncengine.ops.states import BindingState
from syncengine.store import read_overlay as overlay
from syncengine.store import teams
from syncengine.store.connection import all_rows, one_row
from syncengine.store.errors import InvalidInput

if TYPE_CHECKING:
    # Only annotations: apsw loads with the store's first connection.
    import apsw

__all__ = [
    "MAX_EXACT_PER_PREPARE",
    "ExactWrite",
    "FrontierWrite",
    "MemberFacts",
    "MemberVerdict",
    "PrepareReadResult",
    "ReadApplyPlan",
    "apply_read_state",
    "block_member",
    "check_snapshot",
    "judge_member",
    "plan_read_apply",
    "prefix_target",
    "prepare_read_state",
    "safe_prefix",
    "unblock_member",
]

#: At most this many exact reads leave one prepare (one request's budget).
MAX_EXACT_PER_PREPARE = 1000


@dataclass(frozen=True, slots=True)
class PrepareReadResult:
    """What one prepare found.

    ``answers`` holds exactly one frontier or one block for every member of
    the context, in the context's order — the driver's answer, which a host
    engine requires whole (read-state-synchronization.md prepare records;
    specs/read-state.md §6). ``frontiers`` is the subset worth sending: the
    members whose frontier moved past what this store holds for them or
    who have exact reads queued. Our engine sends only those (a frontier
    the relay already holds changes nothing there, and the request stays
    byte for byte what it was); ``exact`` and ``blocked`` as named."""

    frontiers: tuple[SyncReadFrontier, ...]
    exact: tuple[SyncReadExact, ...]
    blocked: tuple[SyncReadBlocked, ...]
    answers: tuple[SyncReadFrontier | SyncReadBlocked, ...] = ()

    def records(self) -> list[dict[str, Any]]:
        return [*(a.to_obj() for a in self.answers), *(e.to_obj() for e in self.exact)]


def _binding(conn: apsw.Connection, key: BindingKey, now: str) -> SyncBinding:
    """The stream's binding, created (and the local team interned) on a
    machine that never bound it: a host's read-state phase may run before
    anything was pulled there (specs/store.md §11.1)."""
    binding = open_binding(conn, key, now)
    if binding.state is not BindingState.ACTIVE:  # pragma: no cover - open_binding refuses
        raise InvalidInput("binding", f"team {key.local_team!r} has no active binding")
    return binding


def _read_floor(conn: apsw.Connection, binding_pk: int) -> int:
    row = one_row(
        conn.execute("SELECT read_floor FROM sync_bindings WHERE binding_pk = ?", (binding_pk,))
    )
    return int(row[0])


def check_snapshot(transport_cursor: int, floor: int, current: int, stored_floor: int) -> None:
    """A snapshot that contradicts what this binding already holds is
    terminal (pure): the relay's floor never goes back, and its head is
    never below what this store already pulled (specs/read-state.md §5)."""
    if floor < stored_floor:
        raise InvalidInput(
            "min_available_seq",
            f"the relay's floor {floor} lies below the floor {stored_floor} it reported before",
        )
    if current < transport_cursor:
        raise InvalidInput(
            "current_seq",
            f"current_seq {current} lies below this store's transport cursor {transport_cursor}",
        )


def _merge_floor(conn: apsw.Connection, binding: SyncBinding, floor: int, now: str) -> set[int]:
    stored = _read_floor(conn, binding.pk)
    if floor <= stored:
        return set()
    conn.execute(
        "UPDATE sync_bindings SET read_floor = ? WHERE binding_pk = ?", (floor, binding.pk)
    )
    return overlay.project_range(conn, binding.pk, stored, floor, None, now)


def _roster_member(conn: apsw.Connection, team_pk: int, member_id: str) -> tuple[int, str] | None:
    row = conn.execute(
        "SELECT member_pk, name FROM members WHERE team_pk = ? AND member_id = ? AND roster = 1",
        (team_pk, member_id),
    ).fetchone()
    return None if row is None else (int(row[0]), str(row[1]))


@dataclass(frozen=True, slots=True)
class MemberFacts:
    """One roster member's read-state facts on a binding, loaded at once."""

    pk: int
    name: str
    stored: int
    block: str | None
    queued: bool
    exact: bool


def _members(conn: apsw.Connection, binding: SyncBinding) -> dict[str, MemberFacts]:
    """Every roster member of the binding's team with its stored frontier,
    block and whether it has queued or exact reads: one query for the whole
    roster (≤ 1,000 rows) instead of several per member."""
    queued = {
        str(row[0])
        for row in conn.execute(
            "SELECT DISTINCT member_id FROM read_outbox WHERE binding_pk = ?", (binding.pk,)
        )
    }
    exact = {
        str(row[0])
        for row in conn.execute(
            "SELECT DISTINCT member_id FROM read_remote_exact WHERE binding_pk = ?", (binding.pk,)
        )
    }
    stored: dict[str, int] = dict(
        all_rows(
            conn.execute(
                "SELECT member_id, server_seq FROM read_remote_frontiers WHERE binding_pk = ?",
                (binding.pk,),
            )
        )
    )
    blocks: dict[str, str] = dict(
        all_rows(
            conn.execute(
                "SELECT member_id, reason FROM read_blocks WHERE binding_pk = ?", (binding.pk,)
            )
        )
    )
    return {
        member_id: MemberFacts(
            pk, name, stored.get(member_id, 0), blocks.get(member_id), member_id in queued,
            member_id in exact,
        )
        for member_id, pk, name in conn.execute(
            "SELECT member_id, member_pk, name FROM members INDEXED BY members_roster"
            " WHERE team_pk = ? AND roster = 1",
            (binding.team_pk,),
        )
    }  # fmt: skip


@dataclass(frozen=True, slots=True)
class MemberVerdict:
    """How prepare answers one member of the context (:func:`judge_member`)."""

    #: The member is answered with this block (no frontier, no exact reads).
    block: str | None = None
    #: Record (or refresh) a name-mismatch block with this detail first.
    record_mismatch: str | None = None
    #: The names agree again: the stored name-mismatch block is deleted.
    clear_mismatch: bool = False


def judge_member(local: MemberFacts | None, relay_name: str) -> MemberVerdict:
    """Whether a context member may get a frontier (pure; specs/read-state.md
    §5, ADR 0007). A member with no local row is blocked for a name
    mismatch (adoption left it out: its name is another member's here); one
    whose local name differs from the relay's is durably blocked until the
    names agree again — unless an operator's limit block holds it, which
    only an unblock clears; names that agree again clear a stored
    mismatch; any other stored block stands."""
    if local is None:
        return MemberVerdict(block=REASON_NAME_MISMATCH)
    if local.name != relay_name:
        if local.block == REASON_LIMIT:
            return MemberVerdict(block=REASON_LIMIT)
        detail = f"the relay names this member {relay_name!r}, this store {local.name!r}"
        return MemberVerdict(block=REASON_NAME_MISMATCH, record_mismatch=detail)
    if local.block == REASON_NAME_MISMATCH:
        return MemberVerdict(clear_mismatch=True)
    return MemberVerdict(block=local.block)


def prefix_target(effective: int, transport_cursor: int, blocking: int | None) -> int:
    """How far a member's frontier could reach before its own unread
    messages are looked at (pure): the transport cursor, beyond which no
    outcome is durable yet, and short of the first blocking quarantine
    entry, whose recipient nobody knows. Below ``effective`` means the
    frontier stays."""
    target = transport_cursor
    if blocking is not None:
        target = min(target, blocking - 1)
    return target


def safe_prefix(effective: int, target: int, unread: int | None) -> int:
    """The member's new frontier (pure): ``target``, or short of its first
    uncovered message ``unread`` (the shell looks for it only in
    ``(effective, target]``) — and never below ``effective``, so a
    frontier never moves backwards (read-state-synchronization.md
    "Frontier"; specs/read-state.md §5)."""
    if target <= effective:
        return effective
    if unread is None or unread > target:  # nothing uncovered up to the target
        return target
    return max(unread - 1, effective)


def _set_block(
    conn: apsw.Connection, binding_pk: int, member_id: str, reason: str, detail: str, now: str
) -> None:
    conn.execute(
        "INSERT INTO read_blocks (binding_pk, member_id, reason, detail, blocked_at)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (binding_pk, member_id) DO UPDATE SET"
        " reason = excluded.reason, detail = excluded.detail, blocked_at = excluded.blocked_at"
        " WHERE read_blocks.reason != excluded.reason OR read_blocks.detail != excluded.detail",
        (binding_pk, member_id, reason, detail, now),
    )


def _first_blocking_seq(conn: apsw.Connection, binding_pk: int, after: int) -> int | None:
    """The lowest quarantined ``server_seq`` above ``after`` with no durable
    import outcome: its recipient is unknown, so no member's prefix passes it."""
    found = []
    for sql in (
        "SELECT min(server_seq) FROM sync_quarantine INDEXED BY sync_quarantine_blocking"
        " WHERE binding_pk = ? AND server_seq > ? AND status IN ('unsupported_cipher',"
        " 'pending_key', 'authentication_failed', 'malformed', 'policy_violation',"
        " 'manifest_mismatch', 'before_join')",
        "SELECT min(server_seq) FROM sync_quarantine INDEXED BY sync_quarantine_corrupt"
        " WHERE binding_pk = ? AND server_seq > ? AND status = 'corrupt_state'",
    ):
        row = one_row(conn.execute(sql, (binding_pk, after)))
        if row[0] is not None:
            found.append(int(row[0]))
    return min(found) if found else None


#: How many sequences above a member's frontier the ordered walk of
#: :func:`_first_unread_seq` covers before it asks the reader's own unread
#: messages instead. A member's next unread message is normally right above
#: its frontier (the last prepare stopped just before it), so the walk ends
#: at once there; the window bounds what a frontier left far behind costs.
UNREAD_WALK_WINDOW = 4096

#: The reader's covering test, shared by every form of the unread search:
#: a message addressed to ``:reader`` above its local frontier and without an
#: exact local read.
_UNREAD = """
    m.recipient_pk = :reader
    AND m.seq > coalesce(
        (SELECT local_position FROM read_frontiers WHERE member_pk = :reader), 0)
    AND NOT EXISTS (SELECT 1 FROM message_reads AS x
                    WHERE x.reader_pk = :reader AND x.msg_seq = m.seq)"""

#: The two mappings of a held message to a ``server_seq``, walked in
#: sequence order through their ``(binding_pk, server_seq)`` keys (CROSS JOIN
#: keeps the mapping table outermost): our acknowledged pushes, and imports.
_WALKS = (
    f"""SELECT p.server_seq FROM sync_push AS p CROSS JOIN messages AS m
        ON m.seq = p.local_position
        WHERE p.binding_pk = :binding AND p.server_seq > :after AND p.server_seq <= :upto
          AND p.state = 'acked' AND {_UNREAD}
        ORDER BY p.server_seq LIMIT 1""",
    f"""SELECT q.server_seq FROM sync_quarantine AS q CROSS JOIN messages AS m
        ON m.seq = q.local_position
        WHERE q.binding_pk = :binding AND q.server_seq > :after AND q.server_seq <= :upto
          AND q.status = 'imported' AND m.origin = 'imported' AND {_UNREAD}
        ORDER BY q.server_seq LIMIT 1""",
)

#: The same minimum found from the reader's side: every unread message of
#: the reader, mapped. It visits the reader's whole unread backlog, so it
#: only runs past the walk's window.
_BY_READER = f"""
    SELECT min(s) FROM (
        SELECT (SELECT p.server_seq FROM sync_push AS p
                WHERE p.binding_pk = :binding AND p.local_position = m.seq
                  AND p.state = 'acked') AS s
        FROM messages AS m WHERE {_UNREAD}
        UNION ALL
        SELECT (SELECT q.server_seq FROM sync_quarantine AS q
                WHERE q.binding_pk = :binding AND q.local_position = m.seq
                  AND q.status = 'imported') AS s
        FROM messages AS m WHERE m.origin = 'imported' AND {_UNREAD}
    ) WHERE s > :after AND s <= :upto"""


def _first_unread_seq(
    conn: apsw.Connection,
    binding_pk: int,
    reader: int,
    after: int,
    upto: int,
    window: int = UNREAD_WALK_WINDOW,
) -> int | None:
    """The lowest mapped ``server_seq`` in ``(after, upto]`` of a message
    addressed to ``reader`` that local read state does not cover.

    Its cost must not grow with the reader's unread backlog (issue #17: an
    idle scheduled pull runs this for every member): an agent that never
    reads would otherwise make each pull visit every message ever sent to
    it. So the sequences right above ``after`` are walked first, in order,
    stopping at the first uncovered one — they are the ones the last
    prepare could not pass. Only when the first :data:`UNREAD_WALK_WINDOW`
    sequences (``window``) hold none is the rest searched from the reader's
    side. The two ranges are disjoint and the window is the lower, so the
    answer is the same minimum either way."""
    top = min(upto, after + window)
    args = {"binding": binding_pk, "reader": reader, "after": after, "upto": top}
    found: int | None = None
    for sql in _WALKS:
        row = conn.execute(sql, args).fetchone()
        if row is not None:
            found = int(row[0])
            args["upto"] = found - 1  # the next walk needs only lower sequences
    if found is not None:
        return found
    if top >= upto:
        return None
    args.update(after=top, upto=upto)
    row = one_row(conn.execute(_BY_READER, args))
    return None if row[0] is None else int(row[0])


def prepare_read_state(
    conn: apsw.Connection, path: Path, key: BindingKey, context: SyncReadContext, now: str
) -> PrepareReadResult:
    """One transaction (``read.prepare.*``): the floor merged and projected,
    name mismatches blocked, and each member's frontier and exact reads."""
    frontiers: list[SyncReadFrontier] = []
    exact: list[SyncReadExact] = []
    blocked: list[SyncReadBlocked] = []
    answers: list[SyncReadFrontier | SyncReadBlocked] = []

    def block(member_id: str, reason: str) -> None:
        answer = SyncReadBlocked(member_id, reason)
        blocked.append(answer)
        answers.append(answer)

    with sync_transaction(conn, path, "read.prepare") as conn:
        binding = _binding(conn, key, now)
        stored_floor = _read_floor(conn, binding.pk)
        check_snapshot(
            binding.transport_cursor, context.min_available_seq, context.current_seq, stored_floor
        )
        readers = _merge_floor(conn, binding, context.min_available_seq, now)
        overlay.compact_readers(conn, readers)
        budget = MAX_EXACT_PER_PREPARE
        roster = _members(conn, binding)
        if any(member_id not in roster for member_id, _ in context.members):
            # The context's members are the relay's authenticated roster. A
            # host engine hands it over without adopting it first (our
            # engine adopts it beforehand, so this is skipped there): take
            # it now, as our engine would, so every member has a local row.
            teams.adopt_roster(conn, binding.team_pk, list(context.members), now)
            roster = _members(conn, binding)
        floor = _read_floor(conn, binding.pk)
        blocking: dict[int, int | None] = {}
        for member_id, relay_name in context.members:
            local = roster.get(member_id)
            verdict = judge_member(local, relay_name)
            if verdict.record_mismatch is not None:
                _set_block(
                    conn, binding.pk, member_id, REASON_NAME_MISMATCH, verdict.record_mismatch, now
                )
            if verdict.clear_mismatch:
                conn.execute(
                    "DELETE FROM read_blocks WHERE binding_pk = ? AND member_id = ?",
                    (binding.pk, member_id),
                )
            if verdict.block is not None:
                block(member_id, verdict.block)
                continue
            assert local is not None  # judge_member blocks a member without a row
            effective = max(local.stored, floor)
            prefix = effective
            if binding.transport_cursor > effective:
                if effective not in blocking:  # shared by members at the same frontier
                    blocking[effective] = _first_blocking_seq(conn, binding.pk, effective)
                target = prefix_target(effective, binding.transport_cursor, blocking[effective])
                unread = None
                if target > effective:
                    unread = _first_unread_seq(conn, binding.pk, local.pk, effective, target)
                prefix = safe_prefix(effective, target, unread)
            pending: list[str] = []
            if local.queued and budget > 0:
                pending = [
                    str(row[0])
                    for row in conn.execute(
                        "SELECT wire_id FROM read_outbox INDEXED BY read_outbox_by_seq"
                        " WHERE binding_pk = ? AND member_id = ? AND server_seq > ?"
                        " ORDER BY server_seq, wire_id LIMIT ?",
                        (binding.pk, member_id, prefix, budget),
                    )
                ]
            budget -= len(pending)
            # Every member gets its frontier, moved or not (a host engine
            # requires one per member); a member with nothing read yet has
            # the effective frontier, max(stored, floor).
            frontier = SyncReadFrontier(member_id, prefix)
            answers.append(frontier)
            if prefix > effective or pending:
                frontiers.append(frontier)
                exact.extend(SyncReadExact(member_id, wire_id) for wire_id in pending)
    return PrepareReadResult(tuple(frontiers), tuple(exact), tuple(blocked), tuple(answers))


@dataclass(frozen=True, slots=True)
class FrontierWrite:
    """Max-merge ``member_id``'s remote frontier from ``before`` to ``after``
    and project the coverage of ``(before, after]`` locally."""

    member_id: str
    before: int
    after: int


@dataclass(frozen=True, slots=True)
class ExactWrite:
    """Keep an exact remote read (by wire ID) and project it locally."""

    member_id: str
    wire_id: str


@dataclass(frozen=True, slots=True)
class ReadApplyPlan:
    """What one page writes, in page order, and whose facts are collected."""

    writes: tuple[FrontierWrite | ExactWrite, ...]
    #: Members whose exact facts and queued reads are garbage-collected.
    collect: tuple[str, ...]
    #: Members of the page this store holds (the result's count).
    members: frozenset[str]


def plan_read_apply(
    roster: Mapping[str, MemberFacts],
    floor: int,
    current_seq: int,
    items: Sequence[SyncReadFrontier | SyncReadExact],
    mapped: Mapping[str, int | None],
) -> ReadApplyPlan:
    """Decide one page of the relay's read state (pure; specs/read-state.md
    §5, read-state-synchronization.md "Apply").

    ``floor`` is the merged read floor, ``mapped`` the durable sequence of
    each exact item's wire ID (``None``: not held yet). Items of members this
    store holds no row for are passed over; among the rest one frontier per
    member and none beyond ``current_seq`` (else the whole page is refused,
    nothing written). A frontier only max-merges — it never moves a stored
    frontier backwards; a name-mismatch-blocked member's items are never
    merged; an exact read already under the member's frontier is not kept.
    """
    seen_frontier: set[str] = set()
    members: set[str] = set()
    for index, item in enumerate(items):
        if item.member_id not in roster:
            continue
        # The item's name is formatted only for a refusal (a page holds 1,000).
        if isinstance(item, SyncReadFrontier):
            if item.member_id in seen_frontier:
                raise InvalidInput(
                    f"item {index + 1}.member_id", "a member has one frontier per page"
                )
            if item.server_seq > current_seq:
                raise InvalidInput(f"item {index + 1}.server_seq", "a frontier beyond current_seq")
            seen_frontier.add(item.member_id)
        members.add(item.member_id)
    stored = {member_id: local.stored for member_id, local in roster.items()}
    writes: list[FrontierWrite | ExactWrite] = []
    touched: set[str] = set()
    for item in items:
        local = roster.get(item.member_id)
        if local is None:
            continue
        if local.block == REASON_NAME_MISMATCH:
            continue  # a name mismatch never authorizes advancing a frontier
        before = max(stored[item.member_id], floor)
        if isinstance(item, SyncReadFrontier):
            if item.server_seq > before:
                writes.append(FrontierWrite(item.member_id, before, item.server_seq))
                stored[item.member_id] = item.server_seq
            continue
        touched.add(item.member_id)
        seq = mapped.get(item.wire_id)
        if seq is not None and seq <= before:
            continue  # already covered by the frontier: nothing to keep
        writes.append(ExactWrite(item.member_id, item.wire_id))
    collect = tuple(
        member_id
        for member_id in sorted(members)
        if roster[member_id].queued or roster[member_id].exact or member_id in touched
    )
    return ReadApplyPlan(tuple(writes), collect, frozenset(members))


def _mapped_seq(conn: apsw.Connection, binding_pk: int, wire_id: str) -> int | None:
    """The durable ``server_seq`` a wire ID maps to in this binding, if any."""
    for sql in (
        "SELECT server_seq FROM sync_push WHERE binding_pk = ? AND wire_id = ? AND state = 'acked'",
        "SELECT server_seq FROM sync_quarantine WHERE binding_pk = ? AND wire_id = ?",
    ):
        row = conn.execute(sql, (binding_pk, wire_id)).fetchone()
        if row is not None and row[0] is not None:
            return int(row[0])
    return None


def _collect_garbage(conn: apsw.Connection, binding_pk: int, member_id: str) -> None:
    """Drop exact facts a durable mapping proves covered, and queued reads
    the relay already holds (covered or known exactly)."""
    effective = overlay.effective_frontier(conn, binding_pk, member_id)
    covered = [
        (binding_pk, member_id, str(row[0]))
        for row in conn.execute(
            "SELECT wire_id FROM read_remote_exact WHERE binding_pk = ? AND member_id = ?",
            (binding_pk, member_id),
        )
        if (seq := _mapped_seq(conn, binding_pk, str(row[0]))) is not None and seq <= effective
    ]
    conn.executemany(
        "DELETE FROM read_remote_exact WHERE binding_pk = ? AND member_id = ? AND wire_id = ?",
        covered,
    )
    conn.execute(
        "DELETE FROM read_outbox WHERE binding_pk = ?1 AND member_id = ?2 AND (server_seq <= ?3"
        " OR wire_id IN (SELECT wire_id FROM read_remote_exact"
        " WHERE binding_pk = ?1 AND member_id = ?2))",
        (binding_pk, member_id, effective),
    )


def apply_read_state(
    conn: apsw.Connection,
    path: Path,
    key: BindingKey,
    snapshot: SyncReadSnapshot,
    items: Sequence[SyncReadFrontier | SyncReadExact],
    now: str,
) -> SyncReadApplyResult:
    """One page of the relay's read state in one transaction (``read.apply.*``):
    the facts loaded, :func:`plan_read_apply` decides, its writes applied."""
    with sync_transaction(conn, path, "read.apply") as conn:
        binding = _binding(conn, key, now)
        stored_floor = _read_floor(conn, binding.pk)
        check_snapshot(
            binding.transport_cursor, snapshot.min_available_seq, snapshot.current_seq, stored_floor
        )
        roster = _members(conn, binding)
        # A member this store holds no row for (one adoption left out, one
        # the relay added since the last prepare) cannot be held here: its
        # items are passed over, as our engine never hands them over. A host
        # engine passes every item of the page, blocked members' included.
        # The merged floor is the larger of the stored one and the relay's
        # (_merge_floor below); the page is judged before anything is written.
        floor = max(stored_floor, snapshot.min_available_seq)
        mapped = {
            item.wire_id: _mapped_seq(conn, binding.pk, item.wire_id)
            for item in items
            if isinstance(item, SyncReadExact)
            and (local := roster.get(item.member_id)) is not None
            and local.block != REASON_NAME_MISMATCH
        }
        plan = plan_read_apply(roster, floor, snapshot.current_seq, items, mapped)
        readers = _merge_floor(conn, binding, snapshot.min_available_seq, now)
        for write in plan.writes:
            if isinstance(write, FrontierWrite):
                conn.execute(
                    "INSERT INTO read_remote_frontiers (binding_pk, member_id, server_seq)"
                    " VALUES (?, ?, ?) ON CONFLICT (binding_pk, member_id) DO UPDATE SET"
                    " server_seq = max(server_seq, excluded.server_seq)",
                    (binding.pk, write.member_id, write.after),
                )
                readers |= overlay.project_range(
                    conn, binding.pk, write.before, write.after, write.member_id, now
                )
                continue
            conn.execute(
                "INSERT OR IGNORE INTO read_remote_exact (binding_pk, member_id, wire_id)"
                " VALUES (?, ?, ?)",
                (binding.pk, write.member_id, write.wire_id),
            )
            readers |= overlay.project_wire_reads(
                conn, binding.pk, [(write.member_id, write.wire_id)], now
            )
        for member_id in plan.collect:
            _collect_garbage(conn, binding.pk, member_id)
        overlay.compact_readers(conn, readers)
    return SyncReadApplyResult(max(floor, snapshot.min_available_seq), len(plan.members))


def block_member(
    conn: apsw.Connection, path: Path, key: BindingKey, request: SyncReadBlock, now: str
) -> SyncReadBlocked:
    """Durably exclude a member from read-state mutations (``read.block.*``);
    its local and remote facts are all kept."""
    with sync_transaction(conn, path, "read.block") as conn:
        binding = _binding(conn, key, now)
        if _roster_member(conn, binding.team_pk, request.member_id) is None:
            raise InvalidInput("member_id", f"member {request.member_id} is not on the roster")
        detail = "the relay refused this member's exact reads (limit exceeded)"
        if request.reason == REASON_NAME_MISMATCH:
            detail = "blocked by request: local and relay names differ"
        _set_block(conn, binding.pk, request.member_id, request.reason, detail, now)
    return SyncReadBlocked(request.member_id, request.reason)


def unblock_member(
    conn: apsw.Connection, path: Path, key: BindingKey, request: SyncReadUnblock, now: str
) -> SyncReadUnblocked:
    """The operator's explicit clearing of a block (``read.unblock.*``);
    the next cycle either succeeds or blocks the member again."""
    with sync_transaction(conn, path, "read.unblock") as conn:
        binding = _binding(conn, key, now)
        conn.execute(
            "DELETE FROM read_blocks WHERE binding_pk = ? AND member_id = ?",
            (binding.pk, request.member_id),
        )
    return SyncReadUnblocked(request.member_id)
