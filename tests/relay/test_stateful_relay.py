"""Stateful property test: writes, replays, retention and read state against a model.

Invariants after every step: sequences are gap-free from 1 in commit order;
a replayed ID always gets its original sequence (also after retention); the
floor never passes current_seq and never moves back; every member's effective
frontier never moves back; every exact item lies strictly above its member's
effective frontier.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from relay.secrets import hash_secret, new_credential_secret, new_uuid7, timestamp
from relay.storage.records import Access, IncomingMessage, ReadStateRequest, ReadUpdate
from tests.relay.backends import Backend, require_postgres
from tests.relay.helpers import T0, issue_token, provision
from wire.envelope import Envelope


def _incoming(wire_id: str, payload: bytes) -> IncomingMessage:
    envelope = Envelope.from_blob_bytes("none", None, payload)
    return IncomingMessage(wire_id, envelope, envelope.digest())


class RelayMachine(RuleBasedStateMachine):
    """The model check on SQLite; :class:`PostgresRelayMachine` runs it on PostgreSQL."""

    backend_name = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        if self.backend_name == "sqlite":
            backend = Backend("sqlite", str(self.dir / "relay.db"))
        else:
            backend = Backend(
                "postgres", require_postgres().clean_relay_database(), initialized=True
            )
        self.store = backend.new_store()
        team = provision(self.store, ("a", "b", "c"))
        self.members = sorted(m.member_id for m in team.members)
        secret = new_credential_secret()
        self.store.exchange_pairing_token(
            hash_secret(issue_token(self.store, team.team_id)),
            new_uuid7(),
            hash_secret(secret),
            timestamp(T0),
        )
        self.access = Access(team.team_id, hash_secret(secret))
        self.team_id = team.team_id
        self.acked: dict[str, tuple[int, bytes]] = {}
        self.current = 0
        self.floor = 0
        self.frontiers = dict.fromkeys(self.members, 0)
        self.counter = 0
        self.payloads: dict[str, bytes] = {}

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _post(self, items: list[IncomingMessage]) -> None:
        result = self.store.post_messages(self.access, items, timestamp(T0))
        for item, ack in zip(items, result.acks, strict=True):
            assert ack.wire_id == item.wire_id
            if item.wire_id in self.acked:
                assert ack.server_seq == self.acked[item.wire_id][0]
            else:
                self.current += 1
                assert ack.server_seq == self.current
                self.acked[item.wire_id] = (ack.server_seq, item.digest)
                self.payloads[item.wire_id] = item.envelope.blob_bytes()

    @rule(count=st.integers(1, 6))
    def write(self, count: int) -> None:
        self._post([_incoming(self._next_id(), bytes([i + 1])) for i in range(count)])

    def _next_id(self) -> str:
        # Deterministic UUIDv4-shaped IDs keep Hypothesis replays reproducible.
        self.counter += 1
        return f"00000000-0000-4000-8000-{self.counter:012d}"

    @precondition(lambda self: bool(self.acked))
    @rule(data=st.data())
    def replay(self, data: st.DataObject) -> None:
        wire_id = data.draw(st.sampled_from(sorted(self.acked)))
        self._post([_incoming(wire_id, self.payloads[wire_id]), _incoming(self._next_id(), b"z")])

    @rule(data=st.data())
    def retain(self, data: st.DataObject) -> None:
        through = data.draw(st.integers(0, self.current))
        result = self.store.retain(self.team_id, through)
        self.floor = max(self.floor, through)
        assert result.new_floor == self.floor

    @precondition(lambda self: self.current > 0)
    @rule(data=st.data())
    def read(self, data: st.DataObject) -> None:
        member = data.draw(st.sampled_from(self.members))
        seq = data.draw(st.integers(0, self.current))
        ids = data.draw(st.lists(st.sampled_from(sorted(self.acked)), max_size=4, unique=True))
        request = ReadStateRequest((ReadUpdate(member, seq, tuple(ids)),), None, 1000)
        self.store.sync_read_state(self.access, request)
        self.frontiers[member] = max(self.frontiers[member], seq)

    @invariant()
    def read_state_is_monotone_and_exact_items_lie_above_frontiers(self) -> None:
        page = self.store.sync_read_state(self.access, ReadStateRequest((), None, 1000))
        assert page.binding.min_available_seq == self.floor <= max(self.current, 0)
        effective: dict[str, int] = {}
        for item in page.items:
            if item.key.kind_order == 0:
                assert item.server_seq is not None
                expected = max(self.frontiers[item.key.member_id], self.floor)
                assert item.server_seq == expected
                effective[item.key.member_id] = item.server_seq
            else:
                seq = self.acked[item.key.wire_id][0]
                assert seq > effective[item.key.member_id]
        assert sorted(effective) == self.members

    @invariant()
    def live_stream_is_the_gap_free_suffix_above_the_floor(self) -> None:
        page = self.store.page_messages(self.access, self.floor, 1000)
        assert [m.server_seq for m in page.messages] == list(
            range(self.floor + 1, self.current + 1)
        )


class PostgresRelayMachine(RelayMachine):
    backend_name = "postgres"


TestRelayMachine = RelayMachine.TestCase
TestRelayMachine.settings = settings(max_examples=60, stateful_step_count=20, deadline=None)
TestPostgresRelayMachine = PostgresRelayMachine.TestCase
TestPostgresRelayMachine.settings = settings(max_examples=60, stateful_step_count=20, deadline=None)
