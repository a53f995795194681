"""Every number the relay enforces, named once (server/spec/v1.md).

Protocol numbers are owned by :mod:`wire.limits` and
:mod:`wire.http_v1.limits`; they are re-exported here under the names the
relay uses, so a reviewer checks relay policy in one place and nothing is
restated. Only relay-side choices (defaults, retry hints) are defined here.
"""

from __future__ import annotations

from typing import Final

from wire.http_v1.limits import (
    MAX_EXACT_PER_MEMBER,
    MAX_EXACT_PER_TEAM,
    MAX_MEMBERS,
    MAX_POLICY_HISTORY,
    MAX_READ_EXACT_IDS,
    MAX_READ_PAGE_LIMIT,
    MAX_READ_UPDATE_MEMBERS,
    MAX_SECRET_CHARS,
    PAIRING_TOKEN_TTL_SECONDS,
)
from wire.http_v1.live import MAX_WAIT_SECONDS
from wire.limits import (
    DEFAULT_PAGE_LIMIT,
    ENVELOPE_VERSION,
    MAX_BATCH,
    MAX_BLOB_BYTES,
    MAX_NAME_SCALARS,
    MAX_PAGE_LIMIT,
    MAX_REQUEST_BYTES,
    MAX_SEQ,
    PROTOCOL_VERSION,
)

__all__ = [
    "ACCEPTED_ENVELOPE_VERSIONS",
    "DEFAULT_PAGE_LIMIT",
    "DEFAULT_WRITE_ALLOWED_CIPHERS",
    "KEEP_ALIVE_SECONDS",
    "LIVE_MAX_WAITS",
    "LIVE_MAX_WAITS_PER_CREDENTIAL",
    "LIVE_MAX_WAIT_SECONDS",
    "LIVE_RETRY_AFTER_SECONDS",
    "LIVE_TICK_SECONDS",
    "MAX_BATCH",
    "MAX_BLOB_BYTES",
    "MAX_CONNECTIONS_PER_PEER",
    "MAX_EXACT_PER_MEMBER",
    "MAX_EXACT_PER_TEAM",
    "MAX_MEMBERS",
    "MAX_NAME_SCALARS",
    "MAX_PAGE_LIMIT",
    "MAX_POLICY_HISTORY",
    "MAX_READ_EXACT_IDS",
    "MAX_READ_PAGE_LIMIT",
    "MAX_READ_UPDATE_MEMBERS",
    "MAX_REQUEST_BYTES",
    "MAX_SECRET_CHARS",
    "MAX_SEQ",
    "MAX_WAIT_SECONDS",
    "PAIRING_TOKEN_TTL_SECONDS",
    "PROTOCOL_VERSION",
    "REQUEST_READ_TIMEOUT_SECONDS",
    "RETRY_AFTER_SECONDS",
    "STORABLE_CIPHERS",
    "SUPPORTED_VERSIONS",
]

#: Protocol versions this relay serves; the 426 body advertises them.
SUPPORTED_VERSIONS: Final[tuple[int, ...]] = (PROTOCOL_VERSION,)

#: Envelope versions this relay can store (422 unsupported-cipher otherwise).
ACCEPTED_ENVELOPE_VERSIONS: Final[tuple[int, ...]] = (ENVELOPE_VERSION,)

#: Cipher profiles this relay recognizes and stores opaquely. A well-formed
#: identifier outside this set is 422 for a new ID; inside it but outside the
#: team's policy it is 403 (v1.md "POST /v1/messages", step 3).
STORABLE_CIPHERS: Final[tuple[str, ...]] = ("age-v1", "none")

#: Write policy of a newly provisioned team (revision 0, effective from 1).
#: Operators narrow it with ``syncengine relay policy set``.
DEFAULT_WRITE_ALLOWED_CIPHERS: Final[tuple[str, ...]] = ("age-v1", "none")

#: ``Retry-After`` on 503 (v1.md: servers MAY include it).
RETRY_AFTER_SECONDS: Final = 1

# -- the live wait (our Stage 3 extension, specs/live.md) ------------------------------------
#: ``--live-max-wait`` default: the relay answers a wait after at most this
#: long, whatever the client asked (up to the protocol's MAX_WAIT_SECONDS).
LIVE_MAX_WAIT_SECONDS: Final = 25
#: ``--live-max-waits``: open waits one relay process holds at once.
LIVE_MAX_WAITS: Final = 2000
#: ``--live-max-waits-per-credential``: a device needs one per team; a few
#: spare cover a reconnect racing its previous wait's answer.
LIVE_MAX_WAITS_PER_CREDENTIAL: Final = 4
#: A wait re-authorizes its credential and re-reads its team at least this
#: often: a revoked credential is cut off, and a lost wake costs at most this.
LIVE_TICK_SECONDS: Final = 5.0
#: ``Retry-After`` on 429 live-wait-limit: about one tick, by when a wait
#: of the same credential has usually answered.
LIVE_RETRY_AFTER_SECONDS: Final = 5

# -- connections (#33: a hostile peer cannot hold the relay's sockets) -------------------------
#: ``--max-connections-per-peer``: connections one peer address may hold at
#: once; the excess is closed on accept. A device needs a few (one per
#: request in flight, one live wait per team); 64 leaves room for a NAT.
MAX_CONNECTIONS_PER_PEER: Final = 64
#: ``--request-read-timeout``: seconds a client has, from connecting (or from
#: the first byte of its next request on a kept-alive connection), to send a
#: whole request — headers and body. A 2 MiB push at 1 Mbit/s takes ~17 s.
#: A live wait is never cut: its request is whole before it starts waiting.
REQUEST_READ_TIMEOUT_SECONDS: Final = 30.0
#: Seconds an idle kept-alive connection stays open between requests. It
#: must outlast the client's own idle expiry (httpx: 5 s) and a reverse
#: proxy's upstream keep-alive (nginx: 60 s): when both ends time out
#: together, the relay can close a connection whose next request is already
#: on its way, and that request fails unanswered. uvicorn's default, 5 s,
#: was such a tie; under a lagging event loop it dropped requests (the
#: capacity bench, specs/relay-scaling.md §6). Idle connections still count
#: against ``--max-connections-per-peer``.
KEEP_ALIVE_SECONDS: Final = 65
