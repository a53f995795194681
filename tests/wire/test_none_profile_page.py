"""``open_canonical_page``: a page of ``none`` blobs opened in one decode.

Whatever the page holds, each blob's answer is either ``None`` (the caller
opens that envelope alone) or exactly the message ``NoneProfile.open``
imports from it; a page of canonical messages is opened whole, so the fast
path is really taken (issue #17; v1.md "Message representation").
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.wire.wire_strategies import messages
from wire.envelope import Envelope, encode_blob
from wire.limits import MAX_BLOB_BYTES
from wire.message import Message
from wire.none_profile import PROFILE, open_canonical_page
from wire.outcome import Importable
from wire.profiles import OpenContext

CANONICAL = Message("hi", "2026-07-20T06:30:00.000000Z", "leader", "worker-1").to_jcs()

#: Spellings the strict reader refuses or that only a neighbour could complete.
TRICKY = [
    b" " + CANONICAL,
    CANONICAL + b" ",
    CANONICAL + b"," + CANONICAL,
    CANONICAL[:-1],
    b"}",
    b"]",
    b"[",
    b"1,2",
    b"1",
    b'"text"',
    b"{}",
    b"[" * 5000,
    b"\xff\xfe",
    CANONICAL.replace(b'"hi"', b'"\\u0068i"'),
    CANONICAL.replace(b'"hi"', b'"\\ud800"'),
    CANONICAL.replace(b'"hi"', b'""'),
    CANONICAL.replace(b"2026-07-20", b"2026-02-30"),
    CANONICAL.replace(b'"leader"', b'"lea.der"'),
    CANONICAL.replace(b'"leader"', b'"e\\u0301"'),
    CANONICAL.replace(b'{"body":"hi",', b'{"body":"hi","body":"hi",'),
    CANONICAL.replace(b'{"body":"hi",', b'{"body":"hi","extra":"x",'),
    CANONICAL.replace(b'{"body":"hi",', b"{").replace(b"}", b',"body":"hi"}'),
    CANONICAL.replace(b'{"body":"hi",', b'{"body":1,'),
    CANONICAL.replace(b'"to_agent":"worker-1"', b'"to_agent":null'),
    CANONICAL.replace(b'"to_agent":"worker-1"', b'"to_agnt":"worker-1"'),
]


def strict(data: bytes, max_blob_bytes: int = MAX_BLOB_BYTES) -> Message | None:
    """What ``NoneProfile.open`` imports from ``data`` (``None``: it blocks)."""
    envelope = Envelope(1, "none", None, encode_blob(data), data)
    outcome = PROFILE.open(envelope, OpenContext(max_blob_bytes=max_blob_bytes))
    return outcome.message if isinstance(outcome, Importable) else None


def assert_never_beyond_strict(blobs: list[bytes], max_blob_bytes: int = MAX_BLOB_BYTES) -> None:
    opened = open_canonical_page(blobs, max_blob_bytes)
    assert len(opened) == len(blobs)
    for data, message in zip(blobs, opened, strict=True):
        if message is not None:
            assert message == strict(data, max_blob_bytes)


canonical_blobs = messages.map(Message.to_jcs)
blobs = canonical_blobs | st.sampled_from(TRICKY) | st.binary(min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.lists(canonical_blobs, max_size=12))
def test_a_page_of_canonical_messages_opens_whole_as_the_profile_opens_each(
    page: list[bytes],
) -> None:
    assert open_canonical_page(page) == [strict(data) for data in page]


@settings(max_examples=500, deadline=None)
@given(st.lists(blobs, min_size=1, max_size=8))
def test_a_mixed_page_never_accepts_what_the_profile_refuses(page: list[bytes]) -> None:
    assert_never_beyond_strict(page)


@pytest.mark.parametrize("tricky", TRICKY)
def test_each_refused_or_neighbour_shaped_spelling_is_left_to_the_profile(tricky: bytes) -> None:
    page = [CANONICAL, tricky, CANONICAL]
    assert_never_beyond_strict(page)
    if strict(tricky) is None:
        assert open_canonical_page(page)[1] is None


def test_a_blob_over_the_limit_is_left_to_the_profile() -> None:
    assert open_canonical_page([CANONICAL], len(CANONICAL)) == [strict(CANONICAL)]
    assert open_canonical_page([CANONICAL], len(CANONICAL) - 1) == [None]
    assert strict(CANONICAL, len(CANONICAL) - 1) is None


def test_an_empty_page_opens_nothing() -> None:
    assert open_canonical_page([]) == []
