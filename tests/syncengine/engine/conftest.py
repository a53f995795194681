from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from syncengine.engine import Engine
from syncengine.engine.connect import connect_store
from syncengine.http.client import ClientConfig
from syncengine.http.credentials import Secret
from syncengine.http.retry import RetryPolicy
from tests.syncengine.engine.fakerelay import TOKEN, FakeRelay

#: No real waiting in unit tests: two quick attempts, then the error surfaces.
FAST = ClientConfig(retry=RetryPolicy(max_attempts=2, backoff_base=0.001, backoff_cap=0.001))


@pytest.fixture
def relay() -> FakeRelay:
    return FakeRelay()


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


@pytest.fixture
def make_engine(tmp_path: Path, relay: FakeRelay) -> Iterator[Callable[..., Engine]]:
    """A connected store (team ``crew``; its members alice and bob come from
    the relay's roster at connect) and its engine."""
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

    yield make
    for engine in engines:
        engine.close()
