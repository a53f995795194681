"""The plaintext message and its strict canonical byte form (wire/message.py)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.wire.wire_strategies import PROPERTY, message_obj, messages
from wire import jcs
from wire.errors import MessageError
from wire.limits import MAX_BODY_BYTES
from wire.message import MESSAGE_MEMBERS, Message

V1_EXAMPLE_MESSAGE_JCS = (
    b'{"body":"Run the test suite","created_at":"2026-07-20T06:30:00.000000Z",'
    b'"from_agent":"leader","to_agent":"worker-1"}'
)
EXAMPLE = Message("Run the test suite", "2026-07-20T06:30:00.000000Z", "leader", "worker-1")


def _obj(**overrides: Any) -> dict[str, Any]:
    obj = message_obj(EXAMPLE)
    obj.update(overrides)
    return obj


# --- the v1.md example -------------------------------------------------------------


def test_v1_example_message_encodes_to_literal_bytes() -> None:
    assert EXAMPLE.to_jcs() == V1_EXAMPLE_MESSAGE_JCS


def test_v1_example_bytes_decode_to_the_example_message() -> None:
    assert Message.from_jcs(V1_EXAMPLE_MESSAGE_JCS) == EXAMPLE


def test_members_are_exactly_the_four_v1_fields() -> None:
    assert sorted(MESSAGE_MEMBERS) == ["body", "created_at", "from_agent", "to_agent"]
    assert set(EXAMPLE.to_obj()) == set(MESSAGE_MEMBERS)


# --- construction rules -------------------------------------------------------------


def test_body_must_not_be_empty() -> None:
    with pytest.raises(MessageError, match="empty") as caught:
        Message.from_obj(_obj(body=""))
    assert caught.value.field == "message.body"


def test_body_accepts_exactly_the_byte_limit() -> None:
    assert len(Message.from_obj(_obj(body="b" * MAX_BODY_BYTES)).body) == MAX_BODY_BYTES


def test_body_rejects_one_byte_over_the_limit() -> None:
    with pytest.raises(MessageError, match="exceeds"):
        Message.from_obj(_obj(body="b" * (MAX_BODY_BYTES + 1)))


def test_body_limit_counts_utf8_bytes_not_characters() -> None:
    body = "é" * (MAX_BODY_BYTES // 2 + 1)  # fewer characters than the limit
    with pytest.raises(MessageError, match="exceeds"):
        Message.from_obj(_obj(body=body))


def test_body_limit_counts_bytes_before_json_escaping() -> None:
    body = '"' * MAX_BODY_BYTES  # escapes to twice as many bytes
    message = Message.from_obj(_obj(body=body))
    assert len(message.to_jcs()) > 2 * MAX_BODY_BYTES


@pytest.mark.parametrize("body", ["\ud800", "ok\udfff"])
def test_body_rejects_lone_surrogates(body: str) -> None:
    with pytest.raises(MessageError, match="surrogate"):
        Message.from_obj(_obj(body=body))


@pytest.mark.parametrize("member", MESSAGE_MEMBERS)
@pytest.mark.parametrize("value", [None, 1, ["x"], {"x": 1}, True])
def test_every_member_must_be_a_string(member: str, value: Any) -> None:
    with pytest.raises(MessageError) as caught:
        Message.from_obj({**_obj(), member: value})
    assert caught.value.field == f"message.{member}"


@pytest.mark.parametrize(
    "created_at",
    ["2026-07-20T06:30:00Z", "2026-07-20T06:30:00.000000+00:00", "2026-02-30T00:00:00.000000Z"],
)
def test_created_at_must_be_a_canonical_timestamp(created_at: str) -> None:
    with pytest.raises(MessageError) as caught:
        Message.from_obj(_obj(created_at=created_at))
    assert caught.value.field == "message.created_at"


@pytest.mark.parametrize("member", ["from_agent", "to_agent"])
@pytest.mark.parametrize("name", ["", "-x", "a/b", "..", "e\u0301", "a\x7f", "x" * 129])
def test_agent_names_follow_the_agent_name_rules(member: str, name: str) -> None:
    with pytest.raises(MessageError) as caught:
        Message.from_obj(_obj(**{member: name}))
    assert caught.value.field == f"message.{member}"


def test_direct_construction_validates_like_from_obj() -> None:
    with pytest.raises(MessageError):
        Message("", EXAMPLE.created_at, EXAMPLE.from_agent, EXAMPLE.to_agent)


@pytest.mark.parametrize("member", MESSAGE_MEMBERS)
def test_from_obj_requires_every_member(member: str) -> None:
    obj = _obj()
    del obj[member]
    with pytest.raises(MessageError, match="missing"):
        Message.from_obj(obj)


@pytest.mark.parametrize("extra", ["id", "Body", "reply_to"])
def test_from_obj_rejects_unknown_members(extra: str) -> None:
    with pytest.raises(MessageError, match="unknown"):
        Message.from_obj(_obj(**{extra: "x"}))


@pytest.mark.parametrize("value", [[], "msg", None, 3])
def test_from_obj_requires_an_object(value: Any) -> None:
    with pytest.raises(MessageError):
        Message.from_obj(value)


def test_from_obj_errors_use_the_callers_field_path() -> None:
    with pytest.raises(MessageError) as caught:
        Message.from_obj(_obj(to_agent="-x"), field="plaintext")
    assert caught.value.field == "plaintext.to_agent"


# --- canonical bytes ------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    ['say "hi"', "back\\slash", "line\nbreak\ttab", "\x00\x01\x1f", "/slash", "é€😀", "\u2028\x7f"],
)
def test_to_jcs_escapes_exactly_as_rfc8785(body: str) -> None:
    message = Message.from_obj(_obj(body=body))
    assert message.to_jcs() == jcs.canonicalize(message.to_obj())


@PROPERTY
@given(messages)
def test_to_jcs_equals_generic_canonicalization(message: Message) -> None:
    assert message.to_jcs() == jcs.canonicalize(message_obj(message))


@PROPERTY
@given(messages)
def test_message_round_trips_through_canonical_bytes(message: Message) -> None:
    assert Message.from_jcs(message.to_jcs()) == message


# --- from_jcs: only the canonical spelling is accepted ----------------------------------

_CANONICAL = V1_EXAMPLE_MESSAGE_JCS


@pytest.mark.parametrize(
    "data",
    [
        _CANONICAL + b"\n",
        b" " + _CANONICAL,
        _CANONICAL.replace(b'":"', b'": "'),
        _CANONICAL.replace(b'","', b'", "'),
        b"\xef\xbb\xbf" + _CANONICAL,
    ],
)
def test_from_jcs_rejects_insignificant_whitespace_and_bom(data: bytes) -> None:
    with pytest.raises(MessageError):
        Message.from_jcs(data)


def test_from_jcs_rejects_reordered_members() -> None:
    reordered = dict(reversed(list(_obj().items())))
    data = json.dumps(reordered, separators=(",", ":"), ensure_ascii=False).encode()
    with pytest.raises(MessageError, match="canonical"):
        Message.from_jcs(data)


@pytest.mark.parametrize(
    ("body", "spelled"),
    [
        ("a/b", b"a\\/b"),
        ("\u00e9", b"\\u00e9"),
        ("\x1f", b"\\u001F"),
        ("\n", b"\\u000a"),
        ("A", b"\\u0041"),
        ("\U0001f600", b"\\ud83d\\ude00"),
    ],
)
def test_from_jcs_rejects_non_canonical_string_escapes(body: str, spelled: bytes) -> None:
    canonical = Message.from_obj(_obj(body=body)).to_jcs()
    data = b'{"body":"' + spelled + canonical[canonical.index(b'","created_at"') :]
    assert Message.from_jcs(canonical).body == body
    with pytest.raises(MessageError):
        Message.from_jcs(data)


def test_from_jcs_rejects_duplicate_members_naming_the_member() -> None:
    data = _CANONICAL[:-1] + b',"to_agent":"worker-1"}'
    with pytest.raises(MessageError, match="duplicate") as caught:
        Message.from_jcs(data)
    assert caught.value.field == "to_agent"


def test_from_jcs_rejects_unknown_members() -> None:
    with pytest.raises(MessageError, match="unknown"):
        Message.from_jcs(_CANONICAL[:-1] + b',"v":"1"}')


def test_from_jcs_rejects_missing_members() -> None:
    with pytest.raises(MessageError, match="missing"):
        Message.from_jcs(jcs.canonicalize({k: v for k, v in _obj().items() if k != "body"}))


@pytest.mark.parametrize("data", [b"[]", b'"text"', b"null", b"1"])
def test_from_jcs_rejects_non_object_documents(data: bytes) -> None:
    with pytest.raises(MessageError):
        Message.from_jcs(data)


@pytest.mark.parametrize("data", [b"", b"{", b"\xff\xfe", _CANONICAL[:-1], b"{}}"])
def test_from_jcs_rejects_invalid_json(data: bytes) -> None:
    with pytest.raises(MessageError):
        Message.from_jcs(data)


def test_from_jcs_rejects_utf16_encoded_json() -> None:
    with pytest.raises(MessageError):
        Message.from_jcs(_CANONICAL.decode().encode("utf-16"))


def test_from_jcs_rejects_escaped_lone_surrogate_in_body() -> None:
    data = _CANONICAL.replace(b"Run the test suite", b"\\ud800")
    with pytest.raises(MessageError, match="surrogate"):
        Message.from_jcs(data)


def test_from_jcs_rejects_schema_violations_inside_canonical_bytes() -> None:
    data = jcs.canonicalize(_obj(from_agent="a/b"))
    with pytest.raises(MessageError) as caught:
        Message.from_jcs(data)
    assert caught.value.field == "message.from_agent"


def _respell(obj: dict[str, Any], rnd: random.Random) -> bytes:
    items = list(obj.items())
    rnd.shuffle(items)
    separators = rnd.choice([(",", ":"), (", ", ": "), (",", ": "), (" ,", ":")])
    text = json.dumps(
        dict(items),
        separators=separators,
        ensure_ascii=rnd.random() < 0.5,
        indent=rnd.choice([None, 1]),
    )
    if rnd.random() < 0.3:
        text = rnd.choice([" ", "\n", "\t", "\r\n"]) + text
    return text.encode("utf-8")


@PROPERTY
@given(messages, st.randoms(use_true_random=False))
def test_any_respelling_of_canonical_bytes_is_malformed(
    message: Message, rnd: random.Random
) -> None:
    canonical = message.to_jcs()
    data = _respell(message_obj(message), rnd)
    if data == canonical:
        assert Message.from_jcs(data) == message
    else:
        with pytest.raises(MessageError):
            Message.from_jcs(data)
