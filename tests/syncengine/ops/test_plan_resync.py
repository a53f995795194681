"""The pure resync plan of ``syncengine/ops/resync.py``, tested directly
(retention-gap-resynchronization.md "Driver transaction and audit record";
specs/sync-stage1.md §4.5)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from syncengine.ops.errors import StaleBinding
from syncengine.ops.resync import ResyncFacts, SyncResync, SyncResyncAudit, plan_resync
from syncengine.ops.states import BindingState
from syncengine.store.errors import Conflict, InvalidInput

SEQS = st.integers(0, 2**40)


@st.composite
def _requests(draw: st.DrawFn) -> SyncResync:
    """A well-formed approval: expected < floor <= current."""
    expected = draw(SEQS)
    floor = draw(st.integers(expected + 1, expected + 2**20))
    current = draw(st.integers(floor, floor + 2**20))
    request = SyncResync(expected, floor, current)
    request.check()
    return request


LIVE = st.sampled_from([None, BindingState.ACTIVE])


@given(_requests(), LIVE)
def test_plan_resync_moves_the_cursor_exactly_to_the_floor_never_past_it(
    request: SyncResync, state: BindingState | None
) -> None:
    """An accepted gap moves the transport cursor to the relay's floor: not
    beyond (those sequences are still pullable), not short of it."""
    plan = plan_resync(ResyncFacts(state, request.expected_transport_cursor, None), request)
    assert plan.transport_cursor == request.min_available_seq
    assert plan.transport_cursor > request.expected_transport_cursor


@given(_requests(), LIVE)
def test_plan_resync_records_the_gap_from_expected_plus_one_to_the_floor(
    request: SyncResync, state: BindingState | None
) -> None:
    """The audit row states exactly the sequences given up."""
    audit = plan_resync(ResyncFacts(state, request.expected_transport_cursor, None), request).audit
    assert audit.gap_start == request.expected_transport_cursor + 1
    assert audit.gap_end == request.min_available_seq
    assert audit.unavailable == request.min_available_seq - request.expected_transport_cursor


@given(_requests(), LIVE, SEQS)
def test_plan_resync_refuses_an_approval_whose_expected_cursor_is_stale(
    request: SyncResync, state: BindingState | None, stored: int
) -> None:
    """Optimistic check: a cursor that moved since the approval refuses it."""
    assume(stored != request.expected_transport_cursor)
    with pytest.raises(StaleBinding):
        plan_resync(ResyncFacts(state, stored, None), request)


@given(_requests(), LIVE, SEQS)
def test_plan_resync_never_accepts_a_floor_twice(
    request: SyncResync, state: BindingState | None, stored: int
) -> None:
    """The audit row is immutable: a second approval of the same floor is a
    conflict, whatever the cursor says now."""
    existing = SyncResyncAudit(request.expected_transport_cursor, request.min_available_seq)
    with pytest.raises(Conflict):
        plan_resync(ResyncFacts(state, stored, existing), request)


@given(_requests())
def test_plan_resync_never_revives_a_retired_binding(request: SyncResync) -> None:
    """A retired binding is refused before anything else is judged."""
    for state in BindingState:
        if state is BindingState.ACTIVE:
            continue
        with pytest.raises(InvalidInput, match="retired"):
            plan_resync(ResyncFacts(state, request.expected_transport_cursor, None), request)
