"""The run loop's waker (syncengine/engine/live.py; specs/live.md §6–§8):
what ends a wait, and the spacing that keeps a lying relay from making a
client spin. Time is a fake clock advanced by the fake stop's waits, so no
verdict depends on how fast this machine is."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path
from typing import Any

import pytest

from syncengine.engine.live import (
    ANSWER_SPACING,
    WAKE_SPACING,
    Delivery,
    DeliveryState,
    LocalChanges,
    RelayWatch,
    Waker,
    read_delivery,
    write_delivery,
)
from syncengine.http.errors import RelayUnavailable, TeamNotFound
from syncengine.local_store import Store
from syncengine.ops.sync_records import SyncPullCursor
from tests.syncengine.ops.helpers import foreign_envelope, new_key, pull_record
from wire.http_v1.binding import ResponseBinding
from wire.http_v1.live import LiveWaitAnswer, LiveWaitQuery

SID, TID = "0190a0a0-0000-7000-8000-000000000001", "0190a0a0-0000-7000-8000-000000000002"


class FakeTime:
    """A clock, and a stop signal whose waits advance it instead of sleeping."""

    def __init__(self) -> None:
        self.now = 0.0
        self.stopped = False

    def __call__(self) -> float:
        return self.now

    @property
    def is_set(self) -> bool:
        return self.stopped

    def wait(self, seconds: float) -> bool:
        self.now += max(seconds, 1e-3)
        return self.stopped

    def set(self) -> None:
        self.stopped = True


class AlwaysNews:
    """A relay watch stand-in whose news is always set (a relay that
    announces a head that never comes)."""

    def __init__(self) -> None:
        self.news = threading.Event()
        self.news.set()
        self.state = DeliveryState(Delivery.LIVE, "test", "")
        self.heads: list[int] = []

    def known(self, head: int) -> None:
        self.heads.append(head)
        self.news.set()


@pytest.fixture
def store(tmp_path: Path) -> Store:
    made = Store(tmp_path / "store.db")
    made.send("crew", "alice", "bob", "first")
    return made


def test_a_send_by_another_process_ends_the_wait_as_a_local_change(
    store: Store, tmp_path: Path
) -> None:
    clock = FakeTime()
    waker = Waker(
        clock,  # type: ignore[arg-type]
        LocalChanges(store, "crew"),
        clock=clock,
        block=clock.wait,
        watch_store=False,
    )
    waker.before_cycle()
    with Store(store.path) as other:
        other.send("crew", "bob", "alice", "from another process")
    assert waker.wait(60) == "local"


def test_a_mark_read_by_another_process_is_a_local_change(store: Store) -> None:
    local = LocalChanges(store, "crew")
    local.mark()
    with Store(store.path) as other:
        (message,) = other.list_unread("crew", "bob")
        other.mark_read_batch("crew", "bob", [message.id])
    assert local.poll()


def test_the_engines_own_imports_are_not_a_local_change(store: Store) -> None:
    local = LocalChanges(store, "crew")
    local.mark()
    key = new_key("crew")
    wire, envelope = foreign_envelope(key, "pulled", "carol", "bob")
    with Store(store.path) as engine_side:
        engine_side.sync_apply_pull(key, [pull_record(1, wire, envelope)], SyncPullCursor(1))
    assert not local.poll()


def test_with_nothing_happening_the_wait_lasts_the_interval(store: Store) -> None:
    clock = FakeTime()
    waker = Waker(
        clock,  # type: ignore[arg-type]
        LocalChanges(store, "crew"),
        clock=clock,
        block=clock.wait,
        watch_store=False,
    )
    waker.before_cycle()
    assert waker.wait(5.0) == "interval"
    assert clock.now >= 5.0


def test_a_stop_ends_the_wait(store: Store) -> None:
    clock = FakeTime()
    clock.set()
    waker = Waker(
        clock,  # type: ignore[arg-type]
        LocalChanges(store, "crew"),
        clock=clock,
        block=clock.wait,
        watch_store=False,
    )
    assert waker.wait(60) == "stop"


def test_relay_news_ends_the_wait_at_once(store: Store) -> None:
    clock = FakeTime()
    waker = Waker(clock, None, clock=clock, block=clock.wait)  # type: ignore[arg-type]
    waker.watch = AlwaysNews()  # type: ignore[assignment]
    assert waker.wait(60) == "relay"
    assert clock.now == 0.0


def test_a_relay_announcing_heads_that_never_come_is_woken_for_at_doubling_spacing() -> None:
    """Each relay-woken cycle that brings nothing doubles the spacing before
    the next, up to the interval: a lying relay costs a few cycles a minute."""
    clock = FakeTime()
    waker = Waker(clock, None, clock=clock, block=clock.wait)  # type: ignore[arg-type]
    waker.watch = AlwaysNews()  # type: ignore[assignment]
    interval = 60.0
    wakes = []
    for _ in range(12):
        assert waker.wait(interval) in ("relay", "interval")  # the interval caps the spacing
        wakes.append(clock.now)
        waker.after_cycle(7, 7, interval)  # the pull found nothing: head unchanged
    gaps = [round(b - a, 3) for a, b in itertools.pairwise(wakes)]
    assert gaps[0] == pytest.approx(WAKE_SPACING, abs=0.01)
    assert all(later >= earlier - 0.01 for earlier, later in itertools.pairwise(gaps))
    assert max(gaps) <= interval + 0.1
    assert len([g for g in gaps if g >= interval - 0.1]) >= 2  # capped at the interval


def test_a_relay_wake_that_brought_messages_keeps_the_next_one_immediate() -> None:
    clock = FakeTime()
    waker = Waker(clock, None, clock=clock, block=clock.wait)  # type: ignore[arg-type]
    waker.watch = AlwaysNews()  # type: ignore[assignment]
    for head in range(1, 6):
        assert waker.wait(60) == "relay"
        waker.after_cycle(head - 1, head, 60)
    assert clock.now == 0.0


def _answer(current: int, read: int = 0, woken: bool = True) -> LiveWaitAnswer:
    return LiveWaitAnswer(ResponseBinding(SID, TID, "crew", 0), current, read, woken)


class FakeClient:
    """A relay client whose live wait answers from a script."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.queries: list[LiveWaitQuery] = []
        self.closed = False

    def live_wait(self, query: LiveWaitQuery) -> LiveWaitAnswer:
        self.queries.append(query)
        result = self.answer(query)
        if isinstance(result, Exception):
            raise result
        return result  # type: ignore[no-any-return]

    def close(self) -> None:
        self.closed = True


def _watch(client: FakeClient, clock: FakeTime, states: list[DeliveryState]) -> RelayWatch:
    return RelayWatch(
        lambda wait: client,  # type: ignore[arg-type,return-value]
        clock,  # type: ignore[arg-type]
        wait_seconds=25,
        on_state=states.append,
        clock=clock,
    )


def test_a_relay_answering_at_once_with_nothing_new_is_asked_at_most_once_a_second() -> None:
    clock = FakeTime()
    client = FakeClient(lambda q: _answer(q.after, q.read_after, woken=False))

    def stop_after_a_minute(query: LiveWaitQuery) -> LiveWaitAnswer:
        if clock.now > 60:
            clock.set()
        return _answer(query.after, query.read_after, woken=False)

    client.answer = stop_after_a_minute
    states: list[DeliveryState] = []
    _watch(client, clock, states).run()
    assert len(client.queries) <= 60 / ANSWER_SPACING + 2
    assert [s.mode for s in states] == [Delivery.LIVE]
    assert client.closed


def test_a_relay_announcing_a_higher_head_raises_news_and_waits_for_the_cycle() -> None:
    clock = FakeTime()
    client = FakeClient(lambda q: _answer(q.after + 1))
    states: list[DeliveryState] = []
    watch = _watch(client, clock, states)
    watch.known(4)
    worker = threading.Thread(target=watch.run, daemon=True)
    worker.start()
    assert watch.news.wait(30)
    assert client.queries[0].after == 4
    clock.set()
    watch.known(5)  # the loop cycled: the watch asks again, then sees the stop
    worker.join(30)
    assert not worker.is_alive()


def test_a_relay_without_the_extension_turns_the_run_to_polling_with_the_reason() -> None:
    clock = FakeTime()

    def refuse(query: LiveWaitQuery) -> Exception:
        clock.set()
        return TeamNotFound("unknown route", status=404)

    states: list[DeliveryState] = []
    _watch(FakeClient(refuse), clock, states).run()
    assert [(s.mode, s.reason) for s in states] == [
        (Delivery.POLLING, "the relay does not offer the live wait")
    ]


def test_a_failing_wait_backs_off_and_goes_live_again_when_it_answers() -> None:
    clock = FakeTime()
    calls = iter([RelayUnavailable("down", status=503)] * 3 + [None, None])

    def script(query: LiveWaitQuery) -> Any:
        step = next(calls, None)
        if step is not None:
            return step
        clock.set()
        return _answer(query.after, woken=False)

    states: list[DeliveryState] = []
    _watch(FakeClient(script), clock, states).run()
    assert [s.mode for s in states] == [Delivery.POLLING, Delivery.LIVE]
    assert clock.now >= 1 + 2 + 4  # backoff 1, 2, 4 s


def test_the_delivery_file_round_trips_and_a_damaged_one_reads_as_unknown(
    tmp_path: Path,
) -> None:
    path = tmp_path / "x.delivery"
    state = DeliveryState(Delivery.LIVE, "waiting on the relay's live wait", "2026-12-07T10:00:00Z")
    write_delivery(path, state)
    assert read_delivery(path) == state.to_obj()
    assert path.stat().st_mode & 0o077 == 0
    path.write_text("{not json")
    assert read_delivery(path) is None
