"""The plaintext team message ``{body, created_at, from_agent, to_agent}``.

server/spec/v1.md "Message representation": exactly these four string
members; ``body`` non-empty and at most 1,000,000 UTF-8 bytes before JSON
escaping; ``created_at`` a canonical timestamp; both agent names follow the
agent-name rules. The byte form is RFC 8785, and a reader must decode
strictly, re-encode and require byte equality, so every implementation
agrees on one spelling of each message (the age-v1 profile applies the same
rules after decryption).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

from wire import jcs
from wire.errors import CanonicalJsonError, MessageError, SchemaError
from wire.limits import MAX_BODY_BYTES
from wire.scalars import check_agent_name, check_timestamp
from wire.schema import expect_object, expect_str

__all__ = ["MESSAGE_MEMBERS", "Message"]

MESSAGE_MEMBERS = ("body", "created_at", "from_agent", "to_agent")
#: The member set as :func:`~wire.schema.expect_object` uses it, built once
#: (it would otherwise build one per message opened).
_MEMBER_SET = frozenset(MESSAGE_MEMBERS)

_DECODER = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class Message:
    """A validated plaintext message: the importable projection of an envelope."""

    body: str
    created_at: str
    from_agent: str
    to_agent: str

    def __post_init__(self) -> None:
        try:
            _check_body(expect_str(self.body, "message.body"))
            check_timestamp(self.created_at, "message.created_at")
            check_agent_name(self.from_agent, "message.from_agent")
            check_agent_name(self.to_agent, "message.to_agent")
        except SchemaError as exc:
            if isinstance(exc, MessageError):
                raise
            raise MessageError(exc.field, exc.rule) from None

    @classmethod
    def from_obj(cls, value: Any, field: str = "message") -> Message:
        try:
            obj = expect_object(value, field, _MEMBER_SET)
        except SchemaError as exc:
            raise MessageError(exc.field, exc.rule) from None
        try:
            return cls(obj["body"], obj["created_at"], obj["from_agent"], obj["to_agent"])
        except MessageError as exc:
            raise MessageError(exc.field.replace("message", field, 1), exc.rule) from None

    def to_obj(self) -> dict[str, str]:
        return {
            "body": self.body,
            "created_at": self.created_at,
            "from_agent": self.from_agent,
            "to_agent": self.to_agent,
        }

    def to_jcs(self) -> bytes:
        """Canonical bytes: the member names are ASCII and already in JCS order,
        and the C string encoder's escapes are exactly RFC 8785's.

        The object is spelled out around :func:`json.encoder.encode_basestring`
        — the very function ``json`` uses for each string with
        ``ensure_ascii=False`` — so the bytes are those of encoding the dict
        with ``separators=(",", ":")``, without building the dict and an
        encoder per message (every message sealed or opened pays this). A
        lone surrogate still raises :class:`UnicodeEncodeError` here, as it did.
        """
        return (
            '{"body":'
            + encode_basestring(self.body)
            + ',"created_at":'
            + encode_basestring(self.created_at)
            + ',"from_agent":'
            + encode_basestring(self.from_agent)
            + ',"to_agent":'
            + encode_basestring(self.to_agent)
            + "}"
        ).encode("utf-8")

    @classmethod
    def from_jcs(cls, data: bytes) -> Message:
        """Strictly decode canonical message bytes (decode, re-encode, compare).

        Any difference from the canonical spelling — whitespace, member
        order, escapes, duplicates — is refused; the reason is recovered by a
        strict re-parse only on that failure path.
        """
        try:
            value = _decode(data.decode("utf-8"))
            if not isinstance(value, dict):
                raise MessageError("message", "must be a JSON object")
            message = cls.from_obj(value)
            if message.to_jcs() == data:
                return message
            problem = MessageError("message", "bytes are not the canonical RFC 8785 encoding")
        except (ValueError, RecursionError):
            problem = MessageError("message", "not valid JSON")
        except SchemaError as exc:
            problem = MessageError(exc.field, exc.rule)
        # Failure path only: a strict parse names duplicates, surrogates etc.
        try:
            jcs.loads(data)
        except CanonicalJsonError as exc:
            raise MessageError(exc.field or "message", exc.rule) from None
        raise problem


def _decode(text: str) -> Any:
    """``json.loads(text)``: canonical bytes have no whitespace around the
    value, so :meth:`~json.JSONDecoder.raw_decode` from 0 reading all of
    ``text`` is the whole decode; anything else takes the full
    :meth:`~json.JSONDecoder.decode`, which raises what it always did (and
    returns what it always did for surrounding whitespace, then refused as
    non-canonical)."""
    try:
        value, end = _DECODER.raw_decode(text)
    except ValueError:
        end = -1
    if end != len(text):
        return _DECODER.decode(text)
    return value


def _check_body(body: str) -> None:
    if not body:
        raise MessageError("message.body", "body must not be empty")
    # Cheap bound first: a str never encodes to fewer bytes than characters.
    if len(body) > MAX_BODY_BYTES:
        raise MessageError("message.body", f"body exceeds {MAX_BODY_BYTES} UTF-8 bytes")
    try:
        size = len(body.encode("utf-8"))
    except UnicodeEncodeError:
        raise MessageError("message.body", "body contains a lone surrogate") from None
    if size > MAX_BODY_BYTES:
        raise MessageError("message.body", f"body exceeds {MAX_BODY_BYTES} UTF-8 bytes")
