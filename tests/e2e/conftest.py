"""Shared set-up for the end-to-end fault tests: one real relay process on
127.0.0.1 for the whole package, a fresh team per test, and machines
(stores) connected to it.

Provisioning, pairing-token issue and ``connect`` run in-process here (the
same functions the CLI calls) because the tests are about what happens
*after* connecting, and every avoided process start is ~0.5 s on a loaded
machine; the demo and tests/syncengine/engine/test_e2e_live.py cover the
CLI path of those commands.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from relay.limits import PAIRING_TOKEN_TTL_SECONDS
from relay.provisioning import parse_provisioning_document
from relay.secrets import hash_secret, new_pairing_token, new_uuid7, timestamp, utc_now
from relay.storage.sqlite import SqliteRelayStore
from syncengine.engine.connect import connect_store
from syncengine.http.credentials import Secret
from syncengine.local_store import Store
from tests.support.live_relay import LiveRelay, relay_fixture
from tests.syncengine.engine.test_e2e_live import Machine, age_epoch

MEMBERS = ("alice", "bob", "carol")

__all__ = ["MEMBERS", "LeanTeam", "Machine", "age_epoch", "relay_counts", "run_cli"]


@pytest.fixture(scope="package")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveRelay]:
    yield from relay_fixture(tmp_path_factory, name="e2e-relay")


def relay_port(live: LiveRelay) -> int:
    return int(live.base_url.rsplit(":", 1)[1])


class LeanTeam:
    """A team provisioned on the live relay; machines connect to ``endpoint``
    (the relay itself, or a fault proxy in front of it)."""

    def __init__(self, live: LiveRelay, tmp: Path, endpoint: str | None = None) -> None:
        self.live, self.tmp = live, tmp
        self.endpoint = endpoint or live.base_url
        self.id = new_uuid7()
        document = {
            "team_id": self.id,
            "team_name": "crew",
            "members": [{"member_id": new_uuid7(), "name": n} for n in MEMBERS],
        }
        relay = SqliteRelayStore(live.db)
        try:
            relay.apply_provisioning(
                parse_provisioning_document(json.dumps(document).encode()), timestamp(utc_now())
            )
        finally:
            relay.close()

    def via(self, endpoint: str) -> LeanTeam:
        """The same team, with later machines connecting through ``endpoint``."""
        other = object.__new__(LeanTeam)
        other.__dict__.update(self.__dict__, endpoint=endpoint)
        return other

    def token(self) -> Secret:
        token = new_pairing_token()
        now = utc_now()
        relay = SqliteRelayStore(self.live.db)
        try:
            relay.issue_pairing_token(
                self.id,
                hash_secret(token),
                None,
                timestamp(now),
                timestamp(now + timedelta(seconds=PAIRING_TOKEN_TTL_SECONDS)),
            )
        finally:
            relay.close()
        return Secret(token)

    def machine(self, name: str, mode: str = "plaintext-allowed", **epoch: Any) -> Machine:
        directory = self.tmp / name
        directory.mkdir()
        machine = Machine(name, directory / "store.db")
        connect_store(
            machine.store, endpoint=self.endpoint, token=self.token(), team="crew", mode=mode,
            **epoch,
        )  # fmt: skip
        return machine

    def age_machines(self, *names: str) -> list[Machine]:
        """Machines on one age-v1 epoch, each with its own identity."""
        recipients, keys = age_epoch(self.tmp, *names)
        return [
            self.machine(
                name,
                "e2ee-required",
                key_id="epoch-1",
                recipients_file=str(recipients),
                identity_file=str(keys[name]),
            )
            for name in names
        ]


def relay_counts(live: LiveRelay, team_id: str) -> tuple[int, int]:
    """(current_seq, live messages) of the team, read from the relay DB."""
    relay = SqliteRelayStore(live.db)
    try:
        team = next(t for t in relay.status().teams if t.team_id == team_id)
    finally:
        relay.close()
    return team.current_seq, team.live_messages


def run_cli(
    machine: Machine, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``syncengine ARGS`` as its own process against ``machine``'s store."""
    base = {k: v for k, v in os.environ.items() if k != "SYNCENGINE_CRASH_AT"}
    return subprocess.run(
        [sys.executable, "-m", "syncengine", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**base, "SYNCENGINE_STORE": str(machine.store), **(env or {})},
        check=False,
    )


def exactly_once(machine: Machine) -> list[tuple[str, str, str]]:
    """Every message of the store as (from, to, body), sorted, duplicates kept."""
    with Store(machine.store) as store:
        return sorted((m.sender, m.recipient, m.body) for m in store.history("crew"))
