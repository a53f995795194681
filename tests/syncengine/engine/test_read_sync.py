"""The engine's read-state phase against the in-process fake relay
(read-state-synchronization.md "HTTP operation", "Limit failure and
recovery"; specs/read-state.md §7): what is sent, what is refused before the
driver sees it, and how a 409 blocks one member and no other."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from syncengine.engine import Engine
from syncengine.engine.errors import ConfigurationError
from syncengine.http.errors import ProtocolViolation
from syncengine.ids import new_uuid4
from syncengine.local_store import Store
from tests.syncengine.engine.fakerelay import FakeRelay, reply
from wire.http_v1.read_state import FrontierItem, ReadStatePage
from wire.message import Message
from wire.profiles import seal

MakeEngine = Callable[..., Engine]


def to_bob(body: str) -> object:
    return seal(Message(body, "2026-07-20T06:30:00.000000Z", "alice", "bob"), "none")


def member_id(relay: FakeRelay, name: str) -> str:
    return next(mid for mid, n in relay.roster if n == name)


def deliver(engine: Engine, relay: FakeRelay, count: int) -> list[str]:
    """``count`` messages from alice to bob on the relay, pulled; their local IDs."""
    for i in range(count):
        relay.add_foreign(to_bob(f"m{i}"), new_uuid4())  # type: ignore[arg-type]
    engine.pull()
    with Store(engine.store.path) as store:
        return [m.id for m in store.list_unread("crew", "bob")]


def mark(engine: Engine, *ids: str) -> None:
    with Store(engine.store.path) as store:
        store.mark_read_batch("crew", "bob", list(ids))


def unread(engine: Engine) -> list[str]:
    with Store(engine.store.path) as store:
        return [m.body for m in store.list_unread("crew", "bob")]


def test_a_contiguous_read_prefix_is_sent_as_the_members_frontier(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    ids = deliver(engine, relay, 4)
    mark(engine, ids[0], ids[1])
    report = engine.pull().read_state
    assert report is not None and report.frontiers_sent >= 1
    assert relay.read_frontiers[member_id(relay, "bob")] == 2


def test_an_out_of_order_read_is_sent_as_an_exact_wire_id(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    ids = deliver(engine, relay, 4)
    mark(engine, ids[2])
    engine.pull()
    bob = member_id(relay, "bob")
    assert relay.read_frontiers.get(bob, 0) == 0
    assert relay.read_exact[bob] == {relay.messages[2].id}


def test_a_frontier_from_another_machine_marks_the_messages_read_here(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    deliver(engine, relay, 4)
    relay.read_frontiers[member_id(relay, "bob")] = 3
    engine.pull()
    assert unread(engine) == ["m3"]


def test_a_walk_that_ends_without_every_members_frontier_is_a_protocol_violation(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    deliver(engine, relay, 2)
    bob = member_id(relay, "bob")
    # A page naming only bob's frontier (alice's is missing), claiming bob read all.
    partial = ReadStatePage(
        relay.binding(), relay.current_seq, (FrontierItem(bob, 2),), None, False
    )
    relay.inject("POST", "/v1/read-state/sync", lambda: reply(partial.to_obj()))
    with pytest.raises(ProtocolViolation, match="without a frontier"):
        engine.pull()
    # The page itself was valid, so its own facts were applied (bob's
    # frontier); the incomplete walk is what the cycle reports.
    assert unread(engine) == []
    assert engine.status().engine.last_error_code == "protocol-violation"


def test_a_frontier_beyond_current_seq_is_refused_and_changes_nothing(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    deliver(engine, relay, 2)
    items = [
        {"kind": "frontier", "member_id": mid, "server_seq": "99"}
        for mid, _ in sorted(relay.roster)
    ]
    body = {**relay.binding().to_members(), "current_seq": "2", "items": items,
            "next_page_after": None, "has_more": False}  # fmt: skip
    relay.inject("POST", "/v1/read-state/sync", lambda: reply(body))
    with pytest.raises(ProtocolViolation):
        engine.pull()
    assert unread(engine) == ["m0", "m1"]


def test_a_409_blocks_only_the_named_member_and_retries_without_it(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    ids = deliver(engine, relay, 3)
    mark(engine, ids[1])  # an exact read for bob
    bob = member_id(relay, "bob")

    def refuse() -> httpx.Response:
        return relay.error(
            409,
            "read-state-limit-exceeded",
            {
                "member_id": bob,
                "member_exact_count": "4097",
                "team_exact_count": "4097",
                "max_exact_per_member": 4096,
                "max_exact_per_team": 65536,
            },
        )

    relay.inject("POST", "/v1/read-state/sync", refuse)
    report = engine.pull().read_state
    assert report is not None and report.blocked == {bob: "read-state-limit-exceeded"}
    retried = relay.read_requests[-1]
    assert bob not in {u.member_id for u in retried.updates}
    members = {m["name"]: m for m in engine.status().to_obj()["read_state"]["members"]}
    assert members["bob"]["blocked"]["reason"] == "read-state-limit-exceeded"
    assert members["bob"]["pending_upload"] == 1  # the fact is kept, not discarded
    # Blocked: the next cycle sends nothing for bob, with no busy retry.
    engine.pull()
    assert bob not in {u.member_id for u in relay.read_requests[-1].updates}


def test_unblock_lets_the_member_sync_again(make_engine: MakeEngine, relay: FakeRelay) -> None:
    engine = make_engine()
    ids = deliver(engine, relay, 3)
    mark(engine, ids[1])
    bob = member_id(relay, "bob")
    with Store(engine.store.path) as store:
        from syncengine.ops.read_records import SyncReadBlock

        store.sync_block_read_state(engine.connection.key, SyncReadBlock(bob))
    assert engine.unblock_read_state("bob") == bob
    engine.pull()
    assert relay.read_exact[bob] == {relay.messages[1].id}


def test_unblock_of_a_name_not_on_the_roster_names_the_problem(make_engine: MakeEngine) -> None:
    engine = make_engine()
    with pytest.raises(ConfigurationError, match="no roster member named 'zed'"):
        engine.unblock_read_state("zed")


def test_the_phase_is_skipped_with_its_reason_without_the_capability(
    make_engine: MakeEngine, relay: FakeRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine()
    monkeypatch.setattr("syncengine.local_store.CAPABILITIES", ("stage1-sync",))
    report = engine.pull().read_state
    assert report is not None and report.skipped is not None
    assert "stage2-read-state" in report.skipped
    assert relay.read_requests == []


def test_a_local_message_is_never_covered_before_the_relay_acknowledges_it(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    with Store(engine.store.path) as store:
        store.send("crew", "alice", "bob", "local only")
    relay.read_frontiers[member_id(relay, "bob")] = 0
    relay.add_foreign(to_bob("remote"), new_uuid4())  # type: ignore[arg-type]
    relay.read_frontiers[member_id(relay, "bob")] = 1
    engine.pull()  # pull only: the local message is not pushed
    assert unread(engine) == ["local only"]


def test_a_relay_rename_blocks_that_members_reads_until_the_local_name_follows(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    ids = deliver(engine, relay, 3)
    bob = member_id(relay, "bob")
    relay.roster = [(mid, "robert" if mid == bob else name) for mid, name in relay.roster]
    mark(engine, ids[0])
    report = engine.pull().read_state
    assert report is not None and report.blocked == {bob: "member-name-mismatch"}
    assert relay.read_frontiers.get(bob, 0) == 0  # nothing sent for the renamed member
    with Store(engine.store.path) as store:
        store.rename_member("crew", "bob", "robert")
    report = engine.pull().read_state
    assert report is not None and report.blocked == {}
    assert relay.read_frontiers[bob] == 1
    with Store(engine.store.path) as store:
        assert [m.body for m in store.list_unread("crew", "robert")] == ["m1", "m2"]


def test_a_retired_members_name_is_never_rebound_to_another_member(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    from syncengine.ids import new_uuid7

    engine = make_engine()
    bob = member_id(relay, "bob")
    newcomer = new_uuid7()
    relay.roster = [(mid, n) for mid, n in relay.roster if mid != bob] + [(newcomer, "bob")]
    engine.pull()
    rows = engine.store.conn.execute(
        "SELECT member_id, roster FROM members WHERE name = 'bob'"
    ).fetchall()
    assert [tuple(r) for r in rows] == [(bob, 0)]  # retired, still bob's, not the newcomer's
