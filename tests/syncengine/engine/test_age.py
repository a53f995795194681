"""age-v1 through the engine on the fake relay: a reader without its identity
quarantines ``pending_key`` while later messages flow; installing the
identity and reprocessing imports it exactly once."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from syncengine.engine import Engine
from syncengine.ids import new_uuid4
from syncengine.local_store import Store
from tests.syncengine.engine.fakerelay import FakeRelay
from wire.age_keys import X25519Identity
from wire.message import Message
from wire.profiles import seal


def test_pending_key_then_identity_and_reprocess_imports_once(
    tmp_path: Path, make_engine: Callable[..., Engine], relay: FakeRelay
) -> None:
    alice, bob = X25519Identity.generate(), X25519Identity.generate()
    recipients = tmp_path / "recipients.txt"
    recipients.write_text(f"{alice.recipient.to_string()}\n{bob.recipient.to_string()}\n")
    keys = {}
    for name, identity in (("alice", alice), ("bob", bob)):
        keys[name] = tmp_path / f"{name}.key"
        keys[name].write_text(identity.to_secret_string() + "\n")
        keys[name].chmod(0o600)
    epoch = {"key_id": "epoch-1", "recipients_file": str(recipients)}
    writer = make_engine("a", identity_file=str(keys["alice"]), **epoch)
    reader = make_engine("b", **epoch)  # no identity yet

    with Store(writer.store.path) as store:
        store.send("crew", "alice", "bob", "secret plan")
    pushed = writer.push()
    assert pushed.cipher == "age-v1" and relay.messages[-1].envelope.cipher == "age-v1"
    # A later plaintext message from another device keeps flowing.
    plain = seal(Message("later note", "2026-07-20T06:30:00.000000Z", "alice", "bob"), "none")
    relay.add_foreign(plain, new_uuid4())

    pulled = reader.pull()
    assert pulled.outcomes == {"imported": 1, "pending_key": 1}
    assert pulled.transport_cursor == 2
    assert reader.status().sync.quarantine == {"imported": 1, "pending_key": 1}

    reader.set_identity(keys["bob"])
    again = reader.reprocess()
    assert again.outcomes == {"imported": 1}
    assert reader.reprocess().candidates == 0
    with Store(reader.store.path) as store:
        bodies = sorted(m.body for m in store.history("crew"))
    assert bodies == ["later note", "secret plan"]
    # The echo on the writer reconciles; nothing is imported twice.
    assert writer.pull().outcomes == {"imported": 1, "reconciled": 1}
