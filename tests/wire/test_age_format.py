"""Our age v1 reader and writer (age-encryption.org/v1 as narrowed by
age-v1-profile.md "Outer envelope"; bounds in specs/age-v1.md)."""

from __future__ import annotations

import hmac
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.wire.age_craft import craft, stanza
from wire import age_format as af
from wire.age_format import AgeDecryptError, AgeFormatError
from wire.age_keys import X25519Identity, X25519Recipient
from wire.errors import WireError

ALICE = X25519Identity.generate()
BOB = X25519Identity.generate()
CHUNK = af.CHUNK_SIZE


@pytest.fixture
def no_decryption(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if any stanza unwrap (key agreement) is attempted."""

    def forbidden(*_: object) -> None:
        raise AssertionError("decryption was attempted")

    monkeypatch.setattr(af, "_unwrap", forbidden)


# --- round trips ------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK, 2 * CHUNK + 7])
def test_encrypt_decrypt_round_trips_at_chunk_boundaries(size: int) -> None:
    plaintext = bytes(i % 251 for i in range(size))
    assert af.decrypt(af.encrypt(plaintext, [ALICE.recipient]), ALICE) == plaintext


def test_every_recipient_can_decrypt() -> None:
    data = af.encrypt(b"frame", [ALICE.recipient, BOB.recipient])
    assert af.decrypt(data, ALICE) == b"frame"
    assert af.decrypt(data, BOB) == b"frame"


def test_encryption_is_randomized() -> None:
    assert af.encrypt(b"x", [ALICE.recipient]) != af.encrypt(b"x", [ALICE.recipient])


def test_header_has_one_x25519_stanza_per_recipient() -> None:
    recipients = [X25519Identity.generate().recipient for _ in range(5)]
    header = af.parse_header(af.encrypt(b"x", recipients))
    assert len(header.x25519_stanzas) == 5
    assert len(header.stanzas) == 5


IDENTITIES = [X25519Identity.generate() for _ in range(4)]


def _reference_encrypt(plaintext: bytes, recipients: list[X25519Recipient]) -> bytes:
    """The writer as the spec composes it: Stanza objects through encode_stanza,
    HKDF for each key, STREAM for every chunk; no direct-bytes shortcuts."""
    file_key = os.urandom(16)
    stanzas = b"".join(af.encode_stanza(af._wrap(file_key, r)) for r in recipients)
    mac_input = af.VERSION_LINE + stanzas + b"---"
    mac = hmac.digest(af._hkdf(file_key, b"", b"header"), mac_input, "sha256")
    nonce = os.urandom(16)
    chunks = af._stream_encrypt(af._hkdf(file_key, nonce, b"payload"), plaintext)
    return mac_input + b" " + af._b64encode_unpadded(mac) + b"\n" + nonce + b"".join(chunks)


class _RandomStream:
    """A seeded byte stream standing in for os.urandom: one read of a + b
    bytes gives what a read of a and then a read of b give, so a writer may
    draw its randomness in one call or several and still be compared."""

    def __init__(self, seed: int) -> None:
        self._data = random.Random(seed).randbytes(4096)
        self._pos = 0

    def read(self, size: int) -> bytes:
        out = self._data[self._pos : self._pos + size]
        assert len(out) == size, "the stand-in stream ran out"
        self._pos += size
        return out


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(min_value=0, max_value=2**32),
    size=st.sampled_from([0, 1, 1024, CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 7]),
    count=st.integers(min_value=1, max_value=4),
)
def test_encrypt_writes_the_reference_bytes_for_the_same_randomness(
    monkeypatch: pytest.MonkeyPatch, seed: int, size: int, count: int
) -> None:
    """The fast writer (stanza bytes written directly, one-chunk payload path,
    hashlib HMAC) equals the reference composition byte for byte when both
    draw the same OS randomness: the age-v1 file format is unchanged."""
    plaintext = bytes(i % 251 for i in range(size))
    recipients = [i.recipient for i in IDENTITIES[:count]]
    outputs = []
    for writer in (af.encrypt, _reference_encrypt):
        monkeypatch.setattr(os, "urandom", _RandomStream(seed).read)
        outputs.append(writer(plaintext, recipients))
    monkeypatch.undo()
    assert outputs[0] == outputs[1]
    assert af.decrypt(outputs[0], IDENTITIES[count - 1]) == plaintext
    header = af.parse_header(outputs[0])
    assert (
        header.mac_input
        == af.VERSION_LINE + b"".join(af.encode_stanza(s) for s in header.stanzas) + b"---"
    )


@given(st.binary(max_size=200), st.binary(max_size=300))
def test_hmac_equals_the_standard_library_for_any_key_length(key: bytes, message: bytes) -> None:
    """Keys shorter than, equal to and longer than SHA-256's 64-byte block."""
    assert af._hmac_sha256(key, message) == hmac.digest(key, message, "sha256")


@given(st.binary(max_size=100), st.binary(max_size=80), st.binary(max_size=40))
def test_derive_key_is_hkdf_with_the_first_expand_block(
    salt: bytes, ikm: bytes, info: bytes
) -> None:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    expected = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=info).derive(ikm)
    assert af._derive_key(salt, ikm, info + b"\x01") == expected


def test_header_mac_is_hmac_under_the_hkdf_header_key() -> None:
    file_key, mac_input = os.urandom(16), b"age-encryption.org/v1\n---"
    expected = hmac.digest(af._hkdf(file_key, b"", b"header"), mac_input, "sha256")
    assert af._header_mac(file_key, mac_input) == expected


def test_encrypt_refuses_zero_recipients() -> None:
    with pytest.raises(AgeFormatError, match="between 1 and 256"):
        af.encrypt(b"x", [])


def test_encrypt_refuses_257_recipients() -> None:
    with pytest.raises(AgeFormatError, match="between 1 and 256"):
        af.encrypt(b"x", [ALICE.recipient] * 257)


def test_wrong_identity_fails_to_decrypt() -> None:
    with pytest.raises(AgeDecryptError, match="no X25519 stanza"):
        af.decrypt(af.encrypt(b"x", [ALICE.recipient]), BOB)


# --- header framing -----------------------------------------------------------


def test_armored_file_is_refused(no_decryption: None) -> None:
    with pytest.raises(AgeFormatError, match="armor"):
        af.decrypt(b"-----BEGIN AGE ENCRYPTED FILE-----\nYWdl\n", ALICE)


def test_file_without_version_line_is_refused(no_decryption: None) -> None:
    with pytest.raises(AgeFormatError, match=r"age-encryption\.org/v1"):
        af.decrypt(b"age-encryption.org/v2\n", ALICE)


def test_header_without_mac_line_is_refused(no_decryption: None) -> None:
    data = af.encrypt(b"x", [ALICE.recipient])
    cut = data.index(b"\n---")
    with pytest.raises(AgeFormatError, match="truncated"):
        af.decrypt(data[: cut + 1], ALICE)


def test_stanza_without_body_is_refused(no_decryption: None) -> None:
    data = af.encrypt(b"x", [ALICE.recipient])
    lines = data.split(b"\n")
    # Drop the body line of the single X25519 stanza.
    broken = b"\n".join([lines[0], lines[1], *lines[3:]])
    with pytest.raises(AgeFormatError, match="no body"):
        af.decrypt(broken, ALICE)


def test_full_width_body_needs_a_closing_short_line(no_decryption: None) -> None:
    raw = stanza("a-grease", bytes(48))  # 48 bytes = exactly 64 base64 columns
    assert raw.endswith(b"\n\n")
    data = craft(b"x", [ALICE.recipient], extra_stanzas=[raw[:-1]])
    with pytest.raises(AgeFormatError, match="no body"):
        af.decrypt(data, ALICE)


def test_body_line_wider_than_64_columns_is_refused(no_decryption: None) -> None:
    data = craft(b"x", [ALICE.recipient], extra_stanzas=[b"-> a-grease\n" + b"A" * 68 + b"\n"])
    with pytest.raises(AgeFormatError, match="64 columns"):
        af.decrypt(data, ALICE)


def test_noncanonical_base64_body_is_refused(no_decryption: None) -> None:
    # "AB" decodes to one byte but leaves non-zero trailing bits.
    data = craft(b"x", [ALICE.recipient], extra_stanzas=[b"-> a-grease\nAB\n"])
    with pytest.raises(AgeFormatError, match="canonical"):
        af.decrypt(data, ALICE)


def test_padded_base64_body_is_refused(no_decryption: None) -> None:
    data = craft(b"x", [ALICE.recipient], extra_stanzas=[b"-> a-grease\nAA==\n"])
    with pytest.raises(AgeFormatError, match="unpadded"):
        af.decrypt(data, ALICE)


def test_empty_stanza_argument_is_refused(no_decryption: None) -> None:
    data = craft(b"x", [ALICE.recipient], extra_stanzas=[b"-> a-grease  x\n\n"])
    with pytest.raises(AgeFormatError, match="VCHAR"):
        af.decrypt(data, ALICE)


def test_unexpected_header_line_is_refused(no_decryption: None) -> None:
    data = craft(b"x", [ALICE.recipient], extra_stanzas=[b"hello\n"])
    with pytest.raises(AgeFormatError, match="expected a '-> ' stanza"):
        af.decrypt(data, ALICE)


def test_header_line_over_4096_bytes_is_refused(no_decryption: None) -> None:
    data = craft(b"x", [ALICE.recipient], extra_stanzas=[b"-> " + b"a" * 4094 + b"\n\n"])
    with pytest.raises(AgeFormatError, match="4096"):
        af.decrypt(data, ALICE)


def test_header_line_of_exactly_4096_bytes_passes_the_line_bound(no_decryption: None) -> None:
    data = craft(b"x", [ALICE.recipient], extra_stanzas=[b"-> " + b"a" * 4093 + b"\n\n"])
    with pytest.raises(AgeFormatError) as caught:
        af.decrypt(data, ALICE)
    assert "4096" not in caught.value.rule  # refused by the stanza grammar instead


def test_mac_of_wrong_length_is_refused(no_decryption: None) -> None:
    data = af.encrypt(b"x", [ALICE.recipient])
    start = data.index(b"\n--- ") + 5
    broken = data[:start] + b"AAAA" + data[start + 43 :]
    with pytest.raises(AgeFormatError, match="32 bytes"):
        af.decrypt(broken, ALICE)


# --- stanza admission -----------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "rule"),
    [
        (b"-> scrypt c2FsdHNhbHRzYWx0c2FsdA 18\nAAAA\n", "scrypt stanzas"),
        (b"-> ssh-ed25519 abc def\nAAAA\n", "ssh stanzas"),
        (b"-> ssh-rsa abc\nAAAA\n", "ssh stanzas"),
        (b"-> plugin-yubikey abc\nAAAA\n", "plugin stanzas"),
        (b"-> plugin-x-grease\n\n", "plugin stanzas"),
        (b"-> ssh-x-grease\n\n", "ssh stanzas"),
        (b"-> mlkem768x25519 abc\nAAAA\n", "neither X25519 nor bounded GREASE"),
        (b"-> x25519 abc\nAAAA\n", "neither X25519 nor bounded GREASE"),
        (b"-> grease\n\n", "neither X25519 nor bounded GREASE"),
        (b"-> -grease\n\n", "neither X25519 nor bounded GREASE"),
        (b"-> 123456789-grease\n\n", "neither X25519 nor bounded GREASE"),
    ],
)
def test_non_x25519_non_grease_stanzas_are_refused_before_decryption(
    no_decryption: None, raw: bytes, rule: str
) -> None:
    for first in (False, True):
        data = craft(b"x", [ALICE.recipient], extra_stanzas=[raw], extra_first=first)
        with pytest.raises(AgeFormatError) as caught:
            af.decrypt(data, ALICE)
        assert rule in caught.value.rule


def test_grease_at_the_grammar_bounds_is_tolerated_and_authenticated() -> None:
    raw = stanza("!~345678-grease a ~~~~~~~~ 12345678 x", bytes(range(100)))
    data = craft(b"frame", [ALICE.recipient], extra_stanzas=[raw], extra_first=True)
    header = af.parse_header(data)
    assert [s.tag for s in header.stanzas] == ["!~345678-grease", "X25519"]
    assert af.decrypt(data, ALICE) == b"frame"
    # The GREASE bytes are MAC-covered: changing one breaks authentication.
    tampered = data.replace(b"12345678", b"12345679", 1)
    with pytest.raises(AgeDecryptError, match="MAC"):
        af.decrypt(tampered, ALICE)


def test_grease_with_empty_body_is_tolerated() -> None:
    data = craft(b"frame", [ALICE.recipient], extra_stanzas=[b"-> q-grease\n\n"])
    assert af.decrypt(data, ALICE) == b"frame"


@pytest.mark.parametrize(
    ("raw", "rule"),
    [
        (stanza("a-grease 1 2 3 4 5", b""), "at most 4 arguments"),
        (stanza("a-grease 123456789", b""), "1-8 bytes"),
        (stanza("a-grease", bytes(101)), "at most 100 bytes"),
    ],
)
def test_grease_outside_its_bounds_is_refused(no_decryption: None, raw: bytes, rule: str) -> None:
    data = craft(b"x", [ALICE.recipient], extra_stanzas=[raw])
    with pytest.raises(AgeFormatError, match=rule):
        af.decrypt(data, ALICE)


def test_only_grease_and_no_x25519_is_refused(no_decryption: None) -> None:
    data = craft(b"x", [], extra_stanzas=[b"-> q-grease\n\n"])
    with pytest.raises(AgeFormatError, match="at least one X25519"):
        af.decrypt(data, ALICE)


@pytest.mark.parametrize(
    ("raw", "rule"),
    [
        (b"-> X25519\n" + af._b64encode_unpadded(bytes(32)) + b"\n", "exactly one argument"),
        (b"-> X25519 AAAA\n" + af._b64encode_unpadded(bytes(32)) + b"\n", "32 bytes"),
        (
            b"-> X25519 " + af._b64encode_unpadded(bytes(32)) + b"\nAAAA\n",
            "X25519 body is 32 bytes",
        ),
    ],
)
def test_malformed_x25519_stanza_is_refused(no_decryption: None, raw: bytes, rule: str) -> None:
    data = craft(b"x", [ALICE.recipient], extra_stanzas=[raw])
    with pytest.raises(AgeFormatError, match=rule):
        af.decrypt(data, ALICE)


def test_256_x25519_stanzas_are_accepted() -> None:
    data = craft(b"x", [BOB.recipient] * 255 + [ALICE.recipient])
    assert af.decrypt(data, ALICE) == b"x"


def test_257_x25519_stanzas_are_refused(no_decryption: None) -> None:
    data = craft(b"x", [ALICE.recipient] * 257)
    with pytest.raises(AgeFormatError, match="more than 256 X25519"):
        af.decrypt(data, ALICE)


def test_512_stanzas_in_all_are_accepted() -> None:
    grease = [b"-> q-grease\n\n"] * 511
    assert af.decrypt(craft(b"x", [ALICE.recipient], extra_stanzas=grease), ALICE) == b"x"


def test_513_stanzas_are_refused(no_decryption: None) -> None:
    grease = [b"-> q-grease\n\n"] * 512
    with pytest.raises(AgeFormatError, match="more than 512 stanzas"):
        af.decrypt(craft(b"x", [ALICE.recipient], extra_stanzas=grease), ALICE)


def test_header_over_65536_bytes_is_refused(no_decryption: None) -> None:
    big = stanza("12345678-grease 12345678 12345678 12345678 12345678", bytes(100))
    count = 65_536 // len(big) + 1
    assert count < 512
    data = craft(b"x", [ALICE.recipient], extra_stanzas=[big] * count)
    with pytest.raises(AgeFormatError, match="65536"):
        af.decrypt(data, ALICE)


# --- payload ---------------------------------------------------------------------


def test_trailing_bytes_after_the_final_chunk_are_refused() -> None:
    data = af.encrypt(b"x", [ALICE.recipient])
    with pytest.raises(AgeDecryptError):
        af.decrypt(data + b"\x00", ALICE)


def test_second_file_concatenated_is_refused() -> None:
    data = af.encrypt(b"x", [ALICE.recipient])
    with pytest.raises(AgeDecryptError):
        af.decrypt(data + data, ALICE)


def test_truncated_payload_is_refused() -> None:
    data = af.encrypt(bytes(CHUNK + 10), [ALICE.recipient])
    for cut in (1, 10, 17, 27):
        with pytest.raises(AgeDecryptError):
            af.decrypt(data[:-cut], ALICE)


def test_file_ending_at_a_chunk_boundary_without_final_flag_is_refused() -> None:
    data = af.encrypt(bytes(2 * CHUNK), [ALICE.recipient])
    with pytest.raises(AgeDecryptError):
        af.decrypt(data[: -(CHUNK + 16)], ALICE)


def test_empty_final_chunk_after_a_full_chunk_is_refused() -> None:
    data = craft(b"", [ALICE.recipient], chunks=[(bytes(CHUNK), False), (b"", True)])
    with pytest.raises(AgeDecryptError, match="empty final chunk"):
        af.decrypt(data, ALICE)


def test_full_final_chunk_is_accepted() -> None:
    data = craft(b"", [ALICE.recipient], chunks=[(bytes(CHUNK), True)])
    assert af.decrypt(data, ALICE) == bytes(CHUNK)


def test_missing_nonce_is_refused() -> None:
    data = af.encrypt(b"x", [ALICE.recipient])
    header = af.parse_header(data)
    with pytest.raises(AgeDecryptError, match="nonce"):
        af.decrypt(data[: header.payload_offset + 5], ALICE)


def test_tampered_header_mac_is_refused() -> None:
    data = bytearray(af.encrypt(b"x", [ALICE.recipient]))
    index = data.index(b"\n--- ") + 6
    data[index] = ord("A") if data[index] != ord("A") else ord("B")
    with pytest.raises((AgeDecryptError, AgeFormatError)):
        af.decrypt(bytes(data), ALICE)


# --- mutation properties -------------------------------------------------------------

_SAMPLE = craft(
    b"agmsg-age-v1\x00\x00\x00\x00" + bytes(200),
    [ALICE.recipient, BOB.recipient],
    extra_stanzas=[stanza("ab-grease x y", bytes(30))],
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(index=st.integers(0, len(_SAMPLE) - 1), xor=st.integers(1, 255))
def test_any_single_byte_change_is_refused_with_a_wire_error(index: int, xor: int) -> None:
    mutated = bytearray(_SAMPLE)
    mutated[index] ^= xor
    with pytest.raises(WireError):
        af.decrypt(bytes(mutated), ALICE)


@settings(max_examples=200, deadline=None)
@given(cut=st.integers(0, len(_SAMPLE) - 1))
def test_any_truncation_is_refused_with_a_wire_error(cut: int) -> None:
    with pytest.raises(WireError):
        af.decrypt(_SAMPLE[:cut], ALICE)


@settings(max_examples=200, deadline=None)
@given(
    index=st.integers(0, len(_SAMPLE)),
    junk=st.binary(min_size=1, max_size=64),
)
def test_any_insertion_is_refused_with_a_wire_error(index: int, junk: bytes) -> None:
    with pytest.raises(WireError):
        af.decrypt(_SAMPLE[:index] + junk + _SAMPLE[index:], ALICE)


@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(
        st.one_of(
            st.binary(max_size=80),
            st.sampled_from([b"-> X25519", b"-> q-grease", b"---", b"--- ", b"", b"A" * 64]),
        ),
        max_size=30,
    )
)
def test_arbitrary_header_lines_never_escape_as_unhandled_errors(lines: list[bytes]) -> None:
    data = af.VERSION_LINE + b"\n".join(lines) + b"\n" + bytes(40)
    with pytest.raises(WireError):
        af.decrypt(data, ALICE)


# --- key derivation ---------------------------------------------------------


def test_hkdf_matches_rfc5869_test_case_1_truncated_to_32_bytes() -> None:
    ikm = bytes.fromhex("0b" * 22)
    salt = bytes.fromhex("000102030405060708090a0b0c")
    info = bytes.fromhex("f0f1f2f3f4f5f6f7f8f9")
    okm = "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
    assert af._hkdf(ikm, salt, info).hex() == okm


def test_hkdf_matches_rfc5869_test_case_3_empty_salt_and_info() -> None:
    okm = "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d"
    assert af._hkdf(bytes.fromhex("0b" * 22), b"", b"").hex() == okm


@given(st.binary(max_size=80), st.binary(max_size=80), st.binary(max_size=40))
def test_hkdf_equals_the_cryptography_library_for_any_input(
    ikm: bytes, salt: bytes, info: bytes
) -> None:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    expected = HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=info).derive(ikm)
    assert af._hkdf(ikm, salt, info) == expected
