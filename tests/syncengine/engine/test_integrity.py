"""A relay that contradicts what this machine already holds halts the
binding before the contradicted sequence (issue #14 item 1; specs/sync-stage1.md
§8.18): nothing is skipped, the halt is visible, and the genuine message is
fetched once the relay serves it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from syncengine.engine import Engine
from syncengine.engine.errors import EXIT_HALTED, classify
from syncengine.ids import new_uuid4
from syncengine.ops.errors import SyncCorruptState
from syncengine.store import Store
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
    # The relay comes to its senses: the genuine sequence 2 arrives, once.
    engine.pull()
    with Store(engine.store.path) as store:
        assert [m.body for m in store.history("crew")] == ["first", "second"]
