"""Connect flow: health → pairing exchange → verification, nothing persisted on failure."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import respx

from syncengine.http import (
    BindingMismatch,
    ClientConfig,
    PairingTokenRejected,
    ProtocolViolation,
    RelayUnavailable,
    RetryPolicy,
    Secret,
    connect,
)
from tests.syncengine.http.helpers import ENDPOINT, OTHER_SERVER, TOKEN_TEXT, FakeTime, error, reply
from tests.wire.http_v1 import samples
from wire import jcs


def _connect(fake_time: FakeTime) -> Any:
    return connect(
        ENDPOINT,
        Secret(TOKEN_TEXT),
        config=ClientConfig(retry=RetryPolicy(max_attempts=3)),
        sleep=fake_time.sleep,
        clock=fake_time.clock,
    )


@pytest.fixture
def exchange(router: respx.MockRouter) -> respx.Route:
    """A ready relay: health answers ok; each test mocks the pairing exchange's answer."""
    router.get("/v1/health").mock(return_value=reply(samples.health()))
    return router.post("/v1/pairing/exchange")


def _unready() -> dict[str, Any]:
    return {
        "status": "unavailable",
        "protocol": {"supported_versions": [1]},
        "database": "unavailable",
    }


def test_connect_returns_binding_credential_and_capabilities(
    exchange: respx.Route, fake_time: FakeTime
) -> None:
    exchange.mock(return_value=reply(samples.pairing()))
    result = _connect(fake_time)
    assert (result.server_instance_id, result.team_id) == (samples.SERVER, samples.TEAM)
    assert result.team_name == "night-shift"
    assert result.credential_id == samples.CREDENTIAL_ID
    assert result.credential.secret.reveal() == samples.pairing()["credential"]
    assert result.credential.team_id == samples.TEAM
    assert result.capabilities.current_seq == 7
    assert result.binding.server_instance_id == samples.SERVER
    assert result.endpoint == ENDPOINT


def test_exchange_sends_only_the_token_without_team_or_bearer(
    exchange: respx.Route, fake_time: FakeTime
) -> None:
    route = exchange.mock(return_value=reply(samples.pairing()))
    _connect(fake_time)
    request = route.calls.last.request
    assert jcs.loads(request.content) == {"token": TOKEN_TEXT}
    assert request.headers["Agmsg-Protocol-Version"] == "1"
    assert "Agmsg-Team-ID" not in request.headers
    assert "Authorization" not in request.headers


def test_unavailable_health_is_refused_before_any_exchange(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.get("/v1/health").mock(return_value=reply(_unready(), 503))
    exchange = router.post("/v1/pairing/exchange").mock(return_value=reply(samples.pairing()))
    with pytest.raises(RelayUnavailable):
        _connect(fake_time)
    assert exchange.call_count == 0


def test_health_recovering_within_the_retry_budget_lets_connect_proceed(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.get("/v1/health").mock(side_effect=[reply(_unready(), 503), reply(samples.health())])
    router.post("/v1/pairing/exchange").mock(return_value=reply(samples.pairing()))
    assert _connect(fake_time).team_id == samples.TEAM


def test_pairing_answer_from_another_instance_than_health_is_a_mismatch(
    exchange: respx.Route, fake_time: FakeTime
) -> None:
    other = samples.pairing()
    other["server_instance_id"] = OTHER_SERVER
    other["capabilities"]["server_instance_id"] = OTHER_SERVER
    exchange.mock(return_value=reply(other))
    with pytest.raises(BindingMismatch):
        _connect(fake_time)


def test_health_echoing_another_team_than_the_pairing_answer_is_a_mismatch(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.get("/v1/health").mock(
        return_value=reply({**samples.health(), "team_id": samples.OTHER_TEAM})
    )
    router.post("/v1/pairing/exchange").mock(return_value=reply(samples.pairing()))
    with pytest.raises(BindingMismatch):
        _connect(fake_time)


@pytest.mark.parametrize(
    ("member", "value"),
    [("team_id", samples.OTHER_TEAM), ("team_name", "day-shift")],
)
def test_outer_and_nested_capability_binding_must_agree(
    exchange: respx.Route, fake_time: FakeTime, member: str, value: str
) -> None:
    answer = samples.pairing()
    answer["capabilities"][member] = value
    exchange.mock(return_value=reply(answer))
    with pytest.raises(ProtocolViolation):
        _connect(fake_time)


def test_broken_capability_invariant_in_the_pairing_answer_is_refused(
    exchange: respx.Route, fake_time: FakeTime
) -> None:
    answer = samples.pairing()
    answer["capabilities"]["next_sequence_boundary"] = "99"
    exchange.mock(return_value=reply(answer))
    with pytest.raises(ProtocolViolation):
        _connect(fake_time)


def test_unknown_token_is_rejected_without_echoing_it(
    exchange: respx.Route, fake_time: FakeTime
) -> None:
    body = samples.error("invalid-pairing-token", bound=False)
    body["error"]["message"] = f"unknown token {TOKEN_TEXT}"
    exchange.mock(return_value=reply(body, 401))
    with pytest.raises(PairingTokenRejected) as caught:
        _connect(fake_time)
    assert TOKEN_TEXT not in str(caught.value)
    assert "<redacted>" in str(caught.value)


def test_lost_answer_then_consumed_token_tells_the_operator_about_the_orphan(
    exchange: respx.Route, fake_time: FakeTime
) -> None:
    route = exchange.mock(
        side_effect=[httpx.ReadTimeout("answer lost"), error(409, "pairing-token-consumed")]
    )
    with pytest.raises(PairingTokenRejected) as caught:
        _connect(fake_time)
    assert route.call_count == 2
    assert caught.value.code == "pairing-token-consumed"
    assert "orphan" in caught.value.remediation


def test_consumed_token_error_from_another_instance_is_a_mismatch(
    exchange: respx.Route, fake_time: FakeTime
) -> None:
    body = samples.error("pairing-token-consumed")
    body["server_instance_id"] = OTHER_SERVER
    exchange.mock(return_value=reply(body, 409))
    with pytest.raises(BindingMismatch):
        _connect(fake_time)
