"""``syncengine resync``: the operator's approval of a retention gap
(retention-gap-resynchronization.md "Explicit gap acceptance"; specs/engine.md
§5.2).

Polling never calls this: a ``410 resync-required`` stays a durable,
visible stop until an operator names the floor they accept. Before anything
local changes, in the order the spec gives:

1. the binding exists and the driver advertises ``stage1-resync`` — checked
   with no network call, so an unsupported driver fails with nothing done;
2. a fresh authenticated capability snapshot;
3. the read-only ``resync-status`` for the approved floor — an identical
   committed audit means an earlier run already succeeded (perhaps its
   output was lost), and its recorded result is returned as is, without
   the now-impossible old-cursor 410;
4. the 410 reproduced from the exact stored cursor;
5. its floor, the snapshot's floor and ``--accept-floor`` identical, and
6. ``transport_cursor < floor <= current_seq``.

Any other answer — a page instead of a 410, a floor that differs or moved
between the checks, a cursor that moved — is :class:`ResyncRefused`: nothing
changed, and the message names the floor to inspect. Only then does the
driver's one-transaction ``resync`` run, and its result is verified against
the status it followed before success is reported.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from syncengine import local_store as store_module
from syncengine.engine.errors import ResyncRefused, ResyncUnsupported
from syncengine.http.errors import ResyncRequired
from syncengine.ops.errors import StaleBinding
from syncengine.ops.resync import (
    CAPABILITY_STAGE1_RESYNC,
    SyncResync,
    SyncResyncResult,
    SyncResyncStatus,
)
from syncengine.ops.states import BindingState

if TYPE_CHECKING:
    from syncengine.engine.state import ConnectionRecord
    from syncengine.http.client import RelayClient
    from syncengine.local_store import Store

__all__ = ["ResyncReport", "accept_retention_gap", "resync_command"]


@dataclass(frozen=True, slots=True)
class ResyncReport:
    """A committed acceptance; ``already_applied`` when an earlier run made it."""

    result: SyncResyncResult
    already_applied: bool

    def to_obj(self) -> dict[str, Any]:
        audit = self.result.audit
        return {
            **self.result.to_obj(),
            "unavailable": audit.unavailable,
            "already_applied": self.already_applied,
        }


def resync_command(team: str, floor: int | str, store: str | None = None) -> str:
    """The exact command line an operator runs to approve ``floor``."""
    parts = ["syncengine", "resync"]
    if store is not None:
        parts += ["--store", store]
    parts += ["--team", team, "--accept-floor"]
    return shlex.join(parts) + " " + (str(floor) if isinstance(floor, int) else floor)


def _refused(connection: ConnectionRecord, store: Store, message: str) -> ResyncRefused:
    hint = resync_command(connection.local_team, "FLOOR", str(store.path))
    return ResyncRefused(
        message,
        remediation="Nothing was changed. Run 'syncengine status' (or 'syncengine pull') to "
        f"see the relay's current floor, then approve exactly that floor: {hint}",
    )


def _check_capability(store: Store) -> None:
    if CAPABILITY_STAGE1_RESYNC not in store_module.CAPABILITIES:
        raise ResyncUnsupported(
            f"the storage driver does not advertise {CAPABILITY_STAGE1_RESYNC}; "
            "it cannot accept a retention gap"
        )


def _status(store: Store, connection: ConnectionRecord, floor: int) -> SyncResyncStatus:
    """The driver's status, read back through the strict parser with the
    engine's audit checks (the driver is a separate authority)."""
    status = store.sync_resync_status(connection.key, floor)
    return SyncResyncStatus.from_obj(status.to_obj(), requested_floor=floor)


def _verified(
    result: SyncResyncResult, status: SyncResyncStatus, request: SyncResync
) -> SyncResyncResult:
    checked = SyncResyncResult.from_obj(result.to_obj())
    if checked.driver_generation != status.driver_generation:
        raise ResyncRefused("the driver's result names another generation than its status")
    audit = checked.audit
    if (audit.expected_transport_cursor, audit.accepted_floor) != (
        request.expected_transport_cursor,
        request.min_available_seq,
    ):
        raise ResyncRefused("the driver's result does not describe the requested gap")
    return checked


def accept_retention_gap(
    store: Store, connection: ConnectionRecord, client: RelayClient, floor: int
) -> ResyncReport:
    """Steps 1–6 above, then the driver's ``resync``; raises
    :class:`ResyncRefused` with nothing changed when any check fails."""
    binding = store.sync_binding(connection.key)
    if binding is None or binding.state is not BindingState.ACTIVE:
        raise _refused(connection, store, "this team has no active sync binding to resync")
    _check_capability(store)

    caps = client.capabilities()
    status = _status(store, connection, floor)
    if status.audit is not None:
        return ResyncReport(SyncResyncResult(status.driver_generation, status.audit), True)
    cursor = status.transport_cursor
    if cursor >= floor:
        raise _refused(
            connection,
            store,
            f"the transport cursor is already {cursor}, not below the approved floor {floor}; "
            "there is no gap below it to accept",
        )
    relay_floor = caps.binding.min_available_seq
    if relay_floor != floor:
        raise _refused(
            connection,
            store,
            f"the relay's retention floor is {relay_floor}, not the approved {floor}",
        )
    try:
        client.get_messages(cursor, 1)
    except ResyncRequired as gone:
        if gone.min_available_seq != floor:
            raise _refused(
                connection,
                store,
                f"the relay's floor moved to {gone.min_available_seq} during the checks "
                f"(approved {floor})",
            ) from None
    else:
        raise _refused(
            connection,
            store,
            f"the relay still serves messages after cursor {cursor} (no 410 resync-required); "
            "there is no retention gap — run 'syncengine pull'",
        )
    if not cursor < floor <= caps.current_seq:
        raise _refused(
            connection,
            store,
            f"the floor {floor} must lie above the cursor {cursor} and at most at the relay's "
            f"current sequence {caps.current_seq}",
        )
    request = SyncResync(cursor, floor, caps.current_seq)
    try:
        result = store.sync_resync(connection.key, request)
    except StaleBinding as exc:
        raise _refused(connection, store, str(exc)) from None
    return ResyncReport(_verified(result, status, request), False)
