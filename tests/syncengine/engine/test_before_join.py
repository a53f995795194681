"""Messages a machine will never read are not a failure (issue #33, item 3).

An envelope of an epoch this machine was never a recipient of — it holds no
identity for that epoch, and the identity it holds for a later epoch is not
in that epoch's manifest — is ``before_join``: held (unprojected, judged
again by ``reprocess``), but not blocking. A machine that was a recipient
and only lacks the identity file keeps ``pending_key``
(specs/engine.md §6.5).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncengine.cli import main
from syncengine.engine import Engine
from syncengine.engine.doctor import run_checks
from syncengine.engine.epochs import EpochHistory, KeyEpoch
from syncengine.engine.evaluation import judge
from syncengine.engine.state import ConnectionRecord
from syncengine.ids import new_uuid4, new_uuid7
from syncengine.local_store import Store
from tests.support.before_join import NEW, OLD, WRITER, joined_late, key_file, recipient_list
from tests.syncengine.engine.fakerelay import FakeRelay
from wire.age_keys import X25519Identity
from wire.message import Message
from wire.profiles import Binding, SealParams, seal

AT = "2026-07-20T06:30:00.000000Z"
TEAM_ID = new_uuid7()
AGE = frozenset({"age-v1"})


def _epoch(
    revision: int, boundary: int, members: tuple[X25519Identity, ...], path: bool
) -> KeyEpoch:
    recipients = tuple(m.recipient.to_string() for m in members)
    return KeyEpoch(revision, boundary, f"epoch-{revision + 1}", recipients, "/k" if path else None)


def _connection(*epochs: KeyEpoch) -> ConnectionRecord:
    return ConnectionRecord(
        binding_pk=1,
        local_team="crew",
        endpoint="http://127.0.0.1:9",
        server_instance_id=new_uuid7(),
        remote_team_id=TEAM_ID,
        protocol_version=1,
        remote_team_name="crew",
        credential_id=new_uuid7(),
        credential_path="/nonexistent",
        connected_at=AT,
        epochs=EpochHistory(epochs),
    )


def _judge(epoch: KeyEpoch, record: ConnectionRecord, keys: dict[str, object]) -> str:
    """Seal one message to ``epoch`` at its boundary and judge it on ``record``."""
    wire_id = new_uuid4()
    params = SealParams(Binding(TEAM_ID, wire_id, 1), epoch.key_id, epoch.recipients)
    envelope = seal(Message("old news", AT, "alice", "bob"), "age-v1", params)
    status, _, projection = judge(
        envelope, wire_id, epoch.effective_from_seq, AGE, record, keys.get
    )
    assert (projection is not None) == (status == "importable")
    return status


def test_an_epoch_this_machine_joined_after_is_before_join_not_pending_key() -> None:
    old = _epoch(0, 1, (WRITER, OLD), path=False)
    new = _epoch(1, 5, (WRITER, OLD, NEW), path=True)
    assert _judge(old, _connection(old, new), {new.key_id: NEW}) == "before_join"


def test_a_recipient_of_the_epoch_without_its_identity_file_stays_pending_key() -> None:
    old = _epoch(0, 1, (WRITER, OLD), path=False)
    new = _epoch(1, 5, (WRITER, OLD, NEW), path=True)
    # OLD's recipient is in the old manifest: it was sealed to this machine.
    assert _judge(old, _connection(old, new), {new.key_id: OLD}) == "pending_key"


def test_a_machine_holding_no_identity_of_a_later_epoch_stays_pending_key() -> None:
    old = _epoch(0, 1, (WRITER, OLD), path=False)
    new = _epoch(1, 5, (WRITER, NEW), path=False)  # e.g. a machine removed, or none installed
    assert _judge(old, _connection(old, new), {}) == "pending_key"


def test_the_newest_epoch_without_an_identity_stays_pending_key() -> None:
    old = _epoch(0, 1, (WRITER, NEW), path=True)
    new = _epoch(1, 5, (WRITER, OLD), path=False)  # rotated away from this machine
    assert _judge(new, _connection(old, new), {old.key_id: NEW}) == "pending_key"


def test_an_identity_of_that_epoch_installed_later_opens_it() -> None:
    old = _epoch(0, 1, (WRITER, OLD), path=True)
    new = _epoch(1, 5, (WRITER, OLD, NEW), path=True)
    assert _judge(old, _connection(old, new), {old.key_id: OLD, new.key_id: NEW}) == "importable"


@settings(max_examples=40, deadline=None)
@given(
    memberships=st.lists(
        st.sets(st.sampled_from(("old", "new")), min_size=1), min_size=1, max_size=4
    ),
    installed=st.lists(st.booleans(), min_size=4, max_size=4),
    which=st.integers(0, 3),
)
def test_before_join_exactly_when_no_held_identity_is_a_recipient_and_a_later_one_is_held(
    memberships: list[set[str]], installed: list[bool], which: int
) -> None:
    """The machine's identity is NEW; each epoch holds WRITER plus the named
    machines; ``installed[i]`` says whether epoch i records NEW as installed
    (only possible where NEW is a recipient)."""
    who = {"old": OLD, "new": NEW}
    epochs = []
    for revision, members in enumerate(memberships):
        path = installed[revision] and "new" in members
        chosen = (WRITER, *(who[m] for m in sorted(members)))
        epochs.append(_epoch(revision, 1 + 3 * revision, chosen, path))
    record = _connection(*epochs)
    keys: dict[str, object] = {e.key_id: NEW for e in epochs if e.identity_path}
    target = epochs[min(which, len(epochs) - 1)]
    status = _judge(target, record, keys)
    later_held = any(e.identity_path for e in epochs[target.revision + 1 :])
    if target.identity_path:
        assert status == "importable"
    elif later_held and NEW.recipient.to_string() not in target.recipients:
        assert status == "before_join"
    else:
        assert status == "pending_key"


# -- through the engine, on the fake relay --------------------------------------------


def test_a_machine_that_joined_later_holds_the_older_messages_as_before_join(
    tmp_path: Path, make_engine: Callable[..., Engine]
) -> None:
    reader, _ = joined_late(tmp_path, make_engine)
    assert reader.status().sync.quarantine == {"before_join": 2}
    rows = reader.quarantine()
    assert [r.status for r in rows] == ["before_join", "before_join"]
    assert all(r.reason and "before this machine joined" in r.reason for r in rows)


def test_before_join_messages_leave_the_engine_state_ok_with_no_remedy(
    tmp_path: Path, make_engine: Callable[..., Engine]
) -> None:
    reader, _ = joined_late(tmp_path, make_engine)
    obj = reader.status().to_obj()
    assert obj["state"] == "ok"
    assert obj["messages_blocked"] == []
    assert obj["quarantine"] == {"before_join": 2}


def test_status_counts_before_join_messages_in_plain_words(
    tmp_path: Path, make_engine: Callable[..., Engine], capsys: pytest.CaptureFixture[str]
) -> None:
    reader, _ = joined_late(tmp_path, make_engine)
    assert main(["status", "--store", str(reader.store.path), "--team", "crew"]) == 0
    text = capsys.readouterr().out
    assert "2 messages from before this machine joined; they cannot be opened here" in text
    assert "BLOCKED" not in text


def test_doctor_finds_before_join_messages_ok(
    tmp_path: Path, make_engine: Callable[..., Engine], relay: FakeRelay
) -> None:
    reader, _ = joined_late(tmp_path, make_engine, count=1)
    checks = {c.name: c for c in run_checks(reader.store.path, "crew", transport=relay.transport())}
    assert checks["quarantine"].verdict == "ok"
    assert "1 message from before this machine joined" in checks["quarantine"].detail


def test_quarantine_list_shows_before_join_with_its_reason_and_that_it_needs_nothing(
    tmp_path: Path, make_engine: Callable[..., Engine], capsys: pytest.CaptureFixture[str]
) -> None:
    reader, _ = joined_late(tmp_path, make_engine, count=1)
    store = str(reader.store.path)
    args = ["quarantine", "list", "--store", store, "--status", "before_join", "--json"]
    assert main(args) == 0
    obj = json.loads(capsys.readouterr().out)
    assert [row["status"] for row in obj["blocked"]] == ["before_join"]
    assert "Nothing to do" in obj["remediation"]["before_join"]


def test_reprocess_opens_before_join_messages_once_an_identity_of_their_epoch_is_installed(
    tmp_path: Path, make_engine: Callable[..., Engine]
) -> None:
    reader, old_key = joined_late(tmp_path, make_engine)
    assert reader.reprocess().outcomes == {"before_join": 2}  # judged again, still unreadable
    reader.set_identity(old_key, key_id="epoch-1")
    assert reader.reprocess().outcomes == {"imported": 2}
    with Store(reader.store.path) as store:
        assert sorted(m.body for m in store.history("crew")) == ["before 0", "before 1"]
    assert reader.status().sync.quarantine == {"imported": 2}


def test_a_recipient_that_only_lacks_its_identity_file_stays_blocked_pending_key(
    tmp_path: Path, make_engine: Callable[..., Engine]
) -> None:
    writer_key = key_file(tmp_path, "writer", WRITER)
    old_key = key_file(tmp_path, "old", OLD)
    epoch1 = recipient_list(tmp_path, "epoch-1", WRITER, OLD)
    writer = make_engine(
        "a", key_id="epoch-1", recipients_file=str(epoch1), identity_file=str(writer_key)
    )
    reader = make_engine("b", key_id="epoch-1", recipients_file=str(epoch1))
    with Store(writer.store.path) as store:
        store.send("crew", "alice", "bob", "sealed to me")
    writer.push()
    epoch2 = recipient_list(tmp_path, "epoch-2", WRITER, OLD)
    reader.add_epoch("epoch-2", str(epoch2), identity_file=str(old_key))
    reader.pull()
    obj = reader.status().to_obj()
    assert obj["quarantine"] == {"pending_key": 1}
    assert obj["state"] == "blocked"
