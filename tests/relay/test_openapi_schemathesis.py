"""Schemathesis against a live relay on loopback: the served OpenAPI document stays true.

A real relay process (``tests/support/live_relay.py``) serves ``/v1/openapi.json``; schemathesis
loads the schema from that URL and every documented operation gets a few
property-based cases, valid and invalid, sent with a paired device's headers. Each
response must not be a 5xx, must use a documented status code and content type, and
must validate against the documented schema.

Bounded: a few examples per operation and mode, no shrinking, a request timeout, and a
wall-time budget shared by the whole module. ``schema.parametrize()`` needs the schema
at import time and its lazy ``from_fixture`` form does not run under pytest 9, so each
operation is a plain parametrized test that drives ``operation.as_strategy()`` itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from relay.openapi import OPENAPI_PATH, document
from tests.relay.helpers import batch
from tests.support.live_relay import provision, running_relay

MAX_EXAMPLES = 20
BUDGET_SECONDS = 40.0
REQUEST_TIMEOUT = 5.0
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
# Schemathesis leaves out the operation it loaded the schema from; test_openapi.py checks
# that the served document is exactly ``document()``.
OPERATIONS = sorted(
    (method.upper(), path)
    for path, item in document()["paths"].items()
    for method in item
    if path != OPENAPI_PATH
)


# A valid request the random cases rarely hit (the cipher and envelope version must be
# ones the policy accepts), so every run also validates the success response.
KNOWN_GOOD: dict[tuple[str, str], Callable[[], dict[str, Any]]] = {
    ("POST", "/v1/messages"): lambda: {"body": {"messages": batch(2)}},
}


def _integers(value: Any) -> Any:
    """Integral floats → ints. JSON Schema counts ``3.0`` as an integer and schemathesis
    generates it, but the relay's strict JSON wants an integer token, so such cases
    would only ever be rejected."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integers(v) for v in value]
    return value


def _cases() -> list[tuple[str, str, GenerationMode]]:
    """Every operation with valid inputs; invalid ones only where something is generated."""
    paths = document()["paths"]
    out = []
    for method, path in OPERATIONS:
        operation = paths[path][method.lower()]
        out.append((method, path, GenerationMode.POSITIVE))
        fixed = {"Agmsg-Protocol-Version", "Agmsg-Team-ID"}
        generated = [p for p in operation.get("parameters", []) if p["name"] not in fixed]
        if generated or "requestBody" in operation:
            out.append((method, path, GenerationMode.NEGATIVE))
    return out


@dataclass
class Live:
    schema: Any
    base_url: str
    headers: dict[str, str]
    deadline: float

    def within_budget(self) -> None:
        if time.monotonic() > self.deadline:
            pytest.fail(f"schemathesis run exceeded its {BUDGET_SECONDS:.0f}s budget")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    tmp: Path = tmp_path_factory.mktemp("schemathesis")
    with running_relay(tmp / "relay.db") as relay:
        assert relay.base_url.startswith("http://127.0.0.1:")
        team = provision(relay.db, tmp)
        headers = relay.pair(team["team_id"])
        config = schemathesis.Config.from_dict(
            {"base-url": relay.base_url, "request-timeout": REQUEST_TIMEOUT}
        )
        schema = schemathesis.openapi.from_url(
            relay.base_url + OPENAPI_PATH, config=config, timeout=REQUEST_TIMEOUT
        )
        yield Live(schema, relay.base_url, headers, time.monotonic() + BUDGET_SECONDS)


def test_schemathesis_sees_every_documented_operation(live: Live) -> None:
    seen = {(op.ok().method.upper(), op.ok().path) for op in live.schema.get_all_operations()}
    assert seen == set(OPERATIONS)


@pytest.mark.parametrize(("method", "path", "mode"), _cases())
def test_live_relay_conforms_to_its_openapi_document(
    live: Live, method: str, path: str, mode: GenerationMode
) -> None:
    operation = live.schema[path][method]
    strategy = operation.as_strategy(generation_mode=mode, headers=live.headers)

    @hypothesis.given(case=strategy)
    @hypothesis.settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
        suppress_health_check=list(hypothesis.HealthCheck),
        database=None,
    )
    def run(case: Any) -> None:
        live.within_budget()
        if isinstance(case.body, dict | list):
            case.body = _integers(case.body)
        case.call_and_validate(base_url=live.base_url, checks=CHECKS, timeout=REQUEST_TIMEOUT)

    known_good = KNOWN_GOOD.get((method, path))
    if known_good is not None and mode is GenerationMode.POSITIVE:
        case = operation.Case(headers=live.headers, media_type="application/json", **known_good())
        run = hypothesis.example(case=case)(run)
    run()
