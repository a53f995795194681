"""The sealed envelope ``{v, cipher, key_id, blob}`` and its digests.

server/spec/v1.md "Message representation and encryption envelope": all four
members are required; ``blob`` is canonical padded RFC 4648 base64 of at
most 1 MiB (and at most the team's ``max_blob_bytes``); conflict equality is
byte equality of the RFC 8785 encoding of the four members; the idempotency
digest is SHA-256 over the ``agmsg-envelope-v1`` length-prefixed preimage
("Team sequence allocation and visibility").

The envelope is opaque here: nothing in this module looks inside the blob.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from dataclasses import dataclass, field
from typing import Any

from wire import jcs
from wire.errors import EnvelopeError, SchemaError
from wire.limits import MAX_BLOB_BYTES, MAX_BLOB_CHARS
from wire.scalars import check_cipher, check_key_id
from wire.schema import expect_int, expect_object, expect_str, join_field

__all__ = ["DIGEST_DOMAIN", "Envelope", "decode_blob", "encode_blob"]

#: Domain separator of the idempotency digest preimage (v1.md).
DIGEST_DOMAIN = b"agmsg-envelope-v1\x00"

#: A frozenset, so :func:`~wire.schema.expect_object` does not build one per envelope.
_ENVELOPE_MEMBERS = frozenset(("v", "cipher", "key_id", "blob"))
_U32 = struct.Struct(">I")
_U32_MAX = 2**32 - 1


def encode_blob(data: bytes) -> str:
    """Opaque bytes → canonical padded base64 text."""
    return base64.b64encode(data).decode("ascii")


def decode_blob(text: str, field: str, max_bytes: int = MAX_BLOB_BYTES) -> bytes:
    """Canonical padded base64 → bytes, refusing every non-canonical spelling.

    Canonical means: only the RFC 4648 alphabet, correct ``=`` padding, no
    whitespace, and zero unused bits in the final quantum (so each byte
    string has exactly one accepted text).
    """
    limit = min(max_bytes, MAX_BLOB_BYTES)
    if not text:
        raise EnvelopeError(field, "blob must not be empty")
    if len(text) > 4 * ((limit + 2) // 3) or len(text) > MAX_BLOB_CHARS:
        raise EnvelopeError(field, f"blob decodes to more than {limit} bytes")
    if len(text) % 4:
        raise EnvelopeError(field, "blob length must be a multiple of 4 (canonical padding)")
    try:
        raw = text.encode("ascii")
        data = binascii.a2b_base64(raw, strict_mode=True)
    except (UnicodeEncodeError, binascii.Error):
        raise EnvelopeError(field, "blob must be canonical padded base64") from None
    if len(raw) != 4 * ((len(data) + 2) // 3):
        # binascii's strict mode still accepts "====" after a full quantum.
        raise EnvelopeError(field, "blob base64 has excess padding (non-canonical)")
    tail = len(data) % 3
    if tail and raw[-4:] != base64.b64encode(data[-tail:]):
        raise EnvelopeError(field, "blob base64 has non-zero padding bits (non-canonical)")
    if len(data) > limit:
        raise EnvelopeError(field, f"blob decodes to more than {limit} bytes")
    return data


@dataclass(frozen=True, slots=True)
class Envelope:
    """One immutable sealed envelope as it travels and as it is stored.

    Construct it through :meth:`from_obj` (untrusted JSON) or
    :meth:`from_blob_bytes` (a profile that just sealed); both validate.
    ``blob_data`` caches the decoded bytes so digests and opening never
    decode twice; it takes no part in equality.
    """

    v: int
    cipher: str
    key_id: str | None
    blob: str
    blob_data: bytes = field(default=b"", compare=False, repr=False)

    @classmethod
    def from_obj(
        cls, value: Any, field: str = "envelope", max_blob_bytes: int = MAX_BLOB_BYTES
    ) -> Envelope:
        """Validate an untrusted JSON object (exact member set) into an Envelope."""
        # Members are checked under their own names and the path is prefixed
        # only on failure: pages parse thousands of envelopes.
        try:
            obj = expect_object(value, "", _ENVELOPE_MEMBERS)
            v = expect_int(obj["v"], "v", minimum=0, maximum=_U32_MAX)
            cipher = check_cipher(obj["cipher"], "cipher")
            key_id = check_key_id(obj["key_id"], "key_id")
            blob = expect_str(obj["blob"], "blob")
            data = decode_blob(blob, "blob", max_blob_bytes)
        except SchemaError as exc:
            raise EnvelopeError(join_field(field, exc.field), exc.rule) from None
        return cls(v, cipher, key_id, blob, data)

    @classmethod
    def from_blob_bytes(
        cls,
        cipher: str,
        key_id: str | None,
        data: bytes,
        *,
        v: int = 1,
        max_blob_bytes: int = MAX_BLOB_BYTES,
    ) -> Envelope:
        """Wrap freshly sealed bytes, enforcing the same limits a reader applies."""
        try:
            expect_int(v, "envelope.v", minimum=0, maximum=_U32_MAX)
            check_cipher(cipher, "envelope.cipher")
            check_key_id(key_id, "envelope.key_id")
        except SchemaError as exc:
            raise EnvelopeError(exc.field, exc.rule) from None
        limit = min(max_blob_bytes, MAX_BLOB_BYTES)
        if not data:
            raise EnvelopeError("envelope.blob", "blob must not be empty")
        if len(data) > limit:
            raise EnvelopeError("envelope.blob", f"blob is {len(data)} bytes; the limit is {limit}")
        return cls(v, cipher, key_id, encode_blob(data), data)

    @classmethod
    def from_json(cls, data: bytes | str, max_blob_bytes: int = MAX_BLOB_BYTES) -> Envelope:
        """Strict JSON text → Envelope."""
        return cls.from_obj(jcs.loads(data), "envelope", max_blob_bytes)

    def to_obj(self) -> dict[str, Any]:
        return {"v": self.v, "cipher": self.cipher, "key_id": self.key_id, "blob": self.blob}

    def canonical_bytes(self) -> bytes:
        """RFC 8785 bytes of the four members: the conflict-equality key."""
        return jcs.canonicalize(self.to_obj())

    def blob_bytes(self) -> bytes:
        """The decoded opaque blob."""
        if self.blob_data or not self.blob:
            return self.blob_data
        return decode_blob(self.blob, "envelope.blob")

    def digest(self) -> bytes:
        """SHA-256 idempotency digest over the ``agmsg-envelope-v1`` preimage.

        Preimage (v1.md): domain ‖ u32 v ‖ u32 len ‖ cipher ‖ (0x00 for a
        null key_id, else 0x01 ‖ u32 len ‖ key_id) ‖ u32 len ‖ blob bytes.
        The blob is fed to the hash in place, never copied into the preimage.
        """
        data = self.blob_bytes()
        cipher = self.cipher.encode("utf-8")
        if self.key_id is None:
            key_part = b"\x00"
        else:
            key_id = self.key_id.encode("utf-8")
            key_part = b"\x01" + _U32.pack(len(key_id)) + key_id
        hasher = hashlib.sha256(
            DIGEST_DOMAIN
            + _U32.pack(self.v)
            + _U32.pack(len(cipher))
            + cipher
            + key_part
            + _U32.pack(len(data))
        )
        hasher.update(data)
        return hasher.digest()

    @property
    def blob_size(self) -> int:
        """Decoded blob length: the only size the relay may see."""
        return len(self.blob_bytes())
