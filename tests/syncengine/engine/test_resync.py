"""The operator's retention-gap resync against the in-process fake relay
(retention-gap-resynchronization.md "Explicit gap acceptance"; specs/engine.md
§5.2): what must hold before anything changes, the
idempotent rerun, and what the binding looks like afterwards."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from syncengine.engine import Engine
from syncengine.engine.errors import ResyncRefused, ResyncUnsupported, classify
from syncengine.http.errors import ResyncRequired
from syncengine.ids import new_uuid4
from syncengine.local_store import Store
from syncengine.ops.resync import SyncResync
from tests.syncengine.engine.cycle_support import plaintext, send
from tests.syncengine.engine.fakerelay import FakeRelay, reply
from wire.http_v1.binding import ResponseBinding
from wire.http_v1.messages import MessagePage

MakeEngine = Callable[..., Engine]


def fall_behind(engine: Engine, relay: FakeRelay, total: int = 10, floor: int = 6) -> None:
    """``total`` foreign messages, of which retention drops ``1..floor``
    before this machine ever pulls; the pull then records the 410."""
    for i in range(total):
        relay.add_foreign(plaintext(f"m{i}"), new_uuid4())  # type: ignore[arg-type]
    relay.retain_through(floor)
    with pytest.raises(ResyncRequired):
        engine.pull()


def audits(engine: Engine) -> list[tuple[int, ...]]:
    return engine.store.conn.execute(  # type: ignore[return-value]
        "SELECT expected_transport_cursor, accepted_floor, gap_start, gap_end"
        " FROM sync_resync_audits"
    ).fetchall()


def binding_row(engine: Engine) -> tuple[int, ...]:
    return engine.store.conn.execute(  # type: ignore[return-value]
        "SELECT revision, push_cursor, transport_cursor FROM sync_bindings"
    ).fetchone()


def message_gets(relay: FakeRelay) -> int:
    return sum(1 for method, url, _ in relay.requests if method == "GET" and "/v1/messages" in url)


def test_an_approved_floor_moves_the_cursor_there_and_the_next_pull_starts_after_it(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    fall_behind(engine, relay)
    report = engine.resync(6)
    assert not report.already_applied
    audit = report.result.audit
    assert (audit.expected_transport_cursor, audit.gap_start, audit.gap_end) == (0, 1, 6)
    assert audit.unavailable == 6
    assert binding_row(engine)[2] == 6
    pulled = engine.pull()
    assert pulled.received == 4 and pulled.outcomes == {"imported": 4}
    bodies = [m.body for m in engine.store.history("crew", "bob")]
    assert sorted(bodies) == ["m6", "m7", "m8", "m9"]


def test_an_accepted_gap_clears_the_durable_resync_marker(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    fall_behind(engine, relay)
    assert engine.status().engine.state == "resync-required"
    engine.resync(6)
    status = engine.status()
    assert not status.resync_required and status.engine.state == "ok"
    assert status.to_obj()["resync_required"] is None


def test_a_rerun_with_the_same_floor_reports_the_recorded_result_without_a_410(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    fall_behind(engine, relay)
    first = engine.resync(6)
    engine.pull()
    gets = message_gets(relay)
    again = engine.resync(6)
    assert again.already_applied and again.result == first.result
    assert message_gets(relay) == gets  # the old cursor's 410 is not reproduced
    assert audits(engine) == [(0, 6, 1, 6)]


def test_a_driver_commit_whose_output_was_lost_is_completed_by_the_rerun(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    fall_behind(engine, relay)
    # The driver committed, but the engine never saw its result (or died
    # before clearing the marker): the store holds the audit, the marker stands.
    with Store(engine.store.path) as store:
        store.sync_resync(engine.connection.key, SyncResync(0, 6, relay.current_seq))
    assert engine.status().resync_required
    report = engine.resync(6)
    assert report.already_applied
    assert not engine.status().resync_required
    assert audits(engine) == [(0, 6, 1, 6)]


def test_a_floor_other_than_the_relays_is_refused_and_changes_nothing(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    fall_behind(engine, relay)
    before = binding_row(engine)
    with pytest.raises(ResyncRefused, match="floor is 6, not the approved 5"):
        engine.resync(5)
    assert binding_row(engine) == before and audits(engine) == []
    assert engine.status().resync_required


def test_a_relay_that_serves_the_cursor_instead_of_a_410_is_refused(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    fall_behind(engine, relay)
    # A relay that (lying or not) still claims to hold everything after 0.
    unretained = ResponseBinding(relay.server_instance_id, relay.team_id, relay.team_name, 0)
    empty = MessagePage(unretained, (), 0, False)
    relay.inject("GET", "/v1/messages", lambda: reply(empty.to_obj()))
    with pytest.raises(ResyncRefused, match="no 410"):
        engine.resync(6)
    assert binding_row(engine)[2] == 0 and audits(engine) == []


def test_a_floor_that_moves_between_the_snapshot_and_the_410_is_refused(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    fall_behind(engine, relay)

    def moved() -> httpx.Response:
        relay.retain_through(8)
        return relay.error(410, "resync-required", {"after": "0", "min_available_seq": "8"})

    relay.inject("GET", "/v1/messages", moved)
    with pytest.raises(ResyncRefused, match="moved to 8"):
        engine.resync(6)
    assert binding_row(engine)[2] == 0 and audits(engine) == []


def test_a_cursor_already_at_or_above_the_floor_has_no_gap_to_accept(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    for i in range(3):
        relay.add_foreign(plaintext(f"m{i}"), new_uuid4())  # type: ignore[arg-type]
    engine.pull()
    relay.retain_through(2)
    with pytest.raises(ResyncRefused, match="already 3"):
        engine.resync(2)
    assert audits(engine) == []


def test_a_driver_without_stage1_resync_fails_before_any_request(
    make_engine: MakeEngine, relay: FakeRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine()
    fall_behind(engine, relay)
    monkeypatch.setattr("syncengine.local_store.CAPABILITIES", ("stage1-sync",))
    requests = len(relay.requests)
    before = binding_row(engine)
    with pytest.raises(ResyncUnsupported):
        engine.resync(6)
    assert len(relay.requests) == requests
    assert binding_row(engine) == before and audits(engine) == []


def test_unpushed_local_messages_are_still_pushed_after_a_resync(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    send(engine, 3, "mine")
    fall_behind(engine, relay)
    engine.resync(6)
    pushed = engine.push()
    assert pushed.stored == 3 and engine.status().pending_push == 0
    assert relay.current_seq == 13


def test_a_replay_of_a_message_retention_dropped_reconciles_to_its_original_sequence(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    send(engine, 2, "mine")
    engine.push()
    # Lose the acknowledgements: the relay holds seq 1 and 2, the store
    # thinks they are still unacknowledged reservations.
    engine.store.conn.execute(
        "UPDATE sync_push SET state = 'reserved', server_seq = NULL WHERE state = 'acked'"
    )
    engine.store.conn.execute("UPDATE sync_bindings SET push_cursor = 0")
    for i in range(4):
        relay.add_foreign(plaintext(f"m{i}"), new_uuid4())  # type: ignore[arg-type]
    relay.retain_through(5)
    with pytest.raises(ResyncRequired):
        engine.pull()
    engine.resync(5)
    replay = engine.push()
    assert (replay.stored, replay.duplicate) == (0, 2)
    seqs = engine.store.conn.execute(
        "SELECT server_seq FROM sync_push ORDER BY local_position"
    ).fetchall()
    assert seqs == [(1,), (2,)]


def test_status_names_the_gap_and_the_exact_command_that_approves_it(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    fall_behind(engine, relay)
    obj = engine.status().to_obj()["resync_required"]
    assert (obj["after"], obj["min_available_seq"], obj["unavailable"]) == ("0", "6", 6)
    assert obj["command"] == (
        f"syncengine resync --store {engine.store.path} --team crew --accept-floor 6"
    )
    assert obj["command"] in obj["remediation"]


def test_status_lists_accepted_gaps_after_the_approval(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    fall_behind(engine, relay)
    engine.resync(6)
    gaps = engine.status().to_obj()["accepted_gaps"]
    assert gaps == [
        {
            "expected_transport_cursor": "0",
            "accepted_floor": "6",
            "gap_start": "1",
            "gap_end": "6",
            "reason": "retention-gap-accepted",
            "unavailable": 6,
        }
    ]


def test_the_410_failure_remedy_names_the_resync_command(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    for i in range(3):
        relay.add_foreign(plaintext(f"m{i}"), new_uuid4())  # type: ignore[arg-type]
    relay.retain_through(2)
    with pytest.raises(ResyncRequired) as caught:
        engine.pull()
    assert "syncengine resync" in classify(caught.value).remediation
    assert "--accept-floor 2" in engine.status().engine.last_error_remediation  # type: ignore[operator]


def _table(engine: Engine, name: str) -> list[tuple[object, ...]]:
    return sorted(engine.store.conn.execute(f"SELECT * FROM {name}").fetchall(), key=repr)


def test_a_resync_leaves_key_epochs_security_history_and_relay_claims_as_they_were(
    make_engine: MakeEngine, relay: FakeRelay, tmp_path: Path
) -> None:
    """RG-16 (retention-gap-resynchronization.md: only the transport cursor
    moves): the key epochs, the local security history and the relay's
    recorded claims are not touched by the approval itself."""
    from wire.age_keys import X25519Identity

    identity = X25519Identity.generate()
    recipients = tmp_path / "recipients.txt"
    recipients.write_text(identity.recipient.to_string() + "\n")
    engine = make_engine(key_id="epoch-1", recipients_file=str(recipients))
    fall_behind(engine, relay)
    kept = ("engine_key_epochs", "engine_security_history")
    before = {name: _table(engine, name) for name in kept}
    assert before["engine_key_epochs"], "the machine has an epoch to keep"
    seen = engine.store.conn.execute(
        "SELECT seen_floor, seen_current_seq FROM engine_status"
    ).fetchall()
    engine.resync(6)
    assert {name: _table(engine, name) for name in kept} == before
    after = engine.store.conn.execute(
        "SELECT seen_floor, seen_current_seq FROM engine_status"
    ).fetchall()
    # What the relay claimed is only ever max-merged from its own snapshots:
    # the approval neither raised nor lowered it.
    assert after == seen or after == [(6, relay.current_seq)]
    assert binding_row(engine)[2] == 6


@pytest.mark.parametrize(
    ("lie", "named"),
    [("generation", "another generation"), ("gap", "does not describe the requested gap")],
)
def test_a_driver_result_that_contradicts_its_status_or_the_request_is_refused(
    make_engine: MakeEngine, relay: FakeRelay, lie: str, named: str
) -> None:
    """RG-11: the engine reads the driver's result back through the strict
    parser and cross-checks it against the driver's own status and the
    request it made; a driver that answers otherwise is refused."""
    from syncengine.ids import new_uuid4 as fresh_generation
    from syncengine.ops.resync import SyncResyncAudit, SyncResyncResult

    engine = make_engine()
    fall_behind(engine, relay)
    real = engine.store.sync_resync

    def lying(key: object, request: SyncResync) -> SyncResyncResult:
        result = real(key, request)  # type: ignore[arg-type]
        if lie == "generation":
            return SyncResyncResult(fresh_generation(), result.audit)
        return SyncResyncResult(result.driver_generation, SyncResyncAudit(0, request.current_seq))

    engine.store.sync_resync = lying  # type: ignore[method-assign]
    with pytest.raises(ResyncRefused, match=named):
        engine.resync(6)
