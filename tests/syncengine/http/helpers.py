"""Shared pieces of the HTTP engine tests: loopback endpoint, fake time, documents.

Documents come from ``tests.wire.http_v1.samples`` (valid v1 shapes); this
module only adds the HTTP framing a relay would put around them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx

from syncengine.http import ClientConfig, Credential, RelayBinding, RelayClient, RetryPolicy
from syncengine.http.credentials import Secret
from tests.wire.http_v1 import samples

ENDPOINT = "http://127.0.0.1:9"
SECRET_TEXT = "agmsg_cred_S3cr3tValue-do-not-log"
TOKEN_TEXT = "agmsg_pair_T0kenValue-do-not-log"
OTHER_SERVER = "0190a1b2-c3d4-7e5f-8a6b-0000000000ee"

PROTOCOL_HEADERS = {"Agmsg-Protocol-Version": "1", "Content-Type": "application/json"}


@dataclass
class FakeTime:
    """A monotonic clock that only moves when the code under test sleeps."""

    now: float = 1000.0
    sleeps: list[float] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(float(seconds))
        self.now += seconds


def credential() -> Credential:
    return Credential(samples.SERVER, samples.TEAM, samples.CREDENTIAL_ID, Secret(SECRET_TEXT))


def make_client(
    time: FakeTime,
    *,
    bound: bool = True,
    retry: RetryPolicy | None = None,
    **config: Any,
) -> RelayClient:
    policy = retry if retry is not None else RetryPolicy(max_attempts=4, max_elapsed=600.0)
    return RelayClient(
        ENDPOINT,
        binding=RelayBinding(samples.SERVER, samples.TEAM) if bound else None,
        credential=credential() if bound else None,
        config=ClientConfig(retry=policy, **config),
        sleep=time.sleep,
        clock=time.clock,
    )


def reply(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> httpx.Response:
    """A relay answer: JSON body with the protocol header."""
    return httpx.Response(
        status, content=json.dumps(obj).encode(), headers={**PROTOCOL_HEADERS, **(headers or {})}
    )


def proxy_page(status: int, headers: dict[str, str] | None = None) -> httpx.Response:
    """What a reverse proxy sends: HTML, no protocol header (upstream #814)."""
    return httpx.Response(
        status,
        content=b"<html><body><h1>Service Unavailable</h1></body></html>",
        headers={"Content-Type": "text/html", **(headers or {})},
    )


def error(
    status: int, code: str, details: dict[str, Any] | None = None, *, bound: bool = True
) -> httpx.Response:
    return reply(samples.error(code, details, bound=bound), status)
