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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from syncengine.store.errors import InvalidInput

__all__ = [
    "MAX_EXACT_PER_PREPARE",
    "PrepareReadResult",
    "apply_read_state",
    "block_member",
    "prepare_read_state",
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


def _binding(conn: Any, key: BindingKey, now: str) -> SyncBinding:
    """The stream's binding, created (and the local team interned) on a
    machine that never bound it: a host's read-state phase may run before
    anything was pulled there (specs/store.md §11.1)."""
    binding = open_binding(conn, key, now)
    if binding.state is not BindingState.ACTIVE:  # pragma: no cover - open_binding refuses
        raise InvalidInput("binding", f"team {key.local_team!r} has no active binding")
    return binding


def _read_floor(conn: Any, binding_pk: int) -> int:
    row = conn.execute(
        "SELECT read_floor FROM sync_bindings WHERE binding_pk = ?", (binding_pk,)
    ).fetchone()
    return int(row[0])


def _check_snapshot(binding: SyncBinding, floor: int, current: int, stored_floor: int) -> None:
    """A snapshot that contradicts what this binding already holds is terminal."""
    if floor < stored_floor:
        raise InvalidInput(
            "min_available_seq",
            f"the relay's floor {floor} lies below the floor {stored_floor} it reported before",
        )
    if current < binding.transport_cursor:
        raise InvalidInput(
            "current_seq",
            f"current_seq {current} lies below this store's transport cursor "
            f"{binding.transport_cursor}",
        )


def _merge_floor(conn: Any, binding: SyncBinding, floor: int, now: str) -> set[int]:
    stored = _read_floor(conn, binding.pk)
    if floor <= stored:
        return set()
    conn.execute(
        "UPDATE sync_bindings SET read_floor = ? WHERE binding_pk = ?", (floor, binding.pk)
    )
    return overlay.project_range(conn, binding.pk, stored, floor, None, now)


def _roster_member(conn: Any, team_pk: int, member_id: str) -> tuple[int, str] | None:
    row = conn.execute(
        "SELECT member_pk, name FROM members WHERE team_pk = ? AND member_id = ? AND roster = 1",
        (team_pk, member_id),
    ).fetchone()
    return None if row is None else (int(row[0]), str(row[1]))


@dataclass(slots=True)
class _Member:
    """One roster member's read-state facts on a binding, loaded at once."""

    pk: int
    name: str
    stored: int
    block: str | None
    queued: bool
    exact: bool


def _members(conn: Any, binding: SyncBinding) -> dict[str, _Member]:
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
    stored = dict(
        conn.execute(
            "SELECT member_id, server_seq FROM read_remote_frontiers WHERE binding_pk = ?",
            (binding.pk,),
        ).fetchall()
    )
    blocks = dict(
        conn.execute(
            "SELECT member_id, reason FROM read_blocks WHERE binding_pk = ?", (binding.pk,)
        ).fetchall()
    )
    return {
        member_id: _Member(
            pk, name, stored.get(member_id, 0), blocks.get(member_id), member_id in queued,
            member_id in exact,
        )
        for member_id, pk, name in conn.execute(
            "SELECT member_id, member_pk, name FROM members INDEXED BY members_roster"
            " WHERE team_pk = ? AND roster = 1",
            (binding.team_pk,),
        )
    }  # fmt: skip


def _set_block(
    conn: Any, binding_pk: int, member_id: str, reason: str, detail: str, now: str
) -> None:
    conn.execute(
        "INSERT INTO read_blocks (binding_pk, member_id, reason, detail, blocked_at)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (binding_pk, member_id) DO UPDATE SET"
        " reason = excluded.reason, detail = excluded.detail, blocked_at = excluded.blocked_at"
        " WHERE read_blocks.reason != excluded.reason OR read_blocks.detail != excluded.detail",
        (binding_pk, member_id, reason, detail, now),
    )


def _first_blocking_seq(conn: Any, binding_pk: int, after: int) -> int | None:
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
        row = conn.execute(sql, (binding_pk, after)).fetchone()
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
    conn: Any,
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
    row = conn.execute(_BY_READER, args).fetchone()
    return None if row[0] is None else int(row[0])


def _safe_prefix(
    conn: Any, binding: SyncBinding, reader: int, effective: int, blocking: int | None
) -> int:
    """The prefix from ``effective`` up to the transport cursor, before the
    first blocking entry (``blocking``) and the reader's first uncovered
    message."""
    target = binding.transport_cursor
    if blocking is not None:
        target = min(target, blocking - 1)
    if target <= effective:
        return effective
    unread = _first_unread_seq(conn, binding.pk, reader, effective, target)
    return target if unread is None else max(unread - 1, effective)


def prepare_read_state(
    conn: Any, path: Path, key: BindingKey, context: SyncReadContext, now: str
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
        _check_snapshot(binding, context.min_available_seq, context.current_seq, stored_floor)
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
            if local is None:
                # Adoption left it out: its name is another relay member's
                # here for good (store/teams.py adopt_roster).
                block(member_id, REASON_NAME_MISMATCH)
                continue
            if local.name != relay_name:
                if local.block == REASON_LIMIT:  # only an operator's unblock clears that
                    block(member_id, REASON_LIMIT)
                    continue
                detail = f"the relay names this member {relay_name!r}, this store {local.name!r}"
                _set_block(conn, binding.pk, member_id, REASON_NAME_MISMATCH, detail, now)
                block(member_id, REASON_NAME_MISMATCH)
                continue
            if local.block == REASON_NAME_MISMATCH:  # the names agree again
                conn.execute(
                    "DELETE FROM read_blocks WHERE binding_pk = ? AND member_id = ?",
                    (binding.pk, member_id),
                )
            elif local.block is not None:
                block(member_id, local.block)
                continue
            effective = max(local.stored, floor)
            prefix = effective
            if binding.transport_cursor > effective:
                if effective not in blocking:  # shared by members at the same frontier
                    blocking[effective] = _first_blocking_seq(conn, binding.pk, effective)
                prefix = _safe_prefix(conn, binding, local.pk, effective, blocking[effective])
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


def _mapped_seq(conn: Any, binding_pk: int, wire_id: str) -> int | None:
    """The durable ``server_seq`` a wire ID maps to in this binding, if any."""
    for sql in (
        "SELECT server_seq FROM sync_push WHERE binding_pk = ? AND wire_id = ? AND state = 'acked'",
        "SELECT server_seq FROM sync_quarantine WHERE binding_pk = ? AND wire_id = ?",
    ):
        row = conn.execute(sql, (binding_pk, wire_id)).fetchone()
        if row is not None and row[0] is not None:
            return int(row[0])
    return None


def _collect_garbage(conn: Any, binding_pk: int, member_id: str) -> None:
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
    conn: Any,
    path: Path,
    key: BindingKey,
    snapshot: SyncReadSnapshot,
    items: Sequence[SyncReadFrontier | SyncReadExact],
    now: str,
) -> SyncReadApplyResult:
    """One page of the relay's read state in one transaction (``read.apply.*``)."""
    with sync_transaction(conn, path, "read.apply") as conn:
        binding = _binding(conn, key, now)
        stored_floor = _read_floor(conn, binding.pk)
        _check_snapshot(binding, snapshot.min_available_seq, snapshot.current_seq, stored_floor)
        roster = _members(conn, binding)
        seen_frontier: set[str] = set()
        members: set[str] = set()
        # A member this store holds no row for (one adoption left out, one
        # the relay added since the last prepare) cannot be held here: its
        # items are passed over, as our engine never hands them over. A host
        # engine passes every item of the page, blocked members' included.
        held = [item for item in items if item.member_id in roster]
        for index, item in enumerate(items):
            if item.member_id not in roster:
                continue
            # The item's name is formatted only for a refusal (a page holds 1,000).
            if isinstance(item, SyncReadFrontier):
                if item.member_id in seen_frontier:
                    raise InvalidInput(
                        f"item {index + 1}.member_id", "a member has one frontier per page"
                    )
                if item.server_seq > snapshot.current_seq:
                    raise InvalidInput(
                        f"item {index + 1}.server_seq", "a frontier beyond current_seq"
                    )
                seen_frontier.add(item.member_id)
            members.add(item.member_id)
        items = held
        readers = _merge_floor(conn, binding, snapshot.min_available_seq, now)
        floor = _read_floor(conn, binding.pk)
        touched: set[str] = set()
        for item in items:
            local = roster[item.member_id]
            if local.block == REASON_NAME_MISMATCH:
                continue  # a name mismatch never authorizes advancing a frontier
            before = max(local.stored, floor)
            if isinstance(item, SyncReadFrontier):
                if item.server_seq > before:
                    conn.execute(
                        "INSERT INTO read_remote_frontiers (binding_pk, member_id, server_seq)"
                        " VALUES (?, ?, ?) ON CONFLICT (binding_pk, member_id) DO UPDATE SET"
                        " server_seq = max(server_seq, excluded.server_seq)",
                        (binding.pk, item.member_id, item.server_seq),
                    )
                    local.stored = item.server_seq
                    readers |= overlay.project_range(
                        conn, binding.pk, before, item.server_seq, item.member_id, now
                    )
                continue
            touched.add(item.member_id)
            seq = _mapped_seq(conn, binding.pk, item.wire_id)
            if seq is not None and seq <= before:
                continue  # already covered by the frontier: nothing to keep
            conn.execute(
                "INSERT OR IGNORE INTO read_remote_exact (binding_pk, member_id, wire_id)"
                " VALUES (?, ?, ?)",
                (binding.pk, item.member_id, item.wire_id),
            )
            readers |= overlay.project_wire_reads(
                conn, binding.pk, [(item.member_id, item.wire_id)], now
            )
        for member_id in sorted(members):
            local = roster[member_id]
            if local.queued or local.exact or member_id in touched:
                _collect_garbage(conn, binding.pk, member_id)
        overlay.compact_readers(conn, readers)
    return SyncReadApplyResult(max(floor, snapshot.min_available_seq), len(members))


def block_member(
    conn: Any, path: Path, key: BindingKey, request: SyncReadBlock, now: str
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
    conn: Any, path: Path, key: BindingKey, request: SyncReadUnblock, now: str
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
