from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from syncengine.local_store import Store
from syncengine.ops.bindings import BindingKey
from tests.syncengine.ops.helpers import new_key
from wire.age_keys import X25519Identity


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """An initialized store with team ``dev`` = {alice, bob}."""
    with Store(tmp_path / "store.db") as opened:
        opened.init()
        opened.create_team("dev", ["alice", "bob"])
        yield opened


@pytest.fixture
def key() -> BindingKey:
    return new_key()


@pytest.fixture(scope="session")
def age_identity() -> X25519Identity:
    """One age identity per test session (key generation is not free)."""
    return X25519Identity.generate()
