"""``Message.to_jcs`` and ``from_jcs`` after their per-message shortcuts.

``to_jcs`` spells the object around ``json.encoder.encode_basestring``
instead of encoding a dict, and ``from_jcs`` decodes with ``raw_decode``
when the text is one bare value (issue #17). Both must give exactly what
the ``json`` encoder and ``JSONDecoder.decode`` gave: the same bytes, the
same message, the same refusal with the same reason.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wire import jcs
from wire.errors import CanonicalJsonError, MessageError, SchemaError
from wire.message import Message

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)
_DECODER = json.JSONDecoder()


def encoded(fields: tuple[str, str, str, str]) -> bytes | str:
    """What ``to_jcs`` gave before: the dict through the json encoder."""
    names = ("body", "created_at", "from_agent", "to_agent")
    try:
        return _ENCODER.encode(dict(zip(names, fields, strict=True))).encode("utf-8")
    except UnicodeEncodeError:
        return "UnicodeEncodeError"


def unchecked(fields: tuple[str, str, str, str]) -> Message:
    """A Message holding any four strings (``to_jcs`` is only a spelling)."""
    message = object.__new__(Message)
    for name, value in zip(("body", "created_at", "from_agent", "to_agent"), fields, strict=True):
        object.__setattr__(message, name, value)
    return message


@settings(max_examples=500, deadline=None)
@given(st.tuples(st.text(), st.text(), st.text(), st.text()))
def test_to_jcs_is_the_json_encoding_of_the_four_members(fields: tuple[str, str, str, str]) -> None:
    try:
        spelled: bytes | str = unchecked(fields).to_jcs()
    except UnicodeEncodeError:
        spelled = "UnicodeEncodeError"
    assert spelled == encoded(fields)


@pytest.mark.parametrize(
    "text", ["\ud800", "a\udfffb", "\x00\x1f\x7f", '"\\/', "\u2028\u2029", "é\U0001f600"]
)
def test_to_jcs_escapes_like_the_encoder(text: str) -> None:
    fields = (text, text, text, text)
    try:
        spelled: bytes | str = unchecked(fields).to_jcs()
    except UnicodeEncodeError:
        spelled = "UnicodeEncodeError"
    assert spelled == encoded(fields)


def previous_from_jcs(data: bytes) -> Message:
    """``from_jcs`` as it was: ``JSONDecoder.decode`` of the whole text."""
    try:
        value = _DECODER.decode(data.decode("utf-8"))
        if not isinstance(value, dict):
            raise MessageError("message", "must be a JSON object")
        message = Message.from_obj(value)
        if message.to_jcs() == data:
            return message
        problem = MessageError("message", "bytes are not the canonical RFC 8785 encoding")
    except (ValueError, RecursionError):
        problem = MessageError("message", "not valid JSON")
    except SchemaError as exc:
        problem = MessageError(exc.field, exc.rule)
    try:
        jcs.loads(data)
    except CanonicalJsonError as exc:
        raise MessageError(exc.field or "message", exc.rule) from None
    raise problem


def outcome(parse: Any, data: bytes) -> tuple[str, Any]:
    try:
        return "message", parse(data)
    except MessageError as exc:
        return "MessageError", str(exc)


CANONICAL = (
    b'{"body":"hi","created_at":"2026-07-20T06:30:00.000000Z",'
    b'"from_agent":"leader","to_agent":"worker-1"}'
)


@pytest.mark.parametrize(
    "data",
    [
        CANONICAL,
        b" " + CANONICAL,
        CANONICAL + b"\n",
        b"\t" + CANONICAL + b" ",
        CANONICAL + b"x",
        CANONICAL + CANONICAL,
        CANONICAL[:-1],
        b"",
        b" ",
        b"[1]",
        b' "text" ',
        b"1 2",
        b"[" * 5000,
        b'{"body":"hi","body":"hi","created_at":"2026-07-20T06:30:00.000000Z",'
        b'"from_agent":"leader","to_agent":"worker-1"}',
        CANONICAL.replace(b"hi", b"\\u0068i"),
        CANONICAL.replace(b"hi", b"\\ud800"),
        CANONICAL.replace(b"2026-07-20", b"2026-02-30"),
    ],
)
def test_from_jcs_decides_as_before(data: bytes) -> None:
    assert outcome(Message.from_jcs, data) == outcome(previous_from_jcs, data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40), st.sampled_from([b"", b" ", b"\n", b"}", b"{}"]))
def test_from_jcs_of_noise_around_a_message_decides_as_before(noise: bytes, tail: bytes) -> None:
    for data in (noise + CANONICAL, CANONICAL + noise, CANONICAL + tail, noise):
        assert outcome(Message.from_jcs, data) == outcome(previous_from_jcs, data)
