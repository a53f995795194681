"""The pure adoption plans of ``syncengine/ops/adopt.py``, tested directly.

Rules (specs/engine.md §7.1 and §3.4, adoption after a restore, issue #15 item 5; a new
binding over an existing history, ``sync_adoptable``): a local message is
adopted at most once, only by a page message of the same sender, recipient
and creation time, identical messages pair one to one oldest first, and a
held import is taken at most once.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from syncengine.ops.adopt import LocalCandidate, plan_adopt_held, plan_adopt_own
from wire.message import Message

AT = "2026-01-01T00:00:00.000000Z"
NAMES = st.sampled_from(["alice", "bob", "carol"])
TIMES = st.sampled_from([AT, "2026-01-01T00:00:01.000000Z"])


@st.composite
def _messages(draw: st.DrawFn) -> Message:
    return Message("hi", draw(TIMES), draw(NAMES), draw(NAMES))


@st.composite
def _own_case(draw: st.DrawFn) -> tuple[list[Message], list[list[LocalCandidate]]]:
    """Page messages with a shared pool of local candidates (the same local
    message may be a candidate of several page messages, as it is when
    their bodies agree)."""
    pool = [
        LocalCandidate(seq, draw(NAMES), draw(NAMES), draw(TIMES), draw(st.booleans()))
        for seq in range(1, draw(st.integers(0, 8)) + 1)
    ]
    wanted = draw(st.lists(_messages(), max_size=8))
    candidates = [
        sorted(draw(st.sets(st.sampled_from(pool))) if pool else [], key=lambda c: c.seq)
        for _ in wanted
    ]
    return wanted, candidates


@given(_own_case())
def test_plan_adopt_own_never_adopts_a_local_message_twice(
    case: tuple[list[Message], list[list[LocalCandidate]]],
) -> None:
    """A local message is the copy of at most one relay message."""
    adoptions = plan_adopt_own(*case)
    seqs = [a.seq for a in adoptions]
    assert len(seqs) == len(set(seqs))
    indexes = [a.index for a in adoptions]
    assert len(indexes) == len(set(indexes))


@given(_own_case())
def test_plan_adopt_own_adopts_only_a_candidate_of_the_same_sender_recipient_and_time(
    case: tuple[list[Message], list[list[LocalCandidate]]],
) -> None:
    """Adoption pairs equal content only; ``fresh`` is the candidate's own."""
    wanted, candidates = case
    for adoption in plan_adopt_own(wanted, candidates):
        message = wanted[adoption.index]
        chosen = next(c for c in candidates[adoption.index] if c.seq == adoption.seq)
        assert (chosen.sender, chosen.recipient, chosen.created_at) == (
            message.from_agent,
            message.to_agent,
            message.created_at,
        )
        assert adoption.fresh is chosen.fresh


@given(_own_case())
def test_plan_adopt_own_leaves_no_matching_candidate_unused_behind_an_unadopted_message(
    case: tuple[list[Message], list[list[LocalCandidate]]],
) -> None:
    """A page message is left to import only when every candidate of its
    content is already taken by an earlier page message."""
    wanted, candidates = case
    adoptions = plan_adopt_own(wanted, candidates)
    adopted = {a.index for a in adoptions}
    taken_by = {a.seq: a.index for a in adoptions}
    for index, message in enumerate(wanted):
        if index in adopted:
            continue
        for c in candidates[index]:
            if (c.sender, c.recipient, c.created_at) == (
                message.from_agent,
                message.to_agent,
                message.created_at,
            ):
                assert taken_by[c.seq] < index


@given(st.integers(1, 6), st.integers(0, 6))
def test_plan_adopt_own_pairs_identical_messages_one_to_one_oldest_first(
    relay_copies: int, local_copies: int
) -> None:
    """Identical local messages pair with identical relay copies in order."""
    message = Message("hi", AT, "alice", "bob")
    pool = [LocalCandidate(seq, "alice", "bob", AT, True) for seq in range(1, local_copies + 1)]
    adoptions = plan_adopt_own([message] * relay_copies, [pool] * relay_copies)
    pairs = min(relay_copies, local_copies)
    assert [(a.index, a.seq) for a in adoptions] == [(i, i + 1) for i in range(pairs)]


DIGESTS = st.sampled_from([b"a", b"b", b"c"])


@st.composite
def _adoptable(draw: st.DrawFn) -> dict[bytes, list[int]]:
    """``sync_adoptable`` as loaded: each local position holds one digest."""
    rows = draw(st.dictionaries(st.integers(1, 50), DIGESTS, max_size=12))
    adoptable: dict[bytes, list[int]] = {}
    for position in sorted(rows):
        adoptable.setdefault(rows[position], []).append(position)
    return adoptable


@given(st.lists(DIGESTS, max_size=10), _adoptable())
def test_plan_adopt_held_takes_each_adoptable_row_once_lowest_position_first(
    digests: list[bytes], adoptable: dict[bytes, list[int]]
) -> None:
    """A held import is recorded onto at most one page message; per digest
    the pairs take the lowest positions in order, as many as both sides
    have."""
    pairs = plan_adopt_held(digests, adoptable)
    positions = [p for _, p in pairs]
    assert len(positions) == len(set(positions))
    for digest in set(digests):
        mine = [(i, p) for i, p in pairs if digests[i] == digest]
        indexes = [i for i, d in enumerate(digests) if d == digest]
        available = adoptable.get(digest, [])
        count = min(len(indexes), len(available))
        assert mine == list(zip(indexes[:count], available[:count], strict=True))
    assert Counter(digests[i] for i, _ in pairs).keys() <= adoptable.keys()
