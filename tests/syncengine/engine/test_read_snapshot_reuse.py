"""The read-state phase's snapshot (specs/read-state.md §8 step 1, decision 8):
the capability snapshot the cycle's pull ended with is reused when the
roster's floor agrees with it and it covers the cursor the pull reached;
otherwise capabilities and members are fetched afresh until their floors agree."""

from __future__ import annotations

import logging
from collections.abc import Callable

import httpx
import pytest

from syncengine.engine import Engine
from syncengine.http.errors import RelayRollback
from syncengine.ids import new_uuid4, new_uuid7
from tests.syncengine.engine.fakerelay import FakeRelay, reply
from wire.http_v1.members import Member, MembersDocument
from wire.message import Message
from wire.profiles import seal

MakeEngine = Callable[..., Engine]


def paths(relay: FakeRelay, since: int) -> list[str]:
    return [f"{method} {httpx.URL(url).path}" for method, url, _ in relay.requests[since:]]


def test_a_pull_is_followed_by_members_and_read_state_without_another_capabilities_request(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    engine.pull()
    relay.add_foreign(
        seal(Message("new", "2026-07-20T06:30:00.000000Z", "alice", "bob"), "none"),
        new_uuid4(),
    )
    since = len(relay.requests)
    report = engine.pull()
    assert report.received == 1
    assert report.read_state is not None and report.read_state.skipped is None
    assert paths(relay, since) == [
        "GET /v1/capabilities",
        "GET /v1/messages",
        "GET /v1/members",
        "POST /v1/read-state/sync",
    ]


def test_an_idle_pull_requests_no_page(make_engine: MakeEngine, relay: FakeRelay) -> None:
    """The snapshot shows nothing past the cursor (``current_seq`` equal to
    it, no retention floor beyond it): the empty page is not asked for."""
    engine = make_engine()
    engine.pull()
    since = len(relay.requests)
    report = engine.pull()
    assert report.pages == 0 and report.received == 0
    assert paths(relay, since) == [
        "GET /v1/capabilities",
        "GET /v1/members",
        "POST /v1/read-state/sync",
    ]


def test_an_idle_sync_takes_one_capabilities_snapshot(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    """A sync whose push posted nothing lets its pull use the push's snapshot."""
    engine = make_engine()
    engine.sync()
    since = len(relay.requests)
    engine.sync()
    assert paths(relay, since) == [
        "GET /v1/capabilities",
        "GET /v1/members",
        "POST /v1/read-state/sync",
    ]


def test_a_sync_that_posted_asks_for_a_fresh_snapshot_before_it_pulls(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    engine.sync()
    engine.store.send(engine.connection.local_team, "alice", "bob", "posted")
    since = len(relay.requests)
    engine.sync()
    assert paths(relay, since)[:3] == [
        "GET /v1/capabilities",
        "POST /v1/messages",
        "GET /v1/capabilities",
    ]


def test_a_roster_with_another_floor_than_the_pulls_snapshot_takes_a_fresh_pair(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    for i in range(3):
        envelope = seal(Message(f"m{i}", "2026-07-20T06:30:00.000000Z", "alice", "bob"), "none")
        relay.add_foreign(envelope, new_uuid4())
    engine.pull()
    since = len(relay.requests)

    def retention_between_the_pull_and_the_roster() -> httpx.Response:
        relay.retain_through(2)
        members = tuple(Member(mid, name) for mid, name in sorted(relay.roster))
        return reply(MembersDocument(relay.binding(), len(relay.roster), members).to_obj())

    relay.inject("GET", "/v1/members", retention_between_the_pull_and_the_roster)
    report = engine.pull()
    assert report.read_state is not None and report.read_state.skipped is None
    assert paths(relay, since) == [
        "GET /v1/capabilities",
        "GET /v1/members",
        "GET /v1/capabilities",
        "GET /v1/members",
        "POST /v1/read-state/sync",
    ]


def test_an_unchanged_roster_is_turned_into_local_pairs_once(
    make_engine: MakeEngine, relay: FakeRelay, caplog: pytest.LogCaptureFixture
) -> None:
    """A member no local agent can be named like is reported when the roster
    arrives, not on every cycle that gets the same roster body again."""
    engine = make_engine()
    relay.roster = [*relay.roster, (new_uuid7(), "ops:bot")]
    with caplog.at_level(logging.WARNING, logger="syncengine"):
        engine.pull()
        engine.pull()
    warned = [r for r in caplog.records if "no local agent can use" in r.getMessage()]
    assert len(warned) == 1


def test_a_snapshot_behind_the_cursor_is_never_taken_for_an_idle_relay(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    """A relay whose ``current_seq`` went back below the cursor is a rollback
    (halted at its snapshot), never an idle pull that skips its page."""
    engine = make_engine()
    for i in range(3):
        envelope = seal(Message(f"m{i}", "2026-07-20T06:30:00.000000Z", "alice", "bob"), "none")
        relay.add_foreign(envelope, new_uuid4())
    engine.pull()
    relay.messages = relay.messages[:1]
    with pytest.raises(RelayRollback):
        engine.pull()
