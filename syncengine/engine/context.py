"""What every cycle step needs (the :class:`CycleContext` the engine builds),
and the pull's first look at the relay (:func:`probe_pull`).

Apart from the steps themselves (:mod:`syncengine.engine.cycle`) so that an
idle ``pull`` can build its context and find nothing to fetch without
importing the push and pull machinery and its records (issue #17, start-up).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from syncengine.engine.evaluation import IdentityLookup
    from syncengine.engine.progress import Progress
    from syncengine.engine.security import SecurityHistory
    from syncengine.engine.state import ConnectionRecord
    from syncengine.engine.workers import Workers
    from syncengine.http.client import RelayClient
    from syncengine.ops.bindings import BindingKey
    from syncengine.ops.prepare_push import BlockedSeal, LocalMessage, Sealed
    from syncengine.ops.records import SyncPrepare
    from syncengine.store import Store
    from wire.http_v1.capabilities import Capabilities

__all__ = ["CycleContext", "nothing_past", "probe_pull"]


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


def probe_pull(ctx: CycleContext) -> tuple[int, Capabilities]:
    """A pull's first two steps: the binding (created if absent, in its own
    transaction, as every pull does first) and a capability snapshot;
    returns the transport cursor and the snapshot.

    The engine asks :func:`nothing_past` of them and loads the pull's
    pipeline (:func:`syncengine.engine.cycle.pull_all`, handed this very
    snapshot) only when there is something to fetch.
    """
    binding = ctx.store.sync_bind(ctx.key)
    return binding.transport_cursor, ctx.client.capabilities()
