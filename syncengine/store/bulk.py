"""Multi-row ``INSERT`` and range reads for the sync hot paths (issue #17,
"Pull at the relay's pace").

A page of 1,000 pulled messages writes 1,000 rows into ``messages`` and
into ``sync_quarantine``. ``executemany`` runs the one-row statement 1,000
times; a ``VALUES (…), (…), …`` statement of :data:`ROWS_PER_STATEMENT` rows
does the same inserts with less per-statement work (measured per 1,000 rows:
about a fifth less CPU on the quarantine, a few per cent on messages — and
*more* on ``sync_push``, which therefore keeps ``executemany``). The rows,
their order of insertion, every constraint and every trigger are exactly
those of the one-row statement: only the number of statement executions
changes.

The rows are cut into the fewest statements of at most
:data:`ROWS_PER_STATEMENT` rows, as even as possible (:func:`_chunks`): a
page of 1,000 is eight statements of 125 rows, one statement text that stays
in the connection's statement cache from page to page, and any other count
compiles at most two texts. An uneven cut would leave a remainder of up to
127 rows; run as one-row statements (``executemany``) those cost ten times a
multi-row row each — a remainder of 104 once took more time than the 896 rows
before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import apsw

__all__ = ["ROWS_PER_STATEMENT", "dense", "insert_rows", "insert_rows_returning"]

#: Rows per multi-row statement: large enough to amortise a statement's
#: set-up, small enough to stay far below SQLite's host-parameter limit
#: (32,766) for the widest row here (13 columns) and to compile quickly.
ROWS_PER_STATEMENT = 128


def dense(values: Sequence[int]) -> bool:
    """Whether sorted distinct ``values`` fill most of their range. A page's
    positions and sequences usually do, and then one index range scan
    (``BETWEEN``, the rows outside the set dropped) reads them more cheaply
    than hundreds of ``IN`` probes; a sparse set keeps the probes, so a read
    never walks far beyond what it was asked for."""
    return bool(values) and values[-1] - values[0] < 2 * len(values)


def _values(columns: int, rows: int) -> str:
    one = "(" + ", ".join("?" * columns) + ")"
    return ", ".join([one] * rows)


def _chunks(count: int) -> list[tuple[int, int]]:
    """``(start, rows)`` of each statement for ``count`` rows, in order: the
    fewest statements of at most :data:`ROWS_PER_STATEMENT` rows, the first
    ones one row longer than the last ones when ``count`` does not divide
    evenly (so at most two statement texts)."""
    statements = -(-count // ROWS_PER_STATEMENT)
    size, longer = divmod(count, statements)
    chunks = []
    start = 0
    for index in range(statements):
        rows = size + 1 if index < longer else size
        chunks.append((start, rows))
        start += rows
    return chunks


def _flat(rows: Sequence[Sequence[Any]], start: int, count: int) -> list[Any]:
    """The parameters of ``rows[start : start + count]``, row after row."""
    return [v for row in rows[start : start + count] for v in row]


def insert_rows(conn: apsw.Connection, head: str, rows: Sequence[Sequence[Any]]) -> None:
    """Insert ``rows`` in order with ``head`` (``INSERT INTO t (a, b, …) VALUES``)."""
    if not rows:
        return
    columns = len(rows[0])
    for start, count in _chunks(len(rows)):
        conn.execute(f"{head} {_values(columns, count)}", _flat(rows, start, count))


def insert_rows_returning(
    conn: apsw.Connection, head: str, rows: Sequence[Sequence[Any]], returning: str
) -> list[tuple[Any, ...]]:
    """Insert like :func:`insert_rows` and return ``RETURNING returning`` of
    every row, as one tuple per row in the order of the rows inserted.

    SQLite leaves the order of a multi-row statement's ``RETURNING`` rows
    unspecified, so ``returning`` must start with a column that tells the
    rows apart (a fresh unique ID): the answers are put back in row order by
    it. ``rows[i][0]`` must be that same column's value.
    """
    if not rows:
        return []
    columns = len(rows[0])
    by_key: dict[Any, tuple[Any, ...]] = {}
    for start, count in _chunks(len(rows)):
        sql = f"{head} {_values(columns, count)} RETURNING {returning}"
        for answer in conn.execute(sql, _flat(rows, start, count)):
            by_key[answer[0]] = tuple(answer)
    if len(by_key) != len(rows):  # pragma: no cover - a key repeated within the rows
        raise AssertionError("insert_rows_returning needs a distinct first column per row")
    return [by_key[row[0]] for row in rows]
