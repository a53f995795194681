"""Fuzzing the input side of the codec: every decoder either returns a value
or raises a :class:`wire.errors.WireError` subclass, and opening any envelope
always yields an outcome (Importable or Blocked) without raising."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.wire.wire_strategies import PROPERTY, json_values, message_obj, messages
from wire import jcs, scalars
from wire.envelope import Envelope, decode_blob
from wire.errors import WireError
from wire.message import Message
from wire.outcome import Blocked, Importable
from wire.profiles import Binding, OpenContext, open_envelope

FUZZ = settings(PROPERTY, max_examples=200)

VALID_ENVELOPE = (
    b'{"blob":"eyJib2R5IjoiUnVuIHRoZSB0ZXN0IHN1aXRlIiwiY3JlYXRlZF9hdCI6IjIwMjYtMDctMjBUMDY6MzA6'
    b'MDAuMDAwMDAwWiIsImZyb21fYWdlbnQiOiJsZWFkZXIiLCJ0b19hZ2VudCI6Indvcmtlci0xIn0=",'
    b'"cipher":"none","key_id":null,"v":1}'
)
VALID_MESSAGE = (
    b'{"body":"Run the test suite","created_at":"2026-07-20T06:30:00.000000Z",'
    b'"from_agent":"leader","to_agent":"worker-1"}'
)


def _value_or_wire_error(decode: Callable[[], Any]) -> Any:
    """Run one decoder; anything other than a value or a WireError escapes."""
    try:
        return decode()
    except WireError:
        return None


@st.composite
def mutated(draw: st.DrawFn, seed: bytes) -> bytes:
    """A valid document with a few byte-level flips, insertions and deletions."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        at = draw(st.integers(min_value=0, max_value=max(len(data) - 1, 0)))
        action = draw(st.sampled_from(["flip", "insert", "delete"]))
        if action == "flip" and data:
            data[at] ^= 1 << draw(st.integers(min_value=0, max_value=7))
        elif action == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=3))
        elif data:
            del data[at]
    return bytes(data)


raw_inputs = (
    st.binary(max_size=256)
    | mutated(VALID_ENVELOPE)
    | mutated(VALID_MESSAGE)
    | json_values.map(jcs.canonicalize)
)

#: Arbitrary JSON-ish values, including almost-valid envelopes and messages.
loose_objects = (
    json_values
    | st.fixed_dictionaries(
        {"v": json_values, "cipher": json_values, "key_id": json_values, "blob": json_values}
    )
    | st.fixed_dictionaries(
        {
            "body": json_values,
            "created_at": json_values,
            "from_agent": json_values,
            "to_agent": json_values,
        }
    )
    | st.dictionaries(
        st.sampled_from(["v", "cipher", "key_id", "blob", "body", "created_at", "x"]),
        st.none() | st.integers() | st.text(max_size=40) | st.binary(max_size=8),
    )
)


@FUZZ
@given(raw_inputs)
def test_jcs_loads_yields_a_value_or_wire_error(data: bytes) -> None:
    value = _value_or_wire_error(lambda: jcs.loads(data))
    if value is not None:
        assert jcs.loads(jcs.canonicalize(value)) == value


@FUZZ
@given(raw_inputs)
def test_envelope_from_json_yields_an_envelope_or_wire_error(data: bytes) -> None:
    envelope = _value_or_wire_error(lambda: Envelope.from_json(data))
    if envelope is not None:
        assert Envelope.from_json(envelope.canonical_bytes()) == envelope


@FUZZ
@given(raw_inputs)
def test_message_from_jcs_yields_a_message_or_wire_error(data: bytes) -> None:
    message = _value_or_wire_error(lambda: Message.from_jcs(data))
    if message is not None:
        assert message.to_jcs() == data


@FUZZ
@given(loose_objects)
def test_envelope_from_obj_yields_an_envelope_or_wire_error(value: Any) -> None:
    envelope = _value_or_wire_error(lambda: Envelope.from_obj(value))
    if envelope is not None:
        assert envelope.to_obj() == value


@FUZZ
@given(loose_objects)
def test_message_from_obj_yields_a_message_or_wire_error(value: Any) -> None:
    message = _value_or_wire_error(lambda: Message.from_obj(value))
    if message is not None:
        assert message_obj(message) == value


SCALAR_CHECKS: list[Callable[[Any, str], Any]] = [
    scalars.parse_seq,
    scalars.check_uuid4,
    scalars.check_uuid7,
    scalars.check_timestamp,
    scalars.parse_timestamp,
    scalars.check_agent_name,
    scalars.check_team_name,
    scalars.check_cipher,
    scalars.check_key_id,
    scalars.check_profile_key_id,
]

scalar_inputs = (
    st.text(max_size=64)
    | st.from_regex(r"[0-9]{0,25}", fullmatch=True)
    | st.from_regex(
        r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z", fullmatch=True
    )
    | st.uuids().map(str)
    | st.from_regex(r"[A-Za-z0-9+/=\s-]{0,24}", fullmatch=True)
    | json_values
)


@FUZZ
@given(st.sampled_from(SCALAR_CHECKS), scalar_inputs)
def test_every_scalar_check_yields_a_value_or_wire_error(
    check: Callable[[Any, str], Any], value: Any
) -> None:
    _value_or_wire_error(lambda: check(value, "field"))


@FUZZ
@given(
    st.text(max_size=64)
    | st.from_regex(r"[A-Za-z0-9+/=\s_-]{0,24}", fullmatch=True)
    | st.binary(max_size=48).map(lambda data: base64.b64encode(data).decode())
)
def test_decode_blob_yields_bytes_or_wire_error(text: str) -> None:
    data = _value_or_wire_error(lambda: decode_blob(text, "blob"))
    if data is not None:
        assert base64.b64encode(data).decode() == text


@FUZZ
@given(st.integers() | st.booleans() | st.floats() | st.text(max_size=4))
def test_format_seq_yields_text_or_wire_error(value: Any) -> None:
    text = _value_or_wire_error(lambda: scalars.format_seq(value))
    if text is not None:
        assert scalars.parse_seq(text, "seq") == value


# --- open_envelope over random envelopes -------------------------------------------------

ciphers = st.sampled_from(["none", "age-v1", "future-v9", "x"]) | st.from_regex(
    r"[a-z0-9][a-z0-9._-]{0,10}", fullmatch=True
)
key_ids = st.none() | st.sampled_from(["epoch-1", "e", "Not An Epoch"])
blobs = (
    st.binary(min_size=1, max_size=256)
    | mutated(VALID_MESSAGE).filter(bool)
    | messages.map(Message.to_jcs)
    | st.just(b"age-encryption.org/v1\n-> X25519 abc\n--- xyz\n\x00\x01")
)
TEAM_ID = "018f3f7e-0000-7000-8000-000000000001"
WIRE_ID = "550e8400-e29b-41d4-a716-446655440000"
versions = st.sampled_from([1, 1, 1, 0, 2, 2**32 - 1])

contexts = st.builds(
    OpenContext,
    binding=st.just(Binding(TEAM_ID, WIRE_ID)),
    allowed_ciphers=st.none() | st.frozensets(st.sampled_from(["none", "age-v1", "x"])),
    trusted_key_id=key_ids,
    identities=st.just({}),
    max_blob_bytes=st.sampled_from([1024 * 1024, 64, 1]),
)


@FUZZ
@given(versions, ciphers, key_ids, blobs, contexts)
def test_open_envelope_always_returns_an_outcome(
    v: int, cipher: str, key_id: str | None, blob: bytes, ctx: OpenContext
) -> None:
    envelope = Envelope.from_blob_bytes(cipher, key_id, blob, v=v)
    outcome = open_envelope(envelope, ctx)
    assert isinstance(outcome, Importable | Blocked)
    if isinstance(outcome, Importable):
        assert (v, cipher, key_id) == (1, "none", None)
        assert outcome.message.to_jcs() == blob


@FUZZ
@given(raw_inputs, contexts)
def test_open_envelope_of_any_decodable_envelope_returns_an_outcome(
    data: bytes, ctx: OpenContext
) -> None:
    envelope = _value_or_wire_error(lambda: Envelope.from_json(data))
    if envelope is not None:
        assert isinstance(open_envelope(envelope, ctx), Importable | Blocked)


@FUZZ
@given(versions, ciphers, key_ids, st.text(max_size=40), contexts)
def test_open_envelope_of_unvalidated_envelope_text_returns_an_outcome(
    v: int, cipher: str, key_id: str | None, blob_text: str, ctx: OpenContext
) -> None:
    # Direct construction skips validation, as a store reading old rows might.
    envelope = Envelope(v, cipher, key_id, blob_text)
    assert isinstance(open_envelope(envelope, ctx), Importable | Blocked)
