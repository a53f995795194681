"""The binary age v1 file: header grammar, X25519 stanzas, header MAC, STREAM.

This is our own reader and writer for the subset of age-encryption.org/v1 the
age-v1 profile admits (docs/spec/age-v1-profile.md, "Outer envelope"; our notes
in specs/age-v1.md). The header is parsed and bounded *before* any key
agreement or decryption, so that scrypt, SSH, plugin and unknown stanzas never
reach a decryptor and a hostile header cannot make us do unbounded work.

Accepted header, after the version line ``age-encryption.org/v1``:

* ``-> X25519 <share>`` stanzas: one 32-byte share argument in canonical
  unpadded base64, a 32-byte body (wrapped file key). 1 to 256 of them.
* GREASE stanzas: tag ``[!-~]{1,8}-grease`` outside the active namespaces
  (``scrypt``, ``ssh-…``, ``plugin-…``), 0–4 arguments of 1–8 VCHAR bytes, a
  body of 0–100 bytes. Kept in the MAC'd header bytes; never dispatched.
* At most 512 stanzas, 65,536 header bytes through the MAC line's newline,
  4,096 bytes a line (newline excluded). Every stanza has a body: its lines
  are canonical unpadded base64, 64 columns each, closed by a shorter line.
* The MAC line ``--- <43 base64 characters>``.

Then a 16-byte nonce and the STREAM payload: ChaCha20-Poly1305 over 64 KiB
chunks, nonce = 11-byte big-endian counter || last-chunk flag. Nothing may
follow the final chunk, and an empty final chunk is only valid as the sole
chunk (age's rule), so truncation and extension are both detected.

Errors: :class:`AgeFormatError` for a file refused before decryption,
:class:`AgeDecryptError` for a cryptographic failure. Both carry a field and a
rule and never include key material or plaintext.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from wire.age_keys import X25519Identity, X25519Recipient
from wire.errors import WireError

__all__ = [
    "CHUNK_SIZE",
    "MAX_GREASE_ARGS",
    "MAX_GREASE_BODY_BYTES",
    "MAX_HEADER_BYTES",
    "MAX_LINE_BYTES",
    "MAX_STANZAS",
    "MAX_X25519_STANZAS",
    "VERSION_LINE",
    "AgeDecryptError",
    "AgeFormatError",
    "AgeHeader",
    "Stanza",
    "decrypt",
    "encode_stanza",
    "encrypt",
    "is_grease_tag",
    "parse_header",
]

VERSION_LINE = b"age-encryption.org/v1\n"
ARMOR_BEGIN = b"-----BEGIN AGE ENCRYPTED FILE-----"
X25519_TAG = "X25519"
X25519_INFO = b"age-encryption.org/v1/X25519"

# Bounds from the profile's "Outer envelope" section.
MAX_X25519_STANZAS = 256
MAX_STANZAS = 512
MAX_HEADER_BYTES = 65_536
MAX_LINE_BYTES = 4_096
# GREASE grammar (profile: the bounds Rust age 0.12.1 emits).
MAX_GREASE_ARGS = 4
MAX_GREASE_ARG_BYTES = 8
MAX_GREASE_BODY_BYTES = 100

CHUNK_SIZE = 64 * 1024
_TAG_BYTES = 16
_CHUNK_CT = CHUNK_SIZE + _TAG_BYTES
_FILE_KEY_BYTES = 16
_NONCE_BYTES = 16
_MAC_BYTES = 32
_BODY_COLUMNS = 64
_ZERO_NONCE = bytes(12)
_FIRST_LAST_NONCE = bytes(11) + b"\x01"
_b2a_base64 = binascii.b2a_base64

_GREASE_TAG = re.compile(rb"[!-~]{1,8}-grease")
_VCHAR = re.compile(rb"[!-~]+")
_BASE64_CHARS = re.compile(rb"[A-Za-z0-9+/]*")


class AgeFormatError(WireError):
    """The age file breaks the profile's grammar or bounds; refused before decryption."""


class AgeDecryptError(WireError):
    """The age file is well formed but does not decrypt and authenticate."""


@dataclass(frozen=True, slots=True)
class Stanza:
    """One header stanza: its tag, further arguments and decoded body."""

    tag: str
    args: tuple[str, ...]
    body: bytes


@dataclass(frozen=True, slots=True)
class AgeHeader:
    """A parsed header. ``mac_input`` is every byte up to and including ``---``."""

    stanzas: tuple[Stanza, ...]
    mac_input: bytes
    mac: bytes
    payload_offset: int

    @property
    def x25519_stanzas(self) -> tuple[Stanza, ...]:
        return tuple(s for s in self.stanzas if s.tag == X25519_TAG)


# --- base64 ---------------------------------------------------------------


def _b64encode_unpadded(data: bytes) -> bytes:
    return binascii.b2a_base64(data, newline=False).rstrip(b"=")


def _b64decode_unpadded(text: bytes, field: str) -> bytes:
    """Decode age's canonical unpadded base64: no padding, no stray bits."""
    if not _BASE64_CHARS.fullmatch(text):
        raise AgeFormatError(field, "must be unpadded standard base64")
    if len(text) % 4 == 1:
        raise AgeFormatError(field, "base64 length is impossible")
    padded = text + b"=" * (-len(text) % 4)
    decoded = binascii.a2b_base64(padded, strict_mode=True)
    if _b64encode_unpadded(decoded) != text:
        raise AgeFormatError(field, "base64 is not canonical (non-zero trailing bits)")
    return decoded


# --- key derivation ---------------------------------------------------------


# HMAC's pads (RFC 2104) as byte-translation tables: ``key.translate(_IPAD)``
# XORs every byte of a block-sized key with 0x36 in one C call.
_IPAD = bytes(b ^ 0x36 for b in range(256))
_OPAD = bytes(b ^ 0x5C for b in range(256))
_BLOCK = 64  # SHA-256's block size in bytes
_sha256 = hashlib.sha256
# HKDF-Expand's first (and, for 32 bytes, only) block is HMAC(prk, info || 0x01).
_X25519_EXPAND = X25519_INFO + b"\x01"
_HEADER_EXPAND = b"header\x01"
_PAYLOAD_EXPAND = b"payload\x01"


def _hmac_sha256(key: bytes, message: bytes) -> bytes:
    """HMAC-SHA-256 (RFC 2104) over two OpenSSL SHA-256 one-shots.

    The same bytes as ``hmac.digest(key, message, "sha256")`` (a property
    test holds them equal, for keys shorter than, equal to and longer than
    the 64-byte block), but ``hmac.digest`` looks the digest up by name in
    OpenSSL on every call and costs about 3 µs; this costs about 2 µs, and
    an age-v1 seal computes 5 + 2 × recipients HMACs.
    """
    if len(key) > _BLOCK:
        key = _sha256(key).digest()
    block = key.ljust(_BLOCK, b"\x00")
    inner = _sha256(block.translate(_IPAD) + message).digest()
    return _sha256(block.translate(_OPAD) + inner).digest()


def _derive_key(salt: bytes, ikm: bytes, expand: bytes) -> bytes:
    """HKDF-SHA-256 of 32 bytes, with ``expand`` = info || 0x01 (RFC 5869):
    extract (PRK = HMAC(salt, ikm)), then the one expand block
    (HMAC(PRK, info || 0x01)). The seal derives 2 + recipients keys.
    Property-tested equal to :func:`_hkdf` on the library's HKDF."""
    return _hmac_sha256(_hmac_sha256(salt, ikm), expand)


def _hkdf(ikm: bytes, salt: bytes, info: bytes) -> bytes:
    """HKDF-SHA-256 (RFC 5869) of 32 bytes: extract, then one expand block.

    Two HMAC calls. ``cryptography``'s HKDF object computes the same bytes
    (a property test holds them equal) but spends about 8 µs building itself
    per call, and age-v1 derives three keys per seal and three per open.
    An empty salt is the RFC's default: HMAC pads any key shorter than its
    block with zeros, so ``b""`` and 32 zero bytes are the same key.
    """
    return _derive_key(salt, ikm, info + b"\x01")


def _header_mac(file_key: bytes, mac_input: bytes) -> bytes:
    """The header MAC: HMAC-SHA-256 keyed by HKDF(file_key, "", "header")."""
    return _hmac_sha256(_derive_key(b"", file_key, _HEADER_EXPAND), mac_input)


# --- header grammar ---------------------------------------------------------


def is_grease_tag(tag: bytes) -> bool:
    """True if ``tag`` is GREASE under the profile and not an active namespace."""
    if not _GREASE_TAG.fullmatch(tag):
        return False
    return not _is_active_namespace(tag)


def _is_active_namespace(tag: bytes) -> bool:
    return tag == b"scrypt" or tag.startswith((b"ssh-", b"plugin-"))


def _classify(tag: bytes, args: list[bytes], body: bytes, where: str) -> None:
    """Admit an X25519 or GREASE stanza; refuse everything else by name."""
    if tag == b"X25519":
        if len(args) != 1:
            raise AgeFormatError(where, "an X25519 stanza has exactly one argument")
        if len(_b64decode_unpadded(args[0], f"{where}.share")) != 32:
            raise AgeFormatError(f"{where}.share", "an X25519 share is 32 bytes")
        if len(body) != _FILE_KEY_BYTES + _TAG_BYTES:
            raise AgeFormatError(f"{where}.body", "an X25519 body is 32 bytes")
        return
    if _is_active_namespace(tag):
        kind = "plugin" if tag.startswith(b"plugin-") else tag.split(b"-")[0].decode()
        raise AgeFormatError(where, f"{kind} stanzas are not allowed by age-v1")
    if not is_grease_tag(tag):
        raise AgeFormatError(where, "stanza type is neither X25519 nor bounded GREASE")
    if len(args) > MAX_GREASE_ARGS:
        raise AgeFormatError(where, "a GREASE stanza has at most 4 arguments")
    if any(len(a) > MAX_GREASE_ARG_BYTES for a in args):
        raise AgeFormatError(where, "GREASE arguments are 1-8 bytes")
    if len(body) > MAX_GREASE_BODY_BYTES:
        raise AgeFormatError(f"{where}.body", "a GREASE body is at most 100 bytes")


class _Lines:
    """Bounded line reader over the header region of an untrusted buffer."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.pos = 0

    def next(self) -> bytes:
        start = self.pos
        limit = min(len(self._data), start + MAX_LINE_BYTES + 1)
        end = self._data.find(b"\n", start, limit)
        if end < 0:
            if limit - start > MAX_LINE_BYTES:
                raise AgeFormatError("age_file.header", "a header line exceeds 4096 bytes")
            raise AgeFormatError("age_file.header", "header is truncated (no MAC line)")
        if end + 1 > MAX_HEADER_BYTES:
            raise AgeFormatError("age_file.header", "header exceeds 65536 bytes")
        self.pos = end + 1
        return self._data[start:end]


def _read_body(lines: _Lines, where: str) -> bytes:
    """Collect 64-column body lines up to and including the closing short line."""
    parts: list[bytes] = []
    while True:
        line = lines.next()
        if line.startswith(b"-"):
            raise AgeFormatError(where, "stanza has no body")
        if len(line) > _BODY_COLUMNS:
            raise AgeFormatError(where, "body lines are at most 64 columns")
        parts.append(line)
        if len(line) < _BODY_COLUMNS:
            break
    return _b64decode_unpadded(b"".join(parts), f"{where}.body")


def parse_header(data: bytes) -> AgeHeader:
    """Parse and bound-check an age header; no cryptography happens here."""
    if data.startswith(ARMOR_BEGIN):
        raise AgeFormatError("age_file", "ASCII armor is not allowed; the file must be binary")
    if not data.startswith(VERSION_LINE):
        raise AgeFormatError("age_file", "must begin with the 'age-encryption.org/v1' line")
    lines = _Lines(data)
    lines.pos = len(VERSION_LINE)
    stanzas: list[Stanza] = []
    x25519_count = 0
    while True:
        line_start = lines.pos
        line = lines.next()
        if line.startswith(b"--- "):
            mac = _b64decode_unpadded(line[4:], "age_file.mac")
            if len(mac) != _MAC_BYTES:
                raise AgeFormatError("age_file.mac", "the header MAC is 32 bytes")
            break
        if not line.startswith(b"-> "):
            raise AgeFormatError("age_file.header", "expected a '-> ' stanza or the '--- ' MAC")
        if len(stanzas) == MAX_STANZAS:
            raise AgeFormatError("age_file.header", "more than 512 stanzas")
        where = f"age_file.stanza[{len(stanzas)}]"
        words = line[3:].split(b" ")
        if not all(_VCHAR.fullmatch(w) for w in words):
            raise AgeFormatError(where, "stanza arguments are non-empty VCHAR strings")
        tag, args = words[0], words[1:]
        if tag == b"X25519":
            x25519_count += 1
            if x25519_count > MAX_X25519_STANZAS:
                raise AgeFormatError("age_file.header", "more than 256 X25519 stanzas")
        body = _read_body(lines, where)
        _classify(tag, args, body, where)
        stanzas.append(Stanza(tag.decode("ascii"), tuple(a.decode("ascii") for a in args), body))
    if x25519_count == 0:
        raise AgeFormatError("age_file.header", "at least one X25519 stanza is required")
    return AgeHeader(
        stanzas=tuple(stanzas),
        mac_input=bytes(data[: line_start + 3]),
        mac=mac,
        payload_offset=lines.pos,
    )


def encode_stanza(stanza: Stanza) -> bytes:
    """Canonical stanza bytes: argument line, then 64-column unpadded base64 body."""
    line = " ".join((stanza.tag, *stanza.args)).encode("ascii")
    encoded = _b64encode_unpadded(stanza.body)
    rows = [encoded[i : i + _BODY_COLUMNS] for i in range(0, len(encoded), _BODY_COLUMNS)]
    if len(encoded) % _BODY_COLUMNS == 0:
        rows.append(b"")  # a full last row is closed by an empty one
    return b"-> " + line + b"\n" + b"\n".join(rows) + b"\n"


# --- STREAM -------------------------------------------------------------------


def _chunk_nonce(counter: int, last: bool) -> bytes:
    return counter.to_bytes(11, "big") + (b"\x01" if last else b"\x00")


def _stream_encrypt(key: bytes, plaintext: bytes) -> list[bytes]:
    aead = ChaCha20Poly1305(key)
    view = memoryview(plaintext)
    count = max(1, -(-len(plaintext) // CHUNK_SIZE))
    return [
        aead.encrypt(
            _chunk_nonce(i, i == count - 1), view[i * CHUNK_SIZE : (i + 1) * CHUNK_SIZE], None
        )
        for i in range(count)
    ]


def _stream_decrypt(key: bytes, payload: memoryview) -> bytes:
    if len(payload) < _TAG_BYTES:
        raise AgeDecryptError("age_file.payload", "payload is shorter than one chunk tag")
    count = -(-len(payload) // _CHUNK_CT)
    last_len = len(payload) - (count - 1) * _CHUNK_CT
    if last_len < _TAG_BYTES:
        raise AgeDecryptError("age_file.payload", "final chunk is truncated")
    if last_len == _TAG_BYTES and count > 1:
        raise AgeDecryptError("age_file.payload", "empty final chunk after a full chunk")
    aead = ChaCha20Poly1305(key)
    out: list[bytes] = []
    try:
        for i in range(count):
            chunk = payload[i * _CHUNK_CT : (i + 1) * _CHUNK_CT]
            out.append(aead.decrypt(_chunk_nonce(i, i == count - 1), chunk, None))
    except InvalidTag:
        raise AgeDecryptError("age_file.payload", "payload chunk failed authentication") from None
    return out[0] if count == 1 else b"".join(out)


# --- files ----------------------------------------------------------------------


def _wrap_key(file_key: bytes, recipient: X25519Recipient, secret: bytes) -> tuple[bytes, bytes]:
    """Wrap the file key to one recipient: ``(ephemeral share, stanza body)``.

    age-encryption.org/v1 "X25519 recipient stanza": a fresh ephemeral key
    per stanza (``secret``: 32 bytes of OS randomness, never reused), wrap
    key = HKDF(shared, share || recipient, X25519 info), body =
    ChaCha20-Poly1305 of the file key under a zero nonce.
    """
    # Ephemeral scalar straight from the OS CSPRNG: same distribution as
    # generate() (the key is clamped on use), but OpenSSL's keygen path costs
    # roughly 40% more here, and seal is dominated by these two X25519 ops.
    ephemeral = X25519PrivateKey.from_private_bytes(secret)
    share = ephemeral.public_key().public_bytes_raw()
    shared = ephemeral.exchange(recipient.public_key())
    wrap_key = _derive_key(share + recipient.public_bytes, shared, _X25519_EXPAND)
    return share, ChaCha20Poly1305(wrap_key).encrypt(_ZERO_NONCE, file_key, None)


def _wrap(file_key: bytes, recipient: X25519Recipient) -> Stanza:
    """One X25519 stanza as an object, with its own fresh ephemeral secret.

    :func:`encrypt` writes stanza bytes directly; this is the reference
    composition (with :func:`encode_stanza`) the tests craft files from and
    compare :func:`encrypt` against.
    """
    share, body = _wrap_key(file_key, recipient, os.urandom(32))
    return Stanza(X25519_TAG, (_b64encode_unpadded(share).decode("ascii"),), body)


def _unwrap(stanza: Stanza, identity: X25519Identity) -> bytes | None:
    share = _b64decode_unpadded(stanza.args[0].encode("ascii"), "age_file.share")
    try:
        peer = X25519Recipient.from_public_bytes(share)
        shared = identity.private_key().exchange(peer.public_key())
    except ValueError:
        return None  # low-order share: the exchange yields zero; not for us
    wrap_key = _hkdf(shared, share + identity.recipient.public_bytes, X25519_INFO)
    try:
        return ChaCha20Poly1305(wrap_key).decrypt(_ZERO_NONCE, stanza.body, None)
    except InvalidTag:
        return None


def encrypt(plaintext: bytes, recipients: Sequence[X25519Recipient]) -> bytes:
    """Encrypt to every recipient (1–256) as one binary age v1 file.

    Each X25519 stanza is written directly as the bytes :func:`encode_stanza`
    gives for it (a test holds them equal): a 32-byte share and a 32-byte
    body are 43 unpadded base64 characters each, so the body is one short
    line and needs no wrapping loop.
    """
    if not 1 <= len(recipients) <= MAX_X25519_STANZAS:
        raise AgeFormatError("recipients", "between 1 and 256 X25519 recipients are required")
    # One CSPRNG read, cut in the order the spec draws them: the file key,
    # one ephemeral secret per stanza, then the payload nonce.
    count = len(recipients)
    random = os.urandom(_FILE_KEY_BYTES + 32 * count + _NONCE_BYTES)
    file_key = random[:_FILE_KEY_BYTES]
    nonce = random[-_NONCE_BYTES:]
    parts = [VERSION_LINE]
    offset = _FILE_KEY_BYTES
    for recipient in recipients:
        share, body = _wrap_key(file_key, recipient, random[offset : offset + 32])
        offset += 32
        # b2a_base64 of 32 bytes is 43 characters and one "=": drop the "=".
        parts += (
            b"-> X25519 ",
            _b2a_base64(share, newline=False)[:43],
            b"\n",
            _b2a_base64(body, newline=False)[:43],
            b"\n",
        )
    parts.append(b"---")
    mac_input = b"".join(parts)
    mac = _header_mac(file_key, mac_input)
    payload_key = _derive_key(nonce, file_key, _PAYLOAD_EXPAND)
    if len(plaintext) <= CHUNK_SIZE:
        # One chunk, the last: counter 0, flag 1 (what _stream_encrypt writes).
        chunk = ChaCha20Poly1305(payload_key).encrypt(_FIRST_LAST_NONCE, plaintext, None)
        return b"".join(
            (mac_input, b" ", _b2a_base64(mac, newline=False)[:43], b"\n", nonce, chunk)
        )
    chunks = _stream_encrypt(payload_key, plaintext)
    return b"".join((mac_input, b" ", _b64encode_unpadded(mac), b"\n", nonce, *chunks))


def decrypt(data: bytes, identity: X25519Identity) -> bytes:
    """Decrypt a profile-conforming age file with exactly one identity.

    The identity is tried against each X25519 stanza of this one file (that is
    how age addresses recipients); no other identity is ever tried.
    """
    header = parse_header(data)
    file_key: bytes | None = None
    for stanza in header.x25519_stanzas:
        file_key = _unwrap(stanza, identity)
        if file_key is not None:
            break
    if file_key is None:
        raise AgeDecryptError("age_file", "no X25519 stanza is addressed to this identity")
    if not hmac.compare_digest(_header_mac(file_key, header.mac_input), header.mac):
        raise AgeDecryptError("age_file.mac", "header MAC does not verify")
    view = memoryview(data)
    nonce_end = header.payload_offset + _NONCE_BYTES
    if len(view) < nonce_end:
        raise AgeDecryptError("age_file.payload", "payload nonce is truncated")
    nonce = bytes(view[header.payload_offset : nonce_end])
    return _stream_decrypt(_hkdf(file_key, nonce, b"payload"), view[nonce_end:])
