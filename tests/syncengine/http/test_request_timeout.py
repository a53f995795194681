"""One HTTP request has a total time bound: 60 s unless
``$SYNCENGINE_REQUEST_TIMEOUT`` says otherwise (#33, deliverable 5).

The bound is ``ClientConfig.request_deadline`` (enforced below httpx by
syncengine/http/guard.py); the variable is read where its default is built,
so every client a command builds honours it, and a config that sets the
bound itself (the live wait's own client) keeps its own.
"""

from __future__ import annotations

import dataclasses
import threading

import pytest

from syncengine.http import ClientConfig
from syncengine.http.client import (
    DEFAULT_REQUEST_DEADLINE,
    REQUEST_TIMEOUT_ENV,
    default_request_deadline,
)
from syncengine.http.errors import ClientUsageError, TransportFailure
from tests.syncengine.http.guard_support import client_for, drip_headers, raw_server


def test_one_request_is_bounded_at_60_seconds_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUEST_TIMEOUT_ENV, raising=False)
    assert DEFAULT_REQUEST_DEADLINE == 60.0
    assert ClientConfig().request_deadline == 60.0


def test_the_environment_variable_sets_the_bound_of_every_default_config(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(REQUEST_TIMEOUT_ENV, "7.5")
    assert ClientConfig().request_deadline == 7.5
    assert default_request_deadline({REQUEST_TIMEOUT_ENV: " 12 "}) == 12.0
    assert default_request_deadline({}) == DEFAULT_REQUEST_DEADLINE


def test_a_config_that_sets_its_own_bound_keeps_it_whatever_the_variable_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The live wait builds its client with ``dataclasses.replace(base,
    request_deadline=wait + margin)``; that must stay the wait's bound."""
    monkeypatch.setenv(REQUEST_TIMEOUT_ENV, "5")
    base = ClientConfig()
    live = dataclasses.replace(base, request_deadline=40.0)
    assert (base.request_deadline, live.request_deadline) == (5.0, 40.0)
    assert ClientConfig(request_deadline=90.0).request_deadline == 90.0


@pytest.mark.parametrize("value", ["soon", "0", "-1", "nan", "inf", "3601"])
def test_a_bad_variable_is_a_usage_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv(REQUEST_TIMEOUT_ENV, value)
    with pytest.raises(ClientUsageError, match=REQUEST_TIMEOUT_ENV):
        ClientConfig()


def test_a_relay_dripping_its_headers_is_abandoned_at_the_variables_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A relay sending one byte at a time never trips a per-read timeout;
    the request's total bound from the environment ends it."""
    monkeypatch.setenv(REQUEST_TIMEOUT_ENV, "1")
    stop = threading.Event()
    with raw_server(drip_headers(stop)) as url, client_for(url) as client:
        try:
            with pytest.raises(TransportFailure, match=r"longer than 1 s"):
                client.capabilities()
        finally:
            stop.set()
