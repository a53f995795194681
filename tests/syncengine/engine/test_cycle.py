"""The cycle against the in-process fake relay: push batching and splitting,
the write-set preflight, per-page pull, policy evaluation, resync-required."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from syncengine.engine import Engine, PushOversized
from syncengine.http.errors import InvalidRequest, ResyncRequired, UnsupportedCipher
from syncengine.ids import new_uuid4
from syncengine.local_store import Store
from tests.syncengine.engine.cycle_support import plaintext, send
from tests.syncengine.engine.fakerelay import FakeRelay

MakeEngine = Callable[..., Engine]


def test_push_posts_every_pending_message_once_and_reconciles(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    send(engine, 5)
    report = engine.push()
    assert (report.candidates, report.stored, report.duplicate) == (5, 5, 0)
    assert report.push_cursor == 5 and relay.current_seq == 5
    assert engine.status().pending_push == 0
    again = engine.push()
    assert again.candidates == 0 and relay.posted_batches == [5]


def test_push_halves_a_batch_the_relay_answers_413_keeping_ids_and_envelopes(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    send(engine, 8, body="x" * 300)
    relay.max_request_bytes = 1500  # about three such messages per request
    report = engine.push()
    assert report.stored == 8 and report.splits >= 2
    assert max(relay.posted_batches) <= 3 and sum(relay.posted_batches) == 8
    assert report.push_cursor == 8


def test_a_message_too_large_even_alone_is_push_oversized(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    send(engine, 1, body="y" * 2000)
    relay.max_request_bytes = 1000
    with pytest.raises(PushOversized):
        engine.push()
    assert engine.status().engine.last_error_code == "push-oversized"


def test_acks_received_before_a_later_batch_fails_are_recorded_first(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    send(engine, 4)
    # The whole batch gets 413; its first half is stored, its second refused.
    relay.inject("POST", "/v1/messages", lambda: relay.error(413, "request-too-large"))
    original = relay.post
    calls = {"n": 0}

    def post_then_refuse(request: object) -> object:
        calls["n"] += 1
        if calls["n"] == 2:
            return relay.error(422, "unsupported-cipher", _unsupported_details())
        return original(request)  # type: ignore[arg-type]

    relay.post = post_then_refuse  # type: ignore[assignment, method-assign]
    with pytest.raises(UnsupportedCipher):
        engine.push()
    status = engine.status()
    assert status.sync.binding is not None and status.sync.binding.push_cursor == 2
    assert status.sync.reservations == {"acked": 2, "reserved": 2}


def _unsupported_details() -> dict[str, object]:
    return {
        "id": new_uuid4(),
        "v": 1,
        "cipher": "none",
        "write_allowed_ciphers": ["none"],
        "accepted_envelope_versions": [1],
        "policy_revision": "0",
    }


def test_empty_write_set_mints_nothing_and_pull_continues(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    relay.set_policy("age-v1")  # this device has no age-v1 epoch
    relay.add_foreign(plaintext("old"), new_uuid4())  # type: ignore[arg-type]
    send(engine, 2)
    report = engine.sync()
    assert not report.push.allow_new and report.push.candidates == 0
    assert "age-v1" in (report.push.blocked_reason or "")
    assert relay.posted_batches == []
    assert report.pull.received == 1
    assert engine.status().pending_push == 2


def test_pull_walks_pages_from_the_cursor_until_has_more_is_false(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    for i in range(25):
        relay.add_foreign(plaintext(f"m{i}"), new_uuid4())  # type: ignore[arg-type]
    report = engine.pull(page_limit=10)
    afters = [
        url.split("after=")[1].split("&")[0]
        for method, url, _ in relay.requests
        if method == "GET" and "/v1/messages" in url
    ]
    assert afters == ["0", "10", "20"]
    assert report.pages == 3 and report.received == 25
    assert report.outcomes == {"imported": 25}
    with Store(engine.store.path) as store:
        assert len(store.list_unread("crew", "alice")) == 25


def _get_afters(relay: FakeRelay) -> list[str]:
    return [
        url.split("after=")[1].split("&")[0]
        for method, url, _ in relay.requests
        if method == "GET" and "/v1/messages" in url
    ]


def test_pull_requests_the_next_page_while_applying_the_current_one(
    make_engine: MakeEngine, relay: FakeRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine()
    for i in range(15):
        relay.add_foreign(plaintext(f"m{i}"), new_uuid4())  # type: ignore[arg-type]
    original = engine.store.sync_apply_pull
    seen: list[list[str]] = []

    def apply_once_the_next_page_is_asked_for(*args: object) -> object:
        # Only a prefetching engine has asked for page two before page one
        # is applied; a serial one would make this wait time out.
        deadline = time.monotonic() + 5.0
        while "10" not in _get_afters(relay) and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(_get_afters(relay))
        return original(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(engine.store, "sync_apply_pull", apply_once_the_next_page_is_asked_for)
    report = engine.pull(page_limit=10)
    assert seen[0] == ["0", "10"]
    assert report.received == 15 and report.transport_cursor == 15


def test_pull_error_of_the_prefetched_page_surfaces_after_the_page_before_is_applied(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    for i in range(25):
        relay.add_foreign(plaintext(f"m{i}"), new_uuid4())  # type: ignore[arg-type]
    original = relay.get

    def refuse_second_page(request: object) -> object:
        if "after=10" in str(request.url):  # type: ignore[attr-defined]
            return relay.error(400, "invalid-request")
        return original(request)  # type: ignore[arg-type]

    relay.get = refuse_second_page  # type: ignore[assignment, method-assign]
    with pytest.raises(InvalidRequest):
        engine.pull(page_limit=10)
    status = engine.status()
    assert status.sync.binding is not None and status.sync.binding.transport_cursor == 10
    assert "20" not in _get_afters(relay)


def test_plaintext_after_a_server_policy_boundary_is_a_policy_violation(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    relay.add_foreign(plaintext("before"), new_uuid4())  # type: ignore[arg-type]
    relay.set_policy("age-v1")
    relay.add_foreign(plaintext("after"), new_uuid4())  # type: ignore[arg-type]
    report = engine.pull()
    assert report.outcomes == {"imported": 1, "policy_violation": 1}
    with Store(engine.store.path) as store:
        assert [m.body for m in store.list_unread("crew", "alice")] == ["before"]


def test_pull_refreshes_capabilities_when_a_page_passes_the_snapshot(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    original = relay.capabilities

    def stale_then_fresh() -> object:
        # The first snapshot predates the policy change and the new message.
        relay.capabilities = original  # type: ignore[method-assign]
        relay.messages, saved = relay.messages[:1], relay.messages
        relay.history, saved_history = relay.history[:1], relay.history
        caps = original()
        relay.messages, relay.history = saved, saved_history
        return caps

    relay.add_foreign(plaintext("before"), new_uuid4())  # type: ignore[arg-type]
    relay.set_policy("age-v1")
    relay.add_foreign(plaintext("after"), new_uuid4())  # type: ignore[arg-type]
    relay.capabilities = stale_then_fresh  # type: ignore[assignment, method-assign]
    report = engine.pull()
    assert report.capability_refreshes == 1
    assert report.outcomes == {"imported": 1, "policy_violation": 1}


def test_resync_required_is_durable_visible_and_never_moves_the_cursor(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    for i in range(6):
        relay.add_foreign(plaintext(f"m{i}"), new_uuid4())  # type: ignore[arg-type]
    relay.retain_through(4)
    with pytest.raises(ResyncRequired):
        engine.pull()
    path = engine.store.path
    engine.close()
    # A new process sees the marker; the cursor stayed where it was.
    reopened = Engine(path, transport=relay.transport())
    status = reopened.status()
    assert status.resync_required and status.engine.state == "resync-required"
    assert (status.engine.resync_after, status.engine.resync_min_available_seq) == (0, 4)
    assert status.sync.binding is not None and status.sync.binding.transport_cursor == 0
    obj = status.to_obj()
    assert obj["resync_required"]["min_available_seq"] == "4"
    # A push still succeeds but does not clear the marker.
    reopened.push()
    assert reopened.status().engine.state == "resync-required"
    reopened.close()


def test_failure_is_recorded_with_its_remedy_and_cleared_by_success(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    relay.inject("GET", "/v1/capabilities", lambda: relay.error(400, "invalid-request"))
    with pytest.raises(InvalidRequest):
        engine.push()
    failed = engine.status().engine
    assert failed.state == "refused" and failed.last_error_code == "invalid-request"
    assert failed.last_error_remediation and failed.failures_since_success == 1
    engine.sync()
    healed = engine.status().engine
    assert healed.state == "ok" and healed.failures_since_success == 0
    assert healed.last_success_at is not None


def test_bearer_credential_never_reaches_logs_status_or_the_store(
    make_engine: MakeEngine, relay: FakeRelay, caplog: pytest.LogCaptureFixture
) -> None:
    import json
    import logging

    from tests.syncengine.engine.fakerelay import SECRET

    caplog.set_level(logging.DEBUG)
    engine = make_engine()
    send(engine, 2)
    relay.inject("GET", "/v1/capabilities", lambda: relay.error(400, "invalid-request"))
    with pytest.raises(InvalidRequest):
        engine.sync()
    engine.sync()
    assert SECRET not in caplog.text
    assert SECRET not in json.dumps(engine.status().to_obj())
    assert SECRET.encode() not in engine.store.path.read_bytes()
    assert SECRET not in repr(engine.client)


# -- draining a backlog (push --all) -------------------------------------------------


def _reserved_beyond(engine: Engine, position: int) -> int:
    with Store(engine.store.path) as store:
        row = store.conn.execute(
            "SELECT count(*) FROM sync_push WHERE state = 'reserved' AND local_position > ?",
            (position,),
        ).fetchone()
    return int(row[0])


def test_push_all_drains_the_backlog_in_rounds_of_the_limit_exactly_once(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    send(engine, 10)
    report = engine.push_all(3)
    assert (report.candidates, report.stored, report.duplicate) == (10, 10, 0)
    assert relay.posted_batches == [3, 3, 3, 1]
    assert report.push_cursor == 10 and relay.current_seq == 10
    assert engine.status().pending_push == 0


def test_push_all_prepares_the_next_round_while_the_post_is_in_flight(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    send(engine, 6)
    original = relay.post
    seen: list[int] = []

    def slow_post(request: object) -> object:
        # The relay holds the first POST until round two is published (or
        # gives up after five seconds): only an overlapped prepare gets there.
        deadline = time.monotonic() + 5.0
        while not seen and time.monotonic() < deadline:
            if _reserved_beyond(engine, 3) == 3:
                seen.append(relay.current_seq)
            time.sleep(0.01)
        return original(request)  # type: ignore[arg-type]

    relay.post = slow_post  # type: ignore[assignment, method-assign]
    report = engine.push_all(3)
    assert seen == [0], "round two was not prepared during round one's POST"
    assert report.stored == 6 and relay.posted_batches == [3, 3]


def test_push_all_refused_midway_keeps_prepared_rounds_durable_and_loses_nothing(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    send(engine, 9)
    original = relay.post
    calls = {"n": 0}

    def refuse_second(request: object) -> object:
        calls["n"] += 1
        if calls["n"] == 2:
            return relay.error(422, "unsupported-cipher", _unsupported_details())
        return original(request)  # type: ignore[arg-type]

    relay.post = refuse_second  # type: ignore[assignment, method-assign]
    with pytest.raises(UnsupportedCipher):
        engine.push_all(3)
    status = engine.status()
    assert status.sync.reservations == {"acked": 3, "reserved": 6}
    report = engine.push_all(3)
    assert report.stored == 6 and relay.current_seq == 9
    assert len(relay.by_id) == 9 and engine.status().pending_push == 0


def test_push_all_records_the_acks_of_a_post_before_a_failed_overlapped_prepare_surfaces(
    make_engine: MakeEngine, relay: FakeRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine()
    send(engine, 6)
    original = engine.store.sync_prepare_push

    def fail_next_round(
        key: object, request: object, limit: int, after: int = 0, **kw: object
    ) -> object:
        if after:
            raise RuntimeError("disk trouble while preparing round two")
        return original(key, request, limit, after, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(engine.store, "sync_prepare_push", fail_next_round)
    with pytest.raises(RuntimeError, match="round two"):
        engine.push_all(3)
    status = engine.status()
    assert status.sync.binding is not None and status.sync.binding.push_cursor == 3
    assert relay.posted_batches == [3]


def test_a_failed_operation_is_logged_at_info_so_the_caller_reports_it_once(
    make_engine: MakeEngine, relay: FakeRelay, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    caplog.set_level(logging.INFO, logger="syncengine.engine")
    engine = make_engine()
    relay.inject("GET", "/v1/capabilities", lambda: relay.error(400, "invalid-request"))
    with pytest.raises(InvalidRequest):
        engine.push()
    mine = [r for r in caplog.records if r.name == "syncengine.engine" and "invalid" in r.message]
    assert mine and all(r.levelno == logging.INFO for r in mine)


def test_push_all_never_uses_the_relay_client_from_two_threads_at_once(
    make_engine: MakeEngine, relay: FakeRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    import functools
    import threading

    import syncengine.engine.cycle as cycle

    engine = make_engine()
    send(engine, 12, body="x" * 300)
    # Rounds of 4 go out as two batches of 2, and every batch is then split
    # after a 413, so each round makes several relay calls besides its preflight.
    monkeypatch.setattr(cycle, "plan_batches", functools.partial(cycle.plan_batches, max_count=2))  # type: ignore[attr-defined]
    relay.max_request_bytes = 700
    client = engine.client
    original = client._run
    lock = threading.Lock()
    state = {"in_flight": 0, "most": 0}

    def tracked(call: object) -> object:
        with lock:
            state["in_flight"] += 1
            state["most"] = max(state["most"], state["in_flight"])
        try:
            time.sleep(0.02)  # widen any window in which a second thread could enter
            return original(call)  # type: ignore[arg-type]
        finally:
            with lock:
                state["in_flight"] -= 1

    monkeypatch.setattr(client, "_run", tracked)
    report = engine.push_all(4)
    assert report.stored == 12 and report.splits >= 3
    assert state["most"] == 1
