"""Named crash points around every commit of the relay's write transactions.

The relay's crash safety is argued the same way as the client's: every
mutating :class:`~relay.storage.sqlite.SqliteRelayStore` method is one
transaction, and each such transaction has a name with two points,
``<name>.before_commit`` and ``<name>.after_commit``. Setting
``SYNCENGINE_CRASH_AT=<point>`` makes the process die with :func:`os._exit`
(status :data:`CRASH_EXIT_CODE`; no ``finally`` blocks, no response sent,
no rollback but the one SQLite performs on the next open) exactly there, so
``crash_tests/test_relay_crash_points.py`` can prove that each transaction
is wholly absent or wholly present after a crash.

The variable deliberately has the client's name, ``SYNCENGINE_CRASH_AT``:
operators and tests already know it, and the relay's point names (all
``relay.…``) cannot collide with the client's. This is nonetheless a
separate module from ``syncengine/crash.py`` because of the layout rule:
``relay/`` never imports ``syncengine/`` (tests/relay/test_boundaries.py),
and ``wire/`` is a pure codec that knows nothing of processes.

The variable is read once, at import; unset, :func:`crash_point` is one
comparison against ``None``. Every name the relay passes is listed in
:data:`RELAY_CRASH_POINTS`, so a typo is a test failure rather than a point
that silently never fires.
"""

from __future__ import annotations

import os

__all__ = ["CRASH_EXIT_CODE", "RELAY_CRASH_POINTS", "RELAY_TRANSACTIONS", "crash_point"]

#: Exit status of an injected crash (the same as the client's).
CRASH_EXIT_CODE = 77

#: The named write transactions, one per mutating store operation.
RELAY_TRANSACTIONS: tuple[str, ...] = (
    "relay.init",  # ``relay init``: schema + server_instance_id
    "relay.provision",  # ``team apply``: create or replace a team's roster
    "relay.token_issue",  # ``token issue``: one pairing-token row
    "relay.pairing",  # POST /v1/pairing/exchange: credential + token consumed
    "relay.post",  # POST /v1/messages: the batch (and automatic retention)
    "relay.read_state",  # POST /v1/read-state/sync with updates
    "relay.revoke",  # POST /v1/credentials/{id}/revoke (self-revoke)
    "relay.credential_revoke",  # ``credential revoke`` (operator)
    "relay.policy",  # ``policy set``
    "relay.retain",  # ``retain`` (manual retention)
)

#: Every crash point, two per transaction, in that order.
RELAY_CRASH_POINTS: tuple[str, ...] = tuple(
    f"{name}.{when}_commit" for name in RELAY_TRANSACTIONS for when in ("before", "after")
)

_ARMED: str | None = os.environ.get("SYNCENGINE_CRASH_AT") or None


def crash_point(name: str) -> None:
    """Die here, without cleanup, if this is the armed crash point."""
    if _ARMED is not None and name == _ARMED:
        os._exit(CRASH_EXIT_CODE)
