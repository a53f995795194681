"""``prepare_push``: publish durable wire reservations, then emit them
(message-synchronization.md "Prepare push"; ADR 0005 "Local durability is
authoritative"; specs/sync-stage1.md §4.1).

Three steps, two kinds of transaction:

1. ``prepare.begin`` (one transaction) opens the binding and takes the work
   list from one snapshot: every published, unacknowledged reservation (to
   re-emit byte for byte), then — when ``allow_new`` — the next local-origin
   positions of the team and any blocked position a larger blob limit might
   now admit.
2. Sealing happens outside any transaction. Each new position gets a fresh
   random UUIDv4 minted *privately*: until step 3 commits, nothing outside
   this process has seen it. A crash here (``prepare.sealed``) abandons it;
   the next call seals again under a new wire ID.
3. ``prepare.publish`` (one transaction per chunk) inserts wire ID and the
   complete envelope together. From that commit on the envelope is reused
   forever and never re-sealed, even if the cipher or key changes.

A message that cannot fit the blob limit becomes a durable ``blocked``
reservation (visible in status, holding the push cursor) instead of
wedging the operation; it is retried only when a larger limit is offered.
Imported messages (``origin = 'imported'``) are never candidates: the only
query that finds new positions reads the ``origin = 'local'`` index
(agmsg #949).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from syncengine import ids
from syncengine.crash import crash_point
from syncengine.ops.bindings import BindingKey, SyncBinding, open_binding, sync_transaction
from syncengine.ops.history_counts import add_history
from syncengine.ops.states import (
    RESERVATION_STATES,
    ReservationEvent,
    ReservationState,
    reservation_next,
)
from syncengine.ops.sync_records import AGE_V1, SyncPrepare, SyncPushCandidate, SyncState
from syncengine.store.bulk import dense
from syncengine.store.connection import Row, one_row
from syncengine.store.errors import InvalidInput
from syncengine.store.event_log import canonical_at
from wire.envelope import Envelope, encode_blob
from wire.errors import WireError
from wire.limits import ENVELOPE_VERSION, MAX_BLOB_BYTES, MAX_BODY_BYTES
from wire.message import Message
from wire.profiles import Binding, SealParams, seal
from wire.scalars import check_agent_name, check_timestamp

if TYPE_CHECKING:
    import apsw

__all__ = [
    "MAX_PREPARE_LIMIT",
    "PUBLISH_CHUNK_BLOB_CHARS",
    "PUBLISH_CHUNK_MESSAGES",
    "BlockedSeal",
    "LocalMessage",
    "PrepareResult",
    "SealAll",
    "Sealed",
    "check_limit",
    "plan_publish",
    "prepare_push",
    "seal_local",
    "seal_none_chunk",
]

#: Candidates per call (the engine asks for 100 steady, 1000 catching up).
MAX_PREPARE_LIMIT = 1000
#: A publish transaction holds at most this many reservations …
PUBLISH_CHUNK_MESSAGES = 1000
#: … and at most this much envelope text, so memory stays bounded.
PUBLISH_CHUNK_BLOB_CHARS = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class LocalMessage:
    """A local-origin message at a position that has no published reservation."""

    position: int
    local_id: str
    body: str
    at: str
    sender: str
    recipient: str


@dataclass(frozen=True, slots=True)
class Sealed:
    """A privately sealed candidate: not durable, not observable, until published."""

    message: LocalMessage
    wire_id: str
    envelope: Envelope


@dataclass(frozen=True, slots=True)
class BlockedSeal:
    """Sealing showed the message cannot fit ``limit`` (or cannot be sealed at all)."""

    message: LocalMessage
    limit: int
    reason: str


@dataclass(frozen=True, slots=True)
class PrepareResult:
    state: SyncState
    candidates: tuple[SyncPushCandidate, ...]
    blocked: tuple[BlockedSeal, ...]

    def records(self) -> list[dict[str, Any]]:
        return [self.state.to_obj(), *(c.to_obj() for c in self.candidates)]


def check_limit(limit: object, field: str = "limit") -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PREPARE_LIMIT:
        raise InvalidInput(field, f"must be an integer in 1..{MAX_PREPARE_LIMIT}")
    return limit


# -- pure core ------------------------------------------------------------------------


def seal_local(
    message: LocalMessage, request: SyncPrepare, key: BindingKey
) -> Sealed | BlockedSeal:
    """Seal one message under a freshly minted private wire ID.

    Any refusal of the codec for *this message* (too large for the limit,
    or — defensively — not a valid v1 plaintext) blocks the message rather
    than the operation. A size refusal below the protocol maximum records
    the limit it failed under, so a larger server limit can retry it.
    """
    wire_id = ids.new_uuid4()
    try:
        plaintext = Message(
            message.body, canonical_at(message.at), message.sender, message.recipient
        )
    except WireError as exc:
        return BlockedSeal(message, MAX_BLOB_BYTES, f"not a valid v1 message: {exc}")
    if request.cipher == "none":
        # The plaintext profile binds nothing: its blob is the canonical
        # message alone (v1.md "Message representation"), so the per-message
        # binding an authenticated profile needs is not built for it.
        params = SealParams(key_id=request.key_id, max_blob_bytes=request.max_blob_bytes)
    else:
        params = SealParams(
            binding=Binding(
                team_id=key.remote_team_id, wire_id=wire_id, protocol_version=key.protocol_version
            ),
            key_id=request.key_id,
            recipients=request.recipients,
            max_blob_bytes=request.max_blob_bytes,
        )
    try:
        envelope = seal(plaintext, request.cipher, params)
    except WireError as exc:
        return BlockedSeal(message, request.max_blob_bytes, str(exc))
    return Sealed(message, wire_id, envelope)


#: ``json.encoder``'s C string encoder (``ensure_ascii=False``): exactly the
#: escapes :meth:`Message.to_jcs` writes, one string at a time.
_encode_string: Callable[[str], str] = json.encoder.encode_basestring


def _judged_json(
    verdicts: dict[str, str | None], check: Callable[[str, str], object], value: str
) -> str | None:
    """``value`` as a JSON string when ``check`` accepts it, else ``None``;
    each distinct value of a chunk is judged once (the verdict is a pure
    function of the text)."""
    if value not in verdicts:
        try:
            check(value, "message")
        except WireError:
            verdicts[value] = None
        else:
            verdicts[value] = _encode_string(value)
    return verdicts[value]


def _canonical_plaintext(
    message: LocalMessage, names: dict[str, str | None], stamps: dict[str, str | None]
) -> bytes | None:
    """The RFC 8785 bytes :meth:`Message.to_jcs` writes for ``message``, or
    ``None`` when a v1 plaintext rule might refuse it (:func:`seal_local`
    then seals it alone and gives the reference's refusal).

    The rules are the plaintext's own functions: each distinct agent name
    and timestamp of a chunk is judged once by :func:`check_agent_name` /
    :func:`check_timestamp` (``names`` and ``stamps`` hold the verdicts), the
    body by the size and encodability rules of ``Message``, and the members
    are written by the C string encoder that method uses.
    """
    body = message.body
    stamp = _judged_json(stamps, check_timestamp, canonical_at(message.at))
    sender = _judged_json(names, check_agent_name, message.sender)
    recipient = _judged_json(names, check_agent_name, message.recipient)
    if (
        stamp is None
        or sender is None
        or recipient is None
        or type(body) is not str
        or not body
        # Four UTF-8 bytes at most per character: within the body limit
        # without encoding it (a longer body takes the reference path).
        or len(body) > MAX_BODY_BYTES // 4
    ):
        return None
    text = (
        f'{{"body":{_encode_string(body)},"created_at":{stamp},'
        f'"from_agent":{sender},"to_agent":{recipient}}}'
    )
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: the reference refuses it
        return None


def seal_chunk(
    messages: Sequence[LocalMessage], request: SyncPrepare, key: BindingKey
) -> list[Sealed | BlockedSeal]:
    """:func:`seal_local` of every message of a chunk, message by message the
    same envelope or refusal, in one pass for the ``none`` and ``age-v1``
    profiles (any other cipher is sealed message by message)."""
    if request.cipher == "none":
        return seal_none_chunk(messages, request, key)
    if request.cipher == AGE_V1:
        return seal_age_chunk(messages, request, key)
    return [seal_local(message, request, key) for message in messages]


def seal_none_chunk(
    messages: Sequence[LocalMessage], request: SyncPrepare, key: BindingKey
) -> list[Sealed | BlockedSeal]:
    """:func:`seal_local` of every message of a ``none`` chunk, in one pass.

    Per message this is the same work — a fresh private UUIDv4, the v1
    plaintext rules (``Message``), the canonical bytes, the blob limit —
    without building the ``Message``, its ``SealParams`` and the profile
    call for each (v1.md "Message representation": the ``none`` blob is the
    RFC 8785 message alone, ``key_id`` null; :func:`_canonical_plaintext`).
    A message any rule would refuse, or whose blob would exceed the limit,
    is left to :func:`seal_local` itself, so its refusal (reason and
    recorded limit) is exactly the reference's;
    ``tests/syncengine/ops/test_throughput_paths.py`` pins the bytes against
    ``wire.profiles.seal`` over random messages.
    """
    if request.cipher != "none" or request.key_id is not None:
        return [seal_local(message, request, key) for message in messages]
    limit = min(request.max_blob_bytes, MAX_BLOB_BYTES)
    names: dict[str, str | None] = {}
    stamps: dict[str, str | None] = {}
    out: list[Sealed | BlockedSeal] = []
    append = out.append
    for message, wire_id in zip(messages, ids.new_uuid4s(len(messages)), strict=True):
        data = _canonical_plaintext(message, names, stamps)
        if data is None or len(data) > limit:
            append(seal_local(message, request, key))
            continue
        append(
            Sealed(
                message, wire_id, Envelope(ENVELOPE_VERSION, "none", None, encode_blob(data), data)
            )
        )
    return out


def seal_age_chunk(
    messages: Sequence[LocalMessage], request: SyncPrepare, key: BindingKey
) -> list[Sealed | BlockedSeal]:
    """:func:`seal_local` of every message of an ``age-v1`` chunk, in one pass.

    The epoch manifest is parsed once for the chunk rather than once per
    message, the wire IDs come from one CSPRNG read, and each plaintext is
    written by :func:`_canonical_plaintext` and sealed by
    :func:`wire.age_profile.seal_canonical` — the profile's own binding
    rule, frame, age file and limit (issue #17: age-v1 prepare beside bare
    seals). A request the manifest refuses, and a message a plaintext rule
    might refuse, take :func:`seal_local`, so every refusal is the
    reference's; a test pins the envelopes byte for byte under the same
    randomness.
    """
    # start-up pin (CRYPTO): only this path loads wire.age_profile
    from wire.age_profile import EpochManifest, seal_canonical

    if request.cipher != AGE_V1 or request.key_id is None:
        return [seal_local(message, request, key) for message in messages]
    try:
        manifest = EpochManifest.from_strings(request.key_id, request.recipients)
    except WireError:
        return [seal_local(message, request, key) for message in messages]
    names: dict[str, str | None] = {}
    stamps: dict[str, str | None] = {}
    team_id, version = key.remote_team_id, key.protocol_version
    out: list[Sealed | BlockedSeal] = []
    append = out.append
    for message, wire_id in zip(messages, ids.new_uuid4s(len(messages)), strict=True):
        data = _canonical_plaintext(message, names, stamps)
        if data is None:
            append(seal_local(message, request, key))
            continue
        binding = Binding(team_id=team_id, wire_id=wire_id, protocol_version=version)
        try:
            envelope = seal_canonical(data, binding, manifest, request.max_blob_bytes)
        except WireError as exc:
            append(BlockedSeal(message, request.max_blob_bytes, str(exc)))
            continue
        append(Sealed(message, wire_id, envelope))
    return out


#: Seals a chunk of local messages elsewhere, or returns ``None`` to decline.
SealAll = Callable[
    [Sequence[LocalMessage], SyncPrepare, BindingKey], "list[Sealed | BlockedSeal] | None"
]


@dataclass(frozen=True, slots=True)
class PublishPlan:
    """Rows one publish transaction writes, and what it emits."""

    inserts: tuple[tuple[Any, ...], ...]
    reseals: tuple[tuple[Any, ...], ...]
    blocks_new: tuple[tuple[Any, ...], ...]
    blocks_again: tuple[tuple[Any, ...], ...]
    emitted: tuple[SyncPushCandidate, ...]
    taken_positions: tuple[int, ...]


def plan_publish(
    binding_pk: int,
    items: Sequence[Sealed | BlockedSeal],
    stored: dict[int, ReservationState],
    wire_ids_taken: frozenset[str],
) -> PublishPlan:
    """Decide the rows for one chunk from what is stored now (pure).

    ``stored`` is the current state of each chunk position (absent = no
    row). A position that another prepare published meanwhile is skipped:
    our private wire ID is abandoned and the stored one is emitted instead
    (the caller re-reads it). A private wire ID already used by a pulled
    envelope is abandoned too (the position is sealed again next call), so
    wire IDs stay unique within the binding. A chunk meeting none of these
    cases (no stored row, no used wire ID, nothing blocked) is planned by
    :func:`_plan_fresh` (message-synchronization.md "Prepare push").
    """
    if not stored and not wire_ids_taken and all(type(item) is Sealed for item in items):
        return _plan_fresh(binding_pk, cast("Sequence[Sealed]", items))
    inserts: list[tuple[Any, ...]] = []
    reseals: list[tuple[Any, ...]] = []
    blocks_new: list[tuple[Any, ...]] = []
    blocks_again: list[tuple[Any, ...]] = []
    emitted: list[SyncPushCandidate] = []
    taken: list[int] = []
    for item in items:
        position = item.message.position
        current = stored.get(position)
        if current not in (None, ReservationState.BLOCKED):
            taken.append(position)
            continue
        if isinstance(item, BlockedSeal):
            reservation_next(current, ReservationEvent.BLOCK)
            target = blocks_new if current is None else blocks_again
            target.append((binding_pk, position, item.limit, item.reason))
            continue
        if item.wire_id in wire_ids_taken:
            continue
        reservation_next(current, ReservationEvent.PUBLISH)
        env = item.envelope
        row = (binding_pk, position, item.wire_id, env.v, env.cipher, env.key_id, env.blob)
        (inserts if current is None else reseals).append(row)
        emitted.append(SyncPushCandidate(position, item.message.local_id, item.wire_id, env))
    return PublishPlan(
        tuple(inserts),
        tuple(reseals),
        tuple(blocks_new),
        tuple(blocks_again),
        tuple(emitted),
        tuple(taken),
    )


def _plan_fresh(binding_pk: int, items: Sequence[Sealed]) -> PublishPlan:
    """:func:`plan_publish` of a chunk of sealed messages at positions with no
    row and private wire IDs no pulled envelope uses — a backlog's every
    chunk. Each item then takes the same path there: nothing skipped, the
    ``PUBLISH`` edge from no row (checked once here: it depends on the state
    alone), one insert row and one emitted candidate, in chunk order;
    without the per-item lookups (a chunk holds up to 1,000 messages)."""
    reservation_next(None, ReservationEvent.PUBLISH)
    inserts = tuple(
        (
            binding_pk,
            item.message.position,
            item.wire_id,
            item.envelope.v,
            item.envelope.cipher,
            item.envelope.key_id,
            item.envelope.blob,
        )
        for item in items
    )
    emitted = tuple(
        SyncPushCandidate(item.message.position, item.message.local_id, item.wire_id, item.envelope)
        for item in items
    )
    return PublishPlan(inserts, (), (), (), emitted, ())


# -- edge -----------------------------------------------------------------------------

_CANDIDATE_SELECT = """
    SELECT p.local_position, m.id, p.wire_id, p.envelope_v, p.cipher, p.key_id, p.blob
    FROM sync_push AS p JOIN messages AS m ON m.seq = p.local_position
"""
# Pinned to the partial index of open reservations: the primary key would
# also give position order, but by walking every acknowledged row first.
_OPEN_SELECT = """
    SELECT p.local_position, m.id, p.wire_id, p.envelope_v, p.cipher, p.key_id, p.blob
    FROM sync_push AS p INDEXED BY sync_push_open
    JOIN messages AS m ON m.seq = p.local_position
"""

_MESSAGE_SELECT = """
    SELECT m.seq, m.id, m.body, m.at, s.name, r.name
    FROM messages AS m
    JOIN members AS s ON s.member_pk = m.sender_pk
    JOIN members AS r ON r.member_pk = m.recipient_pk
"""


# Local-origin positions only, through their partial index: an imported
# message is never even read here (agmsg #949), and a history of imports
# after the last reservation costs nothing.
_FRESH_SELECT = """
    SELECT m.seq, m.id, m.body, m.at, s.name, r.name
    FROM messages AS m INDEXED BY messages_local_by_team
    JOIN members AS s ON s.member_pk = m.sender_pk
    JOIN members AS r ON r.member_pk = m.recipient_pk
"""


def _stored_candidate(row: tuple[Any, ...]) -> SyncPushCandidate:
    # Stored bytes are emitted as stored: no re-encoding, no re-validation.
    envelope = Envelope(row[3], row[4], row[5], row[6])
    return SyncPushCandidate(row[0], row[1], row[2], envelope)


def _open_candidates(
    conn: apsw.Connection, binding_pk: int, limit: int, after: int
) -> list[SyncPushCandidate]:
    rows = conn.execute(
        _OPEN_SELECT + " WHERE p.binding_pk = ? AND p.state != 'acked' AND p.state = 'reserved'"
        " AND p.local_position > ? ORDER BY p.local_position LIMIT ?",
        (binding_pk, after, limit),
    ).fetchall()
    return [_stored_candidate(row) for row in rows]


def _work_list(
    conn: apsw.Connection, binding: SyncBinding, request: SyncPrepare, room: int
) -> list[LocalMessage]:
    """Blocked positions a larger limit may admit, then new local positions."""
    if room <= 0 or not request.allow_new:
        return []
    retry: list[Row] = conn.execute(
        _MESSAGE_SELECT + " JOIN sync_push AS p ON p.local_position = m.seq"
        " WHERE p.binding_pk = ? AND p.state = 'blocked' AND p.blocked_limit < ?"
        " ORDER BY m.seq LIMIT ?",
        (binding.pk, request.max_blob_bytes, room),
    ).fetchall()
    high = one_row(
        conn.execute(
            "SELECT max(local_position) FROM sync_push WHERE binding_pk = ?", (binding.pk,)
        )
    )[0]
    fresh: list[Row] = conn.execute(
        _FRESH_SELECT
        + " WHERE m.team_pk = ? AND m.origin = 'local' AND m.seq > ? ORDER BY m.seq LIMIT ?",
        (binding.team_pk, high or 0, room - len(retry)),
    ).fetchall()
    return [LocalMessage(*row) for row in (*retry, *fresh)]


def _chunks(work: list[LocalMessage]) -> list[list[LocalMessage]]:
    chunks: list[list[LocalMessage]] = []
    current: list[LocalMessage] = []
    size = 0
    for message in work:
        # Plaintext length bounds the sealed size closely enough for budgeting.
        estimate = 4 * (len(message.body) + 200) // 3
        if current and (
            len(current) >= PUBLISH_CHUNK_MESSAGES or size + estimate > PUBLISH_CHUNK_BLOB_CHARS
        ):
            chunks.append(current)
            current, size = [], 0
        current.append(message)
        size += estimate
    if current:
        chunks.append(current)
    return chunks


def _publish(
    conn: apsw.Connection,
    path: Path,
    binding: SyncBinding,
    items: list[Sealed | BlockedSeal],
    now: str,
) -> PublishPlan:
    with sync_transaction(conn, path, "prepare.publish"):
        current = open_binding(conn, binding.key, now)
        if current.pk != binding.pk:  # pragma: no cover - keys are immutable
            raise InvalidInput("binding", "the binding changed during prepare; retry")
        positions = [item.message.position for item in items]
        ordered = sorted(set(positions))
        if dense(ordered):
            # A chunk of fresh positions is one run: one range scan reads it.
            wanted = set(ordered)
            stored = {
                row[0]: RESERVATION_STATES[row[1]]
                for row in conn.execute(
                    "SELECT local_position, state FROM sync_push"
                    " WHERE binding_pk = ? AND local_position BETWEEN ? AND ?",
                    (binding.pk, ordered[0], ordered[-1]),
                )
                if row[0] in wanted
            }
        else:
            marks = ",".join("?" * len(positions))
            stored = {
                row[0]: RESERVATION_STATES[row[1]]
                for row in conn.execute(
                    f"SELECT local_position, state FROM sync_push"
                    f" WHERE binding_pk = ? AND local_position IN ({marks})",
                    (binding.pk, *positions),
                )
            }
        wires = [item.wire_id for item in items if isinstance(item, Sealed)]
        taken_wires = (
            frozenset(
                row[0]
                for row in conn.execute(
                    f"SELECT wire_id FROM sync_quarantine WHERE binding_pk = ?"
                    f" AND wire_id IN ({','.join('?' * len(wires))})",
                    (binding.pk, *wires),
                )
            )
            if wires
            else frozenset()
        )
        plan = plan_publish(binding.pk, items, stored, taken_wires)
        # One-row statement on purpose: measured, a multi-row VALUES insert
        # into sync_push costs more per page than executemany (it saves a
        # fifth on sync_quarantine; see syncengine/store/bulk.py).
        conn.executemany(
            "INSERT INTO sync_push (binding_pk, local_position, state, wire_id, envelope_v,"
            " cipher, key_id, blob) VALUES (?, ?, 'reserved', ?, ?, ?, ?, ?)",
            plan.inserts,
        )
        conn.executemany(
            "UPDATE sync_push SET state = 'reserved', wire_id = ?3, envelope_v = ?4, cipher = ?5,"
            " key_id = ?6, blob = ?7, blocked_limit = NULL, blocked_reason = NULL"
            " WHERE binding_pk = ?1 AND local_position = ?2 AND state = 'blocked'",
            plan.reseals,
        )
        conn.executemany(
            "INSERT INTO sync_push (binding_pk, local_position, state, blocked_limit,"
            " blocked_reason) VALUES (?, ?, 'blocked', ?, ?)",
            plan.blocks_new,
        )
        conn.executemany(
            "UPDATE sync_push SET blocked_limit = ?3, blocked_reason = ?4"
            " WHERE binding_pk = ?1 AND local_position = ?2 AND state = 'blocked'",
            plan.blocks_again,
        )
        add_history(conn, binding.pk, push=len(plan.inserts) + len(plan.blocks_new))
        if plan.taken_positions:
            # Published by a concurrent prepare: emit what it committed.
            extra = conn.execute(
                _CANDIDATE_SELECT + f" WHERE p.binding_pk = ? AND p.state = 'reserved'"
                f" AND p.local_position IN ({','.join('?' * len(plan.taken_positions))})",
                (binding.pk, *plan.taken_positions),
            ).fetchall()
            emitted = sorted(
                [*plan.emitted, *(_stored_candidate(row) for row in extra)],
                key=lambda c: c.local_position,
            )
            plan = PublishPlan(
                plan.inserts,
                plan.reseals,
                plan.blocks_new,
                plan.blocks_again,
                tuple(emitted),
                plan.taken_positions,
            )
    return plan


def prepare_push(
    conn: apsw.Connection,
    path: Path,
    key: BindingKey,
    request: SyncPrepare,
    limit: int,
    now: str,
    after: int = 0,
    seal_all: SealAll | None = None,
) -> PrepareResult:
    """Run one prepare; returns ``sync_state`` and the ordered candidates.

    ``after`` (engine use only; the driver verb always starts at 0) skips
    published reservations at or below that local position: the engine's
    pipelined drain passes the last position of a batch still in flight, so
    the next round does not emit it a second time. Nothing is lost by the
    skip: the skipped reservations stay durable and unacknowledged, so any
    later prepare from 0 emits them again.

    ``seal_all`` may seal a chunk elsewhere (the engine's worker processes);
    it returns ``None`` to leave the chunk to :func:`seal_local` here. Either
    way the chunk is sealed before ``prepare.sealed`` and published here.
    """
    check_limit(limit)
    if isinstance(after, bool) or not isinstance(after, int) or after < 0:
        raise InvalidInput("after", "must be a non-negative local position")
    with sync_transaction(conn, path, "prepare.begin"):
        binding = open_binding(conn, key, now)
        existing = _open_candidates(conn, binding.pk, limit, after)
        work = _work_list(conn, binding, request, limit - len(existing))
    state = SyncState(binding.driver_generation, binding.transport_cursor)
    candidates = list(existing)
    blocked: list[BlockedSeal] = []
    for chunk in _chunks(work):
        items = seal_all(chunk, request, key) if seal_all is not None else None
        if items is None:
            items = seal_chunk(chunk, request, key)
        crash_point("prepare.sealed")
        plan = _publish(conn, path, binding, items, now)
        candidates.extend(plan.emitted)
        blocked.extend(item for item in items if isinstance(item, BlockedSeal))
    return PrepareResult(state, tuple(candidates[:limit]), tuple(blocked))
