"""The pure reprocess page plan of ``syncengine/ops/reprocess.py``, tested
directly (specs/sync-stage1.md §4.4; message-synchronization.md "Three
independent progress layers")."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from syncengine.ops.reprocess import MAX_REPROCESS_LIMIT, plan_reprocess_page
from syncengine.ops.states import QuarantineState
from syncengine.ops.sync_records import SyncReprocessCandidate, SyncState, parse_page_key
from wire.envelope import Envelope

STATE = SyncState("gen-1", 40)
ENVELOPE = Envelope(1, "none", None, "e30")
RECEIVED = "2026-01-01T00:00:00.000000Z"


@st.composite
def _rows(draw: st.DrawFn) -> list[SyncReprocessCandidate]:
    """Loaded rows in keyset order, of any status (held or settled)."""
    keys = draw(
        st.lists(
            st.tuples(st.integers(1, 30), st.uuids(version=4).map(str)),
            unique=True,
            max_size=12,
        )
    )
    return [
        SyncReprocessCandidate(
            seq, wire, RECEIVED, ENVELOPE, draw(st.sampled_from(QuarantineState)).value
        )
        for seq, wire in sorted(keys)
    ]


LIMITS = st.integers(1, 6)
AFTER = st.tuples(st.integers(0, 30), st.uuids(version=4).map(str)) | st.just((0, ""))


@given(_rows(), LIMITS, AFTER)
def test_plan_reprocess_never_offers_a_settled_row(
    rows: list[SyncReprocessCandidate], limit: int, after: tuple[int, str]
) -> None:
    """Imported, reconciled and corrupt_state rows are final: reprocess
    never offers them to be judged again (§4.4; corrupt_state needs an
    operator, not a key)."""
    page = plan_reprocess_page(STATE, rows, limit, after)
    assert all(QuarantineState(c.prior_status).held for c in page.candidates)


@given(_rows(), LIMITS, AFTER)
def test_plan_reprocess_offers_only_rows_strictly_after_the_page_key(
    rows: list[SyncReprocessCandidate], limit: int, after: tuple[int, str]
) -> None:
    """A keyset page never repeats a row of an earlier page."""
    page = plan_reprocess_page(STATE, rows, limit, after)
    assert all((c.server_seq, c.wire_id) > after for c in page.candidates)


@given(_rows(), LIMITS, AFTER)
def test_plan_reprocess_page_holds_at_most_limit_candidates_in_keyset_order(
    rows: list[SyncReprocessCandidate], limit: int, after: tuple[int, str]
) -> None:
    """At most ``limit`` candidates, ordered by (server_seq, wire_id)."""
    page = plan_reprocess_page(STATE, rows, limit, after)
    keys = [(c.server_seq, c.wire_id) for c in page.candidates]
    assert len(keys) <= limit
    assert keys == sorted(keys)


@given(_rows(), LIMITS, AFTER)
def test_plan_reprocess_next_after_is_the_last_candidate_exactly_when_has_more(
    rows: list[SyncReprocessCandidate], limit: int, after: tuple[int, str]
) -> None:
    """``has_more`` iff an offered row lies past the page; then
    ``next_after`` is the last candidate's key, so the next page starts
    right after it and no held row is skipped."""
    page = plan_reprocess_page(STATE, rows, limit, after)
    offered = [
        r
        for r in rows
        if QuarantineState(r.prior_status).held and (r.server_seq, r.wire_id) > after
    ]
    assert page.page.has_more is (len(offered) > limit)
    assert list(page.candidates) == offered[:limit]
    if page.page.has_more:
        assert page.page.next_after is not None
        last = page.candidates[-1]
        assert parse_page_key(page.page.next_after) == (last.server_seq, last.wire_id)
    else:
        assert page.page.next_after is None


def test_plan_reprocess_reports_the_state_it_was_given() -> None:
    """The plan never moves the transport cursor or the generation."""
    wire = str(uuid.uuid4())
    rows = [SyncReprocessCandidate(3, wire, RECEIVED, ENVELOPE, "pending_key")]
    page = plan_reprocess_page(STATE, rows, MAX_REPROCESS_LIMIT, (0, ""))
    assert page.state == STATE
    assert [c.wire_id for c in page.candidates] == [wire]
