"""The age-v1 plaintext frame and its canonical binding context.

docs/spec/age-v1-profile.md, "Plaintext frame" and "Canonical authenticated
binding context". Everything is big-endian and has no trailing bytes::

    frame   = magic(16) ‖ u32 context_length ‖ context ‖ u32 message_length ‖ message
    context = u32 protocol_version ‖ team_id(16) ‖ wire_id(16)
              ‖ u16 len ‖ cipher ‖ u16 len ‖ key_id

:func:`split_frame` checks each declared length against the bytes that remain
*before* slicing, so a hostile length never drives an allocation. It does not
judge the message bytes: a zero-length message is a structurally complete
frame whose message is then invalid (``malformed``), while a length that
overruns the frame or leaves bytes behind is a frame failure
(``authentication_failed``), exactly as the conformance vectors expect.
"""

from __future__ import annotations

import re
import struct

from wire.errors import WireError

__all__ = [
    "CONTEXT_MAX_BYTES",
    "CONTEXT_MIN_BYTES",
    "MAGIC",
    "FrameError",
    "build_context",
    "encode_frame",
    "split_frame",
]

MAGIC = b"agmsg-age-v1\x00\x00\x00\x00"
#: 4 + 16 + 16 + 2 + 6 + 2 + key_id (1..64 bytes).
CONTEXT_MIN_BYTES = 47
CONTEXT_MAX_BYTES = 110
_MAX_KEY_ID_BYTES = 64
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class FrameError(WireError):
    """Decrypted bytes are not one well-formed age-v1 frame."""


def _uuid_bytes(text: str, field: str) -> bytes:
    """RFC 9562 bytes in network order of a lowercase canonical UUID string."""
    if not isinstance(text, str) or _CANONICAL_UUID.fullmatch(text) is None:
        raise FrameError(field, "must be a lowercase canonical UUID")
    return bytes.fromhex(text.replace("-", ""))


def build_context(
    protocol_version: int, team_id: str, wire_id: str, cipher: str, key_id: str
) -> bytes:
    """The canonical binding context for one envelope (47–110 bytes)."""
    if isinstance(protocol_version, bool) or not 0 <= protocol_version <= 0xFFFFFFFF:
        raise FrameError("protocol_version", "must fit an unsigned 32-bit integer")
    cipher_bytes = cipher.encode("utf-8")
    key_bytes = key_id.encode("utf-8")
    if len(cipher_bytes) > 0xFFFF:
        raise FrameError("cipher", "must be at most 65535 bytes")
    if not 1 <= len(key_bytes) <= _MAX_KEY_ID_BYTES:
        raise FrameError("key_id", "must be 1-64 bytes")
    return b"".join(
        (
            _U32.pack(protocol_version),
            _uuid_bytes(team_id, "team_id"),
            _uuid_bytes(wire_id, "wire_id"),
            _U16.pack(len(cipher_bytes)),
            cipher_bytes,
            _U16.pack(len(key_bytes)),
            key_bytes,
        )
    )


def encode_frame(context: bytes, message: bytes) -> bytes:
    """Frame a context and canonical message bytes."""
    return b"".join((MAGIC, _U32.pack(len(context)), context, _U32.pack(len(message)), message))


def split_frame(frame: bytes) -> tuple[bytes, bytes]:
    """Return ``(context, message)``; raise :class:`FrameError` on any framing fault."""
    size = len(frame)
    if size < len(MAGIC) + 4 or frame[: len(MAGIC)] != MAGIC:
        raise FrameError("frame.magic", "must start with 'agmsg-age-v1' and four zero bytes")
    offset = len(MAGIC)
    (context_length,) = _U32.unpack_from(frame, offset)
    offset += 4
    if not CONTEXT_MIN_BYTES <= context_length <= CONTEXT_MAX_BYTES:
        raise FrameError("frame.context_length", "must be 47-110 bytes")
    if context_length > size - offset:
        raise FrameError("frame.context_length", "exceeds the bytes remaining")
    context = frame[offset : offset + context_length]
    offset += context_length
    if size - offset < 4:
        raise FrameError("frame.message_length", "is missing")
    (message_length,) = _U32.unpack_from(frame, offset)
    offset += 4
    remaining = size - offset
    if message_length > remaining:
        raise FrameError("frame.message_length", "exceeds the bytes remaining")
    if message_length < remaining:
        raise FrameError("frame", "has bytes after the declared message")
    return bytes(context), bytes(frame[offset:])
