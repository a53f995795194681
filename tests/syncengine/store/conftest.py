from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from syncengine.local_store import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """An initialized store with team ``dev`` = {alice, bob, carol}."""
    with Store(tmp_path / "store.db") as opened:
        opened.init()
        opened.create_team("dev", ["alice", "bob", "carol"])
        yield opened
