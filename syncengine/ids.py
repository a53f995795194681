"""Identifier minting for the local store.

Local message IDs, team IDs and member IDs are UUIDv7 (driver-interface §2.5,
server/spec/v1.md "Scope and conventions"); the driver generation is a random
UUIDv4. Python 3.11 has no ``uuid.uuid7``, so this module builds one from the
RFC 9562 layout: 48 bits of Unix milliseconds, the version nibble, 12 bits
that keep IDs minted in the same millisecond by this process strictly
increasing, the variant bits, and 62 random bits. Output is always the
lowercase canonical text form.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

__all__ = ["new_uuid4", "new_uuid7"]

_lock = threading.Lock()
_last_ms = -1
_counter = 0


def new_uuid4() -> str:
    """A random (CSPRNG) UUIDv4 in lowercase canonical form."""
    return str(uuid.UUID(bytes=os.urandom(16), version=4))


def new_uuid7() -> str:
    """A time-ordered UUIDv7 in lowercase canonical form.

    Within one process the IDs are strictly increasing even when several are
    minted in the same millisecond (RFC 9562 §6.2 method 1, 12-bit counter
    seeded randomly each millisecond); if the counter overflows the
    timestamp is advanced by one millisecond rather than repeating a value.
    """
    global _last_ms, _counter
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms > _last_ms:
            _last_ms = now_ms
            _counter = int.from_bytes(os.urandom(2), "big") & 0x07FF
        else:
            _counter += 1
            if _counter > 0x0FFF:
                _last_ms += 1
                _counter = int.from_bytes(os.urandom(2), "big") & 0x07FF
        ms = _last_ms
        counter = _counter
    tail = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | counter << 64 | 0b10 << 62 | tail
    return str(uuid.UUID(int=value))
