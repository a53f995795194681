"""A lying relay's live wait (issue #32, item 4; specs/live.md §5): the
byzantine harness's proxy answers the victim's live wait itself — at once
and for ever, announcing heads that never come, holding it open without a
byte, or dripping bytes — while the victim's run loop runs in-process.

Whatever the lie, the victim neither spins (its pulls stay under a bound
that only a faster machine could approach, never one a slower machine
could break), nor hangs past its bounds, nor skips, invents or duplicates
a message; after the lie the honest relay brings it to exactly the
genuine history (:meth:`Scene.check`, :meth:`Scene.heal`).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import parse_qs

from syncengine.engine import Engine, RunLoop, RunSettings, StopSignal
from syncengine.engine.live import Delivery, DeliveryState, LocalChanges, RelayWatch, Waker
from tests.e2e.byzantine import PAGES, VICTIM_CONFIG, Scene, byzantine_scene
from tests.e2e.proxy import Fault
from tests.support.live_relay import LiveRelay

LIVE = "GET /x-syncengine/live/v1/wait"


def _query(request: bytes) -> dict[str, str]:
    target = request.split(b"\r\n", 1)[0].split(b" ")[1].decode()
    return {k: v[0] for k, v in parse_qs(target.partition("?")[2]).items()}


def _ok(body: bytes) -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nAgmsg-Protocol-Version: 1\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )


def announcing(scene: Scene, ahead: int) -> Callable[[socket.socket, bytes], None]:
    """Answer at once: the head is ``ahead`` past what the client holds."""
    with Engine(scene.victim.store) as engine:
        c = engine.connection
        sid, tid = c.server_instance_id, c.remote_team_id

    def forge(client: socket.socket, request: bytes) -> None:
        query = _query(request)
        document = {
            "protocol_version": 1,
            "server_instance_id": sid,
            "team_id": tid,
            "team_name": "crew",
            "min_available_seq": "0",
            "current_seq": str(int(query["after"]) + ahead),
            "read_revision": query["read_after"],
            "woken": True,
        }
        client.sendall(_ok(json.dumps(document).encode()))

    return forge


def holding(seconds: float) -> Callable[[socket.socket, bytes], None]:
    def forge(client: socket.socket, request: bytes) -> None:
        time.sleep(seconds)

    return forge


def dripping(client: socket.socket, request: bytes) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nAgmsg-Protocol-Version: 1\r\n"
    try:
        for byte in head * 100:
            client.sendall(bytes([byte]))
            time.sleep(0.2)
    except OSError:
        return


@contextmanager
def victim_running(
    scene: Scene, *, wait_seconds: int = 1, margin: float = 1.0, interval: float = 30.0
) -> Iterator[tuple[StopSignal, list[DeliveryState]]]:
    """The victim's run loop in a thread, live wait on, until the block ends."""
    stop = StopSignal()
    states: list[DeliveryState] = []
    engine = Engine(
        scene.victim.store,
        client_config=VICTIM_CONFIG,
        sleep=stop.interruptible_sleep,
        interrupt=stop.check,
    )

    def make_watch() -> RelayWatch:
        return RelayWatch(
            lambda wait: engine.live_client(wait, margin),
            stop,
            wait_seconds=wait_seconds,
            on_state=states.append,
        )

    waker = Waker(stop, LocalChanges(engine.store, "crew"), make_watch=make_watch)
    loop = RunLoop(
        engine, stop, RunSettings(interval=interval), waker=waker, live_interval=interval
    )
    thread = threading.Thread(target=loop.run, daemon=True)
    with engine, engine.lock():
        thread.start()
        try:
            yield stop, states
        finally:
            stop.set()
            thread.join(timeout=60)
            waker.close()
    assert not thread.is_alive(), "the run loop did not stop"


def _until(condition: Callable[[], bool], bound: float = 30.0) -> bool:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_a_live_wait_announcing_heads_that_never_come_cannot_make_the_client_spin(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path, messages=3) as scene:
        scene.lie(Fault(LIVE, "forge", every=True, forge=announcing(scene, 1000)))
        with victim_running(scene) as (_, states):
            assert _until(lambda: len(scene.bodies()) == 3)
            watched = time.monotonic()
            before = len(scene.proxy.requests(PAGES))
            time.sleep(8.0)
            pulls = len(scene.proxy.requests(PAGES)) - before
            elapsed = time.monotonic() - watched
        # Fruitless wakes are spaced 0.25 s doubling: 8 s hold at most ~6 of
        # them (a slower machine makes fewer, never more).
        assert pulls <= 8, (pulls, elapsed)
        assert any(s.mode is Delivery.LIVE for s in states)
        scene.check()
        scene.heal()


def test_a_live_wait_answered_at_once_with_nothing_new_is_not_asked_in_a_tight_loop(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path, messages=2) as scene:
        scene.lie(Fault(LIVE, "forge", every=True, forge=announcing(scene, 0)))
        with victim_running(scene):
            assert _until(lambda: len(scene.bodies()) == 2)
            before = len(scene.proxy.requests(LIVE))
            time.sleep(5.0)
            asked = len(scene.proxy.requests(LIVE)) - before
        assert asked <= 7, asked  # at most about one a second
        scene.check()
        scene.heal()


def test_a_live_wait_held_open_silently_is_abandoned_and_the_run_polls(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path, messages=2) as scene:
        scene.lie(Fault(LIVE, "forge", every=True, forge=holding(120)))
        with victim_running(scene, interval=1.0) as (_, states):
            assert _until(lambda: any(s.mode is Delivery.POLLING for s in states), bound=60), states
            new = scene.write(2, prefix="later")
            assert _until(lambda: set(new) <= set(scene.bodies()), bound=60)
        assert "failed" in next(s.reason for s in states if s.mode is Delivery.POLLING)
        scene.check()
        scene.heal()


def test_a_live_wait_dripping_bytes_is_abandoned_at_its_deadline(
    live: LiveRelay, tmp_path: Path
) -> None:
    with byzantine_scene(live, tmp_path, messages=1) as scene:
        scene.lie(Fault(LIVE, "forge", every=True, forge=dripping))
        with victim_running(scene, interval=1.0) as (_, states):
            assert _until(lambda: any(s.mode is Delivery.POLLING for s in states), bound=60), states
            new = scene.write(1, prefix="during")
            assert _until(lambda: set(new) <= set(scene.bodies()), bound=60)
        scene.check()
        scene.heal()
