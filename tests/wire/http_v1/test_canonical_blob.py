"""The page fast path's blob check accepts exactly what ``decode_blob`` accepts.

``_canonical_blob`` decides by a strict decode and a re-encode (issue #17);
``decode_blob`` by its rules one by one (v1.md "Message representation":
canonical padded base64, within the blob limit). For any text and limit
the two give the same bytes, or both refuse (the fast path's refusal only
sends the element to ``PulledMessage.from_obj``, which names the rule).
"""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wire.envelope import decode_blob
from wire.errors import EnvelopeError
from wire.http_v1.messages import _canonical_blob
from wire.limits import MAX_BLOB_BYTES

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="


def strict(text: str, limit: int) -> bytes | None:
    try:
        return decode_blob(text, "blob", limit)
    except EnvelopeError:
        return None


limits = st.sampled_from([0, 1, 2, 3, 4, 5, 6, 7, 20, MAX_BLOB_BYTES, MAX_BLOB_BYTES + 1])
encoded = st.binary(max_size=24).map(lambda data: base64.b64encode(data).decode("ascii"))


@settings(max_examples=600, deadline=None)
@given(
    st.one_of(
        encoded,
        st.text(alphabet=ALPHABET, max_size=16),
        st.text(alphabet=ALPHABET + "-_ \n\u00e9\x00", max_size=12),
        st.tuples(encoded, st.integers(0, 30), st.sampled_from(ALPHABET + " \n-")).map(
            lambda t: t[0][: t[1]] + t[2] + t[0][t[1] + 1 :]
        ),
    ),
    limits,
)
def test_the_fast_blob_check_decides_as_decode_blob(text: str, limit: int) -> None:
    assert _canonical_blob(text, limit) == strict(text, limit)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "====",
        "aGk=",
        "aGl=",
        "aGk",
        "aGk==",
        "aGk=====",
        "aGVsbG8=",
        "aGVsbG8",
        "YQ==",
        "YR==",
        "YQ=",
        "Y===",
        "aGk=aGk=",
        "aG k=",
        "aGk=\n",
        "\u00e9GVs",
    ],
)
def test_padding_and_alphabet_edges_decide_as_decode_blob(text: str) -> None:
    for limit in (1, 2, 3, MAX_BLOB_BYTES):
        assert _canonical_blob(text, limit) == strict(text, limit)


def test_a_blob_at_the_limit_passes_and_one_byte_over_does_not() -> None:
    text = base64.b64encode(b"x" * 7).decode("ascii")
    assert _canonical_blob(text, 7) == b"x" * 7
    assert _canonical_blob(text, 6) is None
    assert strict(text, 6) is None
