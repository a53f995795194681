"""read-prepare, read-apply, read-block and read-unblock against a real store
(specs/read-state.md §1, §3, §4, §6; read-state-synchronization.md).

A message is read for its recipient when local read state covers it, when
its durable mapping's ``server_seq`` lies at or below the member's effective
remote frontier ``max(stored, read floor)``, or when its wire ID is one of
the member's exact remote reads. Prepare reports the largest safe prefix and
the promoted reads above it; apply merges what the relay reports and projects
it onto held messages. Neither ever touches transport, push or quarantine
state, and every refusal leaves the store exactly as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import pytest

import syncengine.store.connection as connection
from syncengine.ids import new_uuid4, new_uuid7
from syncengine.local_store import Store
from syncengine.ops.bindings import BindingKey
from syncengine.ops.read_records import (
    REASON_LIMIT,
    REASON_NAME_MISMATCH,
    SyncReadApplyResult,
    SyncReadBlock,
    SyncReadBlocked,
    SyncReadContext,
    SyncReadExact,
    SyncReadFrontier,
    SyncReadSnapshot,
    SyncReadUnblock,
    SyncReadUnblocked,
)
from syncengine.ops.read_state import MAX_EXACT_PER_PREPARE, PrepareReadResult
from syncengine.ops.states import IllegalTransition
from syncengine.ops.sync_records import SyncPullCursor, SyncPushCandidate, dump_line
from syncengine.store import InvalidInput
from syncengine.store import teams as team_rows
from syncengine.store.connection import write_transaction
from tests.syncengine.ops.helpers import (
    ack,
    foreign_envelope,
    new_key,
    prepare_none,
    pull_record,
    table,
)

NOW = "2026-08-01T10:00:00.000000Z"
#: The tables a read-state operation must never write.
TRANSPORT_TABLES = ("sync_push", "sync_quarantine", "sync_conflicts", "messages")


class Prepared(NamedTuple):
    """A prepare result read by member name."""

    frontiers: dict[str, int]
    exact: set[tuple[str, str]]
    blocked: dict[str, str]


@dataclass
class Scene:
    """Team ``dev`` = {alice, bob} adopted from a relay roster, bound to ``key``."""

    store: Store
    key: BindingKey
    ids: dict[str, str]

    # -- messages --------------------------------------------------------------------

    def send(self, body: str, to: str = "bob") -> None:
        self.store.send("dev", "alice" if to == "bob" else "bob", to, body)

    def reserve(self) -> list[SyncPushCandidate]:
        return list(self.store.sync_prepare_push(self.key, prepare_none(), 100).candidates)

    def reconcile(self, candidates: list[SyncPushCandidate], *seqs: int) -> list[str]:
        acks = [ack(c, seq) for c, seq in zip(candidates, seqs, strict=True)]
        self.store.sync_reconcile_push(self.key, acks)
        return [c.wire_id for c in candidates]

    def push(self, *seqs: int) -> list[str]:
        """Reserve every unpushed local message and acknowledge them at ``seqs``."""
        return self.reconcile(self.reserve(), *seqs)

    def pull(self, seq: int, body: str, to: str = "bob", status: str = "importable") -> str:
        """Pull one foreign message at ``seq`` (the cursor moves to it)."""
        wire, envelope = foreign_envelope(self.key, body, "carol", to)
        self.pull_wire(seq, wire, envelope, status)
        return wire

    def pull_wire(self, seq: int, wire: str, envelope: Any, status: str = "importable") -> None:
        reason = None if status == "importable" else "held back"
        record = pull_record(seq, wire, envelope, status, reason=reason)
        self.store.sync_apply_pull(self.key, [record], SyncPullCursor(max(seq, self.cursor)))

    def advance(self, cursor: int) -> None:
        self.store.sync_apply_pull(self.key, [], SyncPullCursor(cursor))

    @property
    def cursor(self) -> int:
        binding = self.store.sync_binding(self.key)
        assert binding is not None
        return binding.transport_cursor

    def read(self, *bodies: str, by: str | None = None) -> None:
        """Mark the messages with these bodies read by their recipient (or ``by``)."""
        for message in self.store.history("dev"):
            if message.body in bodies:
                self.store.mark_read_batch("dev", by or message.recipient, [message.id])

    def unread(self, name: str = "bob") -> list[str]:
        return [m.body for m in self.store.list_unread("dev", name)]

    # -- read state ------------------------------------------------------------------

    @property
    def floor(self) -> int:
        """The stored read floor: the default floor of every snapshot below."""
        ((floor,),) = table(self.store.conn, "SELECT read_floor FROM sync_bindings")
        return int(floor)

    def context(
        self, floor: int | None = None, current: int | None = None, **names: str
    ) -> SyncReadContext:
        members = tuple((member_id, names.get(name, name)) for name, member_id in self.ids.items())
        top = max(100, self.cursor) if current is None else current
        return SyncReadContext(
            self.floor if floor is None else floor, top, members, tuple(self.ids)
        )

    def prepare_raw(
        self, floor: int | None = None, current: int | None = None, **names: str
    ) -> Any:
        return self.store.sync_prepare_read_state(self.key, self.context(floor, current, **names))

    def prepare(
        self, floor: int | None = None, current: int | None = None, **names: str
    ) -> Prepared:
        return self.view(self.prepare_raw(floor, current, **names))

    def view(self, result: PrepareReadResult) -> Prepared:
        name = {member_id: n for n, member_id in self.ids.items()}
        return Prepared(
            {name[f.member_id]: f.server_seq for f in result.frontiers},
            {(name[e.member_id], e.wire_id) for e in result.exact},
            {name[b.member_id]: b.reason for b in result.blocked},
        )

    def frontier(self, name: str, seq: int) -> SyncReadFrontier:
        return SyncReadFrontier(self.ids[name], seq)

    def exact(self, name: str, wire: str) -> SyncReadExact:
        return SyncReadExact(self.ids[name], wire)

    def apply(
        self,
        *items: SyncReadFrontier | SyncReadExact,
        floor: int | None = None,
        current: int | None = None,
    ) -> SyncReadApplyResult:
        top = max(100, self.cursor) if current is None else current
        snapshot = SyncReadSnapshot(self.floor if floor is None else floor, top)
        return self.store.sync_apply_read_state(self.key, snapshot, items)

    def block(self, name: str, reason: str = REASON_LIMIT) -> SyncReadBlocked:
        return self.store.sync_block_read_state(self.key, SyncReadBlock(self.ids[name], reason))

    def unblock(self, name: str) -> SyncReadUnblocked:
        return self.store.sync_unblock_read_state(self.key, SyncReadUnblock(self.ids[name]))

    # -- inspection ------------------------------------------------------------------

    def rows(self, name: str) -> list[tuple[Any, ...]]:
        return sorted(table(self.store.conn, f"SELECT * FROM {name}"), key=repr)

    def everything(self) -> dict[str, list[tuple[Any, ...]]]:
        names = table(self.store.conn, "SELECT name FROM sqlite_master WHERE type = 'table'")
        return {row[0]: self.rows(row[0]) for row in names}

    def binding_row(self) -> dict[str, Any]:
        columns = [c[1] for c in table(self.store.conn, "PRAGMA table_info(sync_bindings)")]
        (row,) = table(self.store.conn, "SELECT * FROM sync_bindings")
        return dict(zip(columns, row, strict=True))

    def remote_exact(self) -> set[tuple[str, str]]:
        name = {member_id: n for n, member_id in self.ids.items()}
        return {
            (name[m], w)
            for m, w in table(self.store.conn, "SELECT member_id, wire_id FROM read_remote_exact")
        }

    def outbox(self) -> set[tuple[str, str]]:
        name = {member_id: n for n, member_id in self.ids.items()}
        return {
            (name[m], w)
            for m, w in table(self.store.conn, "SELECT member_id, wire_id FROM read_outbox")
        }

    def blocks(self) -> dict[str, str]:
        name = {member_id: n for n, member_id in self.ids.items()}
        rows = table(self.store.conn, "SELECT member_id, reason FROM read_blocks")
        return {name[m]: reason for m, reason in rows}


def adopt(store: Store, roster: list[tuple[str, str]]) -> None:
    """Take ``roster`` as the relay's authenticated members (as the engine does)."""
    with write_transaction(store.conn, store.path, "engine.roster") as conn:
        team_rows.adopt_roster(conn, team_rows.team_pk(conn, "dev"), roster, NOW)


@pytest.fixture
def scene(store: Store, key: BindingKey) -> Scene:
    ids = {"alice": new_uuid7(), "bob": new_uuid7()}
    adopt(store, [(member_id, name) for name, member_id in ids.items()])
    store.sync_bind(key)
    return Scene(store, key, ids)


# -- coverage and projection -----------------------------------------------------------


def test_a_remote_frontier_marks_held_messages_at_or_below_it_read(scene: Scene) -> None:
    for seq in (1, 2, 3):
        scene.pull(seq, f"m{seq}")
    scene.apply(scene.frontier("bob", 2))
    assert scene.unread("bob") == ["m3"]


def test_a_remote_frontier_covers_only_its_own_members_messages(scene: Scene) -> None:
    scene.pull(1, "to alice", to="alice")
    scene.pull(2, "to bob")
    scene.apply(scene.frontier("bob", 5))
    assert (scene.unread("alice"), scene.unread("bob")) == (["to alice"], [])


def test_an_acknowledged_local_message_is_covered_through_its_acked_sequence(
    scene: Scene,
) -> None:
    scene.send("mine")
    scene.push(4)
    scene.apply(scene.frontier("bob", 4))
    assert scene.unread("bob") == []


def test_a_local_message_without_an_acknowledged_mapping_is_never_covered_remotely(
    scene: Scene,
) -> None:
    scene.send("never pushed")
    scene.send("reserved")
    scene.reserve()
    scene.send("also never pushed")
    scene.apply(scene.frontier("bob", 50), floor=40)
    scene.prepare(floor=45)
    assert scene.unread("bob") == ["never pushed", "reserved", "also never pushed"]


def test_an_acknowledgement_under_the_remote_frontier_makes_the_message_read(
    scene: Scene,
) -> None:
    scene.send("acked late")
    candidates = scene.reserve()
    scene.apply(scene.frontier("bob", 50))
    assert scene.unread("bob") == ["acked late"]
    scene.reconcile(candidates, 7)
    assert scene.unread("bob") == []


def test_an_acknowledgement_above_the_remote_frontier_leaves_the_message_unread(
    scene: Scene,
) -> None:
    scene.send("acked above")
    candidates = scene.reserve()
    scene.apply(scene.frontier("bob", 50), current=60)
    scene.reconcile(candidates, 51)
    assert scene.unread("bob") == ["acked above"]


def test_an_exact_remote_read_marks_exactly_that_message_read(scene: Scene) -> None:
    scene.pull(1, "m1")
    wire = scene.pull(2, "m2")
    scene.pull(3, "m3")
    scene.apply(scene.exact("bob", wire))
    assert scene.unread("bob") == ["m1", "m3"]


def test_an_exact_remote_read_under_another_member_changes_no_unread_set(scene: Scene) -> None:
    wire = scene.pull(1, "for bob")
    scene.apply(scene.exact("alice", wire))
    assert scene.unread("bob") == ["for bob"]
    assert scene.remote_exact() == {("alice", wire)}


def test_projected_reads_are_local_exact_reads_that_compact_the_frontier(scene: Scene) -> None:
    scene.pull(1, "m1")
    scene.pull(2, "m2")
    scene.apply(scene.frontier("bob", 2))
    assert scene.store.read_cursor_get("dev", "bob") == "2"
    assert table(scene.store.conn, "SELECT count(*) FROM message_reads") == [(2,)]


# -- prepare: the floor --------------------------------------------------------------------


def test_prepare_merges_the_floor_and_projects_it_onto_every_roster_recipient(
    scene: Scene,
) -> None:
    scene.pull(1, "alice old", to="alice")
    scene.pull(2, "bob old")
    scene.send("bob acked")
    scene.push(3)
    scene.pull(4, "bob new")
    scene.send("bob unacked")
    scene.prepare(floor=3)
    assert scene.binding_row()["read_floor"] == 3
    assert scene.unread("alice") == []
    assert scene.unread("bob") == ["bob new", "bob unacked"]


def test_the_floor_counts_as_every_members_frontier(scene: Scene) -> None:
    scene.pull(1, "m1")
    scene.apply(floor=1)
    scene.pull(2, "m2")
    assert scene.unread("bob") == ["m2"]
    scene.read("m2")
    assert scene.prepare().frontiers == {"alice": 2, "bob": 2}


def test_prepare_refuses_a_floor_below_the_stored_floor_and_changes_nothing(
    scene: Scene,
) -> None:
    scene.pull(1, "m1")
    scene.prepare(floor=5)
    before, changes = scene.everything(), scene.store.conn.total_changes()
    with pytest.raises(InvalidInput, match="below the floor 5") as caught:
        scene.prepare(floor=4)
    assert caught.value.field == "min_available_seq"
    assert scene.store.conn.total_changes() == changes
    assert scene.everything() == before


def test_prepare_refuses_a_current_seq_below_the_transport_cursor_and_changes_nothing(
    scene: Scene,
) -> None:
    scene.pull(1, "m1")
    scene.advance(10)
    before, changes = scene.everything(), scene.store.conn.total_changes()
    with pytest.raises(InvalidInput, match="transport cursor 10") as caught:
        scene.prepare(floor=3, current=9)
    assert caught.value.field == "current_seq"
    assert scene.store.conn.total_changes() == changes
    assert scene.everything() == before


# -- prepare: the safe prefix ------------------------------------------------------------


def test_a_member_with_everything_read_reaches_the_transport_cursor(scene: Scene) -> None:
    scene.pull(1, "m1")
    scene.pull(2, "m2")
    scene.advance(10)
    scene.read("m1", "m2")
    assert scene.prepare().frontiers == {"alice": 10, "bob": 10}


def test_the_prefix_stops_before_the_members_first_unread_message(scene: Scene) -> None:
    for seq in (1, 2, 3):
        scene.pull(seq, f"m{seq}")
    scene.read("m1", "m3")
    assert scene.prepare().frontiers["bob"] == 1


def test_an_unread_acknowledged_local_message_stops_its_recipients_prefix(scene: Scene) -> None:
    scene.pull(1, "m1")
    scene.read("m1")
    scene.send("mine, unread")
    scene.push(2)
    scene.advance(5)
    assert scene.prepare().frontiers == {"alice": 5, "bob": 1}


def test_messages_to_other_members_are_vacuously_covered(scene: Scene) -> None:
    scene.pull(1, "bob one")
    scene.pull(2, "alice unread", to="alice")
    scene.pull(3, "bob three")
    scene.advance(5)
    scene.read("bob one", "bob three")
    assert scene.prepare().frontiers == {"alice": 1, "bob": 5}


def test_a_read_by_someone_other_than_the_recipient_does_not_cover_the_message(
    scene: Scene,
) -> None:
    scene.pull(1, "for bob")
    scene.read("for bob", by="alice")
    assert scene.prepare().frontiers == {"alice": 1}
    assert scene.outbox() == set()


@pytest.mark.parametrize(
    "status",
    ["pending_key", "unsupported_cipher", "authentication_failed", "malformed", "policy_violation"],
)
def test_a_blocking_quarantine_entry_stops_every_members_prefix(scene: Scene, status: str) -> None:
    scene.pull(1, "bob one")
    scene.pull(2, "held back", status=status)
    scene.pull(3, "alice three", to="alice")
    scene.pull(4, "bob four")
    scene.read("bob one", "alice three", "bob four")
    assert scene.prepare().frontiers == {"alice": 1, "bob": 1}


def test_a_corrupt_quarantine_entry_stops_every_members_prefix(scene: Scene) -> None:
    scene.send("ours")
    [candidate] = scene.reserve()
    scene.reconcile([candidate], 1)
    scene.pull(2, "blocked later", to="alice")
    # A corrupt row as a store from before the page-halting rule may hold it.
    scene.store.conn.execute(
        "UPDATE sync_quarantine SET status = 'corrupt_state' WHERE server_seq = 2"
    )
    scene.pull(3, "alice three", to="alice")
    scene.read("ours", "alice three")
    assert scene.prepare().frontiers == {"alice": 1, "bob": 1}


def test_a_quarantine_entry_imported_later_stops_the_prefix_only_while_unread(
    scene: Scene,
) -> None:
    wire, envelope = foreign_envelope(scene.key, "late", "carol", "bob")
    scene.pull_wire(1, wire, envelope, "pending_key")
    scene.advance(3)
    assert scene.prepare().frontiers == {}
    scene.pull_wire(1, wire, envelope)
    assert scene.prepare().frontiers == {"alice": 3}
    scene.read("late")
    assert scene.prepare().frontiers == {"alice": 3, "bob": 3}


def test_the_prefix_never_passes_the_transport_cursor(scene: Scene) -> None:
    scene.advance(4)
    scene.send("five")
    scene.send("six")
    wires = scene.push(5, 6)
    scene.read("five", "six")
    out = scene.prepare(current=6)
    assert out.frontiers == {"alice": 4, "bob": 4}
    assert out.exact == {("bob", wires[0]), ("bob", wires[1])}


def test_a_reported_frontier_is_never_below_the_effective_frontier(scene: Scene) -> None:
    scene.advance(10)
    scene.apply(scene.frontier("bob", 20), current=30)
    scene.send("above the remote frontier")
    [wire] = scene.push(25)
    scene.read("above the remote frontier")
    out = scene.prepare(current=30)
    assert out.frontiers["bob"] == 20
    assert out.exact == {("bob", wire)}


def test_a_member_with_no_progress_and_nothing_queued_reports_nothing(scene: Scene) -> None:
    scene.pull(1, "unread")
    scene.apply(scene.frontier("alice", 1))
    assert scene.prepare(current=1).frontiers == {}


def test_a_context_member_new_to_this_store_is_adopted_and_answered(scene: Scene) -> None:
    """The context's members are the relay's roster; a host hands it over
    without adopting it first, so prepare takes a member it has no row for
    and answers it like any other (read-state prepare records)."""
    stranger = new_uuid7()
    context = scene.context()
    context = SyncReadContext(0, 100, (*context.members, (stranger, "zed")), context.local_agents)
    result = scene.store.sync_prepare_read_state(scene.key, context)
    assert [a.member_id for a in result.answers] == [m for m, _ in context.members]
    assert isinstance(result.answers[-1], SyncReadFrontier)
    assert result.blocked == () and scene.blocks() == {}
    assert scene.store.team("dev").members[-1].member_id == stranger


def test_every_context_member_gets_exactly_one_frontier_or_block_in_context_order(
    scene: Scene,
) -> None:
    scene.pull(1, "to bob")
    scene.apply(scene.frontier("alice", 1))
    scene.block("bob")
    result = scene.prepare_raw(current=1)
    records = result.records()
    assert [(r["type"], r["member_id"]) for r in records] == [
        ("sync_read_frontier", scene.ids["alice"]),
        ("sync_read_blocked", scene.ids["bob"]),
    ]
    assert result.frontiers == ()  # alice's frontier did not move: nothing to send


def test_an_unmoved_frontier_is_answered_at_the_members_effective_frontier(scene: Scene) -> None:
    scene.pull(1, "to bob, unread")
    scene.pull(2, "to bob, unread too")
    result = scene.prepare_raw(floor=1, current=2)
    answers = {a.member_id: a for a in result.answers}
    bob = answers[scene.ids["bob"]]
    assert isinstance(bob, SyncReadFrontier) and bob.server_seq == 1  # max(stored 0, floor 1)
    assert scene.ids["bob"] not in {f.member_id for f in result.frontiers}


def test_a_member_whose_name_another_relay_member_holds_is_answered_blocked(
    scene: Scene,
) -> None:
    """Adoption never rebinds a name another relay member holds; that member
    has no row here, and its answer is a block, never a silence."""
    impostor = new_uuid7()
    context = scene.context()
    context = SyncReadContext(0, 100, (*context.members, (impostor, "bob")), context.local_agents)
    result = scene.store.sync_prepare_read_state(scene.key, context)
    assert result.answers[-1] == SyncReadBlocked(impostor, REASON_NAME_MISMATCH)
    assert len(result.answers) == len(context.members)


# -- prepare: exact reads and promotion ------------------------------------------------


def test_reads_above_the_prefix_leave_as_exact_reads_keyed_by_wire_id(scene: Scene) -> None:
    scene.pull(1, "unread")
    two = scene.pull(2, "m2")
    three = scene.pull(3, "m3")
    scene.read("m2", "m3")
    out = scene.prepare()
    assert out.frontiers["bob"] == 0
    assert out.exact == {("bob", two), ("bob", three)}


def test_exact_reads_leave_in_server_seq_order(scene: Scene) -> None:
    scene.pull(1, "unread")
    wires = [scene.pull(seq, f"m{seq}") for seq in (2, 3, 4)]
    scene.read("m4", "m2", "m3")
    assert [e.wire_id for e in scene.prepare_raw().exact] == wires


def test_a_read_under_the_prefix_is_not_sent_again_as_an_exact_read(scene: Scene) -> None:
    scene.pull(1, "m1")
    scene.read("m1")
    out = scene.prepare()
    assert out.frontiers["bob"] == 1 and out.exact == set()


def test_a_read_of_an_unacknowledged_local_message_is_not_emitted(scene: Scene) -> None:
    scene.send("not yet acked")
    scene.reserve()
    scene.read("not yet acked")
    assert scene.outbox() == set()
    assert scene.prepare().exact == set()


def test_a_read_before_the_ack_is_emitted_after_the_ack(scene: Scene) -> None:
    scene.send("read early")
    candidates = scene.reserve()
    scene.read("read early")
    [wire] = scene.reconcile(candidates, 5)
    assert scene.prepare().exact == {("bob", wire)}


def test_a_read_before_the_ack_is_emitted_after_the_echo(scene: Scene) -> None:
    scene.send("read early")
    [candidate] = scene.reserve()
    scene.read("read early")
    scene.pull(4, "unread")
    assert scene.outbox() == set()
    scene.pull_wire(5, candidate.wire_id, candidate.envelope)
    out = scene.prepare()
    assert out.frontiers["bob"] == 3
    assert out.exact == {("bob", candidate.wire_id)}


def test_a_read_after_the_ack_is_promoted_at_once(scene: Scene) -> None:
    scene.send("acked first")
    [wire] = scene.push(5)
    scene.read("acked first")
    assert scene.outbox() == {("bob", wire)}
    assert scene.prepare().exact == {("bob", wire)}


def test_a_read_through_consume_is_promoted_like_a_mark(scene: Scene) -> None:
    scene.pull(1, "unread")
    wire = scene.pull(2, "shown")
    [shown] = [m.id for m in scene.store.history("dev") if m.body == "shown"]
    scene.store.read_cursor_consume("dev", "bob", "2", [shown])
    assert scene.prepare().exact == {("bob", wire)}


def test_one_prepare_carries_at_most_one_thousand_exact_reads_oldest_first(
    scene: Scene,
) -> None:
    records, wires = [], []
    for seq in range(1, MAX_EXACT_PER_PREPARE + 3):
        wire, envelope = foreign_envelope(scene.key, f"m{seq}", "carol", "bob")
        records.append(pull_record(seq, wire, envelope))
        wires.append(wire)
    scene.store.sync_apply_pull(scene.key, records[:500], SyncPullCursor(500))
    scene.store.sync_apply_pull(scene.key, records[500:], SyncPullCursor(len(records)))
    ids = [m.id for m in scene.store.history("dev")[1:]]
    scene.store.mark_read_batch("dev", "bob", ids)
    exact = scene.prepare_raw().exact
    assert [e.wire_id for e in exact] == wires[1 : MAX_EXACT_PER_PREPARE + 1]


# -- prepare: blocks and idempotence ---------------------------------------------------


def test_a_member_whose_relay_name_differs_is_durably_blocked_and_reports_nothing(
    scene: Scene,
) -> None:
    one = scene.pull(1, "m1")
    scene.pull(2, "unread")
    three = scene.pull(3, "m3")
    scene.read("m1", "m3")
    out = scene.prepare(bob="robert")
    assert out.blocked == {"bob": REASON_NAME_MISMATCH}
    assert "bob" not in out.frontiers and all(name != "bob" for name, _ in out.exact)
    assert scene.blocks() == {"bob": REASON_NAME_MISMATCH}
    assert scene.outbox() == {("bob", one), ("bob", three)}
    ((detail,),) = table(scene.store.conn, "SELECT detail FROM read_blocks")
    assert "robert" in detail and "bob" in detail


def test_a_name_mismatch_does_not_hold_back_other_members(scene: Scene) -> None:
    scene.advance(7)
    assert scene.prepare(bob="robert").frontiers == {"alice": 7}


def test_the_name_mismatch_block_clears_when_the_names_agree_again(scene: Scene) -> None:
    scene.pull(1, "m1")
    scene.read("m1")
    scene.prepare(bob="robert")
    out = scene.prepare()
    assert out.blocked == {} and scene.blocks() == {}
    assert out.frontiers == {"alice": 1, "bob": 1}


def test_a_limit_block_persists_across_prepares_until_unblock(scene: Scene) -> None:
    scene.pull(1, "m1")
    scene.read("m1")
    scene.block("bob")
    for _ in range(2):
        out = scene.prepare()
        assert out.blocked == {"bob": REASON_LIMIT} and "bob" not in out.frontiers
    scene.unblock("bob")
    assert scene.prepare().frontiers == {"alice": 1, "bob": 1}


def test_a_limit_block_survives_a_passing_name_mismatch(scene: Scene) -> None:
    scene.block("bob")
    scene.prepare(bob="robert")
    out = scene.prepare()
    assert out.blocked == {"bob": REASON_LIMIT}
    assert scene.blocks() == {"bob": REASON_LIMIT}


def test_prepare_retried_with_nothing_changed_is_byte_identical_and_writes_nothing(
    scene: Scene,
) -> None:
    scene.pull(1, "alice one", to="alice")
    scene.pull(2, "bob unread")
    scene.pull(3, "bob read")
    scene.send("alice acked", to="alice")
    scene.push(4)
    scene.read("alice one", "bob read", "alice acked")
    scene.block("bob")
    first = scene.prepare_raw(floor=1).records()
    assert [r["type"] for r in first] == [
        "sync_read_frontier",
        "sync_read_blocked",
        "sync_read_exact",
    ]
    changes, rows = scene.store.conn.total_changes(), scene.everything()
    second = scene.prepare_raw(floor=1).records()
    assert [dump_line(r) for r in second] == [dump_line(r) for r in first]
    assert scene.store.conn.total_changes() == changes
    assert scene.everything() == rows


def test_a_repeated_name_mismatch_is_byte_identical_and_writes_nothing(scene: Scene) -> None:
    first = [dump_line(r) for r in scene.prepare_raw(bob="robert").records()]
    changes, rows = scene.store.conn.total_changes(), scene.everything()
    second = [dump_line(r) for r in scene.prepare_raw(bob="robert").records()]
    assert second == first
    assert (scene.store.conn.total_changes(), scene.everything()) == (changes, rows)


def test_prepare_never_touches_transport_push_or_quarantine_state(scene: Scene) -> None:
    scene.pull(1, "m1")
    scene.pull(2, "held", status="pending_key")
    scene.send("mine")
    scene.push(3)
    scene.send("reserved")
    scene.reserve()
    scene.read("m1", "mine")
    before = {name: scene.rows(name) for name in TRANSPORT_TABLES}
    binding = scene.binding_row()
    scene.prepare(floor=2, bob="robert")
    scene.prepare(floor=3)
    assert {name: scene.rows(name) for name in TRANSPORT_TABLES} == before
    assert scene.binding_row() == {**binding, "read_floor": 3}


def test_prepare_on_a_stream_never_bound_here_binds_it_and_answers_every_member(
    store: Store,
) -> None:
    """A host's read-state phase may be the first call on a fresh machine:
    the binding is created and the local team interned in prepare's own
    transaction, and every context member is answered."""
    key = new_key("fresh")
    members = ((new_uuid7(), "alice"), (new_uuid7(), "bob"))
    result = store.sync_prepare_read_state(key, SyncReadContext(0, 0, members, ()))
    assert [a for a in result.answers] == [SyncReadFrontier(m, 0) for m, _ in members]
    binding = store.sync_binding(key)
    assert binding is not None and binding.transport_cursor == 0
    assert [m.name for m in store.team("fresh").members] == ["alice", "bob"]


def test_prepare_refuses_a_retired_binding(store: Store) -> None:
    key = new_key()
    binding = store.sync_bind(key)
    store.sync_retire_binding(key, binding.revision)
    with pytest.raises(IllegalTransition, match="retired"):
        store.sync_prepare_read_state(key, SyncReadContext(0, 0, (), ()))


# -- apply: merging ----------------------------------------------------------------------


def test_apply_max_merges_so_a_lower_frontier_moves_nothing_back(scene: Scene) -> None:
    for seq in (1, 2, 3):
        scene.pull(seq, f"m{seq}")
    scene.apply(scene.frontier("bob", 2))
    rows, changes = scene.everything(), scene.store.conn.total_changes()
    scene.apply(scene.frontier("bob", 1))
    assert scene.unread("bob") == ["m3"]
    assert (scene.everything(), scene.store.conn.total_changes()) == (rows, changes)


def test_apply_sets_the_stored_frontier_to_the_highest_reported(scene: Scene) -> None:
    scene.apply(scene.frontier("bob", 4))
    scene.apply(scene.frontier("bob", 9))
    scene.apply(scene.frontier("bob", 6))
    assert table(scene.store.conn, "SELECT server_seq FROM read_remote_frontiers") == [(9,)]


def test_apply_unions_exact_reads_across_pages(scene: Scene) -> None:
    one, two = new_uuid4(), new_uuid4()
    scene.apply(scene.exact("bob", one))
    scene.apply(scene.exact("bob", two), scene.exact("bob", one))
    scene.apply()
    assert scene.remote_exact() == {("bob", one), ("bob", two)}


def test_an_exact_read_of_a_wire_not_yet_held_applies_when_it_is_imported(scene: Scene) -> None:
    wire, envelope = foreign_envelope(scene.key, "read elsewhere first", "carol", "bob")
    scene.apply(scene.exact("bob", wire))
    assert scene.remote_exact() == {("bob", wire)}
    scene.pull_wire(3, wire, envelope)
    assert scene.unread("bob") == []


def test_a_frontier_beyond_held_messages_applies_to_those_imported_later(scene: Scene) -> None:
    scene.apply(scene.frontier("bob", 5))
    scene.pull(4, "under")
    scene.pull(6, "over")
    assert scene.unread("bob") == ["over"]


def test_an_exact_read_of_our_unacknowledged_wire_applies_at_the_ack(scene: Scene) -> None:
    scene.send("ack lost, read elsewhere")
    candidates = scene.reserve()
    scene.apply(scene.exact("bob", candidates[0].wire_id))
    assert scene.unread("bob") == ["ack lost, read elsewhere"]
    scene.reconcile(candidates, 9)
    assert scene.unread("bob") == []


def test_a_limit_blocked_members_incoming_facts_are_still_merged(scene: Scene) -> None:
    scene.pull(1, "m1")
    scene.block("bob")
    scene.apply(scene.frontier("bob", 1))
    assert scene.unread("bob") == []


def test_a_name_mismatch_blocked_members_items_are_not_merged(scene: Scene) -> None:
    scene.pull(1, "m1")
    two = scene.pull(2, "m2")
    scene.prepare(bob="robert")
    before = {n: scene.rows(n) for n in ("read_remote_frontiers", "read_remote_exact")}
    scene.apply(scene.frontier("bob", 1), scene.exact("bob", two))
    assert scene.unread("bob") == ["m1", "m2"]
    assert {n: scene.rows(n) for n in ("read_remote_frontiers", "read_remote_exact")} == before


def test_apply_merges_the_floor_projects_it_and_reports_it(scene: Scene) -> None:
    scene.pull(1, "alice old", to="alice")
    scene.pull(2, "bob old")
    scene.pull(3, "bob new")
    result = scene.apply(scene.frontier("alice", 0), floor=2)
    assert result == SyncReadApplyResult(2, 1)
    assert (scene.unread("alice"), scene.unread("bob")) == ([], ["bob new"])


def test_apply_counts_each_member_the_page_names_once(scene: Scene) -> None:
    result = scene.apply(
        scene.frontier("bob", 1),
        scene.exact("bob", new_uuid4()),
        scene.exact("bob", new_uuid4()),
        scene.exact("alice", new_uuid4()),
    )
    assert result.member_count == 2


def test_reapplying_the_same_page_is_a_no_op(scene: Scene) -> None:
    scene.pull(1, "m1")
    three = scene.pull(3, "m3")
    page = (scene.frontier("bob", 1), scene.exact("bob", three), scene.exact("bob", new_uuid4()))
    first = scene.apply(*page, floor=1)
    rows, changes = scene.everything(), scene.store.conn.total_changes()
    assert scene.apply(*page, floor=1) == first
    assert (scene.everything(), scene.store.conn.total_changes()) == (rows, changes)


# -- apply: garbage collection ---------------------------------------------------------


def test_an_exact_fact_is_collected_once_its_mapping_lies_under_the_frontier(
    scene: Scene,
) -> None:
    scene.pull(1, "m1")
    three = scene.pull(3, "m3")
    scene.apply(scene.exact("bob", three))
    scene.apply(scene.frontier("bob", 2))
    assert scene.remote_exact() == {("bob", three)}
    scene.apply(scene.frontier("bob", 3))
    assert scene.remote_exact() == set()


def test_an_exact_fact_is_never_collected_by_wire_id_alone(scene: Scene) -> None:
    unheld = new_uuid4()
    scene.apply(scene.exact("bob", unheld), scene.frontier("bob", 90))
    scene.apply(scene.frontier("bob", 100), floor=95)
    assert scene.remote_exact() == {("bob", unheld)}


def test_an_exact_read_already_under_the_frontier_is_not_stored(scene: Scene) -> None:
    wire = scene.pull(2, "m2")
    scene.apply(scene.frontier("bob", 5))
    scene.apply(scene.exact("bob", wire))
    assert scene.remote_exact() == set()


def test_an_exact_fact_under_a_blocking_entrys_mapping_is_collected_by_the_frontier(
    scene: Scene,
) -> None:
    wire = scene.pull(2, "held", status="pending_key")
    scene.apply(scene.exact("bob", wire))
    scene.apply(scene.frontier("bob", 2))
    assert scene.remote_exact() == set()


def test_a_queued_read_the_relay_knows_exactly_is_dropped(scene: Scene) -> None:
    scene.pull(1, "unread")
    two = scene.pull(2, "m2")
    scene.read("m2")
    scene.apply(scene.exact("bob", two))
    assert scene.outbox() == set()
    assert scene.prepare().exact == set()


def test_a_queued_read_the_relay_covers_is_dropped(scene: Scene) -> None:
    scene.pull(1, "unread")
    two = scene.pull(2, "m2")
    scene.read("m2")
    assert scene.outbox() == {("bob", two)}
    scene.apply(scene.frontier("bob", 2))
    assert scene.outbox() == set()


# -- apply: what it never touches, what it refuses -------------------------------------


def test_apply_never_touches_transport_push_or_quarantine_state(scene: Scene) -> None:
    scene.pull(1, "m1")
    held = scene.pull(2, "held", status="pending_key")
    scene.send("mine")
    scene.push(3)
    scene.send("reserved")
    scene.reserve()
    before = {name: scene.rows(name) for name in TRANSPORT_TABLES if name != "messages"}
    binding = scene.binding_row()
    scene.apply(scene.frontier("bob", 3), scene.exact("bob", held), floor=1, current=100)
    scene.apply(scene.frontier("alice", 50), floor=2, current=100)
    assert {name: scene.rows(name) for name in before} == before
    assert scene.binding_row() == {**binding, "read_floor": 2}


def _busy(scene: Scene) -> None:
    """Floor 5 stored, the transport cursor at 10, remote facts for bob."""
    scene.pull(1, "m1")
    scene.pull(6, "m6")
    scene.advance(10)
    scene.apply(scene.frontier("bob", 6), scene.exact("bob", new_uuid4()), floor=5, current=20)


BAD_PAGES: list[tuple[str, Callable[[Scene], tuple[SyncReadSnapshot, list[Any]]], str]] = [
    (
        "frontier-beyond-current",
        lambda s: (SyncReadSnapshot(5, 20), [s.frontier("alice", 8), s.frontier("bob", 21)]),
        "item 2.server_seq",
    ),
    (
        "two-frontiers-for-one-member",
        lambda s: (SyncReadSnapshot(5, 20), [s.frontier("bob", 8), s.frontier("bob", 9)]),
        "item 2.member_id",
    ),
    (
        "floor-below-stored",
        lambda s: (SyncReadSnapshot(4, 20), [s.frontier("alice", 8)]),
        "min_available_seq",
    ),
    (
        "current-below-transport-cursor",
        lambda s: (SyncReadSnapshot(5, 9), [s.frontier("alice", 8)]),
        "current_seq",
    ),
]


@pytest.mark.parametrize(
    ("page", "field"), [(p, f) for _, p, f in BAD_PAGES], ids=[n for n, _, _ in BAD_PAGES]
)
def test_a_bad_page_is_refused_naming_the_problem_and_changes_nothing(
    scene: Scene,
    page: Callable[[Scene], tuple[SyncReadSnapshot, list[Any]]],
    field: str,
) -> None:
    _busy(scene)
    snapshot, items = page(scene)
    before, changes = scene.everything(), scene.store.conn.total_changes()
    with pytest.raises(InvalidInput) as caught:
        scene.store.sync_apply_read_state(scene.key, snapshot, items)
    assert caught.value.field == field
    assert scene.store.conn.total_changes() == changes
    assert scene.everything() == before


def test_a_frontier_at_current_seq_is_accepted(scene: Scene) -> None:
    scene.pull(3, "m3")
    scene.apply(scene.frontier("bob", 3), current=3)
    assert scene.unread("bob") == []


def test_items_about_members_this_store_does_not_hold_are_passed_over(scene: Scene) -> None:
    """A host engine hands read-apply every item of the page; one about a
    member this store has no row for cannot be held and changes nothing."""
    scene.pull(1, "m1")
    before = scene.everything()
    result = scene.apply(SyncReadFrontier(new_uuid7(), 1), SyncReadExact(new_uuid7(), new_uuid4()))
    assert result.member_count == 0
    assert scene.everything() == before


def test_apply_on_a_stream_never_bound_here_binds_it(store: Store) -> None:
    key = new_key("fresh")
    result = store.sync_apply_read_state(key, SyncReadSnapshot(0, 0), [])
    assert result.member_count == 0
    assert store.sync_binding(key) is not None


def test_apply_refuses_a_retired_binding(store: Store) -> None:
    key = new_key()
    store.sync_retire_binding(key, store.sync_bind(key).revision)
    with pytest.raises(IllegalTransition, match="retired"):
        store.sync_apply_read_state(key, SyncReadSnapshot(0, 0), [])


# -- block / unblock ---------------------------------------------------------------------


def test_block_is_durable_and_reported_by_prepare(scene: Scene) -> None:
    assert scene.block("bob") == SyncReadBlocked(scene.ids["bob"], REASON_LIMIT)
    assert scene.blocks() == {"bob": REASON_LIMIT}
    assert scene.prepare().blocked == {"bob": REASON_LIMIT}


def test_block_keeps_every_local_and_remote_fact(scene: Scene) -> None:
    scene.pull(1, "unread")
    two = scene.pull(2, "m2")
    scene.read("m2")
    scene.apply(scene.frontier("bob", 0), scene.exact("bob", new_uuid4()))
    kept = ("read_outbox", "read_remote_exact", "read_remote_frontiers", "message_reads")
    before = {name: scene.rows(name) for name in kept}
    scene.block("bob")
    assert {name: scene.rows(name) for name in kept} == before
    assert scene.outbox() == {("bob", two)}


def test_unblock_clears_the_block_and_the_member_reports_again(scene: Scene) -> None:
    scene.pull(1, "m1")
    scene.read("m1")
    scene.block("bob")
    assert scene.unblock("bob") == SyncReadUnblocked(scene.ids["bob"])
    assert scene.blocks() == {}
    assert scene.prepare().frontiers["bob"] == 1


def test_blocking_twice_is_idempotent(scene: Scene) -> None:
    scene.block("bob")
    rows, changes = scene.rows("read_blocks"), scene.store.conn.total_changes()
    assert scene.block("bob") == SyncReadBlocked(scene.ids["bob"], REASON_LIMIT)
    assert (scene.rows("read_blocks"), scene.store.conn.total_changes()) == (rows, changes)


def test_unblocking_twice_is_idempotent(scene: Scene) -> None:
    scene.block("bob")
    scene.unblock("bob")
    changes = scene.store.conn.total_changes()
    assert scene.unblock("bob") == SyncReadUnblocked(scene.ids["bob"])
    assert scene.blocks() == {} and scene.store.conn.total_changes() == changes


def test_block_of_a_member_not_on_the_roster_is_refused_and_changes_nothing(
    scene: Scene,
) -> None:
    before = scene.everything()
    with pytest.raises(InvalidInput, match="not on the roster") as caught:
        scene.store.sync_block_read_state(scene.key, SyncReadBlock(new_uuid7()))
    assert caught.value.field == "member_id"
    assert scene.everything() == before


def test_a_name_mismatch_block_by_request_clears_once_a_context_shows_the_names_agree(
    scene: Scene,
) -> None:
    scene.block("bob", REASON_NAME_MISMATCH)
    assert scene.blocks() == {"bob": REASON_NAME_MISMATCH}
    scene.prepare()
    assert scene.blocks() == {}


@pytest.mark.parametrize("verb", ["block", "unblock"])
def test_block_and_unblock_refuse_a_retired_binding(store: Store, verb: str) -> None:
    key = new_key()
    store.sync_retire_binding(key, store.sync_bind(key).revision)
    member = new_uuid7()
    with pytest.raises(IllegalTransition, match="retired"):
        if verb == "block":
            store.sync_block_read_state(key, SyncReadBlock(member))
        else:
            store.sync_unblock_read_state(key, SyncReadUnblock(member))


# -- crash points ------------------------------------------------------------------------

OPERATIONS: dict[str, Callable[[Scene], object]] = {
    "read.prepare": lambda s: s.prepare(floor=1),
    "read.apply": lambda s: s.apply(s.frontier("bob", 1), floor=1),
    "read.block": lambda s: s.block("bob"),
    "read.unblock": lambda s: s.unblock("bob"),
}


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_each_operation_passes_exactly_its_two_commit_points(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    points: list[str] = []
    monkeypatch.setattr(connection, "crash_point", points.append)
    OPERATIONS[name](scene)
    assert points == [f"{name}.before_commit", f"{name}.after_commit"]


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_a_failure_before_commit_changes_nothing(
    scene: Scene, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    scene.pull(1, "m1")
    scene.read("m1")
    if name == "read.unblock":
        scene.block("bob")
    before = scene.everything()

    def die(point: str) -> None:
        if point == f"{name}.before_commit":
            raise RuntimeError("injected failure before commit")

    monkeypatch.setattr(connection, "crash_point", die)
    with pytest.raises(RuntimeError, match="injected"):
        OPERATIONS[name](scene)
    assert scene.everything() == before


def test_a_prepare_lost_after_commit_keeps_the_floor_and_a_retry_emits_the_same_records(
    scene: Scene, monkeypatch: pytest.MonkeyPatch
) -> None:
    scene.pull(1, "m1")
    scene.pull(2, "unread")
    three = scene.pull(3, "m3")
    scene.read("m3")

    def die(point: str) -> None:
        if point == "read.prepare.after_commit":
            raise RuntimeError("injected failure after commit")

    monkeypatch.setattr(connection, "crash_point", die)
    with pytest.raises(RuntimeError, match="injected"):
        scene.prepare(floor=1, alice="alicia")
    assert scene.binding_row()["read_floor"] == 1
    assert scene.blocks() == {"alice": REASON_NAME_MISMATCH}
    assert scene.unread("bob") == ["unread"]
    monkeypatch.setattr(connection, "crash_point", lambda point: None)
    again = scene.prepare(floor=1, alice="alicia")
    assert again == Prepared({"bob": 1}, {("bob", three)}, {"alice": REASON_NAME_MISMATCH})


def test_a_replaced_bindings_read_overlay_is_never_consulted(scene: Scene) -> None:
    """RS-3: after a binding is retired and the team bound anew (``connect
    --replace``), the old binding's remote facts neither cover messages for
    the new one's answers nor receive the reads made since."""
    scene.pull(1, "m1")
    scene.pull(2, "m2")
    old = scene.store.sync_binding(scene.key)
    assert old is not None
    scene.store.sync_retire_binding(scene.key, old.revision)
    # A stale remote fact left on the old binding: bob read far ahead there.
    with write_transaction(scene.store.conn, scene.store.path, "test.seed") as conn:
        conn.execute(
            "INSERT INTO read_remote_frontiers (binding_pk, member_id, server_seq)"
            " VALUES (?, ?, ?)",
            (old.pk, scene.ids["bob"], 100),
        )
    outbox_before = scene.rows("read_outbox")
    fresh = new_key("dev")
    scene.store.sync_bind(fresh)
    context = SyncReadContext(0, 0, tuple((m, n) for n, m in scene.ids.items()), ())
    answers = {a.member_id: a for a in scene.store.sync_prepare_read_state(fresh, context).answers}
    bob = answers[scene.ids["bob"]]
    assert isinstance(bob, SyncReadFrontier) and bob.server_seq == 0  # not the old 100
    assert scene.unread("bob") == ["m1", "m2"]
    scene.read("m1")
    assert scene.rows("read_outbox") == outbox_before  # nothing queued on the retired binding
