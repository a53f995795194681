"""RelayClient: headers, binding stop rule, redirects, identical retries, waits, bounds."""

from __future__ import annotations

import email.utils
import itertools
import ssl
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import respx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from syncengine import __version__
from syncengine.http import (
    BindingMismatch,
    ClientConfig,
    ClientUsageError,
    EngineState,
    ProtocolVersionUnsupported,
    ProtocolViolation,
    RedirectRefused,
    RelayUnavailable,
    RequestTooLarge,
    ResponseTooLarge,
    ResyncRequired,
    RetryPolicy,
    TransportFailure,
    check_endpoint,
)
from syncengine.http.client import PAGE_MESSAGE_BYTES, page_response_bound
from syncengine.http.retry import MAX_RETRY_AFTER, backoff_window, parse_retry_after
from tests.syncengine.http.helpers import (
    ENDPOINT,
    OTHER_SERVER,
    SECRET_TEXT,
    FakeTime,
    error,
    make_client,
    proxy_page,
    reply,
)
from tests.wire.http_v1 import samples
from wire.envelope import Envelope
from wire.http_v1.body import encode_body
from wire.http_v1.messages import MessageBatch, OutgoingMessage
from wire.http_v1.read_state import ReadStateRequest
from wire.limits import MAX_BLOB_BYTES, MAX_BLOB_CHARS


def _batch() -> MessageBatch:
    return MessageBatch.from_obj(samples.batch())


def _foreign(doc: dict[str, Any], **ids: str) -> dict[str, Any]:
    return {**doc, **ids}


# --- every endpoint returns its typed document --------------------------------


def test_each_endpoint_returns_its_parsed_document(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.get("/v1/health").mock(return_value=reply(samples.health()))
    router.get("/v1/capabilities").mock(return_value=reply(samples.capabilities()))
    router.post("/v1/messages").mock(return_value=reply(samples.push_response()))
    router.get("/v1/messages").mock(return_value=reply(samples.page()))
    router.get("/v1/members").mock(return_value=reply(samples.members()))
    router.post("/v1/read-state/sync").mock(return_value=reply(samples.read_page()))
    router.post(f"/v1/credentials/{samples.CREDENTIAL_ID}/revoke").mock(
        return_value=reply(samples.revoke())
    )
    with make_client(fake_time) as client:
        assert client.health().server_instance_id == samples.SERVER
        assert client.capabilities().current_seq == 7
        assert [ack.server_seq for ack in client.post_messages(_batch()).acks] == [41, 42]
        assert client.get_messages(40, 100).next_after == 42
        assert len(client.members().members) == 2
        request = ReadStateRequest.from_obj(samples.read_request())
        assert client.read_state_sync(request).current_seq == 52
        assert client.revoke_credential(samples.CREDENTIAL_ID).credential_id == (
            samples.CREDENTIAL_ID
        )


def test_get_messages_sends_after_and_limit_as_canonical_query(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    route = router.get("/v1/messages").mock(return_value=reply(samples.page()))
    with make_client(fake_time) as client:
        client.get_messages(40, 2)
    assert route.calls.last.request.url.query == b"after=40&limit=2"


def test_page_that_does_not_answer_the_query_is_a_protocol_violation(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.get("/v1/messages").mock(return_value=reply(samples.page()))
    with make_client(fake_time) as client, pytest.raises(ProtocolViolation):
        client.get_messages(39)  # the page starts at 41, not 40


def test_acks_that_do_not_answer_the_batch_are_a_protocol_violation(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    acks = samples.push_response(
        samples.ack(samples.WIRE_2, "41"), samples.ack(samples.WIRE_1, "42")
    )
    router.post("/v1/messages").mock(return_value=reply(acks))
    with make_client(fake_time) as client, pytest.raises(ProtocolViolation):
        client.post_messages(_batch())


def test_revoke_answer_for_another_credential_is_a_protocol_violation(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    other = "0190a1b2-c3d4-7e5f-8a6b-000000000031"
    router.post(f"/v1/credentials/{other}/revoke").mock(return_value=reply(samples.revoke()))
    with make_client(fake_time) as client, pytest.raises(ProtocolViolation):
        client.revoke_credential(other)


def test_resync_required_carries_after_and_floor(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.get("/v1/messages").mock(
        return_value=error(410, "resync-required", {"after": "40", "min_available_seq": "100"})
    )
    with make_client(fake_time) as client, pytest.raises(ResyncRequired) as caught:
        client.get_messages(40)
    assert (caught.value.after, caught.value.min_available_seq) == (40, 100)
    assert caught.value.state is EngineState.RESYNC_REQUIRED


def test_resync_required_for_another_cursor_is_a_protocol_violation(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.get("/v1/messages").mock(
        return_value=error(410, "resync-required", {"after": "7", "min_available_seq": "100"})
    )
    with make_client(fake_time) as client, pytest.raises(ProtocolViolation):
        client.get_messages(40)


def test_unready_health_is_retried_then_surfaces_as_unavailable(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    unready = {"status": "unavailable", "protocol": {"supported_versions": [1]}}
    unready["database"] = "unavailable"
    route = router.get("/v1/health").mock(return_value=reply(unready, 503))
    with make_client(fake_time, bound=False) as client, pytest.raises(RelayUnavailable):
        client.health()
    assert route.call_count == 4


def test_health_without_protocol_v1_is_refused(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.get("/v1/health").mock(
        return_value=reply({**samples.health(), "protocol": {"supported_versions": [2]}})
    )
    with make_client(fake_time, bound=False) as client, pytest.raises(ProtocolVersionUnsupported):
        client.health()


# --- headers --------------------------------------------------------------------


def test_team_requests_carry_version_team_and_bearer_headers(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    route = router.get("/v1/capabilities").mock(return_value=reply(samples.capabilities()))
    with make_client(fake_time) as client:
        client.capabilities()
    headers = route.calls.last.request.headers
    assert headers["Agmsg-Protocol-Version"] == "1"
    assert headers["Agmsg-Client-Version"] == __version__
    assert headers["Agmsg-Team-ID"] == samples.TEAM
    assert headers["Authorization"] == f"Bearer {SECRET_TEXT}"
    assert "Content-Type" not in headers


def test_post_bodies_are_declared_json(router: respx.MockRouter, fake_time: FakeTime) -> None:
    route = router.post("/v1/messages").mock(return_value=reply(samples.push_response()))
    with make_client(fake_time) as client:
        client.post_messages(_batch())
    assert route.calls.last.request.headers["Content-Type"] == "application/json"


def test_health_carries_no_team_or_credential(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    route = router.get("/v1/health").mock(return_value=reply(samples.health()))
    with make_client(fake_time) as client:
        client.health()
    headers = route.calls.last.request.headers
    assert headers["Agmsg-Protocol-Version"] == "1"
    assert headers["Agmsg-Client-Version"] == __version__
    assert "Agmsg-Team-ID" not in headers
    assert "Authorization" not in headers


def test_revoke_sends_no_body(router: respx.MockRouter, fake_time: FakeTime) -> None:
    route = router.post(f"/v1/credentials/{samples.CREDENTIAL_ID}/revoke").mock(
        return_value=reply(samples.revoke())
    )
    with make_client(fake_time) as client:
        client.revoke_credential(samples.CREDENTIAL_ID)
    assert route.calls.last.request.content == b""
    assert "Content-Type" not in route.calls.last.request.headers


def test_team_endpoints_need_a_bound_client(fake_time: FakeTime) -> None:
    with make_client(fake_time, bound=False) as client, pytest.raises(ClientUsageError):
        client.capabilities()


def test_a_proxy_cookie_is_never_sent_back(router: respx.MockRouter, fake_time: FakeTime) -> None:
    route = router.get("/v1/capabilities").mock(
        side_effect=[
            proxy_page(503, {"Set-Cookie": "edge=abc; Path=/"}),
            reply(samples.capabilities()),
        ]
    )
    with make_client(fake_time) as client:
        client.capabilities()
    assert "Cookie" not in route.calls.last.request.headers


# --- binding stop rule ---------------------------------------------------------


@pytest.mark.parametrize(
    "ids", [{"team_id": samples.OTHER_TEAM}, {"server_instance_id": OTHER_SERVER}]
)
def test_success_naming_another_stream_stops_with_binding_mismatch(
    router: respx.MockRouter, fake_time: FakeTime, ids: dict[str, str]
) -> None:
    route = router.get("/v1/capabilities").mock(
        return_value=reply(_foreign(samples.capabilities(), **ids))
    )
    with make_client(fake_time) as client, pytest.raises(BindingMismatch) as caught:
        client.capabilities()
    assert route.call_count == 1
    assert caught.value.state is EngineState.HALTED


def test_malformed_success_naming_another_team_is_still_a_binding_mismatch(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    doc = _foreign(samples.capabilities(), team_id=samples.OTHER_TEAM)
    del doc["policy_history"]
    router.get("/v1/capabilities").mock(return_value=reply(doc))
    with make_client(fake_time) as client, pytest.raises(BindingMismatch):
        client.capabilities()


@pytest.mark.parametrize(("status", "code"), [(503, "unavailable"), (409, "message-uuid-conflict")])
def test_error_naming_another_stream_stops_with_binding_mismatch(
    router: respx.MockRouter, fake_time: FakeTime, status: int, code: str
) -> None:
    body = samples.error(code, {"id": samples.WIRE_1})
    body["team_id"] = samples.OTHER_TEAM
    route = router.post("/v1/messages").mock(return_value=reply(body, status))
    with make_client(fake_time) as client, pytest.raises(BindingMismatch):
        client.post_messages(_batch())
    assert route.call_count == 1  # a retryable status does not outrank the stop rule


def test_malformed_error_naming_another_team_is_still_a_binding_mismatch(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    body = samples.error("message-uuid-conflict", {})  # details.id missing: malformed
    body["team_id"] = samples.OTHER_TEAM
    router.post("/v1/messages").mock(return_value=reply(body, 409))
    with make_client(fake_time) as client, pytest.raises(BindingMismatch):
        client.post_messages(_batch())


def test_health_naming_another_instance_stops_a_bound_client(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.get("/v1/health").mock(
        return_value=reply({**samples.health(), "server_instance_id": OTHER_SERVER})
    )
    with make_client(fake_time) as client, pytest.raises(BindingMismatch):
        client.health()


def test_unready_health_naming_another_instance_stops_a_bound_client(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    unready = {
        "status": "unavailable",
        "protocol": {"supported_versions": [1]},
        "database": "unavailable",
        "server_instance_id": OTHER_SERVER,
    }
    route = router.get("/v1/health").mock(return_value=reply(unready, 503))
    with make_client(fake_time) as client, pytest.raises(BindingMismatch):
        client.health()
    assert route.call_count == 1


def test_health_naming_another_team_stops_a_bound_client(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.get("/v1/health").mock(
        return_value=reply({**samples.health(), "team_id": samples.OTHER_TEAM})
    )
    with make_client(fake_time) as client, pytest.raises(BindingMismatch):
        client.health()


# --- redirects -----------------------------------------------------------------


@pytest.mark.parametrize("status", [300, 301, 302, 303, 304, 307, 308])
def test_redirect_is_never_followed_and_is_definitive(fake_time: FakeTime, status: int) -> None:
    with respx.mock(assert_all_called=False) as mock:
        origin = mock.get(f"{ENDPOINT}/v1/capabilities").mock(
            return_value=httpx.Response(
                status,
                headers={
                    "Location": "http://127.0.0.2:9/v1/capabilities",
                    "Agmsg-Protocol-Version": "1",
                },
            )
        )
        elsewhere = mock.get("http://127.0.0.2:9/v1/capabilities").mock(
            return_value=reply(samples.capabilities())
        )
        with make_client(fake_time) as client, pytest.raises(RedirectRefused) as caught:
            client.capabilities()
    assert origin.call_count == 1
    assert elsewhere.call_count == 0
    assert caught.value.status == status
    assert "127.0.0.2" in str(caught.value)


# --- identical retries ------------------------------------------------------------


def test_retried_post_sends_byte_identical_bodies(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    batch = _batch()
    route = router.post("/v1/messages").mock(
        side_effect=[
            httpx.ReadTimeout("lost"),
            error(503, "unavailable"),
            proxy_page(502),
            error(500, "internal-error"),
            reply(samples.push_response()),
        ]
    )
    with make_client(fake_time, retry=RetryPolicy(max_attempts=5)) as client:
        client.post_messages(batch)
    bodies = [call.request.content for call in route.calls]
    assert len(bodies) == 5
    assert set(bodies) == {encode_body(batch.to_obj())}
    keys = {tuple(call.request.headers.multi_items()) for call in route.calls}
    assert len(keys) == 1  # headers identical too


def test_retried_read_state_sync_sends_byte_identical_bodies(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    request = ReadStateRequest.from_obj(samples.read_request())
    route = router.post("/v1/read-state/sync").mock(
        side_effect=[httpx.ConnectError("refused"), reply(samples.read_page())]
    )
    with make_client(fake_time) as client:
        client.read_state_sync(request)
    assert [c.request.content for c in route.calls] == [encode_body(request.to_obj())] * 2


def test_batch_over_two_mebibytes_is_refused_locally_as_too_large(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    big = Envelope.from_blob_bytes("x-test", "epoch-1", b"\x00" * MAX_BLOB_BYTES)
    ids = [samples.WIRE_1, samples.WIRE_2]
    batch = MessageBatch(tuple(OutgoingMessage(wire_id, big) for wire_id in ids))
    route = router.post("/v1/messages")
    with make_client(fake_time) as client, pytest.raises(RequestTooLarge):
        client.post_messages(batch)
    assert route.call_count == 0


# --- waits ------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "code"), [(429, "rate-limited"), (503, "unavailable")])
def test_retry_after_seconds_is_honoured(
    router: respx.MockRouter, fake_time: FakeTime, status: int, code: str
) -> None:
    answer = reply(samples.error(code), status, {"Retry-After": "7"})
    router.get("/v1/capabilities").mock(side_effect=[answer, reply(samples.capabilities())])
    with make_client(fake_time) as client:
        client.capabilities()
    assert fake_time.sleeps == [7.0]


def test_retry_after_http_date_is_honoured(router: respx.MockRouter, fake_time: FakeTime) -> None:
    when = datetime.now(UTC) + timedelta(seconds=30)
    header = {"Retry-After": email.utils.format_datetime(when, usegmt=True)}
    router.get("/v1/capabilities").mock(
        side_effect=[proxy_page(503, header), reply(samples.capabilities())]
    )
    with make_client(fake_time) as client:
        client.capabilities()
    assert len(fake_time.sleeps) == 1
    assert 25.0 < fake_time.sleeps[0] <= 30.0


def test_retry_after_is_ignored_on_statuses_other_than_429_and_503(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    answer = reply(samples.error("internal-error"), 500, {"Retry-After": "90"})
    router.get("/v1/capabilities").mock(side_effect=[answer, reply(samples.capabilities())])
    policy = RetryPolicy(max_attempts=3, backoff_base=1.0, backoff_cap=2.0)
    with make_client(fake_time, retry=policy) as client:
        client.capabilities()
    assert fake_time.sleeps[0] <= 1.0


def test_retry_after_beyond_the_budget_surfaces_instead_of_waiting(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    answer = reply(samples.error("rate-limited"), 429, {"Retry-After": "3600"})
    route = router.get("/v1/capabilities").mock(return_value=answer)
    policy = RetryPolicy(max_attempts=5, max_elapsed=60.0)
    with make_client(fake_time, retry=policy) as client, pytest.raises(Exception) as caught:
        client.capabilities()
    assert route.call_count == 1
    assert fake_time.sleeps == []
    assert getattr(caught.value, "retry_after", None) == 3600.0


def test_total_time_budget_bounds_the_retries(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    answer = reply(samples.error("unavailable"), 503, {"Retry-After": "4"})
    route = router.get("/v1/capabilities").mock(return_value=answer)
    policy = RetryPolicy(max_attempts=100, max_elapsed=10.0)
    with make_client(fake_time, retry=policy) as client, pytest.raises(RelayUnavailable) as caught:
        client.capabilities()
    assert fake_time.sleeps == [4.0, 4.0]
    assert route.call_count == caught.value.attempts == 3


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.floats(min_value=0.01, max_value=5.0),
    factor=st.floats(min_value=1.0, max_value=100.0),
    attempts=st.integers(min_value=2, max_value=12),
)
def test_backoff_is_jittered_exponential_and_never_exceeds_the_cap(
    base: float, factor: float, attempts: int
) -> None:
    policy = RetryPolicy(
        max_attempts=attempts, backoff_base=base, backoff_cap=base * factor, max_elapsed=1e9
    )
    fake = FakeTime()
    with respx.mock(base_url=ENDPOINT) as mock:
        mock.get("/v1/capabilities").mock(return_value=error(503, "unavailable"))
        with make_client(fake, retry=policy) as client, pytest.raises(RelayUnavailable):
            client.capabilities()
    assert len(fake.sleeps) == attempts - 1
    for number, slept in enumerate(fake.sleeps, start=1):
        assert 0.0 <= slept <= backoff_window(policy, number) <= policy.backoff_cap


@given(seconds=st.integers(min_value=0, max_value=int(MAX_RETRY_AFTER)))
def test_retry_after_delta_seconds_parse_exactly_up_to_the_clamp(seconds: int) -> None:
    assert parse_retry_after(str(seconds)) == float(seconds)


@given(digits=st.integers(min_value=int(MAX_RETRY_AFTER) + 1, max_value=10**400))
def test_retry_after_of_any_digit_count_is_clamped_never_an_overflow(digits: int) -> None:
    """#14: a few hundred digits once ended sync with "int too large to convert"."""
    assert parse_retry_after(str(digits)) == MAX_RETRY_AFTER


@pytest.mark.parametrize(
    "value", ["99999999999", "Fri, 31 Dec 9999 23:59:59 GMT", "0" * 300 + "99999999"]
)
def test_retry_after_far_in_the_future_is_clamped_to_the_documented_maximum(value: str) -> None:
    assert parse_retry_after(value) == MAX_RETRY_AFTER


def test_retry_after_http_date_in_the_past_means_now() -> None:
    now = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    assert parse_retry_after("Wed, 04 Mar 2026 05:06:37 GMT", now) == 30.0
    assert parse_retry_after("Wed, 04 Mar 2026 05:00:00 GMT", now) == 0.0


@pytest.mark.parametrize("value", ["", "soon", "-5", "1.5", "Wed, 04 Mar 2026 05:06:37"])
def test_unreadable_retry_after_falls_back_to_backoff(value: str) -> None:
    assert parse_retry_after(value) is None


# --- response size bound -------------------------------------------------------------


def _endless() -> Iterator[bytes]:
    for _ in itertools.count():
        yield b" " * 65536


def test_streamed_page_beyond_its_bound_is_refused_without_reading_it_all(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.get("/v1/messages").mock(
        return_value=httpx.Response(
            200, content=_endless(), headers={"Agmsg-Protocol-Version": "1"}
        )
    )
    with make_client(fake_time) as client, pytest.raises(ResponseTooLarge) as caught:
        client.get_messages(40, 1)
    assert caught.value.state is EngineState.ADJUST


def test_a_body_dripped_slowly_is_cut_at_the_attempts_deadline(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    """#14: one byte a second passed every per-read timeout for minutes."""

    def drip() -> Iterator[bytes]:
        for _ in range(10_000):
            fake_time.now += 1.0  # each byte arrives a second after the last
            yield b" "

    router.get("/v1/capabilities").mock(
        return_value=httpx.Response(200, content=drip(), headers={"Agmsg-Protocol-Version": "1"})
    )
    client = make_client(fake_time, retry=RetryPolicy(max_attempts=1), request_deadline=30.0)
    started = fake_time.now
    with client, pytest.raises(TransportFailure, match="longer than 30 s"):
        client.capabilities()
    assert fake_time.now - started <= 32.0


def test_an_interrupt_between_body_chunks_abandons_a_slow_answer(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    """#14: run ignored SIGTERM while a relay dripped its answer."""

    class Stopped(Exception):
        pass

    chunks = 0

    def drip() -> Iterator[bytes]:
        nonlocal chunks
        for _ in range(1000):
            chunks += 1
            yield b" "

    def interrupt() -> None:
        if chunks >= 3:
            raise Stopped

    router.get("/v1/capabilities").mock(
        return_value=httpx.Response(200, content=drip(), headers={"Agmsg-Protocol-Version": "1"})
    )
    from syncengine.http.client import RelayBinding, RelayClient
    from tests.syncengine.http.helpers import credential

    client = RelayClient(
        ENDPOINT,
        binding=RelayBinding(samples.SERVER, samples.TEAM),
        credential=credential(),
        sleep=fake_time.sleep,
        clock=fake_time.clock,
        interrupt=interrupt,
    )
    with client, pytest.raises(Stopped):
        client.capabilities()
    assert chunks == 3


@pytest.mark.parametrize("value", [0.0, -1.0, float("nan"), float("inf"), 7200.0])
def test_the_request_deadline_must_be_a_bounded_positive_number(value: float) -> None:
    with pytest.raises(ClientUsageError, match="request_deadline"):
        ClientConfig(request_deadline=value)


def test_a_compressed_answer_is_refused_unread(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    """#14: a 1 MiB gzip inflating to 1 GiB peaked near 300 MiB before refusal."""
    route = router.get("/v1/capabilities").mock(
        return_value=httpx.Response(
            200,
            content=_endless(),
            headers={"Agmsg-Protocol-Version": "1", "Content-Encoding": "gzip"},
        )
    )
    with make_client(fake_time) as client, pytest.raises(ProtocolViolation, match="compressed"):
        client.capabilities()
    assert route.calls.last.request.headers["Accept-Encoding"] == "identity"


def test_declared_length_beyond_the_bound_is_refused_before_reading(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    body = encode_body(samples.capabilities())
    router.get("/v1/capabilities").mock(
        return_value=httpx.Response(
            200,
            content=body,
            headers={"Agmsg-Protocol-Version": "1", "Content-Length": str(len(body))},
        )
    )
    client = make_client(fake_time, max_document_bytes=len(body) - 1)
    with client, pytest.raises(ResponseTooLarge):
        client.capabilities()


def test_caller_can_lower_the_page_bound(router: respx.MockRouter, fake_time: FakeTime) -> None:
    router.get("/v1/messages").mock(return_value=reply(samples.page()))
    with make_client(fake_time) as client:
        with pytest.raises(ResponseTooLarge):
            client.get_messages(40, max_response_bytes=100)
        assert client.get_messages(40, max_response_bytes=100_000).next_after == 42


def test_oversized_error_body_on_a_definitive_status_is_a_protocol_violation(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.get("/v1/capabilities").mock(
        return_value=httpx.Response(
            404, content=_endless(), headers={"Agmsg-Protocol-Version": "1"}
        )
    )
    client = make_client(fake_time, max_error_bytes=1024)
    with client, pytest.raises(ProtocolViolation):
        client.capabilities()


@given(limit=st.integers(min_value=1, max_value=1000), cap=st.none() | st.integers(1, 2**40))
def test_page_bound_follows_the_limit_and_respects_every_ceiling(
    limit: int, cap: int | None
) -> None:
    config = ClientConfig()
    bound = page_response_bound(limit, config, cap)
    assert bound <= config.max_page_bytes
    assert cap is None or bound <= cap
    if cap is None and limit * PAGE_MESSAGE_BYTES < config.max_page_bytes // 2:
        assert bound >= limit * MAX_BLOB_CHARS  # a full page of maximal blobs fits


# --- configuration ------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1:9", "http://localhost:8080/", "http://10.1.2.3", "https://relay.example"],
)
def test_endpoint_accepts_https_and_local_http(url: str) -> None:
    check_endpoint(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://relay.example",
        "ftp://127.0.0.1",
        "https://relay.example/?team=x",
        "https://relay.example/#frag",
        "relay.example",
    ],
)
def test_endpoint_refuses_remote_plain_http_and_decorations(url: str) -> None:
    with pytest.raises(ClientUsageError):
        check_endpoint(url)


def test_endpoint_refusal_never_echoes_userinfo() -> None:
    with pytest.raises(ClientUsageError) as caught:
        check_endpoint("https://operator:hunter2pass@relay.example")
    assert "hunter2pass" not in str(caught.value)


def test_endpoint_path_prefix_is_kept(router: respx.MockRouter, fake_time: FakeTime) -> None:
    with respx.mock(assert_all_called=False) as mock:
        route = mock.get(f"{ENDPOINT}/agmsg/v1/health").mock(return_value=reply(samples.health()))
        from syncengine.http import RelayClient

        with RelayClient(f"{ENDPOINT}/agmsg/", sleep=fake_time.sleep) as client:
            client.health()
    assert route.call_count == 1


def test_tls_verification_cannot_be_turned_off() -> None:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with pytest.raises(ClientUsageError):
        ClientConfig(verify=context)


def test_a_plain_http_client_trusts_no_certificate_authority_but_still_verifies() -> None:
    from syncengine.http import RelayClient

    with RelayClient("http://127.0.0.1:9") as client:
        trust = client._trust()
    assert isinstance(trust, ssl.SSLContext)
    assert trust.verify_mode == ssl.CERT_REQUIRED and trust.check_hostname
    assert trust.cert_store_stats()["x509_ca"] == 0


def test_an_https_client_uses_the_default_trust_store() -> None:
    from syncengine.http import RelayClient

    with RelayClient("https://127.0.0.1:9") as client:
        assert client._trust() is True


def test_a_configured_tls_context_is_used_as_given() -> None:
    from syncengine.http import RelayClient

    context = ssl.create_default_context()
    with RelayClient("http://127.0.0.1:9", config=ClientConfig(verify=context)) as client:
        assert client._trust() is context


def test_every_timeout_phase_must_be_set() -> None:
    with pytest.raises(ClientUsageError):
        ClientConfig(timeout=httpx.Timeout(5.0, read=None))
