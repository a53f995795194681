"""The engine's read-state phase, after the message phase of every ``pull``,
``sync`` and ``run`` cycle (read-state-synchronization.md "HTTP operation",
"Limit failure and recovery"; UPSTREAM-RECORDS §5.2 step 9; specs/read-state.md §8).

1. (by the caller, which also adopts the roster from it) one consistent
   authenticated snapshot: ``GET /v1/capabilities`` and
   ``GET /v1/members`` whose floors agree (retried up to three times);
2. the driver's ``read-prepare`` with that snapshot and, as
   ``local_agents``, the team's names in the local registry — this store's
   roster as it stands here, never the relay document's names
   (:func:`local_registry`; specs/read-state.md decision 11);
3. ``POST /v1/read-state/sync`` carrying the updates (at most 1,000
   members, at most 1,000 exact reads) with ``page_after: null``, then the
   read-only walk with ``updates: []`` until ``has_more`` is false. Each page
   is checked against its request and against the walk as a whole
   (:class:`wire.http_v1.read_state.ReadStateWalk`) before the driver's
   ``read-apply`` sees it;
4. a ``409 read-state-limit-exceeded`` durably blocks the member it names
   (``read-block``), keeps every local fact, and the same request is sent
   again without that member — never the rejected update unchanged;
5. at the end every roster member's frontier must have been seen.

Skipped, with the reason in the report, when the driver does not advertise
``stage2-read-state``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from syncengine import local_store as store_module
from syncengine.http.errors import ProtocolViolation, ReadStateLimitExceeded
from syncengine.ops.read_records import (
    CAPABILITY_STAGE2_READ_STATE,
    REASON_LIMIT,
    SyncReadBlock,
    SyncReadContext,
    SyncReadExact,
    SyncReadFrontier,
    SyncReadSnapshot,
)
from wire.http_v1.limits import MAX_READ_EXACT_IDS, MAX_READ_PAGE_LIMIT
from wire.http_v1.read_state import (
    ExactItem,
    FrontierItem,
    ReadStatePage,
    ReadStateRequest,
    ReadStateUpdate,
    ReadStateWalk,
)

if TYPE_CHECKING:
    from syncengine.engine.state import ConnectionRecord
    from syncengine.http.client import RelayClient
    from syncengine.local_store import Store
    from syncengine.ops.read_state import PrepareReadResult

__all__ = [
    "ReadStateReport",
    "local_registry",
    "read_state_phase",
    "skipped",
    "snapshot_roster",
    "supported",
    "updates_from",
]

_log = logging.getLogger("syncengine.engine")

#: Attempts at a capabilities + members snapshot whose floors agree.
SNAPSHOT_ATTEMPTS = 3


@dataclass(slots=True)
class ReadStateReport:
    """One read-state phase: what went up, what came down, who is blocked."""

    skipped: str | None = None
    pages: int = 0
    frontiers_sent: int = 0
    exact_sent: int = 0
    items_received: int = 0
    blocked: dict[str, str] = field(default_factory=dict)

    def to_obj(self) -> dict[str, Any]:
        return {
            "skipped": self.skipped,
            "pages": self.pages,
            "frontiers_sent": self.frontiers_sent,
            "exact_sent": self.exact_sent,
            "items_received": self.items_received,
            "blocked": dict(sorted(self.blocked.items())),
        }


def snapshot_roster(client: RelayClient, reuse: Any = None) -> tuple[Any, Any]:
    """Capabilities and members from one retention state (their floors agree).

    ``reuse`` is the capability snapshot this cycle's pull ended with (its
    ``current_seq`` covers the transport cursor the pull reached): when the
    roster's floor agrees with it, the pair is as consistent as a fresh one
    and the phase saves a request (specs/read-state.md §8 and decision 8);
    otherwise fresh pairs are taken as before."""
    if reuse is not None:
        members = client.members()
        if reuse.binding.min_available_seq == members.binding.min_available_seq:
            return reuse, members
    for _ in range(SNAPSHOT_ATTEMPTS):
        caps = client.capabilities()
        members = client.members()
        if caps.binding.min_available_seq == members.binding.min_available_seq:
            return caps, members
    raise ProtocolViolation(
        "the relay's floor kept changing between GET /v1/capabilities and GET /v1/members"
    )


def updates_from(prepared: PrepareReadResult) -> tuple[ReadStateUpdate, ...]:
    """The request's updates: one per member with a frontier, its exact reads
    attached, within the request's exact budget (the rest wait a cycle)."""
    exact: dict[str, list[str]] = {}
    budget = MAX_READ_EXACT_IDS
    for item in prepared.exact:
        if budget == 0:
            break
        exact.setdefault(item.member_id, []).append(item.wire_id)
        budget -= 1
    return tuple(
        ReadStateUpdate(f.member_id, f.server_seq, tuple(exact.get(f.member_id, ())))
        for f in prepared.frontiers
    )


def _items(page: ReadStatePage, usable: set[str]) -> list[SyncReadFrontier | SyncReadExact]:
    items: list[SyncReadFrontier | SyncReadExact] = []
    for item in page.items:
        if item.member_id not in usable:
            continue
        if isinstance(item, FrontierItem):
            items.append(SyncReadFrontier(item.member_id, item.server_seq))
        else:
            assert isinstance(item, ExactItem)
            items.append(SyncReadExact(item.member_id, item.wire_id))
    return items


def supported() -> bool:
    return CAPABILITY_STAGE2_READ_STATE in store_module.CAPABILITIES


def skipped() -> ReadStateReport:
    reason = f"the storage driver does not advertise {CAPABILITY_STAGE2_READ_STATE}"
    _log.info("read-state.skipped: %s", reason)
    return ReadStateReport(skipped=reason)


def local_registry(store: Store, team: str) -> tuple[str, ...]:
    """The names the local team registry holds for ``team``: its roster
    members under their *local* names, sorted (read-state-synchronization.md
    prepare: ``local_agents`` come "from the local team registry as a
    separate authority"; specs/read-state.md decision 11).

    Not the relay's members document: a member the relay renamed keeps its
    local name here until ``team rename-member`` follows, and a member the
    relay has not accepted yet is still one of ours. Passing the relay's
    names (as this phase did before, RS-18) would hand the driver the very
    authority it is meant to check the relay against."""
    return tuple(sorted(member.name for member in store.team(team).members))


def read_state_phase(
    store: Store,
    connection: ConnectionRecord,
    client: RelayClient,
    caps: Any,
    roster: list[tuple[str, str]],
) -> ReadStateReport:
    """Steps 2–5 above, for the snapshot ``caps`` and the members of it a
    local store can hold (``roster``); returns the report, or raises with
    nothing half-applied (each page is one driver transaction). Items about
    members this store cannot hold are not handed to the driver."""
    report = ReadStateReport()
    key = connection.key
    usable = {member_id for member_id, _ in roster}
    context = SyncReadContext(
        caps.binding.min_available_seq,
        caps.current_seq,
        tuple(roster),
        local_registry(store, connection.local_team),
    )
    prepared = store.sync_prepare_read_state(key, context)
    report.blocked = {b.member_id: b.reason for b in prepared.blocked}
    updates = list(updates_from(prepared))

    walk = ReadStateWalk()
    request = ReadStateRequest(tuple(updates), None, MAX_READ_PAGE_LIMIT)
    first = True
    while True:
        try:
            page = client.read_state_sync(request)
        except ReadStateLimitExceeded as refused:
            member = refused.member_id
            if not first or member not in {u.member_id for u in request.updates}:
                raise
            store.sync_block_read_state(key, SyncReadBlock(member, REASON_LIMIT))
            report.blocked[member] = REASON_LIMIT
            _log.warning("read-state.blocked: member %s (%s)", member, REASON_LIMIT)
            request = ReadStateRequest(
                tuple(u for u in request.updates if u.member_id != member),
                None,
                MAX_READ_PAGE_LIMIT,
            )
            continue
        if first:
            report.frontiers_sent = len(request.updates)
            report.exact_sent = sum(len(u.exact_wire_ids) for u in request.updates)
            first = False
        walk.accept(request, page)
        store.sync_apply_read_state(
            key,
            SyncReadSnapshot(page.binding.min_available_seq, page.current_seq),
            _items(page, usable),
        )
        report.pages += 1
        report.items_received += len(page.items)
        if not page.has_more:
            break
        request = ReadStateRequest((), page.next_page_after, MAX_READ_PAGE_LIMIT)
    missing = usable - walk.frontier_members
    if missing:
        raise ProtocolViolation(
            f"the read-state walk ended without a frontier for {len(missing)} active member(s)"
        )
    _log.info("read-state.applied: %d page(s), %d item(s)", report.pages, report.items_received)
    return report
