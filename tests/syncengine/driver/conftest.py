from __future__ import annotations

from pathlib import Path

import pytest

from syncengine.store import Store
from tests.syncengine.driver.contract import BashDriver, PythonDriver


@pytest.fixture(params=["python", "bash"])
def driver_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "store.db"


@pytest.fixture
def driver(driver_kind: str, store_path: Path) -> PythonDriver | BashDriver:
    """An initialized store with team ``dev`` = {alice, bob, carol} and team
    ``ops`` = {alice, dave}, reached through the parametrized way in."""
    with Store(store_path) as store:
        store.init()
        store.create_team("dev", ["alice", "bob", "carol"])
        store.create_team("ops", ["alice", "dave"])
    if driver_kind == "python":
        return PythonDriver(store_path)
    return BashDriver(store_path)


@pytest.fixture
def seed(driver: PythonDriver | BashDriver, store_path: Path) -> PythonDriver:
    """Set-up and cross-checks go through the fast Python path, so the
    parametrized way in exercises only the operation under test."""
    return PythonDriver(store_path)
