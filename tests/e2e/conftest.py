"""The end-to-end fault tests' relay: one real relay process on 127.0.0.1
for the whole package. Each test provisions a fresh team on it and connects
machines (stores) with ``LeanTeam`` from tests/support/machines.py, which
says why that happens in-process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.live_relay import LiveRelay, relay_fixture


@pytest.fixture(scope="package")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRelay]:
    yield from relay_fixture(tmp_path_factory, name="e2e-relay")
