"""Per-binding counts that grow with history, kept as rows are written
(issue #17; migration 13; specs/sync-stage1.md decision 23).

``status`` reports reservations and quarantine rows per state. Counting
them with grouped reads visits every row of the history — every envelope
blob — on each call. The states that stay small (reserved, blocked, the
blocking and corrupt quarantine statuses) have partial indexes and are
counted there; what remains is ``acked`` and ``imported``/``reconciled``,
which follow from three totals: reservations, quarantine rows, and
``reconciled`` echoes. Every statement that inserts those rows or moves a
quarantine row into or out of ``reconciled`` adds its change here, in the
same transaction, so the totals are exact at every commit and crash point.
They are kept by the writers and not by triggers: a trigger made every
multi-row write keep a statement journal, measured at five times the bytes
written per 1,000-message prepare on a 1,000,000-message store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from syncengine.store.connection import one_row

if TYPE_CHECKING:
    import apsw

__all__ = ["HistoryCounts", "add_history", "history_counts", "recount_history"]

#: The totals of one binding: reservations, quarantine rows, reconciled rows.
HistoryCounts = tuple[int, int, int]


def add_history(
    conn: apsw.Connection,
    binding_pk: int,
    *,
    push: int = 0,
    quarantine: int = 0,
    reconciled: int = 0,
) -> None:
    """Add one write's changes to ``binding_pk``'s totals (inside the writer's
    transaction; a binding's row is created by its first change)."""
    if push or quarantine or reconciled:
        conn.execute(
            "INSERT INTO sync_history_counts (binding_pk, push_rows, quarantine_rows,"
            " reconciled_rows) VALUES (?1, ?2, ?3, ?4) ON CONFLICT (binding_pk) DO UPDATE SET"
            " push_rows = push_rows + ?2, quarantine_rows = quarantine_rows + ?3,"
            " reconciled_rows = reconciled_rows + ?4",
            (binding_pk, push, quarantine, reconciled),
        )


def history_counts(conn: apsw.Connection, binding_pk: int) -> HistoryCounts:
    """The kept totals of ``binding_pk`` (zeros before its first row)."""
    row = conn.execute(
        "SELECT push_rows, quarantine_rows, reconciled_rows FROM sync_history_counts"
        " WHERE binding_pk = ?",
        (binding_pk,),
    ).fetchone()
    return (0, 0, 0) if row is None else (int(row[0]), int(row[1]), int(row[2]))


def recount_history(conn: apsw.Connection, binding_pk: int) -> HistoryCounts:
    """The same totals counted from the rows themselves (reads the whole
    history: for the migration that introduces the counts and for checks)."""
    push = one_row(
        conn.execute("SELECT count(*) FROM sync_push WHERE binding_pk = ?", (binding_pk,))
    )[0]
    quarantine, reconciled = one_row(
        conn.execute(
            "SELECT count(*), coalesce(sum(status = 'reconciled'), 0) FROM sync_quarantine"
            " WHERE binding_pk = ?",
            (binding_pk,),
        )
    )
    return int(push), int(quarantine), int(reconciled)
