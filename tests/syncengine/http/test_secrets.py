"""The bearer credential and pairing token never reach logs, reprs or exception text."""

from __future__ import annotations

import logging
import traceback

import httpx
import pytest
import respx

from syncengine.http import (
    ClientConfig,
    RelayClientError,
    RetryPolicy,
    Secret,
    Unauthenticated,
    connect,
)
from tests.syncengine.http.helpers import (
    ENDPOINT,
    SECRET_TEXT,
    TOKEN_TEXT,
    FakeTime,
    credential,
    error,
    make_client,
    proxy_page,
    reply,
)
from tests.wire.http_v1 import samples

PAIRED_SECRET = samples.pairing()["credential"]


def _leaks(text: str) -> bool:
    return any(secret in text for secret in (SECRET_TEXT, TOKEN_TEXT, PAIRED_SECRET))


def _all_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)) + repr(exc) + str(exc)


def test_relay_echoing_the_bearer_in_an_error_is_redacted(
    router: respx.MockRouter, fake_time: FakeTime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    body = samples.error("unauthenticated", bound=False)
    body["error"]["message"] = f"credential {SECRET_TEXT} is revoked"
    router.get("/v1/capabilities").mock(return_value=reply(body, 401))
    with make_client(fake_time) as client, pytest.raises(Unauthenticated) as caught:
        client.capabilities()
    assert not _leaks(_all_text(caught.value))
    assert not _leaks(caplog.text)


def test_no_secret_in_logs_across_retries_failures_and_connect(
    router: respx.MockRouter, fake_time: FakeTime, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, httpx and httpcore included
    router.get("/v1/health").mock(return_value=reply(samples.health()))
    router.post("/v1/pairing/exchange").mock(
        side_effect=[proxy_page(503), httpx.ConnectError("reset"), reply(samples.pairing())]
    )
    router.get("/v1/capabilities").mock(
        side_effect=[
            error(503, "unavailable"),
            httpx.ReadTimeout("slow"),
            reply(samples.capabilities()),
        ]
    )
    router.get("/v1/members").mock(return_value=error(403, "forbidden"))
    result = connect(
        ENDPOINT,
        Secret(TOKEN_TEXT),
        config=ClientConfig(retry=RetryPolicy(max_attempts=4)),
        sleep=fake_time.sleep,
        clock=fake_time.clock,
    )
    failures: list[RelayClientError] = []
    with make_client(fake_time) as client:
        client.capabilities()
        try:
            client.members()
        except RelayClientError as exc:
            failures.append(exc)
        shown = repr(client)
    assert failures
    # The capture is not vacuous: our retries and httpx's request lines are in it.
    assert "retrying POST /v1/pairing/exchange" in caplog.text
    assert "HTTP Request: GET" in caplog.text
    assert not _leaks(caplog.text)
    assert not _leaks(shown + repr(result) + str(result) + repr(result.credential))
    assert not any(_leaks(_all_text(exc)) for exc in failures)


def test_request_objects_in_errors_do_not_show_the_authorization_header(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.get("/v1/capabilities").mock(side_effect=httpx.ConnectError("refused"))
    with make_client(fake_time) as client, pytest.raises(RelayClientError) as caught:
        client.capabilities()
    assert not _leaks(_all_text(caught.value))


def test_credential_repr_names_the_id_but_not_the_secret() -> None:
    shown = repr(credential())
    assert samples.CREDENTIAL_ID in shown
    assert SECRET_TEXT not in shown
