"""Shared builders for relay tests: stores, teams, paired devices, envelopes."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from relay.secrets import hash_secret, new_pairing_token, new_uuid7, timestamp
from relay.storage.base import RelayStore
from relay.storage.records import Member, ProvisioningDocument
from relay.storage.sqlite import SqliteRelayStore
from wire.envelope import encode_blob

T0 = datetime(2026, 7, 20, 6, 30, tzinfo=UTC)


class FakeClock:
    """A settable clock so token expiry is tested without waiting."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def new_store(tmp_path: Path, **kwargs: Any) -> SqliteRelayStore:
    path = tmp_path / "relay.db"
    if not path.exists():
        SqliteRelayStore.initialize(path)
    return SqliteRelayStore(path, **kwargs)


def uuid4() -> str:
    import uuid

    return str(uuid.uuid4())


@dataclass
class Team:
    team_id: str
    team_name: str
    members: list[Member] = field(default_factory=list)


def provision(store: RelayStore, names: tuple[str, ...] = ("leader", "worker-1")) -> Team:
    team = Team(new_uuid7(), "example-team", [Member(new_uuid7(), n) for n in names])
    store.apply_provisioning(
        ProvisioningDocument(team.team_id, team.team_name, tuple(team.members)), timestamp(T0)
    )
    return team


def issue_token(store: RelayStore, team_id: str, now: datetime = T0) -> str:
    token = new_pairing_token()
    store.issue_pairing_token(
        team_id,
        hash_secret(token),
        "laptop",
        timestamp(now),
        timestamp(now + timedelta(minutes=15)),
    )
    return token


def blob(size: int = 48) -> str:
    return encode_blob(os.urandom(size))


def envelope(cipher: str = "none", key_id: str | None = None, size: int = 48) -> dict[str, Any]:
    return {"v": 1, "cipher": cipher, "key_id": key_id, "blob": blob(size)}


def message(cipher: str = "none", key_id: str | None = None) -> dict[str, Any]:
    return {"id": uuid4(), "envelope": envelope(cipher, key_id)}


def batch(count: int) -> list[dict[str, Any]]:
    return [message() for _ in range(count)]


def chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def version_header() -> dict[str, str]:
    return {"Agmsg-Protocol-Version": "1"}


def team_headers(team_id: str, credential: str) -> dict[str, str]:
    return {
        "Agmsg-Protocol-Version": "1",
        "Agmsg-Team-ID": team_id,
        "Authorization": f"Bearer {credential}",
    }
