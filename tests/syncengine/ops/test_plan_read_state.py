"""The pure read-state decisions of ``syncengine/ops/read_state.py``, tested
directly (read-state-synchronization.md; ADR 0006-0008; specs/read-state.md
§5): the snapshot check, the member verdict and the safe prefix of
prepare, and the apply plan."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from syncengine.ops.read_records import (
    REASON_LIMIT,
    REASON_NAME_MISMATCH,
    SyncReadExact,
    SyncReadFrontier,
)
from syncengine.ops.read_state import (
    ExactWrite,
    FrontierWrite,
    MemberFacts,
    check_snapshot,
    judge_member,
    plan_read_apply,
    prefix_target,
    safe_prefix,
)
from syncengine.store.errors import InvalidInput

SEQS = st.integers(0, 200)
OPTIONAL_SEQS = st.none() | st.integers(1, 200)
MEMBER_IDS = ["m-a", "m-b", "m-c", "m-d"]
WIRE_IDS = [f"w-{n}" for n in range(8)]
BLOCKS = st.sampled_from([None, REASON_NAME_MISMATCH, REASON_LIMIT])


# -- prepare --------------------------------------------------------------------------


@given(SEQS, SEQS, OPTIONAL_SEQS, OPTIONAL_SEQS)
def test_safe_prefix_never_moves_a_frontier_backwards(
    effective: int, cursor: int, blocking: int | None, unread: int | None
) -> None:
    """A member's frontier is at least its effective frontier, whatever the
    quarantine and its unread messages say."""
    target = prefix_target(effective, cursor, blocking)
    assert safe_prefix(effective, target, unread) >= effective


@given(SEQS, SEQS, OPTIONAL_SEQS, OPTIONAL_SEQS)
def test_safe_prefix_never_passes_the_transport_cursor_or_a_blocking_entry(
    effective: int, cursor: int, blocking: int | None, unread: int | None
) -> None:
    """Beyond the transport cursor no outcome is durable, and a blocking
    entry's recipient is unknown: a moved frontier stops before both."""
    prefix = safe_prefix(effective, prefix_target(effective, cursor, blocking), unread)
    if prefix > effective:
        assert prefix <= cursor
        assert blocking is None or prefix < blocking


@given(st.data(), SEQS, st.integers(1, 100), OPTIONAL_SEQS)
def test_safe_prefix_stops_before_the_members_first_uncovered_message(
    data: st.DataObject, effective: int, ahead: int, blocking: int | None
) -> None:
    """A frontier covering a message local read state does not cover would
    mark it read everywhere: the prefix stops right before it."""
    cursor = effective + ahead
    target = prefix_target(effective, cursor, blocking)
    assume(target > effective)
    unread = data.draw(st.integers(effective + 1, target))
    assert safe_prefix(effective, target, unread) == unread - 1


@given(SEQS, SEQS, OPTIONAL_SEQS)
def test_safe_prefix_reaches_the_target_when_everything_below_it_is_read(
    effective: int, cursor: int, blocking: int | None
) -> None:
    """Nothing uncovered below the target: the frontier goes all the way."""
    target = prefix_target(effective, cursor, blocking)
    assert safe_prefix(effective, target, None) == max(target, effective)


@st.composite
def _facts(draw: st.DrawFn, name: str = "alice") -> MemberFacts:
    return MemberFacts(
        draw(st.integers(1, 9)),
        name,
        draw(SEQS),
        draw(BLOCKS),
        draw(st.booleans()),
        draw(st.booleans()),
    )


@given(_facts(), st.sampled_from(["alice", "bob"]))
def test_judge_member_never_answers_a_frontier_for_differing_names(
    local: MemberFacts, relay_name: str
) -> None:
    """A member whose local and relay names differ is blocked (ADR 0007):
    a frontier could mark another person's messages read."""
    verdict = judge_member(local, relay_name)
    if relay_name != local.name:
        assert verdict.block is not None
        assert not verdict.clear_mismatch


@given(_facts(), st.sampled_from(["alice", "bob"]))
def test_judge_member_keeps_a_limit_block_until_an_operator_clears_it(
    local: MemberFacts, relay_name: str
) -> None:
    """Only read-unblock clears a limit block: prepare keeps answering it,
    and never overwrites it with a name mismatch."""
    assume(local.block == REASON_LIMIT)
    verdict = judge_member(local, relay_name)
    assert verdict.block == REASON_LIMIT
    assert verdict.record_mismatch is None and not verdict.clear_mismatch


@given(_facts())
def test_judge_member_clears_a_name_mismatch_once_the_names_agree(local: MemberFacts) -> None:
    """The mismatch block lasts only while the names differ."""
    assume(local.block == REASON_NAME_MISMATCH)
    verdict = judge_member(local, local.name)
    assert verdict == type(verdict)(clear_mismatch=True)


def test_judge_member_blocks_a_context_member_without_a_local_row() -> None:
    """Adoption left it out: its name is another member's here."""
    assert judge_member(None, "alice").block == REASON_NAME_MISMATCH


@given(SEQS, SEQS, SEQS, SEQS)
def test_check_snapshot_refuses_a_floor_going_back_or_a_head_below_the_cursor(
    cursor: int, floor: int, current: int, stored_floor: int
) -> None:
    """A snapshot contradicting what the binding holds is terminal."""
    if floor < stored_floor or current < cursor:
        with pytest.raises(InvalidInput):
            check_snapshot(cursor, floor, current, stored_floor)
    else:
        check_snapshot(cursor, floor, current, stored_floor)


# -- apply ----------------------------------------------------------------------------

#: (roster, merged floor, page items, durable sequence of each wire ID)
ApplyCase = tuple[
    dict[str, MemberFacts], int, list[SyncReadFrontier | SyncReadExact], dict[str, int | None]
]


@st.composite
def _apply_case(draw: st.DrawFn) -> ApplyCase:
    """A roster (some of the page's members missing), a merged floor, a
    page with at most one frontier per member, and the wire mappings."""
    held = draw(st.sets(st.sampled_from(MEMBER_IDS)))
    roster = {
        member_id: MemberFacts(n, member_id, draw(SEQS), draw(BLOCKS), draw(st.booleans()), False)
        for n, member_id in enumerate(sorted(held))
    }
    floor = draw(SEQS)
    frontier_members = draw(st.sets(st.sampled_from(MEMBER_IDS)))
    items: list[SyncReadFrontier | SyncReadExact] = [
        SyncReadFrontier(member_id, draw(SEQS)) for member_id in sorted(frontier_members)
    ]
    items += [
        SyncReadExact(draw(st.sampled_from(MEMBER_IDS)), draw(st.sampled_from(WIRE_IDS)))
        for _ in range(draw(st.integers(0, 6)))
    ]
    items = draw(st.permutations(items))
    mapped = {wire_id: draw(st.none() | SEQS) for wire_id in WIRE_IDS}
    return roster, floor, items, mapped


CURRENT = 200


@given(_apply_case())
def test_plan_read_apply_never_moves_a_frontier_backwards(
    case: ApplyCase,
) -> None:
    """Frontiers max-merge: a write starts at the member's effective
    frontier (stored or floor) and only ever goes up."""
    roster, floor, items, mapped = case
    plan = plan_read_apply(roster, floor, CURRENT, items, mapped)
    for write in plan.writes:
        if isinstance(write, FrontierWrite):
            assert write.before == max(roster[write.member_id].stored, floor)
            assert write.after > write.before


@given(_apply_case())
def test_plan_read_apply_never_merges_a_name_mismatched_or_unknown_members_items(
    case: ApplyCase,
) -> None:
    """A name mismatch never authorizes advancing a frontier, and items of
    members this store holds no row for are passed over."""
    roster, floor, items, mapped = case
    plan = plan_read_apply(roster, floor, CURRENT, items, mapped)
    for write in plan.writes:
        assert write.member_id in roster
        assert roster[write.member_id].block != REASON_NAME_MISMATCH
    assert plan.members == {i.member_id for i in items if i.member_id in roster}


@given(_apply_case())
def test_plan_read_apply_keeps_no_exact_read_its_frontier_already_covers(
    case: ApplyCase,
) -> None:
    """An exact read whose durable sequence lies under the member's merged
    frontier is covered: keeping it too would only need collecting later."""
    roster, floor, items, mapped = case
    plan = plan_read_apply(roster, floor, CURRENT, items, mapped)
    reached = {m: max(local.stored, floor) for m, local in roster.items()}
    for write in plan.writes:
        if isinstance(write, FrontierWrite):
            reached[write.member_id] = write.after
        else:
            assert isinstance(write, ExactWrite)
            seq = mapped[write.wire_id]
            assert seq is None or seq > reached[write.member_id]


@given(_apply_case(), st.integers(CURRENT + 1, CURRENT + 50))
def test_plan_read_apply_refuses_a_frontier_beyond_current_seq(
    case: ApplyCase,
    beyond: int,
) -> None:
    """A frontier beyond the snapshot's head refuses the whole page."""
    roster, floor, items, mapped = case
    assume(roster)
    member_id = sorted(roster)[0]
    page = [i for i in items if not isinstance(i, SyncReadFrontier) or i.member_id != member_id]
    page.append(SyncReadFrontier(member_id, beyond))
    with pytest.raises(InvalidInput, match="beyond current_seq"):
        plan_read_apply(roster, floor, CURRENT, page, mapped)


@given(_apply_case())
def test_plan_read_apply_refuses_two_frontiers_for_one_member(
    case: ApplyCase,
) -> None:
    """One frontier per member per page, else the page is refused."""
    roster, floor, items, mapped = case
    assume(roster)
    member_id = sorted(roster)[0]
    twice = [*items, SyncReadFrontier(member_id, 1), SyncReadFrontier(member_id, 2)]
    with pytest.raises(InvalidInput, match="one frontier per page"):
        plan_read_apply(roster, floor, CURRENT, twice, mapped)
