"""How the relay's shared statements are spelled on one database.

:mod:`relay.storage.steps` writes every statement once, with ``?``
placeholders and a few named fragments in braces where SQLite and
PostgreSQL spell the same thing differently:

``{active}``
    the "row is active" predicate (``active = 1`` / ``active``);
``{true}``, ``{false}``
    a boolean literal (``1``/``0`` / ``true``/``false``);
``{any}``
    membership in a bound list of IDs (``IN (SELECT value FROM json_each(?))``
    / ``= ANY(?)``), whose value :attr:`Dialect.encode_ids` prepares;
``{lock_team}``, ``{lock_share}``, ``{lock_update}``, ``{lock_token}``
    the row-lock suffixes PostgreSQL needs to rebuild SQLite's single writer
    (relay/storage/postgres.py says why each is taken); empty on SQLite,
    whose ``BEGIN IMMEDIATE`` already serializes every write.

A :class:`Dialect` fills the fragments and converts the placeholders once per
statement text (cached), so a backend runs exactly the statements it ran when
each had its own copy. What fragments cannot say — transactions, locking
strategy, error mapping, schema — stays in the backend module.

One write is not a statement but a bulk append: a POST stores up to 1,000
``messages`` and ``wire_ids`` rows. :class:`BulkTable` names such a table,
its columns and their PostgreSQL types, and :attr:`Dialect.insert_rows` is
each backend's fastest way to append rows to it inside the open transaction
(SQLite: one prepared ``INSERT`` stepped per row, which costs microseconds
in-process; PostgreSQL: one binary ``COPY``, because a per-row ``INSERT``
there is a client-side round of parameter dumping and protocol handling per
row — issue #35 measured it at a fifth of the write path's busy time).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["BulkTable", "Dialect", "SqlConnection", "SqlCursor", "Tx", "insert_statement"]

Params = Sequence[Any] | Mapping[str, Any] | None


class SqlCursor(Protocol):
    """What the shared steps read from a statement's cursor. A row's values
    are typed by the schema, which neither driver's types know: ``Any``."""

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class SqlConnection(Protocol):
    """The part of a connection the shared steps use, which both backends'
    own connections have: ``apsw.Connection`` (SQLite) and
    ``psycopg.Connection`` (PostgreSQL) run a statement with its parameters
    and return a cursor. A Protocol, because a step takes either kind."""

    def execute(self, query: str, params: Params = None, /) -> SqlCursor: ...


@dataclass(frozen=True, slots=True)
class BulkTable:
    """A table that receives rows in bulk: its name, columns and their types.

    ``pg_types`` are PostgreSQL type names in column order; binary ``COPY``
    needs them to encode each value (SQLite ignores them). Names are code
    constants, never input, so they are spliced into statements as text.
    """

    name: str
    columns: tuple[str, ...]
    pg_types: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.columns) != len(self.pg_types):
            raise ValueError(f"{self.name}: one PostgreSQL type per column")


@dataclass(frozen=True, slots=True)
class Dialect:
    """The SQL fragments and value codecs in which the two backends differ."""

    name: str
    placeholder: str
    active: str
    true: str
    false: str
    any: str
    #: Whether the backend serializes per team with row locks (PostgreSQL)
    #: rather than one database-wide writer (SQLite); only then does a write
    #: re-read the team row under ``lock_team`` after authenticating.
    row_locks: bool
    lock_team: str
    lock_share: str
    lock_update: str
    lock_token: str
    #: A list of IDs as the value bound to ``{any}``.
    encode_ids: Callable[[list[str]], object]
    #: A JSON array column's value on the way in, and back out.
    encode_json: Callable[[list[Any]], object]
    decode_json: Callable[[Any], Iterable[Any]]
    #: Rows changed by the statement just run (connection, its cursor).
    changes: Callable[[Any, Any], int]
    #: Append rows (tuples in the table's column order) to a table inside the
    #: connection's open transaction; a constraint violation fails the call
    #: and leaves the transaction to be rolled back, as a failed INSERT does.
    insert_rows: Callable[[Any, BulkTable, Sequence[Sequence[Any]]], None]
    _rendered: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def sql(self, template: str) -> str:
        """The statement ``template`` in this dialect (computed once per text)."""
        try:
            return self._rendered[template]
        except KeyError:
            pass
        fragments = {
            "active": self.active,
            "true": self.true,
            "false": self.false,
            "any": self.any,
            "lock_team": self.lock_team,
            "lock_share": self.lock_share,
            "lock_update": self.lock_update,
            "lock_token": self.lock_token,
        }
        rendered = template.format_map(fragments).replace("?", self.placeholder)
        self._rendered[template] = rendered
        return rendered


class Tx:
    """One open transaction as the shared steps see it: statements in, tuples out.

    ``conn`` is the backend's own connection (APSW or psycopg); both run a
    statement with ``execute`` and return a cursor with ``fetchone`` /
    ``fetchall``; bulk appends go through :attr:`Dialect.insert_rows`.
    """

    __slots__ = ("conn", "dialect")

    def __init__(self, conn: SqlConnection, dialect: Dialect) -> None:
        self.conn = conn
        self.dialect = dialect

    def rows(self, template: str, params: Params = None) -> list[tuple[Any, ...]]:
        result: list[tuple[Any, ...]] = self.conn.execute(
            self.dialect.sql(template), params
        ).fetchall()
        return result

    def one(self, template: str, params: Params = None) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self.conn.execute(
            self.dialect.sql(template), params
        ).fetchone()
        return row

    def run(self, template: str, params: Params = None) -> int:
        """Run one statement; the number of rows it changed."""
        cursor = self.conn.execute(self.dialect.sql(template), params)
        return self.dialect.changes(self.conn, cursor)

    def insert_rows(self, table: BulkTable, rows: Sequence[Sequence[Any]]) -> None:
        """Append ``rows`` to ``table`` in the backend's bulk way (none: no-op)."""
        if rows:
            self.dialect.insert_rows(self.conn, table, rows)


def insert_statement(table: BulkTable, placeholder: str) -> str:
    """``INSERT INTO name(columns) VALUES (...)`` with one placeholder per column."""
    marks = ", ".join([placeholder] * len(table.columns))
    return f"INSERT INTO {table.name}({', '.join(table.columns)}) VALUES ({marks})"
