"""The age-v1 plaintext frame and binding context (profile "Plaintext frame")."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wire.age_frame import (
    MAGIC,
    FrameError,
    build_context,
    encode_frame,
    split_frame,
)

TEAM = "018f3f7e-0000-7000-8000-000000000001"
WIRE = "550e8400-e29b-41d4-a716-446655440000"
CONTEXT_HEX = (
    "00000001018f3f7e000070008000000000000001550e8400e29b41d4a716446655440000"
    "00066167652d7631000765706f63682d31"
)


def test_context_matches_the_published_bytes() -> None:
    assert build_context(1, TEAM, WIRE, "age-v1", "epoch-1").hex() == CONTEXT_HEX


def test_context_for_epoch_1_is_53_bytes() -> None:
    assert len(build_context(1, TEAM, WIRE, "age-v1", "epoch-1")) == 53


def test_context_lengths_span_47_to_110_bytes() -> None:
    assert len(build_context(1, TEAM, WIRE, "age-v1", "a")) == 47
    assert len(build_context(1, TEAM, WIRE, "age-v1", "a" * 64)) == 110


@pytest.mark.parametrize("key_id", ["", "a" * 65])
def test_context_refuses_key_id_outside_1_to_64_bytes(key_id: str) -> None:
    with pytest.raises(FrameError, match="1-64"):
        build_context(1, TEAM, WIRE, "age-v1", key_id)


@pytest.mark.parametrize("team", ["018F3F7E-0000-7000-8000-000000000001", "not-a-uuid", ""])
def test_context_refuses_a_noncanonical_uuid(team: str) -> None:
    with pytest.raises(FrameError, match="team_id"):
        build_context(1, team, WIRE, "age-v1", "epoch-1")


def test_frame_round_trips() -> None:
    context = build_context(1, TEAM, WIRE, "age-v1", "epoch-1")
    assert split_frame(encode_frame(context, b"{}")) == (context, b"{}")


def test_frame_starts_with_the_16_byte_magic() -> None:
    assert b"agmsg-age-v1" + bytes(4) == MAGIC
    assert encode_frame(b"c" * 53, b"m").startswith(MAGIC)


def _frame(context_length: int, context: bytes, message_length: int, message: bytes) -> bytes:
    return (
        MAGIC
        + struct.pack(">I", context_length)
        + context
        + struct.pack(">I", message_length)
        + message
    )


GOOD_CONTEXT = build_context(1, TEAM, WIRE, "age-v1", "epoch-1")


@pytest.mark.parametrize(
    ("frame", "field"),
    [
        (b"", "frame.magic"),
        (b"agmsg-age-v2\x00\x00\x00\x00" + bytes(80), "frame.magic"),
        (_frame(46, bytes(46), 1, b"x"), "frame.context_length"),
        (_frame(111, bytes(111), 1, b"x"), "frame.context_length"),
        (_frame(0xFFFFFFFF, GOOD_CONTEXT, 1, b"x"), "frame.context_length"),
        (_frame(100, GOOD_CONTEXT, 1, b"x"), "frame.context_length"),
        (MAGIC + struct.pack(">I", 53) + GOOD_CONTEXT + b"\x00\x00", "frame.message_length"),
        (_frame(53, GOOD_CONTEXT, 2, b"x"), "frame.message_length"),
        (_frame(53, GOOD_CONTEXT, 0xFFFFFFFF, b"x"), "frame.message_length"),
        (_frame(53, GOOD_CONTEXT, 1, b"xy"), "frame"),
    ],
)
def test_split_refuses_each_framing_fault(frame: bytes, field: str) -> None:
    with pytest.raises(FrameError) as caught:
        split_frame(frame)
    assert caught.value.field == field


def test_zero_message_length_is_a_complete_frame_with_an_empty_message() -> None:
    assert split_frame(_frame(53, GOOD_CONTEXT, 0, b"")) == (GOOD_CONTEXT, b"")


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200))
def test_split_of_arbitrary_bytes_returns_or_raises_frame_error(data: bytes) -> None:
    try:
        context, message = split_frame(MAGIC + data)
    except FrameError:
        return
    assert 47 <= len(context) <= 110
    assert encode_frame(context, message) == MAGIC + data
