"""The strict field readers every driver-ABI JSONL record shares.

One complete JSON object per LF-terminated line, an exact member set per
record type, every scalar in its canonical spelling, and a failure that
names the line and the field (UPSTREAM-RECORDS §9.5; agmsg #829 for the
carriage return). The Stage-1 records (:mod:`syncengine.ops.sync_records`), the
read-state records (:mod:`syncengine.ops.read_records`) and the resync
records all parse through these, so a rule is written once.

They live apart from the record classes so that a module needing only the
readers — the read-state phase of an idle ``pull`` — does not define the
Stage-1 dataclasses at start-up (issue #17, start-up).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from syncengine.store.errors import InvalidInput
from wire import jcs
from wire.errors import WireError
from wire.scalars import check_uuid4, parse_seq
from wire.schema import expect_object

__all__ = [
    "bad",
    "dump_line",
    "parse_jsonl",
    "record_fields",
    "seq_field",
    "wire_id_field",
    "wrapped",
]


def bad(field: str, problem: str) -> InvalidInput:
    """The driver's ``invalid_input`` failure for ``field`` (changes nothing)."""
    return InvalidInput(field, problem)


def dump_line(obj: dict[str, Any]) -> str:
    """One compact JSONL line, keys in the given order, UTF-8 not escaped.

    Deterministic: equal objects always give equal bytes, which is what
    makes a re-emitted reservation byte-identical.
    """
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def parse_jsonl(data: bytes, source: str = "stdin") -> Iterator[tuple[str, dict[str, Any]]]:
    """Strict JSONL → (where, object) pairs; ``where`` names the line for errors."""
    if not data:
        return
    if not data.endswith(b"\n"):
        raise bad(source, "input is truncated: the last line has no newline")
    for number, line in enumerate(data.split(b"\n")[:-1], start=1):
        where = f"{source} line {number}"
        if line.endswith(b"\r"):
            raise bad(where, "carriage return before newline (use LF line endings)")
        if not line.strip():
            raise bad(where, "blank line; every line must hold one JSON object")
        try:
            value = jcs.loads(line)
        except WireError as exc:
            raise bad(where, exc.rule) from None
        if not isinstance(value, dict):
            raise bad(where, "each line must be a JSON object")
        yield where, value


def record_fields(
    value: dict[str, Any],
    where: str,
    kind: str,
    required: tuple[str, ...],
    optional: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The record's members, checked: its ``type`` is ``kind`` and its member
    set is exactly ``type`` + ``required`` (+ any of ``optional``)."""
    if value.get("type") != kind:
        raise bad(f"{where}.type", f"expected a {kind!r} record")
    try:
        return expect_object(value, where, ("type", *required), optional)
    except WireError as exc:
        raise bad(exc.field, exc.rule) from None


def seq_field(value: Any, field: str, *, minimum: int = 0) -> int:
    """A sequence, cursor or revision in its canonical decimal spelling."""
    try:
        number = parse_seq(value, field)
    except WireError as exc:
        raise bad(exc.field, exc.rule) from None
    if number < minimum:
        raise bad(field, f"must be at least {minimum}")
    return number


def wire_id_field(value: Any, field: str) -> str:
    """A wire ID: a lowercase canonical UUIDv4."""
    try:
        return check_uuid4(value, field)
    except WireError as exc:
        raise bad(exc.field, exc.rule) from None


def wrapped(func: Any, *args: Any, **kwargs: Any) -> Any:
    """``func(*args)`` with a wire rule's refusal turned into ``invalid_input``."""
    try:
        return func(*args, **kwargs)
    except WireError as exc:
        raise bad(exc.field, exc.rule) from None
