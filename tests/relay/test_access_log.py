"""Access logs of a real relay process (``relay serve --log-format json|text``).

The rule (specs/relay.md "Operations"): one line per request with time,
method, route template, status, duration and bytes out — and nothing a
request carried: no Authorization header, pairing token, credential, query
string, team or member ID, or body. Each test drives a whole pairing, push,
read-state and pull flow through a relay on 127.0.0.1 and greps its stderr.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from relay.logformat import AccessRecord, JsonLineFormatter, TextLineFormatter
from tests.relay.backends import Backend
from tests.relay.helpers import uuid4
from tests.support.live_relay import (
    LiveRelay,
    database_for,
    issue_token,
    provision,
    running_relay,
)
from wire.envelope import encode_blob

BODY_TEXT = "the quarterly numbers are in the blue folder"
ACCESS_KEYS = {"event", "time", "method", "route", "status", "duration_ms", "bytes_out"}
TIME = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


@dataclass
class FlowSecrets:
    """Everything the flow sent that must never reach a log line."""

    values: list[str]
    blob: str


def _full_flow(live: LiveRelay, tmp_path: Path) -> FlowSecrets:
    team = provision(live.db, tmp_path)
    token = issue_token(live.db, team["team_id"])
    blob = encode_blob(json.dumps({"body": BODY_TEXT}).encode())
    message = {"id": uuid4(), "envelope": {"v": 1, "cipher": "none", "key_id": None, "blob": blob}}
    version = {"Agmsg-Protocol-Version": "1"}
    with live.client() as client:
        # a token put where it does not belong is refused, and not logged either
        refused = client.post(f"/v1/pairing/exchange?token={token}", json={}, headers=version)
        assert refused.status_code == 400
        exchange = client.post("/v1/pairing/exchange", json={"token": token}, headers=version)
        assert exchange.status_code == 200, exchange.text
        credential, credential_id = exchange.json()["credential"], exchange.json()["credential_id"]
        headers = {
            **version,
            "Agmsg-Team-ID": team["team_id"],
            "Authorization": f"Bearer {credential}",
        }
        assert client.get("/v1/capabilities", headers=headers).status_code == 200
        pushed = client.post("/v1/messages", json={"messages": [message]}, headers=headers)
        assert pushed.status_code == 200, pushed.text
        pulled = client.get("/v1/messages", params={"after": "0", "limit": "9"}, headers=headers)
        assert pulled.json()["messages"][0]["envelope"]["blob"] == blob
        member = team["members"][0]["member_id"]
        read = client.post(
            "/v1/read-state/sync",
            json={
                "updates": [{"member_id": member, "server_seq": "1", "exact_wire_ids": []}],
                "page_after": None,
                "page_limit": 10,
            },
            headers=headers,
        )
        assert read.status_code == 200, read.text
        assert client.get("/v1/members", headers=headers).status_code == 200
        revoke = client.post(f"/v1/credentials/{credential_id}/revoke", headers=headers)
        assert revoke.status_code == 200
    values = [token, credential, credential_id, team["team_id"], message["id"], BODY_TEXT]
    values += [m["member_id"] for m in team["members"]] + [m["name"] for m in team["members"]]
    return FlowSecrets(values, blob)


def _served_log(backend: Backend, tmp_path: Path, *flags: str) -> tuple[str, FlowSecrets]:
    with running_relay(database_for(backend, tmp_path), *flags) as live:
        secrets = _full_flow(live, tmp_path)
    assert live.process.stderr is not None
    return live.process.stderr.read(), secrets


def _assert_nothing_leaked(log: str, secrets: FlowSecrets) -> None:
    leaked = [value for value in secrets.values if value in log]
    assert leaked == []
    assert secrets.blob not in log and secrets.blob[:24] not in log
    assert "Bearer" not in log and "token=" not in log and "limit=" not in log


def test_json_access_log_of_a_full_flow_holds_no_token_credential_id_or_body(
    backend: Backend, tmp_path: Path
) -> None:
    log, secrets = _served_log(backend, tmp_path, "--log-format", "json")
    _assert_nothing_leaked(log, secrets)


def test_json_access_log_is_one_object_per_line_with_the_route_template(
    backend: Backend, tmp_path: Path
) -> None:
    log, _ = _served_log(backend, tmp_path, "--log-format", "json")
    entries: list[dict[str, Any]] = [json.loads(line) for line in log.splitlines()]
    access = [e for e in entries if e["event"] == "access"]
    assert all(set(e) == ACCESS_KEYS for e in access)
    assert all(re.fullmatch(TIME, e["time"]) for e in access)
    seen = {(e["method"], e["route"], e["status"]) for e in access}
    assert ("POST", "/v1/credentials/{credential_id}/revoke", 200) in seen
    assert ("POST", "/v1/pairing/exchange", 400) in seen
    assert ("GET", "/v1/messages", 200) in seen
    pull = next(e for e in access if e["method"] == "GET" and e["route"] == "/v1/messages")
    assert pull["bytes_out"] > 100 and pull["duration_ms"] >= 0


def test_text_access_log_of_a_full_flow_holds_no_token_credential_id_or_body(
    backend: Backend, tmp_path: Path
) -> None:
    log, secrets = _served_log(backend, tmp_path, "--log-format", "text")
    _assert_nothing_leaked(log, secrets)
    lines = log.splitlines()
    access = re.compile(rf"{TIME} [A-Z]+ /\S+ \d{{3}} \d+\.\dms \d+B")
    assert any(
        re.fullmatch(rf"{TIME} POST /v1/messages 200 \d+\.\dms \d+B", line) for line in lines
    )
    assert all(access.fullmatch(line) for line in lines if " /v1/" in line)


def test_no_access_log_silences_requests_only(sqlite_backend: Backend, tmp_path: Path) -> None:
    log, _ = _served_log(sqlite_backend, tmp_path, "--no-access-log")
    assert [line for line in log.splitlines() if '"access"' in line] == []


@pytest.mark.parametrize("formatter", [JsonLineFormatter(), TextLineFormatter()])
def test_formatters_drop_exception_text_and_keep_only_its_type(formatter: Any) -> None:
    """An exception's message can quote request bytes; only its class is printed."""
    import logging

    try:
        raise ValueError("Bearer sekrit-credential")
    except ValueError:
        import sys

        record = logging.LogRecord(
            "relay.errors", logging.ERROR, __file__, 1, "failed", None, sys.exc_info()
        )
    line = formatter.format(record)
    assert "sekrit" not in line and "Traceback" not in line
    assert "ValueError" in line


def test_access_record_renders_the_same_fields_in_both_formats() -> None:
    import logging

    access = AccessRecord("GET", "/v1/messages", 200, 1.25, 512)
    record = logging.LogRecord("relay.access", logging.INFO, __file__, 1, "access", None, None)
    record.relay_access = access
    document = json.loads(JsonLineFormatter().format(record))
    assert {k: document[k] for k in ACCESS_KEYS - {"event", "time"}} == {
        "method": "GET",
        "route": "/v1/messages",
        "status": 200,
        "duration_ms": 1.25,
        "bytes_out": 512,
    }
    assert TextLineFormatter().format(record).endswith(" GET /v1/messages 200 1.2ms 512B")
