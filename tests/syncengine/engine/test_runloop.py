"""The run loop stays up on refusals (#773) and proxy pages (#814), catches up
without sleeping, stops on request, and one engine holds a binding at a time."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from syncengine.engine import (
    CycleOutcome,
    Engine,
    EngineLocked,
    RunLoop,
    RunSettings,
    StopRequested,
    StopSignal,
)
from syncengine.http.client import ClientConfig
from syncengine.http.retry import RetryPolicy
from syncengine.local_store import Store
from tests.syncengine.engine.fakerelay import FakeRelay, proxy_page

MakeEngine = Callable[..., Engine]
QUICK = RunSettings(
    interval=0.2, jitter=0.0, backoff_base=0.01, backoff_cap=0.02, refusal_wait=0.01
)


def run(engine: Engine, cycles: int, settings: RunSettings = QUICK) -> list[CycleOutcome]:
    outcomes: list[CycleOutcome] = []
    RunLoop(engine, StopSignal(), settings, on_cycle=outcomes.append).run(max_cycles=cycles)
    return outcomes


def test_loop_survives_a_definitive_refusal_and_records_it(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    relay.inject("GET", "/v1/capabilities", lambda: relay.error(401, "unauthenticated"))
    outcomes = run(engine, 2)
    assert [(o.ok, o.state, o.code) for o in outcomes] == [
        (False, "refused", "unauthenticated"),
        (True, "ok", None),
    ]
    assert outcomes[0].wait == QUICK.refusal_wait
    status = engine.status().engine
    assert status.state == "ok" and status.last_error_code == "unauthenticated"


def test_loop_backs_off_on_a_proxy_503_page_and_recovers(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    relay.inject("GET", "/v1/capabilities", proxy_page, proxy_page)  # both attempts
    outcomes = run(engine, 2)
    assert [(o.ok, o.state) for o in outcomes] == [(False, "backoff"), (True, "ok")]
    assert outcomes[0].wait == QUICK.backoff(1)
    assert engine.status().engine.failures_since_success == 0


def test_loop_catches_up_without_sleeping_while_pushes_are_full(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    engine = make_engine()
    with Store(engine.store.path) as store:
        for i in range(150):
            store.send("crew", "alice", "bob", f"m{i}")
    outcomes = run(engine, 2)
    assert outcomes[0].report is not None and outcomes[0].report.push.candidates == 100
    assert outcomes[0].wait == 0.0
    assert outcomes[1].report is not None and outcomes[1].report.push.candidates == 50
    assert outcomes[1].wait == pytest.approx(QUICK.interval)
    assert relay.current_seq == 150


def test_transient_backoff_grows_and_is_capped() -> None:
    settings = RunSettings(backoff_base=1.0, backoff_cap=60.0)
    assert [settings.backoff(n) for n in (1, 2, 3, 7, 50)] == [1.0, 2.0, 4.0, 60.0, 60.0]


def test_stop_interrupts_a_retry_wait_without_recording_a_failure(
    tmp_path: Path, relay: FakeRelay, make_engine: MakeEngine
) -> None:
    path = make_engine().store.path
    stop = StopSignal()
    slow = ClientConfig(retry=RetryPolicy(max_attempts=5, backoff_base=30.0, backoff_cap=30.0))
    engine = Engine(
        path, transport=relay.transport(), client_config=slow, sleep=stop.interruptible_sleep
    )
    relay.inject("GET", "/v1/capabilities", *[proxy_page] * 5)
    timer = threading.Timer(0.2, stop.set)
    timer.start()
    try:
        with pytest.raises(StopRequested):
            engine.sync()
        assert RunLoop(engine, stop, QUICK).run() == 0
        assert engine.status().engine.state == "connected"  # nothing recorded
    finally:
        timer.cancel()
        engine.close()


def test_a_second_engine_on_the_same_binding_is_refused(make_engine: MakeEngine) -> None:
    engine = make_engine()
    with engine.lock(), pytest.raises(EngineLocked, match=r"pid \d+"):
        engine.lock().acquire()
    engine.lock().acquire().release()  # released: free again


def test_loop_waits_the_refusal_interval_while_a_resync_is_required_and_resumes_after_it(
    make_engine: MakeEngine, relay: FakeRelay
) -> None:
    from syncengine.ids import new_uuid4
    from tests.syncengine.engine.cycle_support import plaintext

    engine = make_engine()
    for i in range(4):
        relay.add_foreign(plaintext(f"m{i}"), new_uuid4())  # type: ignore[arg-type]
    relay.retain_through(3)
    waiting = run(engine, 3)
    assert [(o.state, o.wait) for o in waiting] == [("resync-required", QUICK.refusal_wait)] * 3
    gets = [url for method, url, _ in relay.requests if method == "GET" and "/v1/messages" in url]
    assert len(gets) == 3  # one 410 per cycle, never a retry storm
    engine.resync(3)
    resumed = run(engine, 1)
    assert resumed[0].ok and resumed[0].report is not None
    assert resumed[0].report.pull.received == 1
