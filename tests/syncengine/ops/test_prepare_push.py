"""prepare_push (message-synchronization.md "Prepare push"; specs/sync-stage1.md §4.1)."""

from __future__ import annotations

from typing import Any

import pytest

from syncengine import ids
from syncengine.local_store import Store
from syncengine.ops import prepare_push as pp
from syncengine.ops.bindings import BindingKey
from syncengine.ops.states import ReservationState
from syncengine.ops.sync_records import dump_line
from tests.syncengine.ops.helpers import (
    Classifier,
    FakeRelay,
    foreign_envelope,
    new_key,
    prepare_age,
    prepare_none,
    pull_record,
    table,
)
from wire.age_keys import X25519Identity
from wire.envelope import Envelope
from wire.message import Message
from wire.outcome import Importable
from wire.profiles import Binding, OpenContext, open_envelope
from wire.scalars import check_uuid4


def _send(store: Store, count: int, body: str = "m") -> list[str]:
    return [store.send("dev", "alice", "bob", f"{body}{i}").id for i in range(count)]


def _lines(store: Store, key: BindingKey, limit: int = 100, **kw: Any) -> list[str]:
    return [dump_line(r) for r in store.sync_prepare_push(key, prepare_none(**kw), limit).records()]


def test_prepare_emits_sync_state_first_with_generation_and_transport_cursor(
    store: Store, key: BindingKey
) -> None:
    _send(store, 1)
    records = store.sync_prepare_push(key, prepare_none(), 10).records()
    assert records[0] == {
        "type": "sync_state",
        "driver_generation": store.driver_generation(),
        "transport_cursor": "0",
    }
    assert [r["type"] for r in records[1:]] == ["sync_push_candidate"]


def test_prepare_reemits_identical_envelope_before_reconcile(store: Store, key: BindingKey) -> None:
    _send(store, 3)
    assert _lines(store, key) == _lines(store, key)


def test_prepare_reemits_age_envelope_byte_identical_without_resealing(
    store: Store, key: BindingKey, age_identity: X25519Identity
) -> None:
    _send(store, 2)
    first = store.sync_prepare_push(key, prepare_age(age_identity), 10).candidates
    second = store.sync_prepare_push(key, prepare_age(age_identity), 10).candidates
    assert [c.to_obj() for c in first] == [c.to_obj() for c in second]


def test_prepare_never_reseals_a_published_reservation_when_the_cipher_changes(
    store: Store, key: BindingKey, age_identity: X25519Identity
) -> None:
    _send(store, 1)
    sealed = store.sync_prepare_push(key, prepare_age(age_identity), 10).candidates
    again = store.sync_prepare_push(key, prepare_none(), 10).candidates
    assert again == sealed and again[0].envelope.cipher == "age-v1"


def test_prepare_emits_existing_reservations_before_new_positions(
    store: Store, key: BindingKey
) -> None:
    _send(store, 2)
    first = store.sync_prepare_push(key, prepare_none(), 1).candidates
    _send(store, 1)
    second = store.sync_prepare_push(key, prepare_none(), 10).candidates
    assert second[0] == first[0]
    assert [c.local_position for c in second] == sorted(c.local_position for c in second)
    assert len(second) == 3


def test_prepare_emits_at_most_limit_candidates(store: Store, key: BindingKey) -> None:
    _send(store, 5)
    assert len(store.sync_prepare_push(key, prepare_none(), 3).candidates) == 3
    assert len(store.sync_prepare_push(key, prepare_none(), 3).candidates) == 3
    assert len(store.sync_prepare_push(key, prepare_none(), 10).candidates) == 5


def test_prepare_after_a_position_skips_the_reservations_still_in_flight(
    store: Store, key: BindingKey
) -> None:
    _send(store, 5)
    first = store.sync_prepare_push(key, prepare_none(), 3).candidates
    second = store.sync_prepare_push(key, prepare_none(), 3, after=3).candidates
    assert [c.local_position for c in first] == [1, 2, 3]
    assert [c.local_position for c in second] == [4, 5]


def test_reservations_skipped_by_after_stay_durable_and_are_emitted_again_from_zero(
    store: Store, key: BindingKey
) -> None:
    _send(store, 4)
    first = store.sync_prepare_push(key, prepare_none(), 2).candidates
    second = store.sync_prepare_push(key, prepare_none(), 2, after=2).candidates
    again = store.sync_prepare_push(key, prepare_none(), 10).candidates
    assert again == (*first, *second)


@pytest.mark.parametrize("after", [-1, True, "3", 1.5])
def test_prepare_refuses_an_after_that_is_not_a_local_position(
    store: Store, key: BindingKey, after: object
) -> None:
    with pytest.raises(Exception, match="after"):
        store.sync_prepare_push(key, prepare_none(), 10, after=after)  # type: ignore[arg-type]


@pytest.mark.parametrize("limit", [0, 1001, -1, True])
def test_prepare_refuses_a_limit_outside_one_to_a_thousand(
    store: Store, key: BindingKey, limit: int
) -> None:
    with pytest.raises(Exception, match="limit"):
        store.sync_prepare_push(key, prepare_none(), limit)


def test_prepare_without_allow_new_reserves_nothing_but_reemits_existing(
    store: Store, key: BindingKey
) -> None:
    _send(store, 1)
    first = store.sync_prepare_push(key, prepare_none(), 10).candidates
    _send(store, 1)
    blocked = store.sync_prepare_push(key, prepare_none(allow_new=False), 10)
    assert blocked.candidates == first
    assert table(store.conn, "SELECT count(*) FROM sync_push") == [(1,)]


def test_prepare_without_allow_new_still_emits_sync_state(store: Store, key: BindingKey) -> None:
    records = store.sync_prepare_push(key, prepare_none(allow_new=False), 10).records()
    assert [r["type"] for r in records] == ["sync_state"]


def test_prepare_mints_a_fresh_random_uuid4_per_position(store: Store, key: BindingKey) -> None:
    _send(store, 20)
    wires = [c.wire_id for c in store.sync_prepare_push(key, prepare_none(), 100).candidates]
    assert all(check_uuid4(w, "id") for w in wires)
    assert len(set(wires)) == 20


def test_prepare_candidate_carries_local_position_and_local_id(
    store: Store, key: BindingKey
) -> None:
    ids = _send(store, 2)
    candidates = store.sync_prepare_push(key, prepare_none(), 10).candidates
    assert [c.local_id for c in candidates] == ids
    seqs = table(store.conn, "SELECT seq FROM messages ORDER BY seq")
    assert [c.local_position for c in candidates] == [s[0] for s in seqs]


def test_prepare_seals_the_stored_message_as_the_v1_plaintext(
    store: Store, key: BindingKey
) -> None:
    sent = store.send("dev", "alice", "bob", "hello")
    (candidate,) = store.sync_prepare_push(key, prepare_none(), 10).candidates
    assert Message.from_jcs(candidate.envelope.blob_bytes()) == Message(
        "hello", sent.at, "alice", "bob"
    )


def test_prepare_age_envelope_is_bound_to_the_remote_team_and_wire_id(
    store: Store, key: BindingKey, age_identity: X25519Identity
) -> None:
    _send(store, 1)
    (candidate,) = store.sync_prepare_push(key, prepare_age(age_identity), 10).candidates
    identities: dict[str, object] = {"epoch-1": age_identity}
    right = OpenContext(Binding(key.remote_team_id, candidate.wire_id, 1), identities=identities)
    wrong = OpenContext(
        Binding(key.server_instance_id, candidate.wire_id, 1), identities=identities
    )
    assert isinstance(open_envelope(candidate.envelope, right), Importable)
    assert open_envelope(candidate.envelope, wrong).state == "authentication_failed"


def test_prepare_selects_only_messages_of_the_bound_local_team(
    store: Store, key: BindingKey
) -> None:
    store.create_team("ops", ["alice", "bob"])
    store.send("ops", "alice", "bob", "other team")
    _send(store, 1)
    candidates = store.sync_prepare_push(key, prepare_none(), 10).candidates
    assert [Message.from_jcs(c.envelope.blob_bytes()).body for c in candidates] == ["m0"]


def test_imported_messages_are_never_push_candidates(store: Store, key: BindingKey) -> None:
    wire, envelope = foreign_envelope(key)
    store.sync_apply_pull(key, [pull_record(1, wire, envelope)], _cursor(1))
    _send(store, 1)
    candidates = store.sync_prepare_push(key, prepare_none(), 10).candidates
    assert [Message.from_jcs(c.envelope.blob_bytes()).body for c in candidates] == ["m0"]


def test_acknowledged_reservations_are_not_candidates_again(store: Store, key: BindingKey) -> None:
    _send(store, 2)
    relay = FakeRelay()
    store.sync_reconcile_push(
        key, relay.push(list(store.sync_prepare_push(key, prepare_none(), 1).candidates))
    )
    remaining = store.sync_prepare_push(key, prepare_none(), 10).candidates
    assert len(remaining) == 1 and remaining[0].wire_id not in relay.by_wire


def test_a_message_too_large_for_the_limit_gets_a_durable_visible_blocked_state(
    store: Store, key: BindingKey
) -> None:
    store.send("dev", "alice", "bob", "x" * 500)
    _send(store, 1)
    result = store.sync_prepare_push(key, prepare_none(max_blob_bytes=300), 10)
    assert len(result.candidates) == 1  # the later small message still flows
    status = store.sync_status(key)
    assert status.reservations == {"blocked": 1, "reserved": 1}
    assert status.blocked[0].limit == 300 and "limit" in status.blocked[0].reason


def test_a_blocked_message_is_not_retried_under_the_same_limit(
    store: Store, key: BindingKey
) -> None:
    store.send("dev", "alice", "bob", "x" * 500)
    store.sync_prepare_push(key, prepare_none(max_blob_bytes=300), 10)
    again = store.sync_prepare_push(key, prepare_none(max_blob_bytes=300), 10)
    assert again.candidates == () and again.blocked == ()


def test_a_blocked_message_is_published_when_a_larger_limit_is_offered(
    store: Store, key: BindingKey
) -> None:
    store.send("dev", "alice", "bob", "x" * 500)
    store.sync_prepare_push(key, prepare_none(max_blob_bytes=300), 10)
    (candidate,) = store.sync_prepare_push(key, prepare_none(max_blob_bytes=4096), 10).candidates
    assert candidate.envelope.blob_size > 300
    assert store.sync_status(key).reservations == {"reserved": 1}


def test_a_blocked_message_holds_the_push_cursor(store: Store, key: BindingKey) -> None:
    store.send("dev", "alice", "bob", "x" * 500)
    _send(store, 1)
    candidates = list(store.sync_prepare_push(key, prepare_none(max_blob_bytes=300), 10).candidates)
    result = store.sync_reconcile_push(key, FakeRelay().push(candidates))
    assert result.push_cursor == 0


def test_plan_publish_abandons_private_wire_ids_of_positions_published_meanwhile() -> None:
    message = pp.LocalMessage(7, "local", "b", "2026-01-01T00:00:00.000000Z", "a", "b")
    sealed = pp.Sealed(message, "w-private", Envelope(1, "none", None, "eyJ9"))
    plan = pp.plan_publish(1, [sealed], {7: ReservationState.RESERVED}, frozenset())
    assert plan.inserts == () and plan.emitted == () and plan.taken_positions == (7,)


def test_plan_publish_abandons_a_private_wire_id_already_used_by_a_pulled_envelope() -> None:
    message = pp.LocalMessage(7, "local", "b", "2026-01-01T00:00:00.000000Z", "a", "b")
    sealed = pp.Sealed(message, "w-taken", Envelope(1, "none", None, "eyJ9"))
    plan = pp.plan_publish(1, [sealed], {}, frozenset({"w-taken"}))
    assert plan.inserts == () and plan.emitted == ()


def test_a_failure_between_seal_and_publish_publishes_nothing_and_the_next_call_uses_a_new_wire_id(
    store: Store, key: BindingKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    _send(store, 1)
    minted: list[str] = []
    original = ids.new_uuid4

    def capture() -> str:
        minted.append(original())
        return minted[-1]

    def die(name: str) -> None:
        if name == "prepare.sealed":
            raise RuntimeError("injected failure after sealing")

    monkeypatch.setattr(ids, "new_uuid4", capture)
    monkeypatch.setattr(pp, "crash_point", die)
    with pytest.raises(RuntimeError):
        store.sync_prepare_push(key, prepare_none(), 10)
    assert table(store.conn, "SELECT count(*) FROM sync_push") == [(0,)]
    monkeypatch.setattr(pp, "crash_point", lambda name: None)
    (candidate,) = store.sync_prepare_push(key, prepare_none(), 10).candidates
    assert candidate.wire_id not in minted[:1]


def test_an_age_v1_chunk_sealed_then_lost_before_publish_never_shows_its_wire_ids(
    store: Store, key: BindingKey, age_identity: X25519Identity, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AG-20 for age-v1 (age-v1-profile.md: an abandoned private wire ID
    never appears): a crash at ``prepare.sealed`` after a whole age-v1 chunk
    was sealed publishes nothing; the next prepare seals under fresh wire
    IDs, and no abandoned one is in any row or bound into any envelope."""
    _send(store, 3)
    sealed_ids: list[str] = []
    real_chunk = pp.seal_chunk

    def recording(*args: Any) -> list[pp.Sealed | pp.BlockedSeal]:
        items = real_chunk(*args)
        sealed_ids.extend(item.wire_id for item in items if isinstance(item, pp.Sealed))
        return items

    def die(name: str) -> None:
        if name == "prepare.sealed":
            raise RuntimeError("injected crash after sealing")

    monkeypatch.setattr(pp, "seal_chunk", recording)
    monkeypatch.setattr(pp, "crash_point", die)
    with pytest.raises(RuntimeError):
        store.sync_prepare_push(key, prepare_age(age_identity), 10)
    abandoned = set(sealed_ids)
    assert len(abandoned) == 3
    assert table(store.conn, "SELECT count(*) FROM sync_push") == [(0,)]
    monkeypatch.setattr(pp, "crash_point", lambda name: None)
    candidates = store.sync_prepare_push(key, prepare_age(age_identity), 10).candidates
    assert len(candidates) == 3
    assert abandoned.isdisjoint(c.wire_id for c in candidates)
    stored = {str(row[0]) for row in table(store.conn, "SELECT wire_id FROM sync_push")}
    assert abandoned.isdisjoint(stored)
    # The age-v1 context binds the wire ID inside each ciphertext: decrypting
    # with the identity shows only the new IDs.
    from wire.outcome import Importable
    from wire.profiles import Binding, OpenContext, open_envelope

    for candidate in candidates:
        ctx = OpenContext(
            binding=Binding(key.remote_team_id, candidate.wire_id, 1),
            identities={"epoch-1": age_identity},
        )
        assert isinstance(open_envelope(candidate.envelope, ctx), Importable)


def test_prepare_publishes_every_new_reservation_of_a_call_in_one_transaction(
    store: Store, key: BindingKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    _send(store, 30)
    points: list[str] = []
    monkeypatch.setattr(pp, "crash_point", points.append)
    import syncengine.store.connection as connection

    monkeypatch.setattr(connection, "crash_point", points.append)
    store.sync_prepare_push(key, prepare_none(), 100)
    assert points.count("prepare.publish.after_commit") == 1


def _cursor(n: int) -> Any:
    from syncengine.ops.sync_records import SyncPullCursor

    return SyncPullCursor(n)


def test_classifier_double_opens_our_own_none_candidates(store: Store, key: BindingKey) -> None:
    # Sanity of the test double used across the suite.
    _send(store, 1)
    relay = FakeRelay()
    relay.push(list(store.sync_prepare_push(key, prepare_none(), 10).candidates))
    (message,), cursor = Classifier(key).page(relay, 0)
    assert message.status == "importable" and cursor.next_after == 1


def test_prepare_for_a_local_team_never_seen_interns_it_and_binds_in_one_step(
    store: Store,
) -> None:
    """The storage axis registers nothing (driver-interface §2): a host's
    first prepare on a machine that never named the team just works."""
    result = store.sync_prepare_push(new_key("ghost"), prepare_none(), 10)
    assert result.candidates == () and result.state.transport_cursor == 0
    assert table(store.conn, "SELECT count(*) FROM teams WHERE name = 'ghost'") == [(1,)]
    assert table(store.conn, "SELECT count(*) FROM sync_bindings") == [(1,)]


def test_a_fresh_chunk_is_planned_as_the_per_item_walk_plans_it() -> None:
    """``plan_publish`` of sealed messages at positions with no row and
    unused wire IDs (``_plan_fresh``) writes the rows and emits the
    candidates of the per-item walk, which an unrelated stored position
    forces without changing its outcome."""
    items: list[pp.Sealed | pp.BlockedSeal] = [
        pp.Sealed(
            pp.LocalMessage(p, f"local-{p}", "b", "2026-01-01T00:00:00.000000Z", "a", "b"),
            f"w-{p}",
            Envelope(1, "none" if p % 2 else "age-v1", None if p % 3 else "epoch-1", f"eyJ{p}"),
        )
        for p in (3, 4, 5, 9, 10)
    ]
    walked = pp.plan_publish(7, items, {-1: ReservationState.RESERVED}, frozenset({"w-none"}))
    assert walked.inserts and len(walked.emitted) == len(items)
    assert pp.plan_publish(7, items, {}, frozenset()) == walked
