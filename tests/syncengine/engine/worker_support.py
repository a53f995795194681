"""What the judging-worker tests share: a connection to a fresh store, a team's keys and
the items a worker judges."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from syncengine.engine.epochs import EpochHistory, KeyEpoch
from syncengine.engine.state import ConnectionRecord
from syncengine.ids import new_uuid4, new_uuid7
from wire.age_keys import X25519Identity
from wire.envelope import Envelope
from wire.message import Message
from wire.profiles import Binding, SealParams, seal

AT = "2026-07-20T06:30:00.000000Z"


KEY_ID = "epoch-1"


@dataclass(frozen=True)
class Keys:
    """An age-v1 epoch of two members and their identity files."""

    alice: X25519Identity
    bob: X25519Identity
    recipients_file: Path
    alice_file: Path
    bob_file: Path

    @property
    def recipients(self) -> tuple[str, ...]:
        return (self.alice.recipient.to_string(), self.bob.recipient.to_string())

    @property
    def epoch(self) -> dict[str, str]:
        return {"key_id": KEY_ID, "recipients_file": str(self.recipients_file)}


def make_keys(directory: Path) -> Keys:
    alice, bob = X25519Identity.generate(), X25519Identity.generate()
    recipients = directory / "recipients.txt"
    recipients.write_text(f"{alice.recipient.to_string()}\n{bob.recipient.to_string()}\n")
    files = {}
    for name, identity in (("alice", alice), ("bob", bob)):
        files[name] = directory / f"{name}.key"
        files[name].write_text(identity.to_secret_string() + "\n")
        files[name].chmod(0o600)
    return Keys(alice, bob, recipients, files["alice"], files["bob"])


def make_connection(keys: Keys, identity_path: Path | None) -> ConnectionRecord:
    return ConnectionRecord(
        binding_pk=1,
        local_team="crew",
        endpoint="http://127.0.0.1:9",
        server_instance_id=new_uuid7(),
        remote_team_id=new_uuid7(),
        protocol_version=1,
        remote_team_name="fake-team",
        credential_id=new_uuid7(),
        credential_path="/nonexistent/credential",
        connected_at=AT,
        epochs=EpochHistory(
            (
                KeyEpoch(
                    0,
                    1,
                    KEY_ID,
                    keys.recipients,
                    None if identity_path is None else str(identity_path),
                ),
            )
        ),
    )


def sealed_to(
    connection: ConnectionRecord,
    body: str,
    recipients: tuple[str, ...],
    key_id: str = KEY_ID,
    wire_id: str | None = None,
) -> tuple[Envelope, str]:
    wire_id = wire_id or new_uuid4()
    params = SealParams(
        binding=Binding(connection.remote_team_id, wire_id, connection.protocol_version),
        key_id=key_id,
        recipients=recipients,
    )
    return seal(Message(body, AT, "alice", "bob"), "age-v1", params), wire_id


#: (envelope, wire ID, server_seq, ciphers the policy allows): one item for Workers.judge.
Item = tuple[Envelope, str, int, frozenset[str]]


def judge_items(keys: Keys, connection: ConnectionRecord) -> list[Item]:
    both = frozenset({"none", "age-v1"})
    age_only = frozenset({"age-v1"})
    stranger = X25519Identity.generate().recipient.to_string()
    items: list[tuple[Envelope, str, frozenset[str]]] = []
    for i in range(6):
        env, wire_id = sealed_to(connection, f"for bob {i}", keys.recipients)
        items.append((env, wire_id, both))
    env, wire_id = sealed_to(connection, "for a stranger", (stranger,))
    items.append((env, wire_id, both))
    env, wire_id = sealed_to(connection, "another epoch", keys.recipients, key_id="epoch-2")
    items.append((env, wire_id, both))
    env, _ = sealed_to(connection, "bound elsewhere", keys.recipients)
    items.append((env, new_uuid4(), both))  # wire ID does not match the binding
    items.append((seal(Message("plain", AT, "alice", "bob"), "none"), new_uuid4(), age_only))
    items.append((seal(Message("plain ok", AT, "alice", "bob"), "none"), new_uuid4(), both))
    env, wire_id = sealed_to(connection, "age not allowed", keys.recipients)
    items.append((env, wire_id, frozenset({"none"})))
    return [(e, w, seq, allowed) for seq, (e, w, allowed) in enumerate(items, start=1)]
