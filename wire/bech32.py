"""Bech32 strings, as age uses them for recipients and identities.

age encodes X25519 keys as BIP-173 Bech32 (the original checksum constant, not
Bech32m): recipients as ``age1…`` and identities as ``AGE-SECRET-KEY-1…``
(age-encryption.org/v1, "X25519 recipients"). Unlike BIP-173, age imposes no
90-character ceiling, so none is applied here; every other BIP-173 rule is.

Decoding is strict because these strings are typed and pasted by operators: the
checksum must verify, the case must be uniform, the padding bits must be zero
and the human-readable part must be printable ASCII. Every refusal raises
:class:`Bech32Error` naming the rule that failed. The error text never repeats
the input, which may be a secret key.
"""

from __future__ import annotations

from wire.errors import WireError

__all__ = ["Bech32Error", "decode", "encode"]

_CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
_CHARSET_INDEX = {c: i for i, c in enumerate(_CHARSET)}
_GENERATOR = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)
_CHECKSUM_LENGTH = 6


class Bech32Error(WireError):
    """A Bech32 string broke one of the encoding rules."""


def _polymod(values: list[int]) -> int:
    checksum = 1
    for value in values:
        top = checksum >> 25
        checksum = ((checksum & 0x1FFFFFF) << 5) ^ value
        for bit, generator in enumerate(_GENERATOR):
            if (top >> bit) & 1:
                checksum ^= generator
    return checksum


def _expand_hrp(hrp: str) -> list[int]:
    return [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]


def _create_checksum(hrp: str, data: list[int]) -> list[int]:
    residue = _polymod([*_expand_hrp(hrp), *data, 0, 0, 0, 0, 0, 0]) ^ 1
    return [(residue >> 5 * (5 - i)) & 31 for i in range(_CHECKSUM_LENGTH)]


def _to_groups(data: bytes) -> list[int]:
    """Regroup 8-bit bytes into 5-bit groups, zero-padding the last group."""
    groups: list[int] = []
    accumulator = 0
    bits = 0
    for byte in data:
        accumulator = (accumulator << 8) | byte
        bits += 8
        while bits >= 5:
            bits -= 5
            groups.append((accumulator >> bits) & 31)
    if bits:
        groups.append((accumulator << (5 - bits)) & 31)
    return groups


def _from_groups(field: str, groups: list[int]) -> bytes:
    """Regroup 5-bit groups into bytes; leftover bits must be fewer than 5 and zero."""
    out = bytearray()
    accumulator = 0
    bits = 0
    for group in groups:
        accumulator = (accumulator << 5) | group
        bits += 5
        if bits >= 8:
            bits -= 8
            out.append((accumulator >> bits) & 0xFF)
    if bits >= 5:
        raise Bech32Error(field, "data part has an incomplete trailing group")
    if accumulator & ((1 << bits) - 1):
        raise Bech32Error(field, "data part has non-zero padding bits")
    return bytes(out)


def _check_hrp(field: str, hrp: str) -> None:
    if not hrp:
        raise Bech32Error(field, "human-readable part must not be empty")
    if any(not 33 <= ord(c) <= 126 for c in hrp):
        raise Bech32Error(field, "human-readable part must be printable ASCII")


def encode(hrp: str, data: bytes, *, field: str = "bech32") -> str:
    """Encode ``data`` under ``hrp``; the result is lowercase.

    Callers that need the uppercase form (age identities) upper-case the whole
    string, which Bech32 permits because the checksum is case-insensitive.
    """
    _check_hrp(field, hrp)
    lowered = hrp.lower()
    groups = _to_groups(data)
    checksum = _create_checksum(lowered, groups)
    return lowered + "1" + "".join(_CHARSET[g] for g in [*groups, *checksum])


def decode(text: str, *, field: str = "bech32") -> tuple[str, bytes]:
    """Return ``(hrp, data)`` of a strictly valid Bech32 string; hrp is lowercased.

    Raises :class:`Bech32Error` (with ``field`` and the broken rule) when the
    string has mixed case, a character outside the alphabet, no separator, a
    short or wrong checksum, or non-zero padding.
    """
    if not text.isascii():
        raise Bech32Error(field, "must be ASCII")
    if text.lower() != text and text.upper() != text:
        raise Bech32Error(field, "must not mix upper and lower case")
    lowered = text.lower()
    separator = lowered.rfind("1")
    if separator < 0:
        raise Bech32Error(field, "missing the '1' separator")
    hrp = lowered[:separator]
    _check_hrp(field, hrp)
    tail = lowered[separator + 1 :]
    if len(tail) < _CHECKSUM_LENGTH:
        raise Bech32Error(field, "data part is shorter than the 6-character checksum")
    values: list[int] = []
    for char in tail:
        value = _CHARSET_INDEX.get(char)
        if value is None:
            raise Bech32Error(field, "data part contains a character outside the Bech32 alphabet")
        values.append(value)
    if _polymod([*_expand_hrp(hrp), *values]) != 1:
        raise Bech32Error(field, "checksum does not verify")
    return hrp, _from_groups(field, values[:-_CHECKSUM_LENGTH])
