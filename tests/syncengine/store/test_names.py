"""Delivery cursors are canonical decimal log positions (specs/store.md)."""

from __future__ import annotations

import pytest

from syncengine.store.errors import InvalidInput
from syncengine.store.names import check_cursor_token


@pytest.mark.parametrize("text", ["0", "7", "9223372036854775807"])
def test_cursor_token_accepts_canonical_positions(text: str) -> None:
    assert check_cursor_token(text) == int(text)


@pytest.mark.parametrize("text", ["", "07", "-1", "1.0", " 1", "1\r", "²", 7, None])
def test_cursor_token_refuses_non_canonical_spellings(text: object) -> None:
    with pytest.raises(InvalidInput, match="issued by this store"):
        check_cursor_token(text)


def test_cursor_token_beyond_signed_64_bits_is_out_of_range() -> None:
    with pytest.raises(InvalidInput, match="out of range"):
        check_cursor_token("9223372036854775808")
