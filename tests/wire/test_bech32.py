"""Bech32 as age uses it (BIP-173 checksum, no length ceiling)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wire import bech32
from wire.bech32 import Bech32Error

BIP173_VALID = [
    "A12UEL5L",
    "a12uel5l",
    "abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw",
    "split1checkupstagehandshakeupstreamerranterredcaperred2y9e3w",
    "?1ezyfcl",
]


@pytest.mark.parametrize("text", BIP173_VALID)
def test_bip173_valid_strings_decode_and_reencode(text: str) -> None:
    hrp, data = bech32.decode(text)
    assert bech32.encode(hrp, data) == text.lower()


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("pzry9x0s0muk", "separator"),
        ("1pzry9x0s0muk", "must not be empty"),
        ("10a06t8", "must not be empty"),
        ("x1b4n0q5v", "outside the Bech32 alphabet"),
        ("li1dgmt3", "shorter than the 6-character checksum"),
        ("A1G7SGD8", "checksum does not verify"),
        ("a12uel5m", "checksum does not verify"),
        ("A12uEL5L", "mix upper and lower case"),
        (" 1nwldj5", "printable ASCII"),
        ("a12uel5lé", "must be ASCII"),
    ],
)
def test_invalid_strings_are_refused_naming_the_rule(text: str, rule: str) -> None:
    with pytest.raises(Bech32Error) as caught:
        bech32.decode(text, field="recipient")
    assert caught.value.field == "recipient"
    assert rule in caught.value.rule


def test_nonzero_padding_bits_are_refused() -> None:
    # One data group of 5 bits cannot form a byte; two groups with a set low bit
    # carry a non-zero pad. Build the latter with a valid checksum.
    hrp = "age"
    groups = [0, 1]  # 10 bits: 8 data bits + 2 pad bits, the pad being '01'
    checksum = bech32._create_checksum(hrp, groups)
    text = hrp + "1" + "".join(bech32._CHARSET[g] for g in groups + checksum)
    with pytest.raises(Bech32Error, match="padding"):
        bech32.decode(text)


def test_age_strings_longer_than_90_characters_are_allowed() -> None:
    data = bytes(range(64))
    text = bech32.encode("age", data)
    assert len(text) > 90
    assert bech32.decode(text) == ("age", data)


@settings(max_examples=200, deadline=None)
@given(
    hrp=st.text(
        alphabet=st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=15
    ).filter(lambda h: h.lower() == h or h.upper() == h),
    data=st.binary(max_size=48),
)
def test_encode_then_decode_round_trips(hrp: str, data: bytes) -> None:
    assert bech32.decode(bech32.encode(hrp, data)) == (hrp.lower(), data)


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(min_size=32, max_size=32), position=st.integers(0, 57), shift=st.integers(1, 31)
)
def test_any_single_character_substitution_in_a_recipient_is_detected(
    data: bytes, position: int, shift: int
) -> None:
    text = bech32.encode("age", data)
    index = 4 + position  # a data or checksum character, after "age1"
    old = bech32._CHARSET.index(text[index])
    mutated = text[:index] + bech32._CHARSET[(old + shift) % 32] + text[index + 1 :]
    with pytest.raises(Bech32Error):
        bech32.decode(mutated)
