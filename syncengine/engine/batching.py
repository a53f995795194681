"""Grouping push candidates into POST batches (pure).

server/spec/v1.md "POST /v1/messages": 1..1000 messages and at most 2 MiB of
request body. A batch here is bounded by count (≤ 1000) and by an upper
bound of its serialized bytes (≤ :data:`~syncengine.engine.limits.BATCH_BYTE_BUDGET`),
so a planned batch never needs the relay's 413 to be split; the 413 halving
in :mod:`syncengine.engine.cycle` remains for relays (or proxies) with a
smaller cap. Order is preserved: the push cursor only advances over a
contiguous acknowledged prefix, so sending later positions first would
gain nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from syncengine.engine.limits import BATCH_BYTE_BUDGET
from syncengine.ops.sync_records import SyncPushCandidate
from wire.limits import MAX_BATCH

__all__ = ["ITEM_OVERHEAD_BYTES", "item_bytes", "plan_batches"]

#: ``{"id":"<36>","envelope":{"v":1,"cipher":"","key_id":null,"blob":""}}`` plus
#: the separating comma, rounded up generously.
ITEM_OVERHEAD_BYTES = 128


def item_bytes(candidate: SyncPushCandidate) -> int:
    """An upper bound of one candidate's bytes inside the request body.

    Blob text is ASCII base64; cipher and key_id are short and need no
    escaping beyond their quotes (key_id excludes control characters).
    """
    envelope = candidate.envelope
    key = 0 if envelope.key_id is None else len(envelope.key_id.encode("utf-8"))
    return ITEM_OVERHEAD_BYTES + len(envelope.blob) + len(envelope.cipher) + key


def plan_batches(
    candidates: Sequence[SyncPushCandidate],
    *,
    max_count: int = MAX_BATCH,
    max_bytes: int = BATCH_BYTE_BUDGET,
) -> list[list[SyncPushCandidate]]:
    """Consecutive batches, each within both bounds (a single item over the
    byte bound still gets a batch of its own: the relay decides, 413 reports)."""
    if not 1 <= max_count <= MAX_BATCH:
        raise ValueError(f"max_count must be within 1..{MAX_BATCH}")
    batches: list[list[SyncPushCandidate]] = []
    current: list[SyncPushCandidate] = []
    size = 0
    for candidate in candidates:
        cost = item_bytes(candidate)
        if current and (len(current) >= max_count or size + cost > max_bytes):
            batches.append(current)
            current, size = [], 0
        current.append(candidate)
        size += cost
    if current:
        batches.append(current)
    return batches
