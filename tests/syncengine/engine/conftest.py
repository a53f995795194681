from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from syncengine.engine import Engine
from tests.syncengine.engine.fake_connect import engine_factory
from tests.syncengine.engine.fakerelay import FakeRelay


@pytest.fixture
def relay() -> FakeRelay:
    return FakeRelay()


@pytest.fixture
def make_engine(tmp_path: Path, relay: FakeRelay) -> Iterator[Callable[..., Engine]]:
    """A connected store (team ``crew``; its members alice and bob come from
    the relay's roster at connect) and its engine."""
    with engine_factory(tmp_path, relay) as make:
        yield make
