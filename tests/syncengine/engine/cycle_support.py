"""Building blocks the engine's cycle tests share: a plaintext team on an in-process relay
and a send into it."""

from __future__ import annotations

from syncengine.engine import Engine
from syncengine.local_store import Store
from wire.message import Message
from wire.profiles import seal


def send(engine: Engine, count: int, body: str = "hello") -> None:
    with Store(engine.store.path) as store:
        for i in range(count):
            store.send("crew", "alice", "bob", f"{body} {i}")


def plaintext(body: str, at: str = "2026-07-20T06:30:00.000000Z") -> object:
    return seal(Message(body, at, "bob", "alice"), "none")
