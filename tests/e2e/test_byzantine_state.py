"""A relay lying about *state* (issue #14, item 4): capabilities, push
acknowledgements, the roster and read state.

Every answer here is well-formed; only what it says is false. Each test arms
one lie on the victim's proxy (tests/e2e/byzantine.py), runs one operation,
asserts the specific outcome (the error class and whether the binding
halted), checks the client's invariants and heals. What the file proves:

- a snapshot contradicting what the victim already holds (an older
  ``current_seq`` or floor, a ``current_seq`` below its transport cursor,
  another server instance or team) halts the binding durably: state
  ``halted``, ``engine_status.halt_code`` set, exit 6, and every later
  operation is ``IntegrityHalted`` without a request until ``resume()``;
- a push answer never makes the victim record a wrong ``wire ID ->
  server_seq`` mapping: one that clashes with a held message is recorded as a
  conflict and halts, one that does not answer the batch is refused, one the
  relay's own snapshots contradict (a ``duplicate`` beyond its
  ``current_seq``, a ``stored`` at a sequence it already counted) halts with
  nothing recorded, and an unverifiable one the genuine page later
  contradicts halts until ``resume`` publishes the message again byte for
  byte (sync-stage1.md §8.20–21); after healing the relay and both machines
  hold each message once, at its genuine sequence;
- a roster that renames, swaps, drops, duplicates or impersonates members
  never loses a message or changes who sent or received it;
- read state naming sequences, members or wire IDs that do not exist never
  makes a message read that nobody read, and never crashes the client.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from relay.storage.sqlite import SqliteRelayStore
from syncengine.engine.errors import EXIT_HALTED, IntegrityHalted, classify
from syncengine.http.errors import (
    AckContradiction,
    BindingMismatch,
    ProtocolViolation,
    RelayClientError,
    RelayRollback,
)
from syncengine.ids import new_uuid4, new_uuid7
from syncengine.local_store import Store
from syncengine.ops.errors import SyncCorruptState
from tests.e2e.byzantine import (
    CAPABILITIES,
    MEMBERS,
    PAGES,
    POST,
    Attack,
    Scene,
    byzantine_scene,
)
from tests.e2e.proxy import Fault, Response
from tests.support.live_relay import LiveRelay
from tests.support.machines import relay_counts

READ_STATE = "POST /v1/read-state/sync"

Change = Callable[[Any], None]


# -- lies ---------------------------------------------------------------------------------


def rewrite(target: str, change: Change) -> Fault:
    """Every 200 answer to ``target`` with ``change(document)`` applied."""

    def lie(response: Response) -> bytes:
        if response.status != 200:
            return response.encode()
        document = response.json()
        change(document)
        return response.with_json(document)

    return Fault(target, "rewrite", every=True, rewrite=lie)


def set_current_seq(document: dict[str, Any], current: int) -> None:
    """A consistent capability document at another ``current_seq``."""
    document["current_seq"] = str(current)
    document["next_sequence_boundary"] = str(current + 1)


def sort_members(document: dict[str, Any]) -> None:
    document["members"].sort(key=lambda member: member["member_id"])


def sort_items(document: dict[str, Any]) -> None:
    order = {"frontier": 0, "exact": 1}
    document["items"].sort(key=lambda i: (i["member_id"], order[i["kind"]], i.get("wire_id", "")))


# -- what the victim holds ----------------------------------------------------------------


def query(scene: Scene, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with Store(scene.victim.store) as store:
        return [tuple(row) for row in store.conn.execute(sql, args).fetchall()]


def member_id(scene: Scene, name: str) -> str:
    return str(query(scene, "SELECT member_id FROM members WHERE name = ?", name)[0][0])


def unread(scene: Scene, agent: str = "bob") -> list[str]:
    with Store(scene.victim.store) as store:
        return sorted(m.body for m in store.list_unread("crew", agent))


def attributions(scene: Scene) -> dict[str, tuple[str, str]]:
    """body -> (sender, recipient) of every message the victim holds."""
    with Store(scene.victim.store) as store:
        return {m.body: (m.sender, m.recipient) for m in store.history("crew")}


def assert_attributed(scene: Scene) -> None:
    """The writer's messages are alice's to bob, the victim's bob's to alice."""
    for body, pair in attributions(scene).items():
        expected = ("alice", "bob") if body.startswith("m") else ("bob", "alice")
        assert pair == expected, f"{body!r} re-attributed to {pair}"


def mappings(scene: Scene) -> list[tuple[str, int]]:
    """Every durable ``(wire ID, server_seq)`` the victim holds (acks and pulls)."""
    rows = query(
        scene,
        "SELECT wire_id, server_seq FROM sync_push WHERE server_seq IS NOT NULL"
        " UNION ALL SELECT wire_id, server_seq FROM sync_quarantine",
    )
    return [(str(w), int(s)) for w, s in rows]


def assert_mappings_genuine(scene: Scene) -> None:
    truth = {wire: seq for seq, wire, _ in scene.genuine()}
    wrong = [(w, s, truth.get(w)) for w, s in mappings(scene) if truth.get(w) != s]
    assert not wrong, f"mappings (wire, held seq, relay's seq) the relay never made: {wrong}"


def relay_live_messages(scene: Scene) -> int:
    return relay_counts(scene.live, scene.team.id)[1]


def pending_push(scene: Scene) -> int:
    with scene.engine() as engine:
        return engine.status().pending_push


# -- outcomes -----------------------------------------------------------------------------


def assert_halted(scene: Scene, attack: Attack, error: type[Exception], code: str) -> None:
    """``attack`` failed with ``error``, halting durably: the next operation is
    refused before any request, until an operator resumes."""
    assert isinstance(attack.error, error), repr(attack.error)
    assert classify(attack.error).exit_code == EXIT_HALTED
    with scene.engine() as engine:
        row = engine.status().engine
    assert (row.state, row.halt_code) == ("halted", code)
    requests = len(scene.proxy.seen)
    again = scene.attack("pull")
    assert isinstance(again.error, IntegrityHalted), repr(again.error)
    assert classify(again.error).exit_code == EXIT_HALTED
    assert len(scene.proxy.seen) == requests, "a halted binding still asked the relay"


def assert_refused(scene: Scene, attack: Attack, error: type[Exception]) -> None:
    """``attack`` failed with ``error``; the binding is not halted."""
    assert isinstance(attack.error, error), repr(attack.error)
    assert isinstance(attack.error, RelayClientError)  # typed, never a traceback
    with scene.engine() as engine:
        row = engine.status().engine
    assert (row.state, row.halt_code) == ("refused", None)


def converge(scene: Scene) -> None:
    """Heal, then the writer syncs too: relay, writer and victim hold the same
    messages, each once, every mapping the relay's own."""
    scene.heal()
    scene.writer.sync()
    assert sorted(scene.writer.bodies()) == sorted(scene.bodies())
    assert_mappings_genuine(scene)
    assert_attributed(scene)


# -- capabilities -------------------------------------------------------------------------


def test_a_current_seq_below_one_already_seen_halts_before_anything_moves(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.attack()  # honest: the victim saw current_seq 6
        scene.write(2)
        pages = len(scene.proxy.requests(PAGES))
        scene.lie(rewrite(CAPABILITIES, lambda doc: set_current_seq(doc, 3)))
        attack = scene.attack()
        assert_halted(scene, attack, RelayRollback, "relay-rollback")
        assert scene.cursor() == 6 and len(scene.proxy.requests(PAGES)) == pages
        scene.check()
        converge(scene)


def test_a_rolled_back_snapshot_stops_a_push_before_it_posts(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.attack()
        scene.victim_sends("v0", "v1")
        scene.lie(rewrite(CAPABILITIES, lambda doc: set_current_seq(doc, 2)))
        attack = scene.attack("push")
        assert_halted(scene, attack, RelayRollback, "relay-rollback")
        assert scene.proxy.requests(POST) == [] and pending_push(scene) == 2
        scene.check()
        converge(scene)


def test_a_retention_floor_going_backwards_halts(live: LiveRelay, tmp_path: Path) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.attack()
        relay = SqliteRelayStore(live.db)
        try:
            relay.retain(scene.team.id, 3)
        finally:
            relay.close()
        assert scene.attack().error is None  # honest: the victim saw floor 3
        scene.lie(rewrite(CAPABILITIES, lambda doc: doc.update(min_available_seq="0")))
        attack = scene.attack()
        assert_halted(scene, attack, RelayRollback, "relay-rollback")
        scene.check()
        # scene.heal() compares with the relay's live history, which retention
        # shortened; the victim pulled all of it before the floor rose.
        scene.proxy.faults.clear()
        with scene.engine() as engine:
            assert engine.resume()
            engine.sync()
            assert engine.status().engine.state == "ok"
        assert sorted(scene.bodies()) == sorted(scene.sent)


def test_capabilities_from_another_server_instance_halt(live: LiveRelay, tmp_path: Path) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite(CAPABILITIES, lambda doc: doc.update(server_instance_id=new_uuid7())))
        attack = scene.attack()
        assert_halted(scene, attack, BindingMismatch, "binding-mismatch")
        assert scene.cursor() == 0 and scene.bodies() == []
        scene.check()
        converge(scene)


def test_capabilities_for_another_team_halt(live: LiveRelay, tmp_path: Path) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.attack()
        scene.write(2)
        scene.lie(rewrite(CAPABILITIES, lambda doc: doc.update(team_id=new_uuid7())))
        attack = scene.attack()
        assert_halted(scene, attack, BindingMismatch, "binding-mismatch")
        assert scene.cursor() == 6
        scene.check()
        converge(scene)


def test_a_current_seq_below_the_transport_cursor_halts_with_no_snapshot_recorded(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        # The first pull applies its pages, then fails in the roster phase:
        # the cursor is 6 but no successful operation recorded what it saw.
        outage = scene.lie(Fault(MEMBERS, "answer", status=503, every=True))
        assert scene.attack().state == "backoff"
        scene.proxy.faults.remove(outage)
        assert scene.cursor() == 6
        assert query(scene, "SELECT seen_floor, seen_current_seq FROM engine_status") == [(0, 0)]
        scene.lie(rewrite(CAPABILITIES, lambda doc: set_current_seq(doc, 4)))
        attack = scene.attack()
        assert_halted(scene, attack, RelayRollback, "relay-rollback")
        assert scene.cursor() == 6
        scene.check()
        converge(scene)


# -- push acknowledgements ----------------------------------------------------------------


def acks(change: Callable[[list[dict[str, Any]]], Any]) -> Fault:
    """Every push answer with its ``acks`` list changed in place (or replaced)."""

    def apply(document: dict[str, Any]) -> None:
        replaced = change(document["acks"])
        if replaced is not None:
            document["acks"] = replaced

    return rewrite(POST, apply)


def test_an_ack_at_a_sequence_a_pulled_message_holds_is_a_recorded_conflict_and_halts(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.attack()  # the victim holds seqs 1..6
        scene.victim_sends("v0")
        # A ``duplicate`` at a held sequence reaches reconcile; a ``stored`` one
        # is refused before it (a sequence the preflight already counted).
        scene.lie(acks(lambda items: items[0].update(server_seq="3", disposition="duplicate")))
        attack = scene.attack("push")
        assert_halted(scene, attack, SyncCorruptState, "corrupt-state")
        with scene.engine() as engine:
            assert engine.status().sync.conflicts == 1
        assert pending_push(scene) == 1  # no mapping taken from the lie
        assert_mappings_genuine(scene)
        scene.check()
        converge(scene)


def test_an_ack_for_an_id_not_in_the_batch_is_refused_and_maps_nothing(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.victim_sends("v0", "v1")
        scene.lie(acks(lambda items: items[1].update(id=new_uuid4())))
        attack = scene.attack("push")
        assert_refused(scene, attack, ProtocolViolation)
        assert pending_push(scene) == 2 and mappings(scene) == []
        scene.check()
        converge(scene)


def test_a_missing_ack_is_refused_and_maps_nothing(live: LiveRelay, tmp_path: Path) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.victim_sends("v0", "v1")
        scene.lie(acks(lambda items: items[:1]))
        attack = scene.attack("push")
        assert_refused(scene, attack, ProtocolViolation)
        assert pending_push(scene) == 2 and mappings(scene) == []
        scene.check()
        converge(scene)


def test_acks_in_another_order_are_refused(live: LiveRelay, tmp_path: Path) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.victim_sends("v0", "v1", "v2")
        scene.lie(acks(lambda items: items[::-1]))
        attack = scene.attack("push")
        assert_refused(scene, attack, ProtocolViolation)
        assert pending_push(scene) == 3 and mappings(scene) == []
        scene.check()
        converge(scene)


def test_stored_acks_with_their_sequences_swapped_are_refused(
    live: LiveRelay, tmp_path: Path
) -> None:
    def swap(items: list[dict[str, Any]]) -> None:
        items[0]["server_seq"], items[1]["server_seq"] = (
            items[1]["server_seq"],
            items[0]["server_seq"],
        )

    with byzantine_scene(live, tmp_path) as scene:
        scene.victim_sends("v0", "v1")
        scene.lie(acks(swap))
        attack = scene.attack("push")
        assert_refused(scene, attack, ProtocolViolation)
        assert pending_push(scene) == 2 and mappings(scene) == []
        scene.check()
        converge(scene)


def test_the_same_id_acked_twice_is_refused(live: LiveRelay, tmp_path: Path) -> None:
    def twice(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [items[0], {**items[0], "disposition": "duplicate"}]

    with byzantine_scene(live, tmp_path) as scene:
        scene.victim_sends("v0", "v1")
        scene.lie(acks(twice))
        attack = scene.attack("push")
        assert_refused(scene, attack, ProtocolViolation)
        assert pending_push(scene) == 2 and mappings(scene) == []
        scene.check()
        converge(scene)


def test_a_duplicate_ack_beyond_current_seq_is_never_recorded_as_a_mapping(
    live: LiveRelay, tmp_path: Path
) -> None:
    def beyond(items: list[dict[str, Any]]) -> None:
        items[0].update(server_seq="999", disposition="duplicate")

    with byzantine_scene(live, tmp_path) as scene:
        scene.attack()  # the victim saw current_seq 6
        scene.victim_sends("v0")
        scene.lie(acks(beyond))
        snapshots = len(scene.proxy.requests(CAPABILITIES))
        attack = scene.attack("push")
        assert 999 not in {seq for _, seq in mappings(scene)}, "v0 mapped to seq 999"
        # preflight, then one fresh snapshot to check the duplicate: 7 < 999
        assert len(scene.proxy.requests(CAPABILITIES)) == snapshots + 2
        assert_halted(scene, attack, AckContradiction, "ack-contradiction")
        assert pending_push(scene) == 1
        scene.check()
        converge(scene)


def test_a_stored_ack_at_a_sequence_the_preflight_already_counted_halts_and_maps_nothing(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.victim_sends("v0")  # the preflight says current_seq 6: new ids take 7 on
        scene.lie(acks(lambda items: items[0].update(server_seq="3")))
        snapshots = len(scene.proxy.requests(CAPABILITIES))
        attack = scene.attack("push")
        assert len(scene.proxy.requests(CAPABILITIES)) == snapshots + 1  # no extra request
        assert_halted(scene, attack, AckContradiction, "ack-contradiction")
        assert pending_push(scene) == 1 and mappings(scene) == []
        scene.check()
        converge(scene)


def test_a_genuine_duplicate_after_a_lost_answer_costs_one_fresh_snapshot_and_is_recorded(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.attack()  # the victim saw current_seq 6
        scene.victim_sends("v0", "v1")
        scene.lie(Fault(POST, "drop_response"))  # stored at 7 and 8, answer lost
        snapshots = len(scene.proxy.requests(CAPABILITIES))
        attack = scene.attack("push")
        assert attack.error is None, repr(attack.error)
        assert (attack.result.stored, attack.result.duplicate) == (0, 2)
        assert len(scene.proxy.requests(CAPABILITIES)) == snapshots + 2
        assert sorted(seq for _, seq in mappings(scene) if seq > 6) == [7, 8]
        assert_mappings_genuine(scene)
        scene.check()
        converge(scene)


def test_an_honest_push_takes_no_snapshot_beyond_its_preflight(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.attack()
        scene.victim_sends("v0", "v1")
        snapshots = len(scene.proxy.requests(CAPABILITIES))
        assert scene.attack("push").error is None
        assert len(scene.proxy.requests(CAPABILITIES)) == snapshots + 1


def test_an_ack_at_a_sequence_not_pulled_yet_never_blocks_the_genuine_history(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.victim_sends("v0")  # the victim has pulled nothing: seq 3 is m3's
        scene.lie(acks(lambda items: items[0].update(server_seq="3", disposition="duplicate")))
        pushed = scene.attack("push")  # seq 3 is unverifiable yet: the lie is taken
        assert pushed.error is None, repr(pushed.error)
        scene.check()
        # The genuine page contradicts the mapping: a visible halt, nothing skipped.
        attack = scene.attack()
        assert_halted(scene, attack, SyncCorruptState, "corrupt-state")
        assert scene.cursor() == 0 and scene.bodies() == ["v0"]
        scene.check()
        # resume publishes v0 again (same wire ID and envelope); the honest
        # sync imports m0..m5 and takes v0 at its genuine sequence 7.
        converge(scene)
        assert sorted({seq for _, seq in mappings(scene)}) == list(range(1, 8))


def test_a_relay_repeating_an_ack_lie_after_resume_halts_again_and_resends_the_same_bytes(
    live: LiveRelay, tmp_path: Path
) -> None:
    posted: list[bytes] = []

    def lie(response: Response) -> bytes:
        posted.append(response.request.split(b"\r\n\r\n", 1)[1])
        document = response.json()
        document["acks"][0].update(server_seq="3", disposition="duplicate")
        return response.with_json(document)

    with byzantine_scene(live, tmp_path) as scene:
        scene.victim_sends("v0")
        scene.lie(Fault(POST, "rewrite", every=True, rewrite=lie))
        assert scene.attack("push").error is None
        assert_halted(scene, scene.attack(), SyncCorruptState, "corrupt-state")
        with scene.engine() as engine:
            assert engine.resume()
        assert pending_push(scene) == 1  # v0 is to be sent again
        again = scene.attack()  # the same lie, then the same genuine page
        assert_halted(scene, again, SyncCorruptState, "corrupt-state")
        assert len(posted) == 2 and posted[0] == posted[1], "v0 re-sent other bytes"
        assert scene.cursor() == 0 and scene.bodies() == ["v0"]
        assert relay_live_messages(scene) == 7  # the relay holds v0 once
        scene.check()
        converge(scene)


def test_a_push_answer_naming_another_server_halts_and_maps_nothing(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.victim_sends("v0")
        scene.lie(rewrite(POST, lambda doc: doc.update(server_instance_id=new_uuid7())))
        attack = scene.attack("push")
        assert_halted(scene, attack, BindingMismatch, "binding-mismatch")
        assert pending_push(scene) == 1 and mappings(scene) == []
        scene.check()
        converge(scene)


# -- members ------------------------------------------------------------------------------


def rename(old: str, new: str) -> Change:
    def change(document: dict[str, Any]) -> None:
        for member in document["members"]:
            if member["name"] == old:
                member["name"] = new

    return change


def test_a_roster_renaming_a_member_blocks_its_read_state_and_keeps_its_messages(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        bob = member_id(scene, "bob")
        scene.lie(rewrite(MEMBERS, rename("bob", "robert")))
        attack = scene.attack()
        assert attack.error is None, repr(attack.error)
        assert attack.result.pull.read_state.blocked == {bob: "member-name-mismatch"}
        assert member_id(scene, "bob") == bob and unread(scene) == sorted(scene.sent)
        assert_attributed(scene)
        scene.check()
        converge(scene)
        with scene.engine() as engine:  # the names agree again: the block cleared
            assert all(m.blocked_reason is None for m in engine.status().sync.read_members)


def test_a_roster_swapping_two_names_reattributes_nothing(live: LiveRelay, tmp_path: Path) -> None:
    def swap(document: dict[str, Any]) -> None:
        for member in document["members"]:
            member["name"] = {"alice": "bob", "bob": "alice"}.get(member["name"], member["name"])

    with byzantine_scene(live, tmp_path) as scene:
        ids = (member_id(scene, "alice"), member_id(scene, "bob"))
        scene.lie(rewrite(MEMBERS, swap))
        attack = scene.attack()
        assert attack.error is None, repr(attack.error)
        assert set(attack.result.pull.read_state.blocked) == set(ids)
        assert (member_id(scene, "alice"), member_id(scene, "bob")) == ids
        assert unread(scene) == sorted(scene.sent) and unread(scene, "alice") == []
        assert_attributed(scene)
        scene.check()
        converge(scene)


def test_a_roster_dropping_a_member_retires_it_but_keeps_and_delivers_its_messages(
    live: LiveRelay, tmp_path: Path
) -> None:
    def drop_bob(document: dict[str, Any]) -> None:
        document["members"] = [m for m in document["members"] if m["name"] != "bob"]

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite(MEMBERS, drop_bob))
        assert scene.attack().error is None
        assert query(scene, "SELECT roster FROM members WHERE name = 'bob'") == [(0,)]
        scene.write(2)  # more messages to the retired member arrive during the lie
        attack = scene.attack()
        assert attack.error is None, repr(attack.error)
        assert unread(scene) == sorted(scene.sent)
        assert_attributed(scene)
        scene.check()
        converge(scene)
        assert query(scene, "SELECT roster FROM members WHERE name = 'bob'") == [(1,)]


def test_a_roster_listing_a_member_twice_is_refused_after_the_messages_landed(
    live: LiveRelay, tmp_path: Path
) -> None:
    def twice(document: dict[str, Any]) -> None:
        document["members"].insert(0, dict(document["members"][0]))

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite(MEMBERS, twice))
        attack = scene.attack()
        assert_refused(scene, attack, ProtocolViolation)
        assert scene.cursor() == 6 and unread(scene) == sorted(scene.sent)
        assert_attributed(scene)
        scene.check()
        converge(scene)


def test_a_newcomer_claiming_a_members_name_takes_none_of_its_messages(
    live: LiveRelay, tmp_path: Path
) -> None:
    impostor = new_uuid7()

    def impersonate(document: dict[str, Any]) -> None:
        for member in document["members"]:
            if member["name"] == "bob":
                member["member_id"] = impostor
        sort_members(document)

    with byzantine_scene(live, tmp_path) as scene:
        bob = member_id(scene, "bob")
        scene.lie(rewrite(MEMBERS, impersonate))
        attack = scene.attack()
        assert attack.error is None, repr(attack.error)
        assert query(scene, "SELECT count(*) FROM members WHERE member_id = ?", impostor) == [(0,)]
        assert member_id(scene, "bob") == bob and unread(scene) == sorted(scene.sent)
        assert_attributed(scene)
        scene.check()
        converge(scene)


def test_a_roster_of_another_team_halts(live: LiveRelay, tmp_path: Path) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite(MEMBERS, lambda doc: doc.update(team_id=new_uuid7())))
        attack = scene.attack()
        assert_halted(scene, attack, BindingMismatch, "binding-mismatch")
        assert unread(scene) == sorted(scene.sent)  # the message phase had landed
        scene.check()
        converge(scene)


# -- read state ---------------------------------------------------------------------------


def frontier_of(name_id: str, seq: Callable[[dict[str, Any]], str]) -> Change:
    """The page with ``name_id``'s frontier set to ``seq(document)``."""

    def change(document: dict[str, Any]) -> None:
        for item in document["items"]:
            if item["member_id"] == name_id and item["kind"] == "frontier":
                item["server_seq"] = seq(document)

    return change


def test_a_read_frontier_beyond_current_seq_is_refused_and_reads_nothing(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        bob = member_id(scene, "bob")
        scene.lie(rewrite(READ_STATE, frontier_of(bob, lambda d: str(int(d["current_seq"]) + 5))))
        attack = scene.attack()
        assert_refused(scene, attack, ProtocolViolation)
        assert unread(scene) == sorted(scene.sent)
        scene.check()
        converge(scene)
        assert unread(scene) == sorted(scene.sent)


def test_read_facts_for_a_member_not_in_the_team_are_ignored(
    live: LiveRelay, tmp_path: Path
) -> None:
    stranger = new_uuid7()

    def facts(wire_id: str) -> Change:
        def change(document: dict[str, Any]) -> None:
            document["items"] += [
                {"kind": "frontier", "member_id": stranger, "server_seq": document["current_seq"]},
                {"kind": "exact", "member_id": stranger, "wire_id": wire_id},
            ]
            sort_items(document)

        return change

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite(READ_STATE, facts(scene.genuine()[0][1])))  # a real message to bob
        attack = scene.attack()
        assert attack.error is None, repr(attack.error)
        assert unread(scene) == sorted(scene.sent)
        assert query(scene, "SELECT count(*) FROM members WHERE member_id = ?", stranger) == [(0,)]
        scene.check()
        converge(scene)
        assert unread(scene) == sorted(scene.sent)


def exact_reads(member: str, wire_ids: list[str]) -> Change:
    def change(document: dict[str, Any]) -> None:
        document["items"] += [
            {"kind": "exact", "member_id": member, "wire_id": w} for w in wire_ids
        ]
        sort_items(document)

    return change


def test_exact_reads_of_wire_ids_that_do_not_exist_read_nothing(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path) as scene:
        ghosts = [new_uuid4() for _ in range(3)]
        scene.lie(rewrite(READ_STATE, exact_reads(member_id(scene, "bob"), ghosts)))
        attack = scene.attack()
        assert attack.error is None, repr(attack.error)
        assert unread(scene) == sorted(scene.sent)
        scene.check()
        converge(scene)
        scene.write(2)  # messages arriving later start unread too
        assert scene.attack().error is None
        assert unread(scene) == sorted(scene.sent)


def test_a_read_state_page_claiming_a_longer_stream_halts_at_the_next_snapshot(
    live: LiveRelay, tmp_path: Path
) -> None:
    """The page's ``current_seq`` is a snapshot claim like the capabilities'
    one: the relay's next honest snapshot contradicts it and halts. What the
    page said of bob's reads was merged — a relay may advance read state
    (specs/engine.md §9: cannot detect) — but nothing is lost, and the
    operator's resume forgets the contradicted claim."""

    def inflate(bob: str) -> Change:
        def change(document: dict[str, Any]) -> None:
            document["current_seq"] = "1000"
            frontier_of(bob, lambda _: "1000")(document)

        return change

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite(READ_STATE, inflate(member_id(scene, "bob"))))
        assert scene.attack().error is None  # a longer stream is not yet a contradiction
        scene.proxy.faults.clear()
        attack = scene.attack()
        assert_halted(scene, attack, RelayRollback, "relay-rollback")
        scene.check()
        converge(scene)


def test_a_read_state_page_below_the_transport_cursor_halts(
    live: LiveRelay, tmp_path: Path
) -> None:
    def rolled_back(document: dict[str, Any]) -> None:
        document["current_seq"] = "2"
        for item in document["items"]:
            if item["kind"] == "frontier":
                item["server_seq"] = str(min(int(item["server_seq"]), 2))

    with byzantine_scene(live, tmp_path) as scene:
        scene.lie(rewrite(READ_STATE, rolled_back))
        attack = scene.attack()
        assert unread(scene) == sorted(scene.sent)
        assert_halted(scene, attack, RelayRollback, "relay-rollback")
        scene.check()
        converge(scene)
