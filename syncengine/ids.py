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

__all__ = ["new_uuid4", "new_uuid4s", "new_uuid7", "new_uuid7s"]

_lock = threading.Lock()
_last_ms = -1
_counter = 0


def new_uuid4() -> str:
    """A random (CSPRNG) UUIDv4 in lowercase canonical form.

    Built directly from 16 random bytes with the version and variant bits set
    (RFC 9562 §5.4): one is minted per pushed message, and this is several
    times cheaper than going through :class:`uuid.UUID`.
    """
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def new_uuid4s(count: int) -> list[str]:
    """``count`` random UUIDv4s, exactly as :func:`new_uuid4` mints each, from
    one read of the CSPRNG: a prepare mints one per message of a 1,000-message
    chunk, and one ``os.urandom`` call per ID was most of the cost."""
    pool = bytearray(os.urandom(16 * count))
    ids: list[str] = []
    for start in range(0, 16 * count, 16):
        pool[start + 6] = (pool[start + 6] & 0x0F) | 0x40
        pool[start + 8] = (pool[start + 8] & 0x3F) | 0x80
        h = pool[start : start + 16].hex()
        ids.append(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    return ids


def new_uuid7() -> str:
    """A time-ordered UUIDv7 in lowercase canonical form.

    Within one process the IDs are strictly increasing even when several are
    minted in the same millisecond (RFC 9562 §6.2 method 1, 12-bit counter
    seeded randomly each millisecond); if the counter overflows the
    timestamp is advanced by one millisecond rather than repeating a value.
    """
    return new_uuid7s(1)[0]


def new_uuid7s(count: int) -> list[str]:
    """``count`` UUIDv7s, increasing, minted under one lock and one read of
    the random source (batched sends mint thousands at once)."""
    global _last_ms, _counter
    tails = os.urandom(8 * count)
    stamps: list[tuple[int, int]] = []
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        for _ in range(count):
            if now_ms > _last_ms:
                _last_ms = now_ms
                _counter = int.from_bytes(os.urandom(2), "big") & 0x07FF
            else:
                _counter += 1
                if _counter > 0x0FFF:
                    _last_ms += 1
                    _counter = int.from_bytes(os.urandom(2), "big") & 0x07FF
            stamps.append((_last_ms, _counter))
    ids: list[str] = []
    mask = (1 << 62) - 1
    for index, (ms, counter) in enumerate(stamps):
        tail = int.from_bytes(tails[8 * index : 8 * index + 8], "big") & mask
        value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | counter << 64 | 0b10 << 62 | tail
        text = f"{value:032x}"
        ids.append(f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}")
    return ids
