"""Teams placed across several PostgreSQL databases: one relay, one identity, N primaries.

Teams are independent streams — no statement of the relay reads or writes
two teams at once — so a deployment that outgrows one PostgreSQL primary
places each team in exactly one of several databases (specs/relay-scaling.md).
:class:`PlacedRelayStore` is the seam: it is a
:class:`~relay.storage.base.RelayStore` that sends every operation naming a
team to that team's database, whole, as the one transaction it already is
there. A second database is a line in the placement file, not new code.

A placement is a JSON file named by a ``placement:`` location
(``--database placement:/etc/syncengine/placement.json``)::

    {"databases": {"a": "postgresql://relay@db-a:5432/relay",
                   "b": "postgresql://relay@db-b:5432/relay"},
     "default": "a",
     "teams": {"0190…team-id": "b"}}

Every team not listed lives in ``default``. Where each kind of row lives:

* a team's roster, policy, messages, tombstones, read state, **pairing tokens
  and credentials** — in the team's database, beside the rows they guard, so
  authentication, the row locks of relay/storage/postgres.py and every
  crash point stay exactly those of one database;
* the deployment identity — in every database, the same
  ``server_instance_id`` (``init`` mints it in ``default`` and writes it
  into the others; opening refuses databases that disagree), so a client
  bound to it never sees it change whichever database serves its team;
* nothing else: there is no cross-database table and no two-database
  transaction.

The one request that names no team is the pairing exchange (it carries only
the token): it is tried in each database in turn until one knows the token's
hash — tokens are 256-bit random, so at most one does, and pairing is rare.
Operator listings and counts (``status``, ``credentials list``, ``/metrics``)
visit every database and merge.

A team's database never changes while it holds data: moving a team is an
offline copy of its rows (not done here), and provisioning a team already
held by another database than its placement is refused.
"""

from __future__ import annotations

import json
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from relay.errors import InvalidPairingToken, OperatorError, ProvisioningRejected, Unavailable
from relay.limits import RETRY_AFTER_SECONDS
from relay.storage.base import LiveFeed, RelayStore, WakeCallback
from relay.storage.records import (
    Access,
    CapabilitySnapshot,
    CredentialInfo,
    ExchangeResult,
    IncomingMessage,
    IssuedToken,
    LiveHead,
    MessagePage,
    PolicyEntry,
    PoolState,
    PostResult,
    ProvisioningDocument,
    ReadStatePage,
    ReadStateRequest,
    RetentionResult,
    RevokeResult,
    Roster,
    StoreCounts,
    StoreStatus,
    TeamBinding,
    TeamSummary,
)

__all__ = [
    "PLACEMENT_PREFIX",
    "PlacedRelayStore",
    "Placement",
    "is_placement",
    "load_placement",
]

#: A ``--database`` value that names a placement file rather than one database.
PLACEMENT_PREFIX = "placement:"
_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_placement(location: str) -> bool:
    return location.startswith(PLACEMENT_PREFIX)


@dataclass(frozen=True, slots=True)
class Placement:
    """Which database holds which team: named URLs, the default name, exceptions."""

    databases: dict[str, str]
    default: str
    teams: dict[str, str]

    def database_of(self, team_id: str) -> str:
        """The name of the database that holds ``team_id``."""
        return self.teams.get(team_id, self.default)

    @property
    def names(self) -> tuple[str, ...]:
        """Database names, ``default`` first (the identity's origin)."""
        return (self.default, *(n for n in self.databases if n != self.default))


def _bad(path: Path, problem: str) -> OperatorError:
    return OperatorError(
        f"placement file {path}: {problem}",
        'write {"databases": {"NAME": "postgresql://…", …}, "default": "NAME", '
        '"teams": {"TEAM_ID": "NAME", …}}',
    )


def load_placement(location: str) -> Placement:
    """Read and check the placement file a ``placement:PATH`` location names."""
    path = Path(location.removeprefix(PLACEMENT_PREFIX))
    try:
        raw = path.read_text(encoding="utf-8")
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise OperatorError(
            f"no placement file at {path}", "write one (specs/relay-scaling.md)"
        ) from None
    except OSError as exc:
        raise OperatorError(
            f"placement file {path} cannot be read: {exc.strerror}", "check its permissions"
        ) from None
    try:
        document = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise _bad(path, f"not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(document, dict) or set(document) - {"databases", "default", "teams"}:
        raise _bad(path, "expected an object with databases, default and teams")
    databases, default, teams = (
        document.get("databases"),
        document.get("default"),
        document.get("teams", {}),
    )
    if not isinstance(databases, dict) or not databases:
        raise _bad(path, "databases must name at least one database")
    for name, url in databases.items():
        if not isinstance(url, str) or not url.startswith(_POSTGRES_SCHEMES):
            raise _bad(path, f"database {name!r} is not a postgresql:// URL")
    if len(set(databases.values())) != len(databases):
        raise _bad(path, "two names give the same database URL")
    if not isinstance(default, str) or default not in databases:
        raise _bad(path, "default must be one of the databases' names")
    if not isinstance(teams, dict):
        raise _bad(path, "teams must map team IDs to database names")
    for team_id, name in teams.items():
        if name not in databases:
            raise _bad(path, f"team {team_id} is placed in unknown database {name!r}")
    if mode & (stat.S_IRWXG | stat.S_IRWXO) and any(
        urlsplit(url).password for url in databases.values()
    ):
        raise OperatorError(
            f"placement file {path} holds a database password and others can read it",
            f"chmod 600 {path} (or keep passwords in ~/.pgpass instead of the URLs)",
        )
    return Placement(dict(databases), default, dict(teams))


class _FeedGroup:
    """One live feed per database, started and closed together."""

    def __init__(self, feeds: Sequence[LiveFeed]) -> None:
        self._feeds = tuple(feeds)

    def start(self, wake: WakeCallback) -> None:
        for feed in self._feeds:
            feed.start(wake)

    def close(self) -> None:
        for feed in self._feeds:
            feed.close()


class PlacedRelayStore:
    """:class:`RelayStore` over one open store per database of a :class:`Placement`."""

    def __init__(self, placement: Placement, open_one: Callable[[str], RelayStore]) -> None:
        self._placement = placement
        self._stores: dict[str, RelayStore] = {}
        try:
            for name in placement.names:
                self._stores[name] = open_one(placement.databases[name])
        except BaseException:
            self.close()
            raise
        identities = {s.server_instance_id for s in self._stores.values()}
        if len(identities) != 1:
            self.close()
            raise OperatorError(
                "the placement's databases belong to different relay deployments "
                "(their server_instance_id differ)",
                "create every database of a placement with: syncengine relay init "
                "--database placement:FILE",
            )
        self._server_instance_id = identities.pop()

    def _of(self, team_id: str) -> RelayStore:
        return self._stores[self._placement.database_of(team_id)]

    @property
    def server_instance_id(self) -> str:
        return self._server_instance_id

    # -- readiness -------------------------------------------------------------------
    def probe(self) -> str:
        """Ready only when every database answers with the deployment's identity."""
        for store in self._stores.values():
            if store.probe() != self._server_instance_id:
                raise Unavailable(headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
        return self._server_instance_id

    # -- data plane: the team's database -----------------------------------------------
    def authorize(self, access: Access) -> TeamBinding:
        return self._of(access.team_id).authorize(access)

    def capabilities(self, access: Access) -> CapabilitySnapshot:
        return self._of(access.team_id).capabilities(access)

    def post_messages(
        self, access: Access, batch: Sequence[IncomingMessage], received_at: str
    ) -> PostResult:
        return self._of(access.team_id).post_messages(access, batch, received_at)

    def page_messages(self, access: Access, after: int, limit: int) -> MessagePage:
        return self._of(access.team_id).page_messages(access, after, limit)

    def members(self, access: Access) -> Roster:
        return self._of(access.team_id).members(access)

    def live_head(self, access: Access) -> LiveHead:
        return self._of(access.team_id).live_head(access)

    def live_heads(self, team_ids: Sequence[str]) -> dict[str, LiveHead]:
        by_database: dict[str, list[str]] = {}
        for team_id in team_ids:
            by_database.setdefault(self._placement.database_of(team_id), []).append(team_id)
        heads: dict[str, LiveHead] = {}
        for name, ids in by_database.items():
            heads.update(self._stores[name].live_heads(ids))
        return heads

    def live_feed(self) -> LiveFeed | None:
        feeds = [f for f in (s.live_feed() for s in self._stores.values()) if f is not None]
        return _FeedGroup(feeds) if feeds else None

    def sync_read_state(self, access: Access, request: ReadStateRequest) -> ReadStatePage:
        return self._of(access.team_id).sync_read_state(access, request)

    def revoke_own_credential(self, access: Access, credential_id: str, now: str) -> RevokeResult:
        return self._of(access.team_id).revoke_own_credential(access, credential_id, now)

    def exchange_pairing_token(
        self, token_hash: bytes, credential_id: str, credential_hash: bytes, now: str
    ) -> ExchangeResult:
        """The one request without a team: each database in turn until one knows the token."""
        for store in self._stores.values():
            try:
                return store.exchange_pairing_token(token_hash, credential_id, credential_hash, now)
            except InvalidPairingToken:
                continue
        raise InvalidPairingToken()

    # -- operator control plane -----------------------------------------------------------
    def apply_provisioning(self, document: ProvisioningDocument, now: str) -> TeamSummary:
        home = self._placement.database_of(document.team_id)
        for name, store in self._stores.items():
            if name != home and store.live_heads([document.team_id]):
                raise ProvisioningRejected(
                    f"team {document.team_id} is held by database {name!r}, "
                    f"but the placement puts it in {home!r}",
                    "a team never changes database while it holds data: restore its "
                    "placement entry",
                )
        return self._stores[home].apply_provisioning(document, now)

    def issue_pairing_token(
        self, team_id: str, token_hash: bytes, device_name: str | None, now: str, expires_at: str
    ) -> IssuedToken:
        return self._of(team_id).issue_pairing_token(
            team_id, token_hash, device_name, now, expires_at
        )

    def list_credentials(self, team_id: str | None) -> tuple[CredentialInfo, ...]:
        if team_id is not None:
            return self._of(team_id).list_credentials(team_id)
        every = [c for s in self._stores.values() for c in s.list_credentials(None)]
        return tuple(sorted(every, key=lambda c: c.credential_id))

    def revoke_credential(self, team_id: str, credential_id: str, now: str) -> CredentialInfo:
        return self._of(team_id).revoke_credential(team_id, credential_id, now)

    def set_policy(self, team_id: str, write_allowed_ciphers: Sequence[str]) -> PolicyEntry:
        return self._of(team_id).set_policy(team_id, write_allowed_ciphers)

    def retain(self, team_id: str, through_seq: int) -> RetentionResult:
        return self._of(team_id).retain(team_id, through_seq)

    def status(self) -> StoreStatus:
        teams = [t for s in self._stores.values() for t in s.status().teams]
        return StoreStatus(self._server_instance_id, tuple(sorted(teams, key=lambda t: t.team_id)))

    # -- operations (/metrics) ----------------------------------------------------------
    def counts(self) -> StoreCounts:
        parts = [s.counts() for s in self._stores.values()]
        return StoreCounts(
            sum(p.teams for p in parts),
            sum(p.messages_stored for p in parts),
            sum(p.messages_sequenced for p in parts),
        )

    def pool_state(self) -> PoolState:
        parts = [s.pool_state() for s in self._stores.values()]

        def total(values: list[int | None]) -> int | None:
            return None if any(v is None for v in values) else sum(v or 0 for v in values)

        return PoolState(
            size=sum(p.size for p in parts),
            max_size=total([p.max_size for p in parts]),
            available=total([p.available for p in parts]),
            waiting=total([p.waiting for p in parts]),
        )

    def close(self) -> None:
        for store in self._stores.values():
            store.close()
        self._stores = {}
