"""Connecting a store to the in-process fake relay (fakerelay.py) with a quick retry
policy: what the engine fixtures, the simulation and the seed op tests share."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from syncengine.engine import Engine
from syncengine.engine.connect import connect_store
from syncengine.http.client import ClientConfig
from syncengine.http.credentials import Secret
from syncengine.http.retry import RetryPolicy
from tests.syncengine.engine.fakerelay import TOKEN, FakeRelay

#: No real waiting in unit tests: two quick attempts, then the error surfaces.
FAST = ClientConfig(retry=RetryPolicy(max_attempts=2, backoff_base=0.001, backoff_cap=0.001))


def connect_fake(
    relay: FakeRelay, store: Path, team: str = "crew", mode: str = "plaintext-allowed", **kw: Any
) -> None:
    connect_store(
        store,
        endpoint="http://127.0.0.1:9",
        token=Secret(TOKEN),
        team=team,
        mode=mode,
        transport=relay.transport(),
        client_config=FAST,
        **kw,
    )


@contextmanager
def engine_factory(tmp_path: Path, relay: FakeRelay) -> Iterator[Callable[..., Engine]]:
    """Engines over stores under ``tmp_path`` (one folder per name), connected
    to ``relay`` unless ``connect=False``; every one is closed on exit."""
    engines: list[Engine] = []

    def make(name: str = "a", *, connect: bool = True, **kw: Any) -> Engine:
        directory = tmp_path / name
        directory.mkdir(exist_ok=True)
        store = directory / "store.db"
        if connect:
            connect_fake(relay, store, **kw)
        engine = Engine(
            store, transport=relay.transport(), client_config=FAST, sleep=lambda s: None
        )
        engines.append(engine)
        return engine

    try:
        yield make
    finally:
        for engine in engines:
            engine.close()
