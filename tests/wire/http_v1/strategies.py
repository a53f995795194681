"""Hypothesis strategies for valid HTTP v1 documents (typed values, not JSON)."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime

from hypothesis import strategies as st

from wire.envelope import Envelope
from wire.http_v1 import (
    Capabilities,
    Disposition,
    ExactItem,
    FrontierItem,
    Member,
    MembersDocument,
    MessagePage,
    MessagesQuery,
    PolicyEntry,
    PulledMessage,
    PushAck,
    ReadStateItem,
    ReadStatePage,
    ReadStateRequest,
    ReadStateUpdate,
    Registration,
    ResponseBinding,
)
from wire.limits import MAX_SEQ
from wire.scalars import format_timestamp

seqs = st.integers(0, MAX_SEQ)


def _uuid(version: str, value: int) -> str:
    text = f"{value:032x}"
    variant = "89ab"[int(text[16], 16) % 4]
    return f"{text[:8]}-{text[8:12]}-{version}{text[13:16]}-{variant}{text[17:20]}-{text[20:]}"


uuid7s = st.integers(0, 2**128 - 1).map(lambda n: _uuid("7", n))
uuid4s = st.integers(0, 2**128 - 1).map(lambda n: _uuid("4", n))
team_names = st.text(
    st.characters(codec="utf-8", categories=("L", "N", "Pd")), min_size=1, max_size=24
).filter(lambda s: unicodedata.is_normalized("NFC", s))
agent_names = st.from_regex(r"[a-z][a-z0-9_-]{0,15}", fullmatch=True)
timestamps = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
).map(format_timestamp)
envelopes = st.builds(
    lambda data, cipher: Envelope.from_blob_bytes(
        cipher, None if cipher == "none" else "e-1", data
    ),
    st.binary(min_size=1, max_size=48),
    st.sampled_from(["none", "age-v1"]),
)
ciphers = st.lists(
    st.from_regex(r"[a-z0-9][a-z0-9._-]{0,8}", fullmatch=True), unique=True, max_size=3
)
versions = st.lists(st.integers(1, 5), unique=True, min_size=1, max_size=3)


@st.composite
def bindings(draw: st.DrawFn, max_floor: int = MAX_SEQ) -> ResponseBinding:
    return ResponseBinding(
        draw(uuid7s), draw(uuid7s), draw(team_names), draw(st.integers(0, max_floor))
    )


@st.composite
def capabilities(draw: st.DrawFn) -> Capabilities:
    current = draw(st.one_of(seqs, st.integers(0, 50), st.just(MAX_SEQ)))
    binding = draw(bindings(max_floor=current))
    top = min(current + 1, MAX_SEQ)
    later = draw(st.lists(st.integers(2, max(2, top)), unique=True, max_size=4)) if top >= 2 else []
    boundaries = [1, *sorted(later)]
    revision = draw(st.integers(0, 10))
    history = []
    for boundary in boundaries:
        history.append(PolicyEntry(revision, boundary, tuple(draw(versions)), tuple(draw(ciphers))))
        revision += draw(st.integers(1, 3))
    return Capabilities(binding, current, draw(st.integers(1, 1 << 20)), tuple(history))


@st.composite
def push_exchanges(draw: st.DrawFn) -> tuple[list[str], list[PushAck]]:
    """A batch's ids and the acks a correct relay would give for them."""
    fresh = draw(st.lists(st.booleans(), min_size=1, max_size=8))
    ids = draw(st.lists(uuid4s, unique=True, min_size=len(fresh), max_size=len(fresh)))
    first_new = draw(st.integers(len(fresh) + 1, 10_000))
    old_seqs = iter(
        draw(
            st.lists(
                st.integers(1, first_new - 1), unique=True, min_size=len(fresh), max_size=len(fresh)
            )
        )
    )
    acks: list[PushAck] = []
    next_new = first_new
    for wire_id, is_new in zip(ids, fresh, strict=True):
        if is_new:
            acks.append(PushAck(wire_id, next_new, Disposition.STORED))
            next_new += 1
        else:
            acks.append(PushAck(wire_id, next(old_seqs), Disposition.DUPLICATE))
    repeats = draw(st.lists(st.integers(0, len(acks) - 1), max_size=3))
    for index in repeats:
        acks.append(PushAck(acks[index].id, acks[index].server_seq, Disposition.DUPLICATE))
    return [ack.id for ack in acks], acks


@st.composite
def message_pages(draw: st.DrawFn) -> tuple[MessagesQuery, MessagePage]:
    binding = draw(bindings(max_floor=10_000))
    after = draw(st.integers(binding.min_available_seq, binding.min_available_seq + 100))
    count = draw(st.integers(0, 5))
    ids = draw(st.lists(uuid4s, unique=True, min_size=count, max_size=count))
    messages = tuple(
        PulledMessage(after + 1 + index, wire_id, draw(timestamps), draw(envelopes))
        for index, wire_id in enumerate(ids)
    )
    has_more = bool(messages) and draw(st.booleans())
    limit = count if has_more else draw(st.integers(max(count, 1), 1000))
    page = MessagePage(binding, messages, after + count, has_more)
    return MessagesQuery(after, limit), page


@st.composite
def rosters(draw: st.DrawFn) -> MembersDocument:
    member_ids = sorted(draw(st.lists(uuid7s, unique=True, max_size=5)))
    names = draw(
        st.lists(agent_names, unique=True, min_size=len(member_ids), max_size=len(member_ids))
    )
    registration_ids = iter(draw(st.lists(uuid7s, unique=True, min_size=12, max_size=12)))
    members = []
    for member_id, name in zip(member_ids, names, strict=True):
        own = sorted(next(registration_ids) for _ in range(draw(st.integers(0, 2))))
        registrations = tuple(
            Registration(rid, draw(uuid7s), draw(st.sampled_from(["codex", "claude"])))
            for rid in own
        )
        members.append(Member(member_id, name, registrations))
    return MembersDocument(draw(bindings()), draw(seqs), tuple(members))


@st.composite
def read_requests(draw: st.DrawFn) -> ReadStateRequest:
    member_ids = draw(st.lists(uuid7s, unique=True, max_size=4))
    updates = tuple(
        ReadStateUpdate(
            member_id, draw(seqs), tuple(draw(st.lists(uuid4s, unique=True, max_size=3)))
        )
        for member_id in member_ids
    )
    key = draw(st.none() | st.builds(lambda item: item.key, read_items()))
    return ReadStateRequest(updates, key, draw(st.integers(1, 1000)))


@st.composite
def read_items(draw: st.DrawFn) -> ReadStateItem:
    if draw(st.booleans()):
        return FrontierItem(draw(uuid7s), draw(seqs))
    return ExactItem(draw(uuid7s), draw(uuid4s))


@st.composite
def read_pages(draw: st.DrawFn) -> ReadStatePage:
    current = draw(st.integers(0, 10_000))
    binding = draw(bindings(max_floor=current))
    stream: list[ReadStateItem] = []
    for member_id in sorted(draw(st.lists(uuid7s, unique=True, max_size=4))):
        stream.append(
            FrontierItem(member_id, draw(st.integers(binding.min_available_seq, current)))
        )
        for wire_id in sorted(draw(st.lists(uuid4s, unique=True, max_size=3))):
            stream.append(ExactItem(member_id, wire_id))
    start = draw(st.integers(0, len(stream)))
    end = draw(st.integers(start, len(stream)))
    items = tuple(stream[start:end])
    has_more = bool(items) and draw(st.booleans())
    return ReadStatePage(binding, current, items, items[-1].key if has_more else None, has_more)
