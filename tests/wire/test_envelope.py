"""The sealed envelope, canonical blob base64 and the idempotency digest
(wire/envelope.py; v1.md "Message representation" and "Team sequence
allocation and visibility")."""

from __future__ import annotations

import base64
import hashlib
import struct
import unicodedata
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.wire.wire_strategies import PROPERTY
from wire import jcs
from wire.envelope import Envelope, decode_blob, encode_blob
from wire.errors import CanonicalJsonError, EnvelopeError, SchemaError
from wire.limits import MAX_BLOB_BYTES

V1_EXAMPLE_BLOB = (
    "eyJib2R5IjoiUnVuIHRoZSB0ZXN0IHN1aXRlIiwiY3JlYXRlZF9hdCI6IjIwMjYtMDctMjBUMDY6MzA6MDAu"
    "MDAwMDAwWiIsImZyb21fYWdlbnQiOiJsZWFkZXIiLCJ0b19hZ2VudCI6Indvcmtlci0xIn0="
)
V1_EXAMPLE_MESSAGE_JCS = (
    b'{"body":"Run the test suite","created_at":"2026-07-20T06:30:00.000000Z",'
    b'"from_agent":"leader","to_agent":"worker-1"}'
)
#: SHA-256 of the hand-built agmsg-envelope-v1 preimage of the v1.md example.
V1_EXAMPLE_DIGEST_HEX = "d82d1a3f2ad1606c4466018eae75f7e14a88a87be47223888c42cc4b5d31c3e3"


def _example_obj(**overrides: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {"v": 1, "cipher": "none", "key_id": None, "blob": V1_EXAMPLE_BLOB}
    obj.update(overrides)
    return obj


def _preimage(v: int, cipher: str, key_id: str | None, blob: bytes) -> bytes:
    """The agmsg-envelope-v1 preimage, written out from the v1.md paragraph."""
    out = b"agmsg-envelope-v1" + b"\x00"
    out += struct.pack(">I", v)
    out += struct.pack(">I", len(cipher.encode("utf-8"))) + cipher.encode("utf-8")
    if key_id is None:
        out += b"\x00"
    else:
        out += b"\x01" + struct.pack(">I", len(key_id.encode("utf-8"))) + key_id.encode("utf-8")
    out += struct.pack(">I", len(blob)) + blob
    return out


def _lenient_decode(text: str) -> bytes:
    """What a forgiving decoder makes of a spelling: no whitespace, either
    alphabet, any padding, unused bits ignored."""
    core = "".join(text.split()).translate(str.maketrans("-_", "+/")).rstrip("=")
    return base64.b64decode(core + "=" * (-len(core) % 4))


# --- the v1.md example ------------------------------------------------------------


def test_v1_example_blob_decodes_to_the_example_message_bytes() -> None:
    envelope = Envelope.from_obj(_example_obj())
    assert envelope.blob_bytes() == V1_EXAMPLE_MESSAGE_JCS


def test_v1_example_canonical_bytes_sort_the_four_members() -> None:
    envelope = Envelope.from_obj(_example_obj())
    expected = ('{"blob":"' + V1_EXAMPLE_BLOB + '","cipher":"none","key_id":null,"v":1}').encode()
    assert envelope.canonical_bytes() == expected


def test_digest_of_v1_example_envelope_is_fixed() -> None:
    assert Envelope.from_obj(_example_obj()).digest().hex() == V1_EXAMPLE_DIGEST_HEX


@pytest.mark.parametrize(
    ("v", "cipher", "key_id", "blob"),
    [
        (1, "none", None, V1_EXAMPLE_MESSAGE_JCS),
        (1, "age-v1", "epoch-7", b"\x00\x01\x02"),
        (7, "x", "é-clé \U0001f511", b"\xff" * 300),
        (2**32 - 1, "a" * 64, "k" * 256, b"z"),
    ],
)
def test_digest_matches_independent_preimage(
    v: int, cipher: str, key_id: str | None, blob: bytes
) -> None:
    envelope = Envelope.from_blob_bytes(cipher, key_id, blob, v=v)
    assert envelope.digest() == hashlib.sha256(_preimage(v, cipher, key_id, blob)).digest()


@pytest.mark.parametrize(
    "change",
    [
        {"v": 2},
        {"cipher": "nonf"},
        {"key_id": "k"},
        {"blob": base64.b64encode(V1_EXAMPLE_MESSAGE_JCS + b" ").decode()},
    ],
)
def test_digest_depends_on_every_member(change: dict[str, Any]) -> None:
    base = Envelope.from_obj(_example_obj())
    assert Envelope.from_obj(_example_obj(**change)).digest() != base.digest()


def test_digest_length_prefixes_separate_cipher_from_key_id() -> None:
    # Without length prefixes these two would hash the same concatenation.
    one = Envelope.from_blob_bytes("ab", "c", b"x")
    two = Envelope.from_blob_bytes("a", "bc", b"x")
    assert one.digest() != two.digest()


def test_digest_and_canonical_bytes_ignore_json_spelling() -> None:
    spaced = '{ "blob" : "' + V1_EXAMPLE_BLOB + '",\n "key_id": null, "v": 1, "cipher": "none" }'
    canonical = Envelope.from_obj(_example_obj())
    reparsed = Envelope.from_json(spaced)
    assert reparsed == canonical
    assert reparsed.canonical_bytes() == canonical.canonical_bytes()
    assert reparsed.digest() == canonical.digest()


def test_directly_constructed_envelope_digests_from_its_blob_text() -> None:
    validated = Envelope.from_obj(_example_obj())
    bare = Envelope(1, "none", None, V1_EXAMPLE_BLOB)
    assert bare.digest() == validated.digest()
    assert bare.blob_size == len(V1_EXAMPLE_MESSAGE_JCS)


def test_equality_ignores_the_cached_blob_bytes() -> None:
    assert Envelope(1, "none", None, V1_EXAMPLE_BLOB) == Envelope.from_obj(_example_obj())


# --- from_obj: member set and values ---------------------------------------------


@pytest.mark.parametrize("member", ["v", "cipher", "key_id", "blob"])
def test_envelope_requires_all_four_members(member: str) -> None:
    obj = _example_obj()
    del obj[member]
    with pytest.raises(EnvelopeError, match="missing") as caught:
        Envelope.from_obj(obj)
    assert caught.value.field == f"envelope.{member}"


def test_envelope_rejects_unknown_members() -> None:
    with pytest.raises(EnvelopeError, match="unknown"):
        Envelope.from_obj(_example_obj(id="550e8400-e29b-41d4-a716-446655440000"))


@pytest.mark.parametrize("value", [[], "{}", None, 1])
def test_envelope_must_be_an_object(value: Any) -> None:
    with pytest.raises(SchemaError):
        Envelope.from_obj(value)


@pytest.mark.parametrize("v", [1.0, "1", True, None, [1]])
def test_envelope_version_must_be_a_json_integer(v: Any) -> None:
    with pytest.raises(EnvelopeError) as caught:
        Envelope.from_obj(_example_obj(v=v))
    assert caught.value.field == "envelope.v"


@pytest.mark.parametrize("v", [-1, 2**32, 2**53 - 1])
def test_envelope_version_must_fit_unsigned_32_bit(v: int) -> None:
    with pytest.raises(EnvelopeError):
        Envelope.from_obj(_example_obj(v=v))


@pytest.mark.parametrize("v", [0, 2, 2**32 - 1])
def test_envelope_keeps_other_versions_for_quarantine(v: int) -> None:
    assert Envelope.from_obj(_example_obj(v=v)).v == v


@pytest.mark.parametrize("cipher", ["", "NONE", "a" * 65, ".none", None, 1])
def test_envelope_cipher_must_match_scheme_grammar(cipher: Any) -> None:
    with pytest.raises(EnvelopeError) as caught:
        Envelope.from_obj(_example_obj(cipher=cipher))
    assert caught.value.field == "envelope.cipher"


def test_envelope_accepts_unknown_but_well_formed_cipher() -> None:
    assert Envelope.from_obj(_example_obj(cipher="future-v9")).cipher == "future-v9"


@pytest.mark.parametrize("key_id", ["", "k" * 257, "e\u0301", "a\nb", "\x7f", 0, False])
def test_envelope_key_id_must_be_null_or_valid_text(key_id: Any) -> None:
    with pytest.raises(EnvelopeError) as caught:
        Envelope.from_obj(_example_obj(key_id=key_id))
    assert caught.value.field == "envelope.key_id"


@pytest.mark.parametrize("blob", [None, 1, ["QQ=="], {"b": "QQ=="}])
def test_envelope_blob_must_be_a_string(blob: Any) -> None:
    with pytest.raises(EnvelopeError) as caught:
        Envelope.from_obj(_example_obj(blob=blob))
    assert caught.value.field == "envelope.blob"


def test_envelope_errors_are_envelope_errors_not_bare_scalar_errors() -> None:
    with pytest.raises(EnvelopeError):
        Envelope.from_obj(_example_obj(cipher="BAD"))


def test_envelope_error_field_uses_the_callers_path() -> None:
    with pytest.raises(EnvelopeError) as caught:
        Envelope.from_obj(_example_obj(blob=""), field="messages[2].envelope")
    assert caught.value.field == "messages[2].envelope.blob"


# --- blob base64 ------------------------------------------------------------------


def test_blob_rejects_empty_text() -> None:
    with pytest.raises(EnvelopeError, match="empty"):
        decode_blob("", "blob")


@pytest.mark.parametrize("text", ["QQ", "QUI", "Q", "QQ=", "QQ==="])
def test_blob_rejects_missing_or_excess_padding(text: str) -> None:
    with pytest.raises(EnvelopeError):
        decode_blob(text, "blob")


@pytest.mark.parametrize("text", ["QR==", "QUJ=", "QUK=", "Q/==", "AB=="])
def test_blob_rejects_nonzero_padding_bits(text: str) -> None:
    with pytest.raises(EnvelopeError, match="padding bits"):
        decode_blob(text, "blob")


@pytest.mark.parametrize("text", ["QQ== ", " QQ==", "QU\nJD", "QUJD\r\n", "QU JD", "\tQUJD"])
def test_blob_rejects_whitespace(text: str) -> None:
    with pytest.raises(EnvelopeError):
        decode_blob(text, "blob")


@pytest.mark.parametrize("text", ["-_8=", "ab-_", "QUJ*", "QUJ\u00e9", "QUJ\x00"])
def test_blob_rejects_characters_outside_the_standard_alphabet(text: str) -> None:
    with pytest.raises(EnvelopeError):
        decode_blob(text, "blob")


@pytest.mark.parametrize("text", ["QQ==QQ==", "QQ=A", "=QQQ", "====", "Q===", "QUJD===="])
def test_blob_rejects_misplaced_padding(text: str) -> None:
    with pytest.raises(EnvelopeError):
        decode_blob(text, "blob")


@pytest.mark.parametrize(
    ("text", "data"), [("QQ==", b"A"), ("QUI=", b"AB"), ("QUJD", b"ABC"), ("/+8=", b"\xff\xef")]
)
def test_blob_accepts_canonical_padded_base64(text: str, data: bytes) -> None:
    assert decode_blob(text, "blob") == data


def test_blob_accepts_exactly_the_protocol_maximum() -> None:
    data = bytes(MAX_BLOB_BYTES)
    assert len(decode_blob(encode_blob(data), "blob")) == MAX_BLOB_BYTES


def test_blob_rejects_one_byte_over_the_protocol_maximum() -> None:
    with pytest.raises(EnvelopeError, match="more than"):
        decode_blob(encode_blob(bytes(MAX_BLOB_BYTES + 1)), "blob")


@pytest.mark.parametrize(("size", "ok"), [(10, True), (11, False)])
def test_blob_enforces_the_teams_smaller_max_blob_bytes(size: int, ok: bool) -> None:
    text = encode_blob(b"x" * size)
    if ok:
        assert len(decode_blob(text, "blob", max_bytes=10)) == size
    else:
        with pytest.raises(EnvelopeError):
            decode_blob(text, "blob", max_bytes=10)


def test_blob_team_limit_cannot_raise_the_protocol_maximum() -> None:
    with pytest.raises(EnvelopeError):
        decode_blob(encode_blob(bytes(MAX_BLOB_BYTES + 1)), "blob", max_bytes=2 * MAX_BLOB_BYTES)


def test_envelope_from_obj_applies_the_team_blob_limit() -> None:
    with pytest.raises(EnvelopeError):
        Envelope.from_obj(_example_obj(), max_blob_bytes=len(V1_EXAMPLE_MESSAGE_JCS) - 1)


@PROPERTY
@given(st.binary(min_size=1, max_size=64), st.data())
def test_any_non_canonical_base64_spelling_of_the_same_bytes_is_rejected(
    data: bytes, draw: st.DataObject
) -> None:
    canonical = encode_blob(data)
    variants: list[str] = [canonical.rstrip("=")]
    at = draw.draw(st.integers(min_value=0, max_value=len(canonical)))
    for space in (" ", "\n", "\r\n", "\t"):
        variants.append(canonical[:at] + space + canonical[at:])
    variants.append(base64.urlsafe_b64encode(data).decode())
    variants.append(canonical + "====")
    tail = len(data) % 3
    if tail:
        # Set each unused low bit of the last data character in turn.
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        last = len(canonical.rstrip("=")) - 1
        index = alphabet.index(canonical[last])
        for bit in range(4 if tail == 1 else 2):
            flipped = alphabet[index ^ (1 << bit)]
            variants.append(canonical[:last] + flipped + canonical[last + 1 :])
    for text in variants:
        if text == canonical:
            continue
        assert _lenient_decode(text) == data  # the same bytes, spelled differently
        with pytest.raises(EnvelopeError):
            decode_blob(text, "blob")


# --- from_json, from_blob_bytes -----------------------------------------------------


def test_from_json_rejects_duplicate_members() -> None:
    text = '{"v":1,"v":1,"cipher":"none","key_id":null,"blob":"' + V1_EXAMPLE_BLOB + '"}'
    with pytest.raises(CanonicalJsonError, match="duplicate"):
        Envelope.from_json(text)


@pytest.mark.parametrize("data", [b"", b"{", b"null", b'{"v":1}', b"\xff"])
def test_from_json_rejects_invalid_documents(data: bytes) -> None:
    with pytest.raises((CanonicalJsonError, EnvelopeError, SchemaError)):
        Envelope.from_json(data)


def test_from_json_applies_the_team_blob_limit() -> None:
    text = jcs.canonicalize(_example_obj())
    with pytest.raises(EnvelopeError):
        Envelope.from_json(text, max_blob_bytes=10)


def test_from_blob_bytes_writes_canonical_base64() -> None:
    envelope = Envelope.from_blob_bytes("none", None, V1_EXAMPLE_MESSAGE_JCS)
    assert envelope.to_obj() == _example_obj()


def test_from_blob_bytes_rejects_empty_blob() -> None:
    with pytest.raises(EnvelopeError, match="empty"):
        Envelope.from_blob_bytes("none", None, b"")


def test_from_blob_bytes_rejects_blob_over_the_limit() -> None:
    with pytest.raises(EnvelopeError):
        Envelope.from_blob_bytes("none", None, b"x" * 11, max_blob_bytes=10)


@pytest.mark.parametrize("v", [-1, 2**32, True, 1.0])
def test_from_blob_bytes_rejects_versions_a_reader_would_refuse(v: Any) -> None:
    with pytest.raises(EnvelopeError) as caught:
        Envelope.from_blob_bytes("none", None, b"x", v=v)
    assert caught.value.field == "envelope.v"


def test_from_blob_bytes_rejects_invalid_cipher() -> None:
    with pytest.raises(SchemaError):
        Envelope.from_blob_bytes("Bad Cipher", None, b"x")


def test_from_blob_bytes_rejects_invalid_key_id() -> None:
    with pytest.raises(SchemaError):
        Envelope.from_blob_bytes("age-v1", "", b"x")


@PROPERTY
@given(
    st.binary(min_size=1, max_size=512),
    st.sampled_from(["none", "age-v1", "x.y-z_0"]),
    st.none()
    | st.text(alphabet=st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=16).map(
        lambda text: unicodedata.normalize("NFC", text)
    ),
    st.integers(min_value=0, max_value=2**32 - 1),
)
def test_envelope_round_trips_through_json_object(
    data: bytes, cipher: str, key_id: str | None, v: int
) -> None:
    sealed = Envelope.from_blob_bytes(cipher, key_id, data, v=v)
    reread = Envelope.from_obj(sealed.to_obj())
    assert reread == sealed
    assert Envelope.from_json(sealed.canonical_bytes()) == sealed
    assert reread.blob_bytes() == data
    assert reread.blob_size == len(data)
    assert reread.canonical_bytes() == sealed.canonical_bytes()
    assert reread.digest() == sealed.digest()
    assert reread.digest() == hashlib.sha256(_preimage(v, cipher, key_id, data)).digest()


@pytest.mark.parametrize("text", ["QUJD====", "AAAAAAAA====", "QQ======"])
def test_blob_rejects_padding_after_a_full_quantum(text: str) -> None:
    with pytest.raises(EnvelopeError):
        decode_blob(text, "blob")


def test_from_blob_bytes_reports_a_bad_cipher_as_an_envelope_error() -> None:
    import pytest

    from wire.envelope import Envelope
    from wire.errors import EnvelopeError

    with pytest.raises(EnvelopeError) as info:
        Envelope.from_blob_bytes("Bad Cipher", None, b"x")
    assert info.value.field == "envelope.cipher"
