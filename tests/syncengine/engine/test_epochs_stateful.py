"""A hypothesis state machine of one team's key-epoch history (issue #15's
quality bar): random rotations that add and drop machines, writers and
readers at random sequences, imports arriving late.

Writers follow the cutover barrier (a writer holds the whole history before
it seals: the operator quiesced it and it imported the snapshot); readers
may lag. Real age-v1 seals and the engine's own :func:`judge` are used.

Invariants:

- every envelope is sealed to the epoch the team's history makes effective
  at its sequence (never the wrong epoch);
- a reader that holds the message's epoch and is in its manifest opens it —
  an honest message is never quarantined once its key is installed;
- a reader not in the manifest, or not yet holding the epoch, keeps it
  ``pending_key`` (unprojected, reprocessable) — never ``importable``, and
  never a durable ``policy_violation`` for an honest message.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from syncengine.engine.epochs import EpochHistory, KeyEpoch
from syncengine.engine.evaluation import judge
from syncengine.engine.state import ConnectionRecord
from syncengine.ids import new_uuid4, new_uuid7
from wire.age_keys import X25519Identity
from wire.envelope import Envelope
from wire.message import Message
from wire.profiles import Binding, SealParams, seal

MACHINES = ("a", "b", "c", "d")
AT = "2026-07-20T06:30:00.000000Z"
TEAM_ID = new_uuid7()
AGE = frozenset({"age-v1"})


@dataclass
class Reader:
    identity: X25519Identity
    known: int = 1  # how many epochs of the team's history it has imported


@dataclass
class Posted:
    seq: int
    wire_id: str
    envelope: Envelope
    body: str


@dataclass
class Team:
    epochs: list[KeyEpoch] = field(default_factory=list)
    members: list[frozenset[str]] = field(default_factory=list)
    posted: list[Posted] = field(default_factory=list)


def connection(epochs: list[KeyEpoch]) -> ConnectionRecord:
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
        epochs=EpochHistory(tuple(epochs)),
    )


class EpochHistoryMachine(RuleBasedStateMachine):
    @initialize()
    def first_epoch(self) -> None:
        self.readers = {name: Reader(X25519Identity.generate()) for name in MACHINES}
        self.team = Team()
        self._add_epoch(frozenset(MACHINES[:3]), boundary=1)

    def _add_epoch(self, members: frozenset[str], boundary: int) -> None:
        recipients = tuple(self.readers[m].identity.recipient.to_string() for m in sorted(members))
        index = len(self.team.epochs)
        self.team.epochs.append(KeyEpoch(index, boundary, f"epoch-{index + 1}", recipients))
        self.team.members.append(members)

    @precondition(lambda self: len(self.team.epochs) < 6)
    @rule(members=st.sets(st.sampled_from(MACHINES), min_size=1), rotator=st.sampled_from(MACHINES))
    def rotate(self, members: set[str], rotator: str) -> None:
        self._add_epoch(frozenset(members), boundary=len(self.team.posted) + 1)
        self.readers[rotator].known = len(self.team.epochs)

    @rule(name=st.sampled_from(MACHINES))
    def import_snapshot(self, name: str) -> None:
        self.readers[name].known = len(self.team.epochs)

    @rule(writer=st.sampled_from(MACHINES), body=st.text(min_size=1, max_size=20))
    def write(self, writer: str, body: str) -> None:
        self.readers[writer].known = len(self.team.epochs)  # the barrier
        history = EpochHistory(tuple(self.team.epochs))
        seq = len(self.team.posted) + 1
        epoch = history.at(seq)
        assert epoch is not None
        wire_id = new_uuid4()
        message = Message(body, AT, "alice", "bob")
        params = SealParams(Binding(TEAM_ID, wire_id, 1), epoch.key_id, epoch.recipients)
        envelope = seal(message, "age-v1", params)
        self.team.posted.append(Posted(seq, wire_id, envelope, body))

    @invariant()
    def sealed_to_the_epoch_effective_at_its_sequence(self) -> None:
        history = EpochHistory(tuple(self.team.epochs))
        for posted in self.team.posted:
            effective = history.at(posted.seq)
            assert effective is not None and posted.envelope.key_id == effective.key_id

    @invariant()
    def every_reader_opens_exactly_what_its_keys_allow(self) -> None:
        history = EpochHistory(tuple(self.team.epochs))
        for name, reader in self.readers.items():
            held = self.team.epochs[: reader.known]
            record = connection(held)

            def identity(key_id: str, name: str = name) -> object | None:
                index = next(i for i, e in enumerate(self.team.epochs) if e.key_id == key_id)
                return self.readers[name].identity if name in self.team.members[index] else None

            for posted in self.team.posted[-6:]:  # the newest few keep each step cheap
                status, _, projection = judge(
                    posted.envelope, posted.wire_id, posted.seq, AGE, record, identity
                )
                effective = history.at(posted.seq)
                assert effective is not None
                index = effective.revision
                if index < reader.known and name in self.team.members[index]:
                    assert status == "importable" and projection is not None
                    assert projection.body == posted.body
                else:
                    assert status == "pending_key", (status, name, index, reader.known)


EpochHistoryMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=15, deadline=None
)
test_epoch_history = EpochHistoryMachine.TestCase
