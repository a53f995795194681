"""The last rendered body of the relay's two large, steady answers, per team.

``GET /v1/members`` and ``POST /v1/read-state/sync`` answer a 1,000-member
team with about 90 KB each, and in a steady team every machine's every cycle
gets the same bytes again (read-state-synchronization.md "HTTP operation":
every active member contributes one frontier item to every walk). Rendering
is a pure function of the storage record the operation returned, so this
keeps, per (route, team), that record and its bytes: an *equal* record —
compared field by field, every member, every item — is answered with the
same bytes; any difference renders afresh. The storage operation itself
(authentication, the snapshot, the merge) runs on every request; only the
JSON building is saved.

Bounded: at most :data:`CAPACITY` entries, least recently used dropped first,
so a relay serving many teams keeps a few MB at most. Used only from the event
loop's thread (the async endpoints), so it needs no lock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

__all__ = ["CAPACITY", "BodyCache"]

#: Entries kept (one per route and team); ~90 KB each at the 1,000-member bound.
CAPACITY = 64

R = TypeVar("R")


class BodyCache:
    """``(route, team_id)`` → the last record rendered and its body."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[tuple[str, str], tuple[object, bytes]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def body(self, route: str, team_id: str, record: R, render: Callable[[R], bytes]) -> bytes:
        """The body for ``record``: the remembered one if the record is equal
        to the one it was rendered from, else ``render(record)`` (remembered)."""
        key = (route, team_id)
        entry = self._entries.get(key)
        if entry is not None and entry[0] == record:
            self._entries.move_to_end(key)
            return entry[1]
        data = render(record)
        self._entries[key] = (record, data)
        self._entries.move_to_end(key)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)
        return data
