"""``connect --replace``: pair a connected team again (issue #15, item 2).

A revoked credential, a lost credential file or a relay that moved to
another address left a store unusable: ``connect`` answered "already
connected" and nothing replaced the credential. Replacing exchanges a new
pairing token and keeps *everything else* of the binding — cursors,
reservations, quarantine, read state, security history — because the relay
stream is the same one: the relay must prove it by answering with the same
``server_instance_id`` and team. A different instance (a rebuilt relay) or
another team is a different stream whose sequence numbers mean nothing to
this binding; it is refused, explained, and the credential just issued is
revoked, so nothing changes locally.

Crash safety (crash points ``engine.reconnect.*``): the new credential is
written to a file of its own first (``credential_written``); one
transaction then points the binding at it (``engine.reconnect`` commit).
A crash before the commit leaves the old binding intact and an unused file
named after its credential ID; after it, the old credential is revoked on
the relay and its file removed, both best effort (the old one is usually
already revoked or gone — the reason to replace it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import httpx

from syncengine.crash import crash_point
from syncengine.engine import state as st
from syncengine.engine.connect import revoke_quietly
from syncengine.engine.errors import ConfigurationError
from syncengine.http.client import ClientConfig, RelayBinding, RelayClient
from syncengine.http.credentials import Credential, Secret, load_credential, save_credential
from syncengine.http.pairing import ConnectResult
from syncengine.http.pairing import connect as http_connect
from syncengine.local_store import Store
from syncengine.store.connection import read_transaction, write_transaction

__all__ = ["Replaced", "replace_connection"]

_log = logging.getLogger("syncengine.engine")


@dataclass(frozen=True, slots=True)
class Replaced:
    """What ``connect --replace`` changed."""

    local_team: str
    endpoint: str
    previous_credential_id: str
    credential_id: str
    credential_path: Path
    previous_revoked: bool

    def to_obj(self) -> dict[str, object]:
        return {
            "ok": True,
            "team": self.local_team,
            "endpoint": self.endpoint,
            "replaced_credential_id": self.previous_credential_id,
            "credential_id": self.credential_id,
            "credential_file": str(self.credential_path),
            "replaced_credential_revoked": self.previous_revoked,
        }


def replace_connection(
    store_path: str | os.PathLike[str] | None,
    *,
    team: str,
    token: Secret,
    endpoint: str | None = None,
    transport: httpx.BaseTransport | None = None,
    client_config: ClientConfig | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> Replaced:
    """Pair ``team``'s binding again with ``token`` (at ``endpoint``, default
    the recorded one); the relay must be the same instance and team."""
    store = Store(store_path)
    try:
        with read_transaction(store.conn, store.path) as conn:
            old = st.connection_for(conn, team)
        target = endpoint or old.endpoint
        result = http_connect(
            target, token, config=client_config, transport=transport, sleep=sleep, clock=clock
        )
        _require_same_stream(old, result, transport, client_config)
        new_path = _fresh_credential_path(Path(old.credential_path), team, result.credential_id)
        save_credential(new_path, result.credential)
        crash_point("engine.reconnect.credential_written")
        try:
            with write_transaction(store.conn, store.path, "engine.reconnect") as conn:
                st.replace_credential(
                    conn,
                    old.binding_pk,
                    endpoint=result.endpoint,
                    credential_id=result.credential_id,
                    credential_path=str(new_path),
                )
        except BaseException:
            with contextlib.suppress(OSError):
                new_path.unlink()
            revoke_quietly(result.endpoint, result, transport, client_config)
            raise
        revoked = _retire_old(old, result.endpoint, transport, client_config)
        _log.info(
            "replaced credential %s of team %s with %s",
            old.credential_id,
            team,
            result.credential_id,
        )
        return Replaced(
            team,
            result.endpoint,
            old.credential_id,
            result.credential_id,
            new_path,
            revoked,
        )
    finally:
        store.close()


def _require_same_stream(
    old: st.ConnectionRecord,
    result: ConnectResult,
    transport: httpx.BaseTransport | None,
    config: ClientConfig | None,
) -> None:
    """The token must pair with *this* binding's relay instance and team."""
    if (result.server_instance_id, result.team_id) == (old.server_instance_id, old.remote_team_id):
        return
    revoked = revoke_quietly(result.endpoint, result, transport, config)
    note = " (the credential it issued was revoked)" if revoked else ""
    if result.server_instance_id != old.server_instance_id:
        raise ConfigurationError(
            f"the relay at {result.endpoint} is instance {result.server_instance_id}, but team "
            f"{old.local_team!r} is bound to instance {old.server_instance_id}: a rebuilt or "
            f"different relay is another stream, never merged into this binding{note}",
            remediation="Check the endpoint. A relay rebuilt from scratch holds none of this "
            "binding's sequence numbers; this store cannot continue on it.",
        )
    raise ConfigurationError(
        f"the pairing token is for relay team {result.team_id}, but team {old.local_team!r} "
        f"is bound to relay team {old.remote_team_id}{note}",
        remediation="Ask the relay operator for a pairing token of this team.",
    )


def _fresh_credential_path(old: Path, team: str, credential_id: str) -> Path:
    """A file of its own for the new credential, beside the old one."""
    return old.with_name(f"{quote(team, safe='')}.{credential_id}.json")


def _retire_old(
    old: st.ConnectionRecord,
    endpoint: str,
    transport: httpx.BaseTransport | None,
    config: ClientConfig | None,
) -> bool:
    """Revoke the replaced credential if it still works, then remove its file."""
    path = Path(old.credential_path)
    revoked = False
    try:
        credential: Credential | None = load_credential(
            path, server_instance_id=old.server_instance_id, team_id=old.remote_team_id
        )
    except Exception:
        credential = None  # lost or damaged: nothing to present, nothing to revoke
    if credential is not None:
        try:
            with RelayClient(
                endpoint,
                binding=RelayBinding(old.server_instance_id, old.remote_team_id),
                credential=credential,
                config=config,
                transport=transport,
            ) as client:
                client.revoke_credential(old.credential_id)
            revoked = True
        except Exception:
            revoked = False  # usually revoked already: the reason to replace it
    with contextlib.suppress(OSError):
        path.unlink()
    return revoked
