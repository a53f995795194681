"""A relay that contradicts what this machine already holds halts the
binding before the contradicted sequence (issue #14 item 1; specs/sync-stage1.md
§8.18): nothing is skipped, the halt is visible, and the genuine message is
fetched once the relay serves it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from syncengine.engine import Engine
from syncengine.engine.errors import EXIT_HALTED, IntegrityHalted, classify
from syncengine.ids import new_uuid4
from syncengine.local_store import Store
from syncengine.ops.errors import SyncCorruptState
from tests.syncengine.engine.fakerelay import RECEIVED_AT, FakeRelay, reply
from wire.http_v1.messages import MessagePage, PulledMessage
from wire.message import Message
from wire.profiles import seal

MakeEngine = Callable[..., Engine]


def to_bob(body: str) -> object:
    return seal(Message(body, "2026-07-20T06:30:00.000000Z", "alice", "bob"), "none")


def test_a_known_message_re_served_at_the_next_sequence_halts_and_skips_nothing(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    relay.add_foreign(to_bob("first"), new_uuid4())  # type: ignore[arg-type]
    engine.pull()
    relay.add_foreign(to_bob("second"), new_uuid4())  # type: ignore[arg-type]
    held = relay.messages[0]
    replay = MessagePage(
        relay.binding(),
        (PulledMessage(2, held.id, RECEIVED_AT, held.envelope),),
        2,
        False,
    )
    relay.inject("GET", "/v1/messages", lambda: reply(replay.to_obj()))
    with pytest.raises(SyncCorruptState) as caught:
        engine.pull()
    assert classify(caught.value).exit_code == EXIT_HALTED
    status = engine.status()
    assert status.engine.state == "halted" and status.sync.conflicts == 1
    assert status.sync.binding is not None and status.sync.binding.transport_cursor == 1
    # Durably halted: no request is made until the operator resumes.
    requests = len(relay.requests)
    with pytest.raises(IntegrityHalted, match="halted since") as halted:
        engine.pull()
    assert "syncengine resume --team crew" in halted.value.remediation
    assert len(relay.requests) == requests
    assert engine.status().to_obj()["integrity_halt"]["code"] == "corrupt-state"
    # The relay came to its senses; the operator resumes and the genuine
    # sequence 2 arrives, once.
    assert engine.resume()
    engine.pull()
    with Store(engine.store.path) as store:
        assert [m.body for m in store.history("crew")] == ["first", "second"]


def test_a_relay_whose_current_seq_goes_backwards_halts_before_anything_moves(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    """#14: capabilities contradicting an earlier authenticated snapshot."""
    from syncengine.http.errors import RelayRollback

    engine = make_engine()
    for body in ("one", "two", "three"):
        relay.add_foreign(to_bob(body), new_uuid4())  # type: ignore[arg-type]
    engine.pull()
    relay.messages = relay.messages[:1]  # a relay restored from an older backup
    with pytest.raises(RelayRollback, match="older than"):
        engine.pull()
    status = engine.status()
    assert status.engine.state == "halted" and status.engine.last_error_code == "relay-rollback"
    assert status.sync.binding is not None and status.sync.binding.transport_cursor == 3


def test_a_rolled_back_floor_is_caught_by_a_new_process_too(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    from syncengine.http.errors import RelayRollback

    engine = make_engine()
    for body in ("one", "two", "three"):
        relay.add_foreign(to_bob(body), new_uuid4())  # type: ignore[arg-type]
    engine.pull()
    relay.retain_through(2)
    engine.pull()  # the floor 2 is now the newest this machine saw, durably
    path = engine.store.path
    engine.close()
    relay.floor = 0  # a later snapshot claims the prefix is back
    again = Engine(path, transport=relay.transport(), sleep=lambda s: None)
    try:
        with pytest.raises(RelayRollback, match="floor 0"):
            again.push()
    finally:
        again.close()


def test_a_current_seq_below_the_transport_cursor_halts_even_with_nothing_seen_recorded(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    from syncengine.http.errors import RelayRollback

    engine = make_engine()
    for body in ("one", "two"):
        relay.add_foreign(to_bob(body), new_uuid4())  # type: ignore[arg-type]
    engine.pull()
    path = engine.store.path
    engine.close()
    with Store(path) as store:  # a store from before the seen-state columns
        store.conn.execute("UPDATE engine_status SET seen_floor = 0, seen_current_seq = 0")
    relay.messages = relay.messages[:1]
    again = Engine(path, transport=relay.transport(), sleep=lambda s: None)
    try:
        with pytest.raises(RelayRollback, match="current_seq 1"):
            again.pull()
    finally:
        again.close()


def test_an_integrity_halt_also_stops_resync_before_any_request(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    engine.store.conn.execute(
        "UPDATE engine_status SET halt_code = 'relay-rollback', halt_message = 'm',"
        " halt_at = '2026-01-01T00:00:00.000000Z'"
    )
    requests = len(relay.requests)
    with pytest.raises(IntegrityHalted):
        engine.resync(5)
    assert len(relay.requests) == requests


def test_members_and_capabilities_whose_floors_keep_disagreeing_are_refused(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    from syncengine.engine.read_sync import SNAPSHOT_ATTEMPTS, snapshot_roster
    from syncengine.http.errors import ProtocolViolation
    from wire.http_v1.binding import ResponseBinding
    from wire.http_v1.members import Member, MembersDocument

    engine = make_engine()
    moved = ResponseBinding(relay.server_instance_id, relay.team_id, relay.team_name, 1)
    relay.add_foreign(to_bob("one"), new_uuid4())  # type: ignore[arg-type]
    members = tuple(Member(mid, name) for mid, name in sorted(relay.roster))
    document = MembersDocument(moved, len(relay.roster), members)
    answers = [lambda: reply(document.to_obj())] * SNAPSHOT_ATTEMPTS
    relay.inject("GET", "/v1/members", *answers)
    with pytest.raises(ProtocolViolation, match="kept changing"):
        snapshot_roster(engine.client)
