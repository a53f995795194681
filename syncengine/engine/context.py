"""What every cycle step needs (the :class:`CycleContext` the engine builds),
the write set a push may use (:func:`write_plan`), and the first looks a
pull and a push take (:func:`probe_pull`, :func:`idle_push`).

Apart from the steps themselves (:mod:`syncengine.engine.cycle`) so that an
idle ``pull``, ``push`` or ``sync`` can build its context and find nothing
to move without importing the push and pull machinery and its records
(issue #17, start-up).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from syncengine.engine.reports import PushReport
from syncengine.engine.security import WritePlan, plan_write
from syncengine.engine.state import pending_push_count
from syncengine.ops.bindings import load_binding
from syncengine.ops.states import BindingState
from syncengine.store.connection import read_transaction

if TYPE_CHECKING:
    from syncengine.engine.evaluation import IdentityLookup
    from syncengine.engine.progress import Progress
    from syncengine.engine.security import SecurityHistory
    from syncengine.engine.state import ConnectionRecord
    from syncengine.engine.workers import Workers
    from syncengine.http.client import RelayClient
    from syncengine.local_store import Store
    from syncengine.ops.bindings import BindingKey
    from syncengine.ops.prepare_push import BlockedSeal, LocalMessage, Sealed
    from syncengine.ops.sync_records import SyncPrepare
    from wire.http_v1.capabilities import Capabilities

__all__ = ["CycleContext", "idle_push", "nothing_past", "probe_pull", "write_plan"]

_log = logging.getLogger("syncengine.engine")


def _no_workers(batch: int) -> Workers | None:
    return None


@dataclass
class CycleContext:
    """What every step needs; built by :class:`~syncengine.engine.engine.Engine`.

    ``identity`` is called, with an epoch's key ID, at most when an age-v1
    envelope of that epoch must be opened; the engine reads each identity
    file once and caches the result.
    """

    store: Store
    connection: ConnectionRecord
    client: RelayClient
    history: Callable[[], SecurityHistory]
    identity: IdentityLookup
    progress: Callable[[str], Progress]
    #: Offered a batch size of age-v1 work; returns worker processes to do it
    #: on, or ``None`` to do it here (see :mod:`syncengine.engine.workers`).
    workers: Callable[[int], Workers | None] = _no_workers

    def seal_all(
        self, messages: Sequence[LocalMessage], request: SyncPrepare, key: BindingKey
    ) -> list[Sealed | BlockedSeal] | None:
        """prepare_push's ``seal_all``: large age-v1 chunks go to the workers."""
        if request.cipher != "age-v1":
            return None
        pool = self.workers(len(messages))
        return pool.seal(messages, request, key) if pool is not None else None

    @property
    def key(self) -> BindingKey:
        return self.connection.key


def nothing_past(caps: Capabilities, cursor: int) -> bool:
    """Whether a capability snapshot shows nothing for a pull at ``cursor``
    to fetch: ``current_seq`` equal to it and no retention floor beyond it.

    The empty page could say no more, and whatever the relay holds beyond is
    taken by the next pull, whose snapshot shows it. A ``current_seq``
    behind the cursor is not "nothing": the page rules must judge that
    contradiction (a rollback), so such a pull still asks for its page.
    """
    return caps.current_seq == cursor and caps.binding.min_available_seq <= cursor + 1


def probe_pull(ctx: CycleContext, caps: Capabilities | None = None) -> tuple[int, Capabilities]:
    """A pull's first two steps: the binding (created if absent, in its own
    transaction, as every pull does first) and a capability snapshot —
    ``caps`` when the caller holds one nothing since can have outdated (a
    sync whose push posted nothing), else a fresh one; returns the transport
    cursor and the snapshot.

    The engine asks :func:`nothing_past` of them and loads the pull's
    pipeline (:func:`syncengine.engine.cycle.pull_all`, handed this very
    snapshot) only when there is something to fetch.
    """
    binding = ctx.store.sync_bind(ctx.key)
    return binding.transport_cursor, caps if caps is not None else ctx.client.capabilities()


def write_plan(ctx: CycleContext, caps: Capabilities) -> WritePlan:
    """The write set a push may use under the snapshot ``caps``
    (:func:`~syncengine.engine.security.plan_write`; specs/engine.md
    §4), with the key-epoch rule on top: a boundary before the newest
    epoch's own writes nothing. A plan that allows nothing new is logged
    (``push.blocked``) every time it is made, idle push or not."""
    # start-up pin: idle pull loads no wire.profiles
    from wire.profiles import supported_ciphers

    plan = plan_write(
        caps, supported_ciphers(), ctx.history(), age_configured=ctx.connection.age_configured
    )
    current = ctx.connection.epochs.current
    if (
        plan.cipher == "age-v1"
        and current is not None
        and plan.boundary is not None
        and plan.boundary < current.effective_from_seq
    ):
        # A boundary before the newest epoch's own: the relay's sequence went
        # backwards. Sealing to the older epoch could reach a removed
        # recipient, to the newer one a reader would refuse — write nothing.
        plan = replace(
            plan,
            cipher=None,
            reason=f"the relay's next sequence boundary {plan.boundary} precedes epoch "
            f"{current.key_id!r}'s boundary {current.effective_from_seq}",
        )
    if not plan.allow_new:
        _log.warning("push.blocked: %s", plan.reason)
    return plan


def idle_push(ctx: CycleContext, limit: int) -> PushReport | None:
    """The report of a push with nothing to send, or ``None`` when a local
    message still waits for its acknowledgement (then the caller runs the
    push itself, which asks for its own snapshot: no request is made here).

    Nothing waits when every local-origin message of the team past the push
    cursor is acknowledged: a prepare could then emit no reservation, old or
    new, and seal nothing, so the push is its preflight alone — the
    capability snapshot and the write plan it reports (a blocked plan is
    logged as before), the push cursor unchanged. A binding a prepare would
    not bind to (none yet, or retired) is never idle here: the prepare
    creates it, or refuses it with its own error.
    """
    with read_transaction(ctx.store.conn, ctx.store.path) as conn:
        binding = load_binding(conn, ctx.key)
        # Only an active binding is one the prepare's BIND edge keeps as it is.
        if binding is None or binding.state is not BindingState.ACTIVE:
            return None
        if pending_push_count(conn, binding) != 0:
            return None
    plan = write_plan(ctx, ctx.client.capabilities())
    return PushReport(
        limit=limit,
        cipher=plan.cipher,
        blocked_reason=plan.reason,
        candidates=0,
        batches=0,
        splits=0,
        stored=0,
        duplicate=0,
        sealed_blocked=0,
        push_cursor=binding.push_cursor,
    )
