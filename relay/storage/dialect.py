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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Dialect", "Tx"]

Params = Sequence[Any] | Mapping[str, Any] | None


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
    ``fetchall``, and both batch with a cursor's ``executemany``.
    """

    __slots__ = ("conn", "dialect")

    def __init__(self, conn: Any, dialect: Dialect) -> None:
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

    def run_many(self, template: str, rows: Iterable[Sequence[Any]]) -> None:
        cursor = self.conn.cursor()
        try:
            cursor.executemany(self.dialect.sql(template), rows)
        finally:
            cursor.close()
