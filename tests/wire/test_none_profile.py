"""The plaintext ``none`` profile (wire/none_profile.py; v1.md "Message
representation")."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given

from tests.wire.wire_strategies import PROPERTY, messages
from wire.envelope import Envelope, encode_blob
from wire.errors import ProfileError
from wire.limits import MAX_BLOB_BYTES, MAX_BODY_BYTES
from wire.message import Message
from wire.none_profile import PROFILE
from wire.outcome import Blocked, BlockState, Importable
from wire.profiles import OpenContext, SealParams

V1_EXAMPLE_BLOB = (
    "eyJib2R5IjoiUnVuIHRoZSB0ZXN0IHN1aXRlIiwiY3JlYXRlZF9hdCI6IjIwMjYtMDctMjBUMDY6MzA6MDAu"
    "MDAwMDAwWiIsImZyb21fYWdlbnQiOiJsZWFkZXIiLCJ0b19hZ2VudCI6Indvcmtlci0xIn0="
)
EXAMPLE = Message("Run the test suite", "2026-07-20T06:30:00.000000Z", "leader", "worker-1")
EXAMPLE_JCS = EXAMPLE.to_jcs()


def _none_envelope(data: bytes) -> Envelope:
    return Envelope.from_blob_bytes("none", None, data)


def _assert_malformed(envelope: Envelope, ctx: OpenContext | None = None) -> None:
    outcome = PROFILE.open(envelope, ctx or OpenContext())
    assert isinstance(outcome, Blocked)
    assert outcome.state is BlockState.MALFORMED


# --- seal -----------------------------------------------------------------------------


def test_none_seal_of_v1_example_reproduces_the_v1_example_envelope() -> None:
    envelope = PROFILE.seal(EXAMPLE, SealParams())
    assert envelope.to_obj() == {"v": 1, "cipher": "none", "key_id": None, "blob": V1_EXAMPLE_BLOB}


def test_none_seal_output_passes_reader_validation() -> None:
    envelope = PROFILE.seal(EXAMPLE, SealParams())
    assert Envelope.from_obj(envelope.to_obj()) == envelope


def test_none_seal_blob_is_exactly_the_canonical_plaintext() -> None:
    assert PROFILE.seal(EXAMPLE, SealParams()).blob_bytes() == EXAMPLE_JCS


def test_none_seal_requires_null_key_id() -> None:
    with pytest.raises(ProfileError, match="null key_id"):
        PROFILE.seal(EXAMPLE, SealParams(key_id="epoch-1"))


def test_none_seal_accepts_plaintext_exactly_at_the_team_limit() -> None:
    envelope = PROFILE.seal(EXAMPLE, SealParams(max_blob_bytes=len(EXAMPLE_JCS)))
    assert envelope.blob_size == len(EXAMPLE_JCS)


def test_none_seal_refuses_plaintext_over_the_team_limit() -> None:
    with pytest.raises(ProfileError, match="blob limit"):
        PROFILE.seal(EXAMPLE, SealParams(max_blob_bytes=len(EXAMPLE_JCS) - 1))


def test_none_seal_limit_counts_escaped_bytes_not_the_body_limit() -> None:
    # A valid body (1,000,000 bytes) whose JSON escaping exceeds 1 MiB.
    message = Message("\x01" * MAX_BODY_BYTES, EXAMPLE.created_at, "a", "b")
    with pytest.raises(ProfileError):
        PROFILE.seal(message, SealParams())


def test_none_seal_team_limit_cannot_exceed_the_protocol_maximum() -> None:
    message = Message("\x01" * MAX_BODY_BYTES, EXAMPLE.created_at, "a", "b")
    with pytest.raises(ProfileError):
        PROFILE.seal(message, SealParams(max_blob_bytes=4 * MAX_BLOB_BYTES))


# --- open -----------------------------------------------------------------------------


def test_none_open_of_v1_example_is_importable() -> None:
    envelope = Envelope.from_obj(
        {"v": 1, "cipher": "none", "key_id": None, "blob": V1_EXAMPLE_BLOB}
    )
    assert PROFILE.open(envelope, OpenContext()) == Importable(EXAMPLE)


def test_none_open_requires_null_key_id() -> None:
    _assert_malformed(Envelope.from_blob_bytes("none", "epoch-1", EXAMPLE_JCS))


@pytest.mark.parametrize(
    "data",
    [
        EXAMPLE_JCS + b"\n",
        EXAMPLE_JCS.replace(b'":"', b'": "'),
        b'{"to_agent":"worker-1","body":"Run the test suite",'
        b'"created_at":"2026-07-20T06:30:00.000000Z","from_agent":"leader"}',
    ],
)
def test_none_open_rejects_non_canonical_plaintext(data: bytes) -> None:
    _assert_malformed(_none_envelope(data))


@pytest.mark.parametrize("data", [b"\x00\x01", b"not json", b"[]", b"\xff", b"{}"])
def test_none_open_rejects_plaintext_that_is_not_a_message(data: bytes) -> None:
    _assert_malformed(_none_envelope(data))


def test_none_open_rejects_schema_violations() -> None:
    data = EXAMPLE_JCS.replace(b"2026-07-20T06:30:00.000000Z", b"2026-07-20T06:30:00Z")
    _assert_malformed(_none_envelope(data))


def test_none_open_enforces_the_teams_max_blob_bytes() -> None:
    _assert_malformed(_none_envelope(EXAMPLE_JCS), OpenContext(max_blob_bytes=len(EXAMPLE_JCS) - 1))


def test_none_open_accepts_plaintext_exactly_at_the_team_limit() -> None:
    outcome = PROFILE.open(
        _none_envelope(EXAMPLE_JCS), OpenContext(max_blob_bytes=len(EXAMPLE_JCS))
    )
    assert outcome == Importable(EXAMPLE)


def test_none_open_of_unvalidated_envelope_with_bad_base64_is_malformed() -> None:
    _assert_malformed(Envelope(1, "none", None, "not base64!"))


def test_none_open_blocked_reason_names_the_rule() -> None:
    outcome = PROFILE.open(_none_envelope(EXAMPLE_JCS + b" "), OpenContext())
    assert isinstance(outcome, Blocked)
    assert "canonical" in outcome.reason


@PROPERTY
@given(messages)
def test_none_seal_then_open_returns_the_same_message(message: Message) -> None:
    envelope = PROFILE.seal(message, SealParams())
    reread = Envelope.from_json(envelope.canonical_bytes())
    assert PROFILE.open(reread, OpenContext()) == Importable(message)


@PROPERTY
@given(messages)
def test_none_blob_is_standard_base64_of_the_canonical_bytes(message: Message) -> None:
    envelope = PROFILE.seal(message, SealParams())
    assert envelope.blob == base64.b64encode(message.to_jcs()).decode("ascii")
    assert envelope.blob == encode_blob(message.to_jcs())
