"""Strict request bodies: size counted from streamed bytes, JSON-only, no surprises."""

from __future__ import annotations

import json
from collections.abc import Iterator

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relay.limits import MAX_REQUEST_BYTES
from tests.relay.app_relay import Device, Relay
from tests.relay.helpers import batch, blob, message, uuid4


def _post(relay: Relay, device: Device, content: bytes, **headers: str) -> object:
    return relay.client.post(
        "/v1/messages",
        content=content,
        headers={**device.headers, "Content-Type": "application/json", **headers},
    )


def _stored_count(relay: Relay, device: Device) -> str:
    caps = relay.client.get("/v1/capabilities", headers=device.headers).json()
    return str(caps["current_seq"])


def test_streamed_body_over_two_mib_is_413_even_without_content_length(
    relay: Relay, device: Device
) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(3):
            yield b" " * (MAX_REQUEST_BYTES // 2)

    response = relay.client.post(
        "/v1/messages",
        content=chunks(),
        headers={**device.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 413
    body = response.json()
    assert body["error"]["code"] == "request-too-large"
    assert body["team_id"] == device.team.team_id


def test_declared_content_length_over_two_mib_is_413(relay: Relay, device: Device) -> None:
    response = _post(relay, device, b" " * (MAX_REQUEST_BYTES + 1))
    assert response.status_code == 413  # type: ignore[attr-defined]


def test_body_of_exactly_two_mib_is_not_too_large(relay: Relay, device: Device) -> None:
    document = json.dumps({"messages": batch(1)}).encode()
    padded = document + b" " * (MAX_REQUEST_BYTES - len(document))
    response = _post(relay, device, padded)
    assert response.status_code == 200  # type: ignore[attr-defined]


def test_only_application_json_utf8_is_accepted(relay: Relay, device: Device) -> None:
    document = json.dumps({"messages": batch(1)}).encode()
    for content_type in ("text/plain", "application/json; charset=latin-1", "application/xml"):
        assert _post(relay, device, document, **{"Content-Type": content_type}).status_code == 400  # type: ignore[attr-defined]
    ok = _post(relay, device, document, **{"Content-Type": "application/json; charset=utf-8"})
    assert ok.status_code == 200  # type: ignore[attr-defined]


def test_non_identity_content_encoding_is_400(relay: Relay, device: Device) -> None:
    document = json.dumps({"messages": batch(1)}).encode()
    response = _post(relay, device, document, **{"Content-Encoding": "gzip"})
    assert response.status_code == 400  # type: ignore[attr-defined]


def test_duplicate_keys_are_rejected(relay: Relay, device: Device) -> None:
    item = message()
    text = json.dumps({"messages": [item]})
    duplicated = text.replace('"cipher": "none"', '"cipher": "none", "cipher": "none"')
    assert _post(relay, device, duplicated.encode()).status_code == 400  # type: ignore[attr-defined]
    assert _stored_count(relay, device) == "0"


def test_unknown_fields_are_rejected_at_every_level(relay: Relay, device: Device) -> None:
    item = message()
    for document in (
        {"messages": [item], "extra": 1},
        {"messages": [{**item, "to": "worker-1"}]},
        {"messages": [{**item, "envelope": {**item["envelope"], "created_at": "x"}}]},
    ):
        assert _post(relay, device, json.dumps(document).encode()).status_code == 400  # type: ignore[attr-defined]
    assert _stored_count(relay, device) == "0"


def test_invalid_utf8_and_bom_are_rejected(relay: Relay, device: Device) -> None:
    document = json.dumps({"messages": batch(1)}).encode()
    assert _post(relay, device, b"\xef\xbb\xbf" + document).status_code == 400  # type: ignore[attr-defined]
    assert _post(relay, device, document[:-2] + b"\xff}").status_code == 400  # type: ignore[attr-defined]


def test_non_canonical_base64_blob_is_rejected(relay: Relay, device: Device) -> None:
    for bad in ("QQ", "QR==", "QQ==\n", "", "Q Q=="):
        item = {"id": uuid4(), "envelope": {"v": 1, "cipher": "none", "key_id": None, "blob": bad}}
        response = _post(relay, device, json.dumps({"messages": [item]}).encode())
        assert response.status_code == 400, bad  # type: ignore[attr-defined]


def test_wire_id_must_be_canonical_uuid4(relay: Relay, device: Device) -> None:
    for bad in ("018f3f7e-0000-7000-8000-000000000001", uuid4().upper(), "x"):
        item = {"id": bad, "envelope": {"v": 1, "cipher": "none", "key_id": None, "blob": blob()}}
        response = _post(relay, device, json.dumps({"messages": [item]}).encode())
        assert response.status_code == 400, bad  # type: ignore[attr-defined]


def test_cipher_none_requires_null_key_id(relay: Relay, device: Device) -> None:
    item = message(key_id="epoch-1")
    response = _post(relay, device, json.dumps({"messages": [item]}).encode())
    assert response.status_code == 400  # type: ignore[attr-defined]


def test_batch_size_is_one_to_one_thousand(relay: Relay, device: Device) -> None:
    assert _post(relay, device, b'{"messages":[]}').status_code == 400  # type: ignore[attr-defined]
    over = json.dumps({"messages": batch(1001)}).encode()
    assert _post(relay, device, over).status_code == 400  # type: ignore[attr-defined]
    assert _stored_count(relay, device) == "0"


def test_envelope_version_must_be_an_integer(relay: Relay, device: Device) -> None:
    item = message()
    for v in (1.0, "1", True, None):
        doc = {"messages": [{**item, "envelope": {**item["envelope"], "v": v}}]}
        assert _post(relay, device, json.dumps(doc).encode()).status_code == 400  # type: ignore[attr-defined]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=300))
def test_hostile_bytes_never_crash_or_store(relay: Relay, device: Device, data: bytes) -> None:
    response = _post(relay, device, data)
    assert response.status_code in (200, 400, 409, 413, 422)  # type: ignore[attr-defined]
    if response.status_code != 200:  # type: ignore[attr-defined]
        assert response.json()["error"]["code"]  # type: ignore[attr-defined]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
        ),
        max_leaves=12,
    )
)
def test_hostile_json_shapes_are_400_and_change_nothing(
    relay: Relay, device: Device, value: object
) -> None:
    for path in ("/v1/messages", "/v1/read-state/sync"):
        response = relay.client.post(path, json=value, headers=device.headers)
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "invalid-request"
    assert _stored_count(relay, device) == "0"


def test_a_body_of_a_million_empty_arrays_is_refused_before_it_is_decoded(
    relay: Relay, device: Device
) -> None:
    """#14: under the 2 MiB cap, ``[],`` repeated would decode to ~25x its bytes."""
    bomb = b'{"messages":[],"junk":[' + b"[]," * 600_000 + b"[]]}"
    response = _post(relay, device, bomb)
    assert response.status_code == 400  # type: ignore[attr-defined]
    assert _stored_count(relay, device) == "0"
