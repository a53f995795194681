"""The retry table of server/spec/v1.md "Error and retry semantics", as built.

Each row is exercised through the real client against respx: a retryable
answer is followed by success and the call succeeds after exactly two
requests; a definitive answer raises its own type after exactly one.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import respx
from hypothesis import given
from hypothesis import strategies as st

from syncengine.http import (
    AccessDenied,
    CipherPolicyViolation,
    EngineState,
    IntermediaryFailure,
    InvalidRequest,
    MessageConflict,
    PairingTokenRejected,
    ProtocolVersionUnsupported,
    ProtocolViolation,
    RateLimited,
    ReadStateLimitExceeded,
    RelayBinding,
    RelayClient,
    RelayClientError,
    RelayRefusal,
    RelayUnavailable,
    RequestTooLarge,
    ResyncRequired,
    SequenceExhausted,
    TeamNotFound,
    TlsVerificationFailed,
    TransportFailure,
    Unauthenticated,
    UnsupportedCipher,
)
from syncengine.http.retry import classify_error_response, is_retryable
from tests.syncengine.http.helpers import (
    FakeTime,
    credential,
    error,
    make_client,
    proxy_page,
    reply,
)
from tests.wire.http_v1 import samples
from wire.http_v1.errors import ERROR_CODES, ErrorResponse
from wire.http_v1.messages import MessageBatch

CIPHER_DETAILS = {
    "write_allowed_ciphers": ["age-v1"],
    "policy_revision": "3",
    "id": samples.WIRE_1,
    "v": 1,
    "cipher": "none",
}

# (status, code, details, bound, expected type, expected engine state)
DEFINITIVE: list[tuple[int, str, dict[str, Any] | None, bool, type[RelayClientError], str]] = [
    (400, "invalid-request", None, False, InvalidRequest, EngineState.REFUSED),
    (401, "unauthenticated", None, False, Unauthenticated, EngineState.REFUSED),
    (403, "forbidden", None, True, AccessDenied, EngineState.REFUSED),
    (403, "credential-scope-violation", None, True, AccessDenied, EngineState.REFUSED),
    (403, "cipher-policy-violation", CIPHER_DETAILS, True, CipherPolicyViolation, "adjust"),
    (404, "team-not-found", None, True, TeamNotFound, EngineState.REFUSED),
    (409, "message-uuid-conflict", {"id": samples.WIRE_1}, True, MessageConflict, "halted"),
    (
        409,
        "read-state-limit-exceeded",
        {
            "member_id": samples.MEMBER_A,
            "member_exact_count": "4097",
            "team_exact_count": "5000",
            "max_exact_per_member": 4096,
            "max_exact_per_team": 65536,
        },
        True,
        ReadStateLimitExceeded,
        EngineState.ADJUST,
    ),
    (
        410,
        "resync-required",
        {"after": "40", "min_available_seq": "100"},
        True,
        ResyncRequired,
        "resync-required",
    ),
    (413, "request-too-large", None, False, RequestTooLarge, EngineState.ADJUST),
    (
        422,
        "unsupported-cipher",
        {**CIPHER_DETAILS, "accepted_envelope_versions": [1]},
        True,
        UnsupportedCipher,
        EngineState.REFUSED,
    ),
    (
        426,
        "unsupported-protocol-version",
        {"requested_version": 1, "supported_versions": [2]},
        False,
        ProtocolVersionUnsupported,
        EngineState.REFUSED,
    ),
    (507, "sequence-exhausted", None, True, SequenceExhausted, EngineState.WRITES_STOPPED),
    # A code this client does not know, on a definitive status: refused by status.
    (402, "payment-required", None, True, RelayRefusal, EngineState.REFUSED),
]

RETRYABLE = [
    (429, "rate-limited", RateLimited),
    (500, "internal-error", RelayUnavailable),
    (502, "unavailable", RelayUnavailable),
    (503, "unavailable", RelayUnavailable),
    (504, "unavailable", RelayUnavailable),
    (503, "overloaded-somehow", RelayUnavailable),  # unknown code, retryable status
]

TRANSPORT_ERRORS = [
    httpx.ConnectError("connection refused"),
    httpx.ConnectTimeout("connect timed out"),
    httpx.ReadTimeout("read timed out"),
    httpx.WriteTimeout("write timed out"),
    httpx.PoolTimeout("pool exhausted"),
    httpx.ReadError("connection reset by peer"),
    httpx.WriteError("broken pipe"),
    httpx.RemoteProtocolError("server disconnected without sending a response"),
]


def _batch() -> MessageBatch:
    return MessageBatch.from_obj(samples.batch())


# Each endpoint kind: how to call it, the route, and its successful answer.
def _get_capabilities(client: RelayClient) -> object:
    return client.capabilities()


def _post_messages(client: RelayClient) -> object:
    return client.post_messages(_batch())


ENDPOINTS: list[tuple[str, str, str, Callable[[RelayClient], object], dict[str, Any]]] = [
    ("GET", "/v1/capabilities", "capabilities", _get_capabilities, samples.capabilities()),
    ("POST", "/v1/messages", "messages", _post_messages, samples.push_response()),
]


@pytest.fixture(params=ENDPOINTS, ids=[row[2] for row in ENDPOINTS])
def endpoint(
    request: pytest.FixtureRequest,
) -> tuple[str, str, str, Callable[[RelayClient], object], dict[str, Any]]:
    return request.param  # type: ignore[no-any-return]


@pytest.mark.parametrize(("status", "code", "expected"), RETRYABLE)
def test_retryable_status_is_retried_then_succeeds(
    router: respx.MockRouter,
    fake_time: FakeTime,
    endpoint: Any,
    status: int,
    code: str,
    expected: Any,
) -> None:
    method, path, _, call, success = endpoint
    route = router.route(method=method, path=path).mock(
        side_effect=[error(status, code), reply(success)]
    )
    with make_client(fake_time) as client:
        call(client)
    assert route.call_count == 2
    assert len(fake_time.sleeps) == 1


@pytest.mark.parametrize(("status", "code", "expected"), RETRYABLE)
def test_retryable_status_surfaces_its_type_when_attempts_run_out(
    router: respx.MockRouter, fake_time: FakeTime, status: int, code: str, expected: Any
) -> None:
    route = router.get("/v1/capabilities").mock(return_value=error(status, code))
    with make_client(fake_time) as client, pytest.raises(expected) as caught:
        client.capabilities()
    assert route.call_count == 4
    assert caught.value.attempts == 4
    assert caught.value.retryable
    assert caught.value.state is EngineState.BACKOFF


@pytest.mark.parametrize(
    ("status", "code", "details", "bound", "expected", "state"),
    DEFINITIVE,
    ids=[f"{row[0]}-{row[1]}" for row in DEFINITIVE],
)
def test_definitive_error_stops_at_once_with_its_type(
    router: respx.MockRouter,
    fake_time: FakeTime,
    endpoint: Any,
    status: int,
    code: str,
    details: dict[str, Any] | None,
    bound: bool,
    expected: type[RelayClientError],
    state: str,
) -> None:
    method, path, _, call, _ = endpoint
    route = router.route(method=method, path=path).mock(
        return_value=error(status, code, details, bound=bound)
    )
    with make_client(fake_time) as client, pytest.raises(expected) as caught:
        call(client)
    assert route.call_count == 1
    assert fake_time.sleeps == []
    assert type(caught.value) is expected
    assert caught.value.code == code
    assert caught.value.status == status
    assert not caught.value.retryable
    assert caught.value.state == state
    assert caught.value.remediation


@pytest.mark.parametrize("exc", TRANSPORT_ERRORS, ids=lambda exc: type(exc).__name__)
def test_transport_failure_is_retried_as_unknown_outcome(
    router: respx.MockRouter, fake_time: FakeTime, endpoint: Any, exc: Exception
) -> None:
    method, path, _, call, success = endpoint
    route = router.route(method=method, path=path).mock(side_effect=[exc, reply(success)])
    with make_client(fake_time) as client:
        call(client)
    assert route.call_count == 2


@pytest.mark.parametrize("exc", TRANSPORT_ERRORS, ids=lambda exc: type(exc).__name__)
def test_transport_failure_surfaces_as_transport_failure(
    router: respx.MockRouter, fake_time: FakeTime, exc: Exception
) -> None:
    router.get("/v1/capabilities").mock(side_effect=exc)
    with make_client(fake_time) as client, pytest.raises(TransportFailure) as caught:
        client.capabilities()
    assert caught.value.attempts == 4
    assert type(exc).__name__ in str(caught.value)


def test_tls_verification_failure_is_definitive(fake_time: FakeTime) -> None:
    # A plain MockTransport keeps the exception chain exactly as httpcore builds it.
    calls: list[httpx.Request] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        cause = ssl.SSLCertVerificationError(1, "certificate verify failed: self-signed")
        raise httpx.ConnectError("TLS handshake failed") from cause

    client = RelayClient(
        "http://127.0.0.1:9",
        binding=RelayBinding(samples.SERVER, samples.TEAM),
        credential=credential(),
        transport=httpx.MockTransport(refuse),
        sleep=fake_time.sleep,
        clock=fake_time.clock,
    )
    with client, pytest.raises(TlsVerificationFailed) as caught:
        client.capabilities()
    assert len(calls) == 1
    assert "self-signed" in str(caught.value)  # the cause chain is visible (#744)


@pytest.mark.parametrize("status", [502, 503, 504])
def test_proxy_page_without_protocol_header_is_retried(
    router: respx.MockRouter, fake_time: FakeTime, endpoint: Any, status: int
) -> None:
    method, path, _, call, success = endpoint
    route = router.route(method=method, path=path).mock(
        side_effect=[proxy_page(status), proxy_page(status), reply(success)]
    )
    with make_client(fake_time) as client:
        call(client)
    assert route.call_count == 3


@pytest.mark.parametrize("status", [502, 503, 504])
def test_proxy_page_surfaces_as_intermediary_failure(
    router: respx.MockRouter, fake_time: FakeTime, status: int
) -> None:
    router.get("/v1/capabilities").mock(return_value=proxy_page(status))
    with make_client(fake_time) as client, pytest.raises(IntermediaryFailure) as caught:
        client.capabilities()
    assert caught.value.retryable and caught.value.status == status


def test_proxy_413_without_header_asks_the_caller_to_split(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    route = router.post("/v1/messages").mock(return_value=proxy_page(413))
    with make_client(fake_time) as client, pytest.raises(RequestTooLarge):
        client.post_messages(_batch())
    assert route.call_count == 1


def test_proxy_429_without_header_is_retried(router: respx.MockRouter, fake_time: FakeTime) -> None:
    route = router.get("/v1/capabilities").mock(
        side_effect=[proxy_page(429), reply(samples.capabilities())]
    )
    with make_client(fake_time) as client:
        client.capabilities()
    assert route.call_count == 2


@pytest.mark.parametrize("status", [200, 400, 401, 404, 409, 410, 500])
def test_other_answers_without_protocol_header_are_protocol_violations(
    router: respx.MockRouter, fake_time: FakeTime, status: int
) -> None:
    route = router.get("/v1/capabilities").mock(
        return_value=httpx.Response(status, json=samples.capabilities())
    )
    with make_client(fake_time) as client, pytest.raises(ProtocolViolation):
        client.capabilities()
    assert route.call_count == 1


def test_wrong_protocol_header_value_is_a_protocol_violation(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.get("/v1/capabilities").mock(
        return_value=reply(samples.capabilities(), headers={"Agmsg-Protocol-Version": "2"})
    )
    with make_client(fake_time) as client, pytest.raises(ProtocolViolation):
        client.capabilities()


@pytest.mark.parametrize("status", [500, 502, 503])
def test_relay_5xx_with_unreadable_body_is_still_retried_by_status(
    router: respx.MockRouter, fake_time: FakeTime, status: int
) -> None:
    bad = httpx.Response(status, content=b"not json", headers={"Agmsg-Protocol-Version": "1"})
    route = router.get("/v1/capabilities").mock(side_effect=[bad, reply(samples.capabilities())])
    with make_client(fake_time) as client:
        client.capabilities()
    assert route.call_count == 2


def test_definitive_status_with_unreadable_body_is_a_protocol_violation(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    bad = httpx.Response(409, content=b"{}", headers={"Agmsg-Protocol-Version": "1"})
    route = router.get("/v1/capabilities").mock(return_value=bad)
    with make_client(fake_time) as client, pytest.raises(ProtocolViolation):
        client.capabilities()
    assert route.call_count == 1


def test_unexpected_success_status_is_a_protocol_violation(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.get("/v1/capabilities").mock(return_value=reply(samples.capabilities(), 201))
    with make_client(fake_time) as client, pytest.raises(ProtocolViolation):
        client.capabilities()


def test_pairing_errors_are_pairing_token_rejections(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    from syncengine.http import Secret
    from tests.syncengine.http.helpers import TOKEN_TEXT

    router.post("/v1/pairing/exchange").mock(
        return_value=error(410, "pairing-token-expired", {"expired_at": samples.TIME})
    )
    with (
        make_client(fake_time, bound=False) as client,
        pytest.raises(PairingTokenRejected) as caught,
    ):
        client.exchange_pairing_token(Secret(TOKEN_TEXT))
    assert caught.value.code == "pairing-token-expired"


@pytest.mark.parametrize("code", sorted(ERROR_CODES))
def test_every_protocol_code_is_classified_as_the_wire_table_says(code: str) -> None:
    row = ERROR_CODES[code]
    response = ErrorResponse(min(row.statuses), code, "m")
    classified = classify_error_response(response, "m", None)
    assert classified.retryable is row.retryable
    assert is_retryable(classified) is row.retryable
    assert classified.code == code
    assert (classified.state is EngineState.BACKOFF) is row.retryable


def test_only_client_errors_are_retryable() -> None:
    assert not is_retryable(RuntimeError("boom"))
    assert not is_retryable(httpx.ConnectError("raw httpx errors are classified first"))


@given(
    status=st.integers(min_value=400, max_value=599),
    code=st.from_regex(r"x-[a-z0-9]{1,20}", fullmatch=True),
)
def test_unknown_code_is_retried_exactly_on_the_retryable_statuses(status: int, code: str) -> None:
    classified = classify_error_response(ErrorResponse(status, code, "m"), "m", None)
    assert classified.retryable is (status in (429, 500, 502, 503, 504))
    assert classified.code == code
    if status == 413:
        assert isinstance(classified, RequestTooLarge)
