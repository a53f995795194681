from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from syncengine.engine import Engine
from tests.syncengine.engine.fake_connect import FAST, connect_fake
from tests.syncengine.engine.fakerelay import FakeRelay


@pytest.fixture
def relay() -> FakeRelay:
    return FakeRelay()


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
