"""The reprocess walk's checks on the pages a store answers
(stage-1-remote-sync.md, reprocess paging; UPSTREAM-RECORDS §2.5; issue #34).

The engine walks the durable blocking envelopes page by page
(``sync_reprocess``) and feeds each page's re-evaluation back through
apply. The pages come from our own store, but a walk that trusted them
could run away: a page that repeats or rewinds its key would be asked for
again for ever, one that grows past its limit or changes its state mid-walk
would be applied against the wrong picture. So every page is checked
before anything of it is applied, and the first violation stops the walk
with :class:`ReprocessWalkBroken` — nothing further is written:

- at most ``limit`` candidates;
- candidates in strictly increasing ``(server_seq, wire_id)`` order, each
  past the previous page's last key, each ``server_seq`` in
  ``1..current_seq`` of the capability snapshot the walk started from;
- ``next_after`` is the last candidate's key exactly when ``has_more``
  (and a page with more holds at least one candidate);
- the page state (driver generation, transport cursor) is the same on
  every page of one walk;
- the walk is bounded by that snapshot: it cannot take more pages than
  ``current_seq // limit + 1`` non-empty ones plus the final one.

Pure: it holds the walk's facts and judges each page; the caller applies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from syncengine.engine.errors import EXIT_HALTED, EngineError
from syncengine.http.errors import EngineState
from syncengine.ops.sync_records import format_page_key

if TYPE_CHECKING:
    from syncengine.ops.reprocess import ReprocessResult

__all__ = ["ReprocessWalk", "ReprocessWalkBroken"]


class ReprocessWalkBroken(EngineError):
    """The store answered a reprocess page no honest walk can produce."""

    code = "reprocess-walk-broken"
    state = EngineState.HALTED
    exit_code = EXIT_HALTED
    remediation = (
        "The local store answered an impossible reprocess page; the walk stopped and "
        "nothing further was written. Run 'syncengine doctor' and report it."
    )


class ReprocessWalk:
    """One reprocess walk's checks (module docstring), page by page."""

    def __init__(self, limit: int, current_seq: int) -> None:
        self.limit = limit
        self.current_seq = current_seq
        self.pages = 0
        self._last: tuple[int, str] = (0, "")
        self._state: tuple[str, int] | None = None
        #: Non-empty pages one snapshot can hold, plus the final page.
        self.max_pages = current_seq // limit + 2

    def _broken(self, rule: str) -> ReprocessWalkBroken:
        return ReprocessWalkBroken(f"reprocess page {self.pages}: {rule}")

    def accept(self, page: ReprocessResult) -> None:
        """Judge one page; raises :class:`ReprocessWalkBroken` on the first
        rule it breaks (the caller applies nothing of it)."""
        self.pages += 1
        if self.pages > self.max_pages:
            raise self._broken(
                f"more pages than the {self.current_seq} sequences of the relay's snapshot "
                f"allow at {self.limit} a page"
            )
        state = (page.state.driver_generation, page.state.transport_cursor)
        if self._state is None:
            self._state = state
        elif state != self._state:
            raise self._broken(
                f"the page state changed mid-walk (generation/transport cursor {self._state} "
                f"became {state})"
            )
        if len(page.candidates) > self.limit:
            raise self._broken(f"{len(page.candidates)} candidates, over the limit {self.limit}")
        for candidate in page.candidates:
            key = (candidate.server_seq, candidate.wire_id)
            if not 1 <= candidate.server_seq <= self.current_seq:
                raise self._broken(
                    f"server_seq {candidate.server_seq} outside 1..{self.current_seq}, the "
                    "relay's head when the walk began"
                )
            if key <= self._last:
                raise self._broken(
                    f"key {format_page_key(*key)} does not come after "
                    f"{format_page_key(*self._last) if self._last[0] else 'the start'} "
                    "(a repeated or rewound page)"
                )
            self._last = key
        more, next_after = page.page.has_more, page.page.next_after
        if more and (not page.candidates or next_after != format_page_key(*self._last)):
            raise self._broken("has_more without next_after equal to its last candidate's key")
        if not more and next_after is not None:
            raise self._broken("next_after on the last page")

    @property
    def next_after(self) -> str:
        return format_page_key(*self._last)
