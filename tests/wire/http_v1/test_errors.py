"""Error envelope, code table and binding rules (v1.md "Error and retry semantics")."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.wire.http_v1 import samples
from wire.errors import ProtocolError, WireError
from wire.http_v1 import (
    ERROR_CODES,
    BindingRule,
    ClientAction,
    ErrorResponse,
    RelayError,
    intermediary_failure,
    is_retryable_status,
)

VALID_DETAILS: dict[str, dict[str, Any]] = {
    "resync-required": {"after": "42", "min_available_seq": "100"},
    "message-uuid-conflict": {"id": samples.WIRE_1},
    "cipher-policy-violation": {
        "write_allowed_ciphers": ["age-v1"],
        "policy_revision": "3",
        "id": samples.WIRE_1,
        "v": 1,
        "cipher": "none",
    },
    "unsupported-cipher": {
        "write_allowed_ciphers": ["none"],
        "policy_revision": "0",
        "id": samples.WIRE_1,
        "v": 2,
        "cipher": "rot13",
        "accepted_envelope_versions": [1],
    },
    "unsupported-protocol-version": {"requested_version": 2, "supported_versions": [1]},
    "pairing-token-expired": {"expired_at": samples.TIME},
    "read-state-limit-exceeded": {
        "member_id": samples.MEMBER_A,
        "member_exact_count": "4097",
        "team_exact_count": "5000",
        "max_exact_per_member": 4096,
        "max_exact_per_team": 65536,
    },
}


def example(code: str) -> tuple[int, dict[str, Any]]:
    row = ERROR_CODES[code]
    bound = row.binding is not BindingRule.FORBIDDEN
    return min(row.statuses), samples.error(
        code, copy.deepcopy(VALID_DETAILS.get(code)), bound=bound
    )


def field_of(value: Any, status: int) -> str:
    with pytest.raises(WireError) as caught:
        ErrorResponse.from_obj(value, status)
    return caught.value.field


@pytest.mark.parametrize("code", sorted(ERROR_CODES))
def test_every_code_in_the_table_parses_and_round_trips(code: str) -> None:
    status, doc = example(code)
    response = ErrorResponse.from_obj(doc, status)
    assert response.code == code and response.status == status
    assert response.to_obj() == doc


def test_table_covers_every_spec_status() -> None:
    statuses = {status for row in ERROR_CODES.values() for status in row.statuses}
    assert statuses == {400, 401, 403, 404, 409, 410, 413, 422, 426, 429, 500, 502, 503, 504, 507}


def test_code_with_the_wrong_status_is_rejected() -> None:
    _, doc = example("resync-required")
    assert field_of(doc, 409) == "error.code"


@pytest.mark.parametrize(
    "code", sorted(c for c, r in ERROR_CODES.items() if r.binding is BindingRule.REQUIRED)
)
def test_codes_after_team_resolution_require_the_binding(code: str) -> None:
    status, doc = example(code)
    del doc["team_id"]
    assert field_of(doc, status) == "team_id"


@pytest.mark.parametrize(
    "code", sorted(c for c, r in ERROR_CODES.items() if r.binding is BindingRule.FORBIDDEN)
)
def test_codes_before_resolution_carry_no_binding(code: str) -> None:
    status, doc = example(code)
    doc["server_instance_id"] = samples.SERVER
    assert field_of(doc, status) == "server_instance_id"


def test_team_id_without_server_instance_is_rejected() -> None:
    doc = samples.error("invalid-request")
    del doc["server_instance_id"]
    assert field_of(doc, 400) == "team_id"


def test_invalid_request_may_or_may_not_carry_the_binding() -> None:
    assert (
        ErrorResponse.from_obj(samples.error("invalid-request", bound=False), 400).team_id is None
    )
    assert ErrorResponse.from_obj(samples.error("invalid-request"), 400).team_id == samples.TEAM


@pytest.mark.parametrize("code", sorted(VALID_DETAILS))
def test_each_detail_schema_requires_its_members(code: str) -> None:
    status, doc = example(code)
    first = sorted(doc["error"]["details"])[0]
    del doc["error"]["details"][first]
    assert field_of(doc, status) == f"error.details.{first}"


def test_resync_details_must_have_after_below_the_floor() -> None:
    status, doc = example("resync-required")
    doc["error"]["details"]["after"] = "100"
    assert field_of(doc, status) == "error.details.after"


def test_resync_top_level_floor_must_equal_the_details_floor() -> None:
    status, doc = example("resync-required")
    doc["team_name"] = "night-shift"
    doc["min_available_seq"] = "100"
    assert ErrorResponse.from_obj(doc, status).min_available_seq == 100
    doc["min_available_seq"] = "99"
    assert field_of(doc, status) == "min_available_seq"


def test_limit_details_must_name_the_offending_member() -> None:
    status, doc = example("read-state-limit-exceeded")
    doc["error"]["details"]["member_id"] = None
    assert field_of(doc, status) == "error.details.member_id"


def test_version_details_allow_a_null_requested_version() -> None:
    status, doc = example("unsupported-protocol-version")
    doc["error"]["details"]["requested_version"] = None
    assert ErrorResponse.from_obj(doc, status).details["requested_version"] is None


def test_details_must_be_an_object() -> None:
    doc = samples.error("invalid-request")
    doc["error"]["details"] = []
    assert field_of(doc, 400) == "error.details"


def test_bare_string_error_is_rejected() -> None:
    assert field_of({"protocol_version": 1, "error": "payment required"}, 402) == "error"


def test_unknown_well_formed_code_is_kept_and_classified_by_status() -> None:
    unknown = ErrorResponse.from_obj(samples.error("payment_required"), 402)
    assert unknown.spec is None and unknown.action is ClientAction.STOP and not unknown.retryable
    busy = ErrorResponse.from_obj(samples.error("overloaded"), 503)
    assert busy.retryable and busy.action is ClientAction.RETRY


def test_malformed_code_is_rejected() -> None:
    assert field_of(samples.error("Resync Required"), 410) == "error.code"


def test_unknown_envelope_members_are_ignored() -> None:
    doc = samples.error("invalid-request")
    doc["trace_id"] = "abc"
    doc["error"]["hint"] = "look"
    assert ErrorResponse.from_obj(doc, 400).code == "invalid-request"


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_unknown_outcome_statuses_are_retryable(status: int) -> None:
    assert is_retryable_status(status)


@pytest.mark.parametrize(
    "code", ["message-uuid-conflict", "unsupported-cipher", "sequence-exhausted", "resync-required"]
)
def test_definitive_codes_are_not_retryable(code: str) -> None:
    assert not ERROR_CODES[code].retryable


def test_intermediary_page_becomes_a_retryable_unavailable() -> None:
    failure = intermediary_failure(503)
    assert failure.code == "unavailable" and failure.retryable and failure.intermediary
    with pytest.raises(WireError):
        intermediary_failure(500)


def test_relay_error_is_a_protocol_error_carrying_status_code_and_binding() -> None:
    status, doc = example("resync-required")
    error = ErrorResponse.from_obj(doc, status).to_exception()
    assert isinstance(error, ProtocolError) and isinstance(error, RelayError)
    assert (error.status, error.code) == (410, "resync-required")
    assert error.details == {"after": "42", "min_available_seq": "100"}
    assert error.team_id == samples.TEAM and error.action is ClientAction.RESYNC_REQUIRED
