"""``syncengine disconnect``: end a team's connection to its relay (issue #15, item 2).

The credential is revoked on the relay when it answers (best effort: the
relay may be gone, which is often why one disconnects), then one
transaction (``engine.disconnect.*``) removes the connection — endpoint,
credential reference, security history and engine status — and the local
credential file is deleted. Every message, read fact and the Stage-1
binding itself (cursors, reservations, quarantine, wire-ID mappings) stay:
connecting the team to the same relay team again picks that binding up, so
nothing the relay holds is published twice; connecting to another relay
starts a new stream.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from syncengine.engine import state as st
from syncengine.engine.engine import Engine
from syncengine.local_store import Store
from syncengine.store.connection import write_transaction

__all__ = ["Disconnected", "disconnect_store"]

_log = logging.getLogger("syncengine.engine")


@dataclass(frozen=True, slots=True)
class Disconnected:
    local_team: str
    endpoint: str
    credential_id: str
    revoked: bool

    def to_obj(self) -> dict[str, object]:
        return {
            "ok": True,
            "team": self.local_team,
            "endpoint": self.endpoint,
            "credential_id": self.credential_id,
            "revoked": self.revoked,
        }


def disconnect_store(store_path: str | os.PathLike[str] | None, team: str) -> Disconnected:
    with Engine(store_path, team) as engine, engine.lock():
        c = engine.connection
        revoked = False
        try:
            engine.client.revoke_credential(c.credential_id)
            revoked = True
        except Exception as exc:  # unreachable, already revoked, file gone
            _log.warning("disconnect: the relay credential was not revoked: %s", exc)
        path = engine.store.path
    store = Store(path)
    try:
        with write_transaction(store.conn, store.path, "engine.disconnect") as conn:
            st.remove_connection(conn, c.binding_pk)
    finally:
        store.close()
    with contextlib.suppress(FileNotFoundError):
        Path(c.credential_path).unlink()
    return Disconnected(c.local_team, c.endpoint, c.credential_id, revoked)
