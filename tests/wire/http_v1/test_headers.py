"""Headers, paths, bodies and the binding stop rule (v1.md "Scope and conventions")."""

from __future__ import annotations

import pytest

from tests.wire.http_v1 import samples
from wire.errors import CanonicalJsonError, SchemaError, WireError
from wire.http_v1 import (
    BindingMismatchError,
    decode_request_body,
    encode_body,
    require_binding,
    require_empty_body,
)
from wire.http_v1.headers import (
    check_client_version,
    format_bearer,
    parse_bearer,
    parse_protocol_version_header,
    parse_retry_after,
    parse_team_id_header,
    read_client_version,
    require_response_protocol_version,
)
from wire.http_v1.paths import credential_revoke_path, parse_credential_revoke_path


def test_protocol_version_header_parses_canonical_decimal() -> None:
    assert parse_protocol_version_header("1") == 1
    assert parse_protocol_version_header("2") == 2


@pytest.mark.parametrize("value", [None, "", "01", "v1", " 1", "1.0"])
def test_absent_or_malformed_protocol_version_header_is_rejected(value: str | None) -> None:
    with pytest.raises(SchemaError) as caught:
        parse_protocol_version_header(value)
    assert caught.value.field == "Agmsg-Protocol-Version"


def test_v1_response_must_carry_version_one() -> None:
    require_response_protocol_version("1")
    with pytest.raises(SchemaError):
        require_response_protocol_version("2")


def test_team_id_header_must_be_uuid7() -> None:
    assert parse_team_id_header(samples.TEAM) == samples.TEAM
    with pytest.raises(WireError) as caught:
        parse_team_id_header(samples.TEAM.upper())
    assert caught.value.field == "Agmsg-Team-ID"


def test_client_version_accepts_printable_ascii_up_to_64() -> None:
    assert check_client_version("syncengine 0.1.0") == "syncengine 0.1.0"
    assert check_client_version("unknown") == "unknown"
    assert check_client_version("x" * 64) == "x" * 64


@pytest.mark.parametrize("value", ["", "x" * 65, "caf\u00e9", "tab\there", " padded"])
def test_client_version_outside_the_grammar_is_rejected(value: str) -> None:
    with pytest.raises(SchemaError):
        check_client_version(value)


def test_server_ignores_a_bad_client_version_instead_of_rejecting() -> None:
    assert read_client_version("x" * 65) is None
    assert read_client_version(None) is None
    assert read_client_version("1.2.3") == "1.2.3"


def test_bearer_round_trips_and_scheme_is_case_insensitive() -> None:
    assert parse_bearer(format_bearer("agmsg_cred_abc")) == "agmsg_cred_abc"
    assert parse_bearer("bearer agmsg_cred_abc") == "agmsg_cred_abc"


@pytest.mark.parametrize("value", [None, "Basic abc", "Bearer", "Bearer  abc", "Bearer a b"])
def test_malformed_authorization_is_rejected(value: str | None) -> None:
    with pytest.raises(SchemaError) as caught:
        parse_bearer(value)
    assert caught.value.field == "Authorization"


def test_retry_after_is_delta_seconds() -> None:
    assert parse_retry_after(None) is None
    assert parse_retry_after("30") == 30
    with pytest.raises(SchemaError):
        parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT")


def test_revoke_path_round_trips_and_refuses_non_uuid7() -> None:
    path = credential_revoke_path(samples.CREDENTIAL_ID)
    assert path == f"/v1/credentials/{samples.CREDENTIAL_ID}/revoke"
    assert parse_credential_revoke_path(path) == samples.CREDENTIAL_ID
    with pytest.raises(WireError) as caught:
        parse_credential_revoke_path(f"/v1/credentials/{samples.WIRE_1}/revoke")
    assert caught.value.field == "credential_id"
    with pytest.raises(SchemaError):
        parse_credential_revoke_path("/v1/credentials//revoke/x")


def test_request_body_over_2_mib_is_rejected_before_parsing() -> None:
    with pytest.raises(SchemaError) as caught:
        decode_request_body(b" " * (2 * 1024 * 1024 + 1))
    assert caught.value.field == "body"


def test_request_body_with_duplicate_keys_is_rejected() -> None:
    with pytest.raises(CanonicalJsonError):
        decode_request_body(b'{"token":"a","token":"b"}')


def test_encoded_body_is_canonical_and_decodes_back() -> None:
    body = encode_body(samples.read_request())
    assert decode_request_body(body) == samples.read_request()
    assert body.startswith(b'{"page_after":null')


def test_revoke_takes_no_body() -> None:
    require_empty_body(b"")
    with pytest.raises(SchemaError):
        require_empty_body(b"{}")


def test_binding_stop_rule_accepts_match_and_absence() -> None:
    require_binding(samples.SERVER, samples.TEAM, samples.SERVER, samples.TEAM)
    require_binding(samples.SERVER, samples.TEAM, None, None)


def test_binding_stop_rule_refuses_another_team_or_instance() -> None:
    with pytest.raises(BindingMismatchError) as caught:
        require_binding(samples.SERVER, samples.TEAM, samples.SERVER, samples.OTHER_TEAM)
    assert caught.value.field == "team_id"
    with pytest.raises(BindingMismatchError) as caught:
        require_binding(samples.SERVER, samples.TEAM, samples.OTHER_TEAM, samples.TEAM)
    assert caught.value.field == "server_instance_id"
