"""Connecting a store: validated first, persisted all-or-nothing, secrets kept off
argv, out of the store and out of error text (specs/engine.md §3.1)."""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from syncengine.engine import (
    AlreadyConnected,
    ConfigurationError,
    ConnectFailed,
    Engine,
    NotConnected,
    TokenSourceRefused,
    read_token,
)
from syncengine.engine import state as engine_state
from syncengine.engine.connect import default_credential_path
from syncengine.http.errors import CredentialStoreError, PairingTokenRejected
from syncengine.local_store import Store
from tests.syncengine.engine.fake_connect import connect_fake
from tests.syncengine.engine.fakerelay import SECRET, TOKEN, FakeRelay


def _tables(store: Path) -> dict[str, int]:
    with Store(store) as s:
        return {
            t: s.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in (
                "engine_bindings",
                "engine_security_history",
                "engine_status",
                "sync_bindings",
            )
        }


def test_connect_persists_binding_security_revision_zero_and_a_private_credential(
    tmp_path: Path, relay: FakeRelay
) -> None:
    store = tmp_path / "store.db"
    connect_fake(relay, store, mode="plaintext-allowed")
    credential = default_credential_path(store, "crew")
    assert stat.S_IMODE(credential.stat().st_mode) == 0o600
    with Engine(store) as engine:
        status = engine.status().to_obj()
    assert status["remote_team_id"] == relay.team_id
    assert status["server_instance_id"] == relay.server_instance_id
    assert status["security"]["history"] == [
        {
            "local_security_revision": "0",
            "effective_from_seq": "1",
            "minimum_security_mode": "plaintext-allowed",
        }
    ]
    assert status["state"] == "connected" and status["last_success_at"] is None
    assert SECRET.encode() not in store.read_bytes()
    assert TOKEN.encode() not in store.read_bytes()


def test_a_store_failure_removes_the_credential_file_and_revokes_it(
    tmp_path: Path, relay: FakeRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store.db"

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(engine_state, "insert_connection", broken)
    with pytest.raises(ConnectFailed, match="revoked") as caught:
        connect_fake(relay, store)
    assert SECRET not in str(caught.value)
    assert not default_credential_path(store, "crew").exists()
    assert relay.revoked
    assert _tables(store)["engine_bindings"] == 0
    with pytest.raises(NotConnected):
        Engine(store)


def test_a_credential_write_failure_leaves_no_binding(
    tmp_path: Path, relay: FakeRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    import syncengine.engine.connect as connect_module

    store = tmp_path / "store.db"

    def refuse(*args: object, **kwargs: object) -> None:
        raise CredentialStoreError("cannot create credential file (Permission denied)")

    monkeypatch.setattr(connect_module, "save_credential", refuse)
    with pytest.raises(CredentialStoreError):
        connect_fake(relay, store)
    assert _tables(store) == {
        "engine_bindings": 0,
        "engine_security_history": 0,
        "engine_status": 0,
        "sync_bindings": 0,
    }


def test_a_rejected_token_leaves_nothing_behind(tmp_path: Path, relay: FakeRelay) -> None:
    from syncengine.engine import connect_store
    from syncengine.http.credentials import Secret
    from tests.syncengine.engine.fake_connect import FAST

    store = tmp_path / "store.db"
    with pytest.raises(PairingTokenRejected):
        connect_store(
            store,
            endpoint="http://127.0.0.1:9",
            token=Secret("wrong-token"),
            team="crew",
            mode="plaintext-allowed",
            transport=relay.transport(),
            client_config=FAST,
        )
    assert not default_credential_path(store, "crew").exists()
    assert _tables(store)["engine_bindings"] == 0


def test_a_connected_team_cannot_be_connected_again(tmp_path: Path, relay: FakeRelay) -> None:
    store = tmp_path / "store.db"
    connect_fake(relay, store)
    requests = len(relay.requests)
    with pytest.raises(AlreadyConnected):
        connect_fake(relay, store)
    assert len(relay.requests) == requests  # refused before the token was spent


def test_e2ee_required_without_an_epoch_is_refused_before_pairing(
    tmp_path: Path, relay: FakeRelay
) -> None:
    with pytest.raises(ConfigurationError, match="age-v1"):
        connect_fake(relay, tmp_path / "store.db", mode="e2ee-required")
    assert relay.requests == []


def test_an_identity_outside_the_epoch_manifest_is_refused_before_pairing(
    tmp_path: Path, relay: FakeRelay
) -> None:
    from wire.age_keys import X25519Identity

    mine, other = X25519Identity.generate(), X25519Identity.generate()
    recipients = tmp_path / "recipients.txt"
    recipients.write_text(mine.recipient.to_string() + "\n")
    identity = tmp_path / "other.key"
    identity.write_text(other.to_secret_string() + "\n")
    identity.chmod(0o600)
    with pytest.raises(ConfigurationError) as caught:
        connect_fake(
            relay,
            tmp_path / "store.db",
            key_id="epoch-1",
            recipients_file=str(recipients),
            identity_file=str(identity),
        )
    assert other.to_secret_string() not in str(caught.value)
    assert relay.requests == []


def test_a_literal_token_is_refused_with_the_reason_and_the_remedy() -> None:
    with pytest.raises(TokenSourceRefused) as caught:
        read_token("agmsg_pair_literal", io.BytesIO())
    assert "argv" in str(caught.value) and "agmsg_pair_literal" not in str(caught.value)
    assert "--token -" in caught.value.remediation


def test_token_is_read_from_stdin_or_from_a_file(tmp_path: Path) -> None:
    assert read_token("-", io.BytesIO(b"tok-en_1\n")).reveal() == "tok-en_1"
    path = tmp_path / "token"
    path.write_bytes(b"tok-en_2\r\n")
    os.chmod(path, 0o600)
    assert read_token(f"@{path}", io.BytesIO()).reveal() == "tok-en_2"


def test_a_malformed_token_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigurationError) as caught:
        read_token("-", io.BytesIO(b"has space secretvalue\n"))
    assert "secretvalue" not in str(caught.value)


def _roster(store: Path) -> set[tuple[str, str]]:
    with Store(store) as s:
        return {(m.member_id, m.name) for m in s.team("crew").members}


def test_connect_takes_the_roster_and_its_member_ids_from_the_relay(
    make_engine: Callable[..., Engine], relay: FakeRelay, tmp_path: Path
) -> None:
    make_engine("b")
    assert _roster(tmp_path / "b" / "store.db") == set(relay.roster)
    with Store(tmp_path / "b" / "store.db") as s:
        s.send("crew", "alice", "bob", "a second machine sends with no add-member")


def test_pulled_message_names_never_join_the_roster_and_a_later_sync_adopts_new_members(
    make_engine: Callable[..., Engine], relay: FakeRelay, tmp_path: Path
) -> None:
    from syncengine.ids import new_uuid7
    from syncengine.ops.bindings import BindingKey
    from tests.syncengine.ops.helpers import foreign_envelope

    engine = make_engine("b")
    key = BindingKey("crew", relay.server_instance_id, relay.team_id)
    wire, envelope = foreign_envelope(key, "from a stranger", "zed", "alice")
    relay.add_foreign(envelope, wire)
    carol = (new_uuid7(), "carol")
    relay.roster.append(carol)
    engine.sync()
    store = tmp_path / "b" / "store.db"
    assert _roster(store) == set(relay.roster)
    assert "zed" not in {name for _, name in _roster(store)}
    with Store(store) as s:
        assert [m.sender for m in s.list_unread("crew", "alice")] == ["zed"]


def test_a_store_connected_by_a_relative_path_records_absolute_file_paths(
    tmp_path: Path, relay: FakeRelay, monkeypatch: pytest.MonkeyPatch
) -> None:
    """#15: a relative ``--store`` saved a relative credential path, and the
    same sync from cron (another working directory) lost the credential."""
    (tmp_path / "home").mkdir()
    monkeypatch.chdir(tmp_path / "home")
    connect_fake(relay, Path("store.db"))
    monkeypatch.chdir(tmp_path)
    with Engine(
        tmp_path / "home" / "store.db", transport=relay.transport(), sleep=lambda s: None
    ) as engine:
        recorded = Path(engine.connection.credential_path)
        assert recorded.is_absolute()
        assert recorded == tmp_path / "home" / "credentials" / "crew.json"
        engine.sync()
