"""The engine's reprocess walk over several pages, and what it does when
the store's pages lie (syncengine/engine/reprocess_walk.py; issue #34, item
1; stage-1-remote-sync.md reprocess paging, MS-31/MS-32/MS-36).

An honest walk re-evaluates every blocked envelope once, page by page. A
store that repeats or rewinds a key, grows a page, changes its state
mid-walk, points ``next_after`` elsewhere or offers a sequence past the
relay's head stops the walk with :class:`ReprocessWalkBroken` before the
bad page is applied — a walk that trusted it once ran 91,000 pages in 20 s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from syncengine.engine import Engine
from syncengine.engine.reprocess_walk import ReprocessWalk, ReprocessWalkBroken
from syncengine.ids import new_uuid4
from syncengine.ops.reprocess import ReprocessResult
from syncengine.ops.sync_records import SyncReprocessPage, SyncState, format_page_key
from tests.syncengine.engine.fakerelay import FakeRelay
from wire.envelope import Envelope, encode_blob

BLOCKED = 7


@pytest.fixture
def reader(make_engine: Callable[..., Engine], relay: FakeRelay) -> Engine:
    """A machine holding ``BLOCKED`` envelopes its policy forbids (blocked,
    reprocessable), pulled at once."""
    for i in range(BLOCKED):
        blob = encode_blob(f"blocked {i}".encode())
        relay.add_foreign(Envelope(1, "zz-cipher", None, blob), new_uuid4())
    engine = make_engine("b")
    pulled = engine.pull()
    assert sum(pulled.outcomes.values()) == BLOCKED
    assert "imported" not in pulled.outcomes
    return engine


class Spy:
    """Wraps the store's reprocess and apply: counts calls, may rewrite pages."""

    def __init__(self, engine: Engine, rewrite: Callable[[int, ReprocessResult], Any]) -> None:
        self.pages = 0
        self.applies = 0
        real_page, real_apply = engine.store.sync_reprocess, engine.store.sync_apply_pull

        def page(*args: Any, **kwargs: Any) -> ReprocessResult:
            self.pages += 1
            result: ReprocessResult = rewrite(self.pages, real_page(*args, **kwargs))
            return result

        def apply(*args: Any, **kwargs: Any) -> Any:
            self.applies += 1
            return real_apply(*args, **kwargs)

        engine.store.sync_reprocess = page  # type: ignore[method-assign]
        engine.store.sync_apply_pull = apply  # type: ignore[method-assign]


def test_a_walk_over_several_pages_re_evaluates_every_blocked_envelope_once(
    reader: Engine,
) -> None:
    spy = Spy(reader, lambda n, page: page)
    report = reader.reprocess(page_limit=3)
    assert (report.pages, report.candidates) == (3, BLOCKED)  # 3 + 3 + 1
    assert spy.applies == 3
    assert sum(report.outcomes.values()) == BLOCKED


def _same_first_page() -> Callable[[int, ReprocessResult], ReprocessResult]:
    first: list[ReprocessResult] = []

    def rewrite(n: int, page: ReprocessResult) -> ReprocessResult:
        if not first:
            first.append(page)
        return first[0]

    return rewrite


def _grown(n: int, page: ReprocessResult) -> ReprocessResult:
    if n == 2:
        return dataclasses.replace(page, candidates=(*page.candidates, *page.candidates[:2]))
    return page


def _moved_state(n: int, page: ReprocessResult) -> ReprocessResult:
    if n == 2:
        state = page.state
        return dataclasses.replace(
            page, state=SyncState(state.driver_generation, state.transport_cursor + 1)
        )
    return page


def _elsewhere(n: int, page: ReprocessResult) -> ReprocessResult:
    if n == 1:
        first = page.candidates[0]
        key = format_page_key(first.server_seq, first.wire_id)
        return dataclasses.replace(page, page=SyncReprocessPage(key, True))
    return page


def _beyond_head(n: int, page: ReprocessResult) -> ReprocessResult:
    if n == 2:
        last = page.candidates[-1]
        return dataclasses.replace(
            page, candidates=(*page.candidates[:-1], dataclasses.replace(last, server_seq=10**6))
        )
    return page


def _rewound(n: int, page: ReprocessResult) -> ReprocessResult:
    if n == 2:
        return dataclasses.replace(page, candidates=tuple(reversed(page.candidates)))
    return page


LIES: dict[str, tuple[Callable[[], Callable[[int, ReprocessResult], Any]], str, int]] = {
    "repeats-its-first-page": (_same_first_page, "repeated or rewound", 1),
    "rewinds-within-a-page": (lambda: _rewound, "repeated or rewound", 1),
    "grows-a-page": (lambda: _grown, "over the limit", 1),
    "changes-state-mid-walk": (lambda: _moved_state, "state changed", 1),
    "points-next-after-elsewhere": (lambda: _elsewhere, "next_after", 0),
    "offers-a-sequence-past-the-head": (lambda: _beyond_head, "outside", 1),
}


@pytest.mark.parametrize("lie", sorted(LIES))
def test_a_lying_page_stops_the_walk_before_it_is_applied(reader: Engine, lie: str) -> None:
    make, named, applied_before = LIES[lie]
    spy = Spy(reader, make())
    with pytest.raises(ReprocessWalkBroken, match=named):
        reader.reprocess(page_limit=3)
    assert spy.applies == applied_before  # the bad page itself was never applied
    assert spy.pages <= 2


def test_the_walk_is_bounded_by_the_snapshot_it_started_from() -> None:
    """A store answering fresh keys for ever cannot outrun the relay's head."""
    walk = ReprocessWalk(limit=2, current_seq=5)
    state = SyncState("gen", 5)
    from syncengine.ops.sync_records import SyncReprocessCandidate

    seq = 0
    with pytest.raises(ReprocessWalkBroken, match=r"more pages|outside"):
        for _ in range(100):
            candidates = []
            for _ in range(2):
                seq += 1
                candidates.append(
                    SyncReprocessCandidate(
                        seq, new_uuid4(), "2026-01-01T00:00:00.000000Z",
                        Envelope(1, "none", None, encode_blob(b"x")), "pending_key",
                    )
                )  # fmt: skip
            last = candidates[-1]
            page = SyncReprocessPage(format_page_key(last.server_seq, last.wire_id), True)
            walk.accept(ReprocessResult(state, tuple(candidates), page))
    assert walk.pages <= walk.max_pages + 1
