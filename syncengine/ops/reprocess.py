"""``reprocess``: page through durable blocking envelopes for re-evaluation
(message-synchronization.md "Three independent progress layers";
UPSTREAM-RECORDS §2.5; specs/sync-stage1.md §4.4).

Read-only: one snapshot yields ``sync_state``, at most ``limit`` candidates
in keyset order ``(server_seq, wire_id)`` strictly after ``page-after``, and
exactly one ``sync_reprocess_page`` whose ``next_after`` is the last
candidate's key exactly when ``has_more``. The keyset reads the partial
index ``sync_quarantine_blocking``, so a page costs its own size whatever
the history, and the pages stay stable while rows leave the blocking set
underneath. A stream never bound here (a fresh machine, a local team this
store has not seen) has nothing to offer: cursor 0, no candidates, and no
binding is created. Transport cursor and generation never change here; outcomes
come back through :func:`syncengine.ops.apply_pull.apply_pull` with
``next_after`` equal to the current transport cursor. ``corrupt_state``
rows are not offered: they need an operator, not a new key. ``before_join``
rows are (issue #33): they need nothing, but an identity of their epoch
installed later opens them, as it does a ``pending_key``.

The pure :func:`plan_reprocess_page` decides the page from the rows read;
:func:`reprocess` reads them in one snapshot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syncengine.crash import crash_point
from syncengine.ops.bindings import BindingKey, load_binding, store_generation
from syncengine.ops.states import QuarantineState
from syncengine.ops.sync_records import (
    SyncReprocessCandidate,
    SyncReprocessPage,
    SyncState,
    format_page_key,
    parse_page_key,
)
from syncengine.store.connection import read_transaction
from syncengine.store.errors import InvalidInput
from wire.envelope import Envelope

if TYPE_CHECKING:
    # Only annotations: apsw loads with the store's first connection.
    import apsw

__all__ = [
    "HELD_IN",
    "KEYSET_SQL",
    "MAX_REPROCESS_LIMIT",
    "ReprocessResult",
    "check_reprocess_limit",
    "plan_reprocess_page",
    "reprocess",
]

#: Upstream bounds a reprocess page to 1..1000 candidates.
MAX_REPROCESS_LIMIT = 1000

#: Every held state (blocking, and the settled ``before_join``: an identity
#: installed later opens it too), as the partial index's ``IN`` list spells
#: them (migration 14): the planner uses the index only on an exact match.
HELD_IN = ", ".join(f"'{state.value}'" for state in QuarantineState if state.held)

#: The held states' text, for the plan's own check of a loaded row.
_HELD_VALUES = frozenset(state.value for state in QuarantineState if state.held)

#: One keyset page. ``INDEXED BY`` pins the partial blocking index: left to
#: itself the planner may prefer the (binding, server_seq) unique index and
#: walk every imported row of the history to find the few blocking ones.
KEYSET_SQL = (
    "SELECT server_seq, wire_id, server_received_at, envelope_v, cipher, key_id, blob, status"
    " FROM sync_quarantine INDEXED BY sync_quarantine_blocking"
    f" WHERE binding_pk = ? AND status IN ({HELD_IN})"
    " AND (server_seq, wire_id) > (?, ?)"
    " ORDER BY server_seq, wire_id LIMIT ?"
)


@dataclass(frozen=True, slots=True)
class ReprocessResult:
    state: SyncState
    candidates: tuple[SyncReprocessCandidate, ...]
    page: SyncReprocessPage

    def records(self) -> list[dict[str, Any]]:
        return [self.state.to_obj(), *(c.to_obj() for c in self.candidates), self.page.to_obj()]


def check_reprocess_limit(limit: object) -> int:
    if (
        isinstance(limit, bool)
        or not isinstance(limit, int)
        or not 1 <= limit <= MAX_REPROCESS_LIMIT
    ):
        raise InvalidInput("limit", f"must be an integer in 1..{MAX_REPROCESS_LIMIT}")
    return limit


def plan_reprocess_page(
    state: SyncState,
    loaded: Sequence[SyncReprocessCandidate],
    limit: int,
    after: tuple[int, str],
) -> ReprocessResult:
    """The page from the rows one snapshot read (up to ``limit + 1`` in
    keyset order; the extra one only says there is more). Pure.

    Only held rows strictly after ``after`` are offered: an imported or
    ``corrupt_state`` row is settled and never judged again here, and a
    keyset page never repeats an earlier page's row (specs/sync-stage1.md
    §4.4). ``next_after`` is the last candidate's key exactly when
    ``has_more``."""
    offered = [
        row
        for row in loaded
        if row.prior_status in _HELD_VALUES and (row.server_seq, row.wire_id) > after
    ]
    has_more = len(offered) > limit
    candidates = tuple(offered[:limit])
    next_after = None
    if has_more:
        next_after = format_page_key(candidates[-1].server_seq, candidates[-1].wire_id)
    return ReprocessResult(state, candidates, SyncReprocessPage(next_after, has_more))


def reprocess(
    conn: apsw.Connection, path: Path, key: BindingKey, limit: int, page_after: str | None
) -> ReprocessResult:
    check_reprocess_limit(limit)
    after = parse_page_key(page_after) if page_after is not None else (0, "")
    with read_transaction(conn, path):
        binding = load_binding(conn, key)
        if binding is None:
            state = SyncState(store_generation(conn), 0)
            loaded: list[SyncReprocessCandidate] = []
        else:
            state = SyncState(binding.driver_generation, binding.transport_cursor)
            loaded = [
                SyncReprocessCandidate(r[0], r[1], r[2], Envelope(r[3], r[4], r[5], r[6]), r[7])
                for r in conn.execute(KEYSET_SQL, (binding.pk, after[0], after[1], limit + 1))
            ]
        crash_point("reprocess.snapshot.after_read")
    return plan_reprocess_page(state, loaded, limit, after)
