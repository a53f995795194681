"""Batch admission for ``POST /v1/messages`` as a pure function.

v1.md "POST /v1/messages" fixes the order of decisions inside the batch
transaction, and this module is that order with the storage taken out:

1. every input ID is looked up (live rows and permanent tombstones alike);
2. an existing ID whose envelope digest differs — or an ID repeated inside
   the batch with differing envelopes — makes the whole batch 409, and an
   identical replay is a duplicate ack whatever the current policy says;
3. only then are *new* IDs checked: a version/cipher the relay cannot store
   is 422, a recognized cipher outside the team policy is 403;
4. before any allocation, ``K`` distinct new IDs must fit below the signed
   64-bit maximum, else 507 (v1.md "Team sequence allocation", step 4);
5. sequences are assigned in first-occurrence input order.

Digest equality stands in for canonical-byte equality: the digest preimage
is length-prefixed over ``v``, ``cipher``, ``key_id`` and the decoded blob,
and canonical base64 is a bijection, so two envelopes have equal digests
exactly when their RFC 8785 bytes are equal (up to SHA-256 collisions, a
risk the spec accepts). Storage wraps :func:`plan_batch` in one transaction.

It lives in ``relay.storage`` because storage is its only caller and it
decides over storage's own records (``IncomingMessage``, ``Ack``): as a
module beside the package they imported each other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from relay.errors import (
    CipherPolicyViolation,
    MessageUuidConflict,
    SequenceExhausted,
    UnsupportedCipher,
)
from relay.limits import ACCEPTED_ENVELOPE_VERSIONS, MAX_SEQ, STORABLE_CIPHERS
from relay.storage.records import Ack, IncomingMessage, PolicyEntry


@dataclass(frozen=True, slots=True)
class ExistingId:
    """A stored wire ID: its digest and original sequence (live or tombstone)."""

    digest: bytes
    team_seq: int


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """The rows to insert (sequence, message) and the complete ack list."""

    inserts: tuple[tuple[int, IncomingMessage], ...]
    acks: tuple[Ack, ...]
    new_current_seq: int


def plan_batch(
    batch: Sequence[IncomingMessage],
    existing: Mapping[str, ExistingId],
    policy: PolicyEntry,
    current_seq: int,
) -> BatchPlan:
    """Decide a whole batch or raise the one error the spec orders first."""
    # Step 2: conflicts, against storage and within the batch.
    first_digest: dict[str, bytes] = {}
    for message in batch:
        known = existing.get(message.wire_id)
        if known is not None and known.digest != message.digest:
            raise MessageUuidConflict(details={"id": message.wire_id})
        earlier = first_digest.setdefault(message.wire_id, message.digest)
        if earlier != message.digest:
            raise MessageUuidConflict(details={"id": message.wire_id})

    # Step 3: admission of new IDs only.
    new_ids: list[IncomingMessage] = []
    seen_new: set[str] = set()
    for message in batch:
        if message.wire_id in existing or message.wire_id in seen_new:
            continue
        seen_new.add(message.wire_id)
        _admit_new(message, policy)
        new_ids.append(message)

    # Step 4: exhaustion preflight, before any allocation.
    if len(new_ids) > MAX_SEQ - current_seq:
        raise SequenceExhausted(
            details={"current_seq": str(current_seq), "new_messages": len(new_ids)}
        )

    # Step 5: allocate in first-occurrence order, then map every input.
    assigned: dict[str, int] = {}
    inserts: list[tuple[int, IncomingMessage]] = []
    seq = current_seq
    for message in new_ids:
        seq += 1
        assigned[message.wire_id] = seq
        inserts.append((seq, message))
    acks: list[Ack] = []
    stored: set[str] = set()
    for message in batch:
        known = existing.get(message.wire_id)
        if known is not None:
            acks.append(Ack(message.wire_id, known.team_seq, "duplicate"))
        elif message.wire_id in stored:
            acks.append(Ack(message.wire_id, assigned[message.wire_id], "duplicate"))
        else:
            stored.add(message.wire_id)
            acks.append(Ack(message.wire_id, assigned[message.wire_id], "stored"))
    return BatchPlan(tuple(inserts), tuple(acks), seq)


def _admit_new(message: IncomingMessage, policy: PolicyEntry) -> None:
    envelope = message.envelope
    details: dict[str, object] = {
        "id": message.wire_id,
        "v": envelope.v,
        "cipher": envelope.cipher,
        "write_allowed_ciphers": list(policy.write_allowed_ciphers),
        "policy_revision": str(policy.policy_revision),
    }
    if envelope.v not in ACCEPTED_ENVELOPE_VERSIONS or envelope.cipher not in STORABLE_CIPHERS:
        details["accepted_envelope_versions"] = list(ACCEPTED_ENVELOPE_VERSIONS)
        raise UnsupportedCipher(details=details)
    if envelope.v not in policy.accepted_envelope_versions or (
        envelope.cipher not in policy.write_allowed_ciphers
    ):
        raise CipherPolicyViolation(details=details)
