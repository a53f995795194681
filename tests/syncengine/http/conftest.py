from __future__ import annotations

from collections.abc import Iterator

import pytest
import respx

from tests.syncengine.http.helpers import ENDPOINT, FakeTime


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    """Every request is answered by a respx route on the loopback endpoint."""
    with respx.mock(base_url=ENDPOINT, assert_all_called=False) as mock:
        yield mock
