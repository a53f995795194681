"""Strict shape checks for decoded JSON values.

Each helper names the dotted field path in its error, so a rejection of a
nested record says exactly which member broke which rule. Unknown members
are rejected wherever a schema is closed (v1.md "Scope and conventions":
unknown request fields must be refused so no client believes an unsupported
field was stored).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from wire.errors import SchemaError

__all__ = [
    "expect_bool",
    "expect_int",
    "expect_list",
    "expect_object",
    "expect_str",
    "join_field",
    "rebased",
]


def join_field(parent: str, child: str | int) -> str:
    """Dotted path of a member (``a.b``) or element (``a[3]``)."""
    if isinstance(child, int):
        return f"{parent}[{child}]"
    if not child:
        return parent
    return f"{parent}.{child}" if parent else child


def rebased(exc: SchemaError, field: str) -> SchemaError:
    """The same error under ``field``. Elements of a large document are
    checked under relative names and the dotted path is built only when one
    fails: a page of 1,000 items would otherwise format 1,000s of paths that
    no error ever shows."""
    return type(exc)(join_field(field, exc.field), exc.rule)


def expect_object(
    value: Any,
    field: str,
    required: Iterable[str],
    optional: Iterable[str] = (),
    *,
    closed: bool = True,
) -> dict[str, Any]:
    """Require a JSON object with every ``required`` member.

    With ``closed`` (the default) any member outside ``required`` ∪
    ``optional`` is an error; open schemas (responses, which clients must
    tolerate growing) pass ``closed=False``.
    """
    if not isinstance(value, dict):
        raise SchemaError(field, f"must be a JSON object, not {_json_type(value)}")
    required_set = frozenset(required)
    # Fast paths for the common, valid case; the slow path names the member.
    keys = value.keys()
    if keys == required_set or (not closed and required_set <= keys):
        return value
    missing = sorted(required_set.difference(value))
    if missing:
        raise SchemaError(join_field(field, missing[0]), "required member is missing")
    if closed:
        allowed = required_set.union(optional)
        unknown = sorted(name for name in value if name not in allowed)
        if unknown:
            raise SchemaError(join_field(field, unknown[0]), "unknown member")
    return value


def expect_str(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise SchemaError(field, f"must be a JSON string, not {_json_type(value)}")
    return value


def expect_int(
    value: Any, field: str, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise SchemaError(field, f"must be a JSON integer, not {_json_type(value)}")
    if minimum is not None and value < minimum:
        raise SchemaError(field, f"must be at least {minimum}")
    if maximum is not None and value > maximum:
        raise SchemaError(field, f"must be at most {maximum}")
    return value


def expect_bool(value: Any, field: str) -> bool:
    if not isinstance(value, bool):
        raise SchemaError(field, f"must be true or false, not {_json_type(value)}")
    return value


def expect_list(
    value: Any, field: str, *, min_items: int = 0, max_items: int | None = None
) -> list[Any]:
    if not isinstance(value, list):
        raise SchemaError(field, f"must be a JSON array, not {_json_type(value)}")
    if len(value) < min_items:
        raise SchemaError(field, f"must have at least {min_items} element(s)")
    if max_items is not None and len(value) > max_items:
        raise SchemaError(field, f"must have at most {max_items} elements")
    return value


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
