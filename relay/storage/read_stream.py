"""One keyset page of the read-state item stream, from three ordered reads.

read-state-synchronization.md "HTTP operation": items sort by
``(member_id, kind_order, wire_id)``, every active member contributes one
frontier item (its effective frontier, at least ``min_available_seq``) and
each of its unabsorbed exact rows one exact item after it; a page holds at
most ``page_limit`` items and says whether more follow.

Both backends used to ask the database for each member's exact rows in turn:
a 1,000-member team cost 1,000 statements per page even when nobody had an
exact read. Here a backend makes three reads — the active members from the
cursor's member on, every stored frontier, and at most ``limit + 1`` exact
rows of active members after the cursor, all in stream order — and
:func:`merge_page` interleaves them in one pass. The rule is the same for
both backends, so it lives once, beside :mod:`relay.storage.rules`.

Why ``limit + 1`` exact rows suffice: the merge stops as soon as it holds
``limit + 1`` items; it could only need an exact row beyond those fetched
after emitting every fetched one, and by then it already holds ``limit + 1``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from relay.storage.records import ReadItem, ReadKey

__all__ = ["exact_floor", "merge_page"]


def exact_floor(after: ReadKey | None) -> tuple[str, str]:
    """The ``(member_id, wire_id)`` every exact row of the page sorts after.

    After a frontier key of member M every exact row of M follows (a wire ID
    is never empty); after an exact key the rows strictly after it follow.
    """
    if after is None:
        return ("", "")
    return (after.member_id, after.wire_id if after.kind_order == 1 else "")


def merge_page(
    members: Iterable[str],
    frontiers: Mapping[str, int],
    exacts: Iterable[tuple[str, str]],
    floor: int,
    after: ReadKey | None,
    limit: int,
) -> tuple[tuple[ReadItem, ...], bool]:
    """The page after ``after``: ``members`` are the active member IDs from
    the cursor's member on, ascending; ``exacts`` the first ``limit + 1``
    exact rows of active members after :func:`exact_floor`, ascending by
    ``(member_id, wire_id)``; ``frontiers`` the stored frontiers (a member
    without one has the floor). Returns the items and ``has_more``."""
    want = limit + 1
    items: list[ReadItem] = []
    pending = iter(exacts)
    head = next(pending, None)
    for member_id in members:
        # A frontier key (M, 0) sorts after the cursor exactly when M does:
        # the cursor is M's own frontier or one of M's exact rows otherwise.
        if after is None or member_id > after.member_id:
            items.append(ReadItem(ReadKey(member_id, 0), max(frontiers.get(member_id, 0), floor)))
            if len(items) >= want:
                break
        while head is not None and head[0] < member_id:
            head = next(pending, None)  # a row of a member not listed: never emitted
        while head is not None and head[0] == member_id:
            items.append(ReadItem(ReadKey(member_id, 1, head[1])))
            if len(items) >= want:
                break
            head = next(pending, None)
        if len(items) >= want:
            break
    return tuple(items[:limit]), len(items) > limit
