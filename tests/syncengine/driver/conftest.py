from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.syncengine.driver.contract import (
    BashDriver,
    PythonDriver,
    make_driver,
    stop_driver_servers,
)
from tests.syncengine.driver.doors import DOORS


@pytest.fixture(params=DOORS)
def driver_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "store.db"


@pytest.fixture
def driver(driver_kind: str, store_path: Path) -> PythonDriver | BashDriver:
    """A store that does not exist yet, reached through the parametrized
    door. No team or agent is ever registered: the storage axis is
    messages only (driver-interface §2 intro)."""
    return make_driver(driver_kind, store_path)


@pytest.fixture(autouse=True)
def _stop_driver_servers(tmp_path: Path) -> Iterator[None]:
    """Every driver server a test's stores started ends with the test."""
    yield
    stop_driver_servers(tmp_path)


@pytest.fixture
def seed(driver: PythonDriver | BashDriver, store_path: Path) -> PythonDriver:
    """Set-up and cross-checks go through the fast Python path, so the
    parametrized door exercises only the operation under test."""
    return PythonDriver(store_path)
