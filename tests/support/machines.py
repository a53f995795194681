"""Machines — stores connected to a live relay — as the end-to-end tests build them.

Two builders, one record: ``Team`` provisions through the relay's CLI and
connects each machine with ``syncengine connect`` as its own process (the
path a user takes, tests/syncengine/engine/test_e2e_live.py proves it);
``LeanTeam`` does both in-process with the same functions the CLI calls,
because the fault tests are about what happens after connecting and every
avoided process start is ~0.5 s on a loaded machine. Both hand back a
``Machine``: a store path plus the CLI, Engine and Store doors onto it.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from relay.limits import PAIRING_TOKEN_TTL_SECONDS
from relay.provisioning import parse_provisioning_document
from relay.secrets import hash_secret, new_pairing_token, new_uuid7, timestamp, utc_now
from relay.storage.sqlite import SqliteRelayStore
from syncengine.engine import Engine
from syncengine.engine.connect import connect_store
from syncengine.http.credentials import Secret
from syncengine.local_store import Store
from tests.support.cli import syncengine
from tests.support.live_relay import LiveRelay, cli, issue_token, provision
from wire.age_keys import X25519Identity

MEMBERS = ("alice", "bob", "carol")

__all__ = [
    "MEMBERS",
    "LeanTeam",
    "Machine",
    "Team",
    "age_epoch",
    "exactly_once",
    "relay_counts",
    "relay_port",
    "run_cli",
]


@dataclass
class Machine:
    name: str
    store: Path

    def cli(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return syncengine(*args, store=self.store, stdin=stdin)

    def engine(self) -> Engine:
        return Engine(self.store)

    def send(self, sender: str, recipient: str, *bodies: str) -> None:
        with Store(self.store) as store:
            for body in bodies:
                store.send("crew", sender, recipient, body)

    def bodies(self) -> list[str]:
        with Store(self.store) as store:
            return sorted(m.body for m in store.history("crew"))

    def sync(self) -> Any:
        with self.engine() as engine:
            return engine.sync()


class Team:
    def __init__(self, live: LiveRelay, tmp: Path) -> None:
        self.live, self.tmp = live, tmp
        self.doc = provision(live.db, tmp, ("alice", "bob", "carol"))
        self.id: str = self.doc["team_id"]

    def machine(self, name: str, *options: str, mode: str = "plaintext-allowed") -> Machine:
        directory = self.tmp / name
        directory.mkdir()
        machine = Machine(name, directory / "store.db")
        token = issue_token(self.live.db, self.id)
        result = machine.cli(
            "connect", "--endpoint", self.live.base_url, "--token", "-",
            "--team", "crew", "--security", mode, "--json", *options,
            stdin=token + "\n",
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert token not in result.stdout + result.stderr
        with Store(machine.store) as store:  # the roster came from the relay
            assert {m.name for m in store.team("crew").members} >= {"alice", "bob"}
        return machine

    def relay(self, *args: str) -> None:
        result = cli(self.live.db, *args)
        assert result.returncode == 0, result.stderr


def age_epoch(tmp: Path, *names: str) -> tuple[Path, dict[str, Path]]:
    identities = {name: X25519Identity.generate() for name in names}
    recipients = tmp / "epoch-1.recipients"
    recipients.write_text("".join(i.recipient.to_string() + "\n" for i in identities.values()))
    keys = {}
    for name, identity in identities.items():
        keys[name] = tmp / f"{name}.key"
        keys[name].write_text(identity.to_secret_string() + "\n")
        keys[name].chmod(0o600)
    return recipients, keys


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
    return syncengine(*args, store=machine.store, env=env, timeout=timeout)


def exactly_once(machine: Machine) -> list[tuple[str, str, str]]:
    """Every message of the store as (from, to, body), sorted, duplicates kept."""
    with Store(machine.store) as store:
        return sorted((m.sender, m.recipient, m.body) for m in store.history("crew"))
