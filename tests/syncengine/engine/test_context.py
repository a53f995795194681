"""When a capability snapshot shows a pull nothing to fetch
(syncengine/engine/context.py): the rule that lets an idle pull stop before
its pipeline is imported, and that keeps a rollback or a gap in front of the
page rules; and that a pull with pages is pulled under the probe's own
binding and snapshot. (What an idle pull imports:
tests/syncengine/cli/test_startup_imports.py.)"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from syncengine.engine import Engine
from syncengine.engine.context import nothing_past
from syncengine.ids import new_uuid4
from tests.syncengine.engine.fakerelay import FakeRelay
from wire.http_v1.binding import ResponseBinding
from wire.http_v1.capabilities import Capabilities
from wire.message import Message
from wire.profiles import seal

SID = "0190a1b2-c3d4-7e5f-8a6b-000000000001"
TID = "0190a1b2-c3d4-7e5f-8a6b-000000000002"

seqs = st.integers(min_value=0, max_value=10**12)


def caps(current: int, floor: int) -> Capabilities:
    return Capabilities(ResponseBinding(SID, TID, "t", floor), current, 1024 * 1024, ())


def test_a_snapshot_at_the_cursor_with_the_floor_not_past_it_shows_nothing() -> None:
    assert nothing_past(caps(current=40, floor=41), 40)
    assert nothing_past(caps(current=40, floor=1), 40)


def test_a_snapshot_ahead_of_the_cursor_shows_messages_to_fetch() -> None:
    assert not nothing_past(caps(current=41, floor=1), 40)


def test_a_snapshot_behind_the_cursor_is_left_to_the_page_rules() -> None:
    # A rollback: the page request is what judges it, so it is not "nothing".
    assert not nothing_past(caps(current=39, floor=1), 40)


def test_a_retention_floor_past_the_next_sequence_is_left_to_the_page_rules() -> None:
    # The page answers 410 for the gap; an idle shortcut would hide it.
    assert not nothing_past(caps(current=40, floor=42), 40)


@given(current=seqs, floor=seqs, cursor=seqs)
def test_nothing_past_holds_exactly_when_the_next_page_could_hold_nothing(
    current: int, floor: int, cursor: int
) -> None:
    expected = current == cursor and floor <= cursor + 1
    assert nothing_past(caps(current, floor), cursor) is expected


def test_a_pull_with_pages_binds_once_and_takes_one_snapshot(
    make_engine: Callable[..., Engine], relay: FakeRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    # probe_pull's binding and snapshot are the very ones the pages are pulled under.
    engine = make_engine()
    relay.add_foreign(
        seal(Message("new", "2026-07-20T06:30:00.000000Z", "alice", "bob"), "none"),
        new_uuid4(),
    )
    binds: list[object] = []
    bind = engine.store.sync_bind
    monkeypatch.setattr(engine.store, "sync_bind", lambda key: binds.append(key) or bind(key))  # type: ignore[func-returns-value]
    since = len(relay.requests)
    report = engine.pull()
    assert report.received == 1
    assert len(binds) == 1
    got = [httpx.URL(url).path for method, url, _ in relay.requests[since:]]
    assert got.count("/v1/capabilities") == 1
