"""The worker processes judge the two new held outcomes exactly as the
engine's own process does (issues #33, #34): ``before_join`` — which reads
the identity of a *later* epoch by path, in the worker — and
``manifest_mismatch`` — which needs the epoch manifest passed to the
profile."""

from __future__ import annotations

from pathlib import Path

from syncengine.engine.epochs import EpochHistory, KeyEpoch
from syncengine.engine.evaluation import judge
from syncengine.engine.identity import read_identity
from syncengine.engine.state import ConnectionRecord
from syncengine.engine.workers import Workers
from syncengine.ids import new_uuid4, new_uuid7
from wire.age_keys import X25519Identity
from wire.envelope import Envelope
from wire.message import Message
from wire.profiles import Binding, SealParams, seal

AT = "2026-07-20T06:30:00.000000Z"
AGE = frozenset({"age-v1"})


def test_workers_judge_before_join_and_manifest_mismatch_as_in_process(tmp_path: Path) -> None:
    writer, other, me, outsider = (X25519Identity.generate() for _ in range(4))
    key = tmp_path / "me.key"
    key.write_text(me.to_secret_string() + "\n")
    key.chmod(0o600)
    old = (writer.recipient.to_string(), other.recipient.to_string())
    new = (*old, me.recipient.to_string())
    connection = ConnectionRecord(
        binding_pk=1,
        local_team="crew",
        endpoint="http://127.0.0.1:9",
        server_instance_id=new_uuid7(),
        remote_team_id=new_uuid7(),
        protocol_version=1,
        remote_team_name="crew",
        credential_id=new_uuid7(),
        credential_path="/nonexistent/credential",
        connected_at=AT,
        epochs=EpochHistory(
            (KeyEpoch(0, 1, "epoch-1", old), KeyEpoch(1, 10, "epoch-2", new, str(key)))
        ),
    )

    def sealed(
        seq: int, key_id: str, recipients: tuple[str, ...]
    ) -> tuple[Envelope, str, int, frozenset[str]]:
        wire_id = new_uuid4()
        params = SealParams(Binding(connection.remote_team_id, wire_id, 1), key_id, recipients)
        envelope = seal(Message(f"m{seq}", AT, "alice", "bob"), "age-v1", params)
        return envelope, wire_id, seq, AGE

    items = [
        *(sealed(seq, "epoch-1", old) for seq in range(1, 5)),
        sealed(10, "epoch-2", new),
        sealed(11, "epoch-2", (*new, outsider.recipient.to_string())),
    ]
    loaded = {"epoch-2": read_identity(connection, key, "epoch-2")}
    expected = [judge(e, w, seq, allowed, connection, loaded.get) for e, w, seq, allowed in items]
    assert [status for status, _, _ in expected] == [
        *(["before_join"] * 4),
        "importable",
        "manifest_mismatch",
    ]
    workers = Workers(connection, 2)
    try:
        assert workers.judge(items)() == expected
    finally:
        workers.close()
