"""A push with nothing to send (syncengine/engine/context.py ``idle_push``):
when no local message waits for its acknowledgement, the push is its
preflight alone — the same report a full push would give, without a prepare
and without the push pipeline; anything waiting goes through the push itself."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from syncengine.engine import Engine
from syncengine.engine.context import idle_push
from syncengine.engine.cycle import drain_push, push_once
from syncengine.http.errors import InvalidRequest
from syncengine.ops.states import IllegalTransition
from tests.syncengine.engine.cycle_support import send
from tests.syncengine.engine.fakerelay import FakeRelay

MakeEngine = Callable[..., Engine]


def paths(relay: FakeRelay, since: int) -> list[str]:
    return [f"{method} {httpx.URL(url).path}" for method, url, _ in relay.requests[since:]]


def no_prepare(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("an idle push must not prepare")


def test_a_push_with_every_message_acknowledged_asks_only_for_its_snapshot(
    make_engine: MakeEngine, relay: FakeRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine()
    send(engine, 3)
    first = engine.push()
    monkeypatch.setattr(engine.store, "sync_prepare_push", no_prepare)
    since = len(relay.requests)
    report = engine.push()
    assert paths(relay, since) == ["GET /v1/capabilities"]
    assert (report.candidates, report.batches, report.stored, report.sealed_blocked) == (0, 0, 0, 0)
    assert report.push_cursor == first.push_cursor
    assert report.cipher == "none" and report.blocked_reason is None


@pytest.mark.parametrize("step", [push_once, drain_push], ids=["push", "push --all"])
def test_the_idle_report_is_the_report_the_whole_push_gives(
    make_engine: MakeEngine, step: Callable[..., Any]
) -> None:
    engine = make_engine()
    send(engine, 2)
    engine.push()
    assert idle_push(engine._context(), 100) == step(engine._context(), 100)


def test_a_message_sent_since_the_last_push_is_pushed(make_engine: MakeEngine) -> None:
    engine = make_engine()
    send(engine, 1)
    engine.push()
    send(engine, 1, body="later")
    report = engine.push()
    assert (report.candidates, report.stored) == (1, 1)


def test_a_reservation_whose_post_failed_is_not_idle_and_is_sent_again(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    send(engine, 1)
    relay.inject("POST", "/v1/messages", lambda: relay.error(400, "invalid-request"))
    with pytest.raises(InvalidRequest):
        engine.push()
    assert idle_push(engine._context(), 100) is None
    report = engine.push()
    assert (report.candidates, report.stored) == (1, 1)


def test_a_retired_binding_is_not_idle_and_the_push_refuses_it(make_engine: MakeEngine) -> None:
    engine = make_engine()
    key = engine.connection.key
    binding = engine.store.sync_binding(key)
    assert binding is not None
    engine.store.sync_retire_binding(key, binding.revision)
    assert idle_push(engine._context(), 100) is None
    with pytest.raises(IllegalTransition, match="binding"):
        engine.push()


def test_an_idle_push_under_a_policy_it_cannot_write_reports_and_logs_the_block(
    make_engine: MakeEngine, relay: FakeRelay, caplog: pytest.LogCaptureFixture
) -> None:
    engine = make_engine()
    send(engine, 1)
    engine.push()
    relay.set_policy("age-v1")  # this device has no age-v1 epoch
    with caplog.at_level(logging.WARNING, logger="syncengine"):
        report = engine.push()
    assert report.cipher is None and "age-v1" in (report.blocked_reason or "")
    assert any("push.blocked" in r.getMessage() for r in caplog.records)


def test_an_idle_sync_neither_prepares_nor_requests_a_page(
    make_engine: MakeEngine, relay: FakeRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = make_engine()
    send(engine, 2)
    engine.sync()
    monkeypatch.setattr(engine.store, "sync_prepare_push", no_prepare)
    since = len(relay.requests)
    report = engine.sync()
    assert report.push.candidates == 0 and report.pull.pages == 0
    assert paths(relay, since) == [
        "GET /v1/capabilities",
        "GET /v1/members",
        "POST /v1/read-state/sync",
    ]
