"""The blocked envelopes of a binding, for the operator (issue #15, item 4).

A pulled envelope this machine could not import stays in ``sync_quarantine``
with a blocking status (message-synchronization.md "Quarantine"); until
now only a count per status was visible. :func:`list_blocked` pages through
them by ``server_seq`` on the partial index ``sync_quarantine_blocking``, so
listing costs the page, not the history.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from syncengine.ops.bindings import BindingKey, load_binding
from syncengine.ops.states import QuarantineState
from syncengine.store.connection import Row, one_row
from syncengine.store.errors import InvalidInput

if TYPE_CHECKING:
    import apsw

__all__ = ["BLOCKING_STATUSES", "BlockedEnvelope", "count_blocked", "list_blocked"]

#: What ``quarantine list`` shows: every held status — the blocking ones and
#: the settled ``before_join`` (issue #33: listed with its reason, though it
#: needs nothing) — in the order of the partial index's ``IN`` list.
BLOCKING_STATUSES = tuple(s.value for s in QuarantineState if s.held)
_IN = ", ".join(f"'{s}'" for s in BLOCKING_STATUSES)


@dataclass(frozen=True, slots=True)
class BlockedEnvelope:
    """One envelope waiting in quarantine, as ``quarantine list`` shows it."""

    server_seq: int
    wire_id: str
    status: str
    reason: str | None
    cipher: str
    key_id: str | None
    server_received_at: str

    def to_obj(self) -> dict[str, Any]:
        return {
            "server_seq": str(self.server_seq),
            "wire_id": self.wire_id,
            "status": self.status,
            "reason": self.reason,
            "cipher": self.cipher,
            "key_id": self.key_id,
            "server_received_at": self.server_received_at,
        }


def list_blocked(
    conn: apsw.Connection,
    key: BindingKey,
    *,
    status: str | None = None,
    after: int = 0,
    limit: int = 100,
) -> tuple[BlockedEnvelope, ...]:
    """Blocked envelopes with ``server_seq > after``, oldest first, at most
    ``limit`` (1..1000); ``status`` narrows to one blocking status."""
    if status is not None and status not in BLOCKING_STATUSES:
        raise InvalidInput("status", f"must be one of {', '.join(BLOCKING_STATUSES)}")
    if not 1 <= limit <= 1000:
        raise InvalidInput("limit", "must be within 1..1000")
    if after < 0:
        raise InvalidInput("after", "must be a sequence number (0 or more)")
    binding = load_binding(conn, key)
    if binding is None:
        return ()
    rows: list[Row] = conn.execute(
        "SELECT server_seq, wire_id, status, reason, cipher, key_id, server_received_at"
        f" FROM sync_quarantine WHERE binding_pk = ? AND status IN ({_IN})"
        " AND server_seq > ? AND (? IS NULL OR status = ?)"
        " ORDER BY server_seq LIMIT ?",
        (binding.pk, after, status, status, limit),
    ).fetchall()
    return tuple(BlockedEnvelope(*row) for row in rows)


def count_blocked(conn: apsw.Connection, binding_pk: int) -> int:
    """How many envelopes wait in quarantine, every held status (one count on
    the held-states index): what a ``reprocess`` will look at."""
    row = one_row(
        conn.execute(
            f"SELECT count(*) FROM sync_quarantine WHERE binding_pk = ? AND status IN ({_IN})",
            (binding_pk,),
        )
    )
    return int(row[0])
