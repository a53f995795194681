"""Connect flow: endpoint + pairing token → a verified, not yet persisted binding.

server/spec/v1.md "Pairing and per-device credentials" and "GET /v1/health":

1. health discovers ``server_instance_id`` (v1.md: "before the first team
   request, a client discovers server_instance_id from health"); an
   unavailable relay is refused — no binding is ever made from it;
2. the one-time token is exchanged for a device credential; the answer must
   name the instance health named;
3. the outer IDs and team name must equal the nested capability document's,
   and the capability invariants must hold (checked again here, explicitly,
   because the caller persists on the strength of it).

Nothing here touches the store: the caller persists :class:`ConnectResult`
atomically (secret in the 0600 credential file, binding in configuration)
and reports "connected" only after that succeeds. Any failure raises before
the caller has anything to persist. The token is a
:class:`~syncengine.http.credentials.Secret` read from a file or stdin by the
CLI, never from argv.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from syncengine.http import errors as e
from syncengine.http.client import RelayBinding, RelayClient
from syncengine.http.credentials import Credential, Secret
from wire.errors import WireError

if TYPE_CHECKING:
    import httpx

    # The package imports this module for its ``connect`` name, so every
    # ``syncengine.http.*`` import pays for these lines: what only a pairing
    # needs is imported inside :func:`connect` (start-up cost, issue #17).
    from syncengine.http.client import ClientConfig, RelayBinding
    from syncengine.http.credentials import Credential, Secret
    from wire.http_v1.capabilities import Capabilities

__all__ = ["ConnectResult", "connect"]


@dataclass(frozen=True, slots=True)
class ConnectResult:
    """Everything the caller persists after a successful pairing exchange."""

    endpoint: str
    server_instance_id: str
    team_id: str
    team_name: str
    credential_id: str
    credential: Credential = field(repr=False)
    capabilities: Capabilities = field(repr=False)
    supported_versions: tuple[int, ...] = (1,)

    @property
    def binding(self) -> RelayBinding:
        return RelayBinding(self.server_instance_id, self.team_id)


def connect(
    endpoint: str,
    token: Secret,
    *,
    config: ClientConfig | None = None,
    transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> ConnectResult:
    """Run health → exchange → verification; return what to persist, or raise."""
    with RelayClient(
        endpoint, config=config, transport=transport, sleep=sleep, clock=clock
    ) as client:
        health = client.health()
        server_instance_id = health.server_instance_id
        if server_instance_id is None:  # Health.validate forbids this for "ok"
            raise e.ProtocolViolation("a ready relay did not name its instance")
        answer = client.exchange_pairing_token(token, server_instance_id=server_instance_id)
        normalized_endpoint = client.endpoint

    if answer.server_instance_id != server_instance_id:
        raise e.BindingMismatch("the pairing answer names another server instance than health")
    if health.team_id is not None and health.team_id != answer.remote_team_id:
        raise e.BindingMismatch("the pairing answer names another team than health")
    nested = answer.capabilities.binding
    if (nested.server_instance_id, nested.team_id, nested.team_name) != (
        answer.server_instance_id,
        answer.remote_team_id,
        answer.remote_team_name,
    ):
        raise e.ProtocolViolation("outer and nested capability bindings differ")
    try:
        answer.capabilities.validate()
    except WireError as exc:
        raise e.ProtocolViolation(f"capability invariants do not hold: {exc}") from None

    credential = Credential(
        server_instance_id=answer.server_instance_id,
        team_id=answer.remote_team_id,
        credential_id=answer.credential_id,
        secret=Secret(answer.credential, "credential"),
    )
    return ConnectResult(
        endpoint=normalized_endpoint,
        server_instance_id=answer.server_instance_id,
        team_id=answer.remote_team_id,
        team_name=answer.remote_team_name,
        credential_id=answer.credential_id,
        credential=credential,
        capabilities=answer.capabilities,
        supported_versions=health.supported_versions,
    )
