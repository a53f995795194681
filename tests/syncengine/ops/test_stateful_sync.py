"""Random interleavings of send, prepare, lost or delivered acks, reconcile,
pulled echoes, foreign messages, key installation and reprocess — against a
simple model — for ``none`` and ``age-v1`` (STYLE.md "Hypothesis stateful
testing"; ADR 0005 failure scenarios; specs/sync-stage1.md §4).

After every step: published envelopes never change bytes, nothing local is
pushed twice, nothing imported is ever pushed (#949), nothing is imported
twice, and both cursors keep their discipline. At teardown the machine is
driven to quiescence and must converge: every local message on the relay
exactly once, every foreign message imported exactly once.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from syncengine.local_store import Store
from syncengine.ops.sync_records import SyncPrepare, SyncPullCursor, SyncPushCandidate
from tests.syncengine.ops.helpers import (
    Classifier,
    FakeRelay,
    foreign_envelope,
    new_key,
    prepare_age,
    prepare_none,
)
from wire.age_keys import X25519Identity

_IDENTITY = X25519Identity.generate()


class SyncMachine(RuleBasedStateMachine):
    cipher = "none"

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="sync-sm-"))
        self.store = Store(self.dir / "store.db")
        self.store.init()
        self.store.create_team("dev", ["alice", "bob"])
        self.key = new_key()
        self.relay = FakeRelay()
        self.key_installed = self.cipher == "none"
        self.sent: list[str] = []
        self.foreign: list[str] = []
        self.outstanding: list[SyncPushCandidate] = []
        self.published: dict[str, tuple[int, object]] = {}  # wire → (position, envelope)
        self.counter = 0

    def teardown(self) -> None:
        try:
            self._converge()
        finally:
            self.store.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers ----------------------------------------------------------------------

    def _request(self) -> SyncPrepare:
        return prepare_none() if self.cipher == "none" else prepare_age(_IDENTITY)

    def _classifier(self) -> Classifier:
        return Classifier(self.key, {"epoch-1": _IDENTITY} if self.key_installed else {})

    def _transport(self) -> int:
        binding = self.store.sync_binding(self.key)
        return 0 if binding is None else binding.transport_cursor

    def _relay_bodies(self) -> list[str]:
        opener = Classifier(self.key, {"epoch-1": _IDENTITY})
        bodies = []
        for entry in self.relay.entries:
            status, message, _ = opener.evaluate(entry)
            assert status == "importable" and message is not None
            bodies.append(message.body)
        return bodies

    # -- rules ------------------------------------------------------------------------

    @rule()
    def send(self) -> None:
        self.counter += 1
        body = f"local {self.counter}"
        self.store.send("dev", "alice", "bob", body)
        self.sent.append(body)

    @rule(limit=st.integers(1, 4))
    def prepare(self, limit: int) -> None:
        result = self.store.sync_prepare_push(self.key, self._request(), limit)
        assert len(result.candidates) <= limit
        for candidate in result.candidates:
            known = self.published.get(candidate.wire_id)
            if known is not None:
                assert known == (candidate.local_position, candidate.envelope)
            assert candidate.local_position not in {p for p, _ in self.published.values()} or known
            self.published[candidate.wire_id] = (candidate.local_position, candidate.envelope)
        self.outstanding = list(result.candidates)

    @precondition(lambda self: bool(self.outstanding))
    @rule(lost=st.booleans())
    def deliver(self, lost: bool) -> None:
        acks = self.relay.push(self.outstanding)
        self.outstanding = []
        if not lost:
            self.store.sync_reconcile_push(self.key, acks)

    @rule()
    def foreign_message(self) -> None:
        self.counter += 1
        body = f"foreign {self.counter}"
        identity = _IDENTITY if self.cipher == "age-v1" else None
        self.relay.post(*foreign_envelope(self.key, body, "zed", "bob", identity=identity))
        self.foreign.append(body)

    @rule(limit=st.integers(1, 5))
    def pull(self, limit: int) -> None:
        page, cursor = self._classifier().page(self.relay, self._transport(), limit)
        result = self.store.sync_apply_pull(self.key, page, cursor)
        assert result.result.transport_cursor == cursor.next_after
        assert "corrupt_state" not in {o.status for o in result.outcomes}

    @precondition(lambda self: not self.key_installed)
    @rule()
    def install_key(self) -> None:
        self.key_installed = True

    @rule(limit=st.integers(1, 3))
    def reprocess(self, limit: int) -> None:
        classifier = self._classifier()
        after: str | None = None
        while True:
            page = self.store.sync_reprocess(self.key, limit, after)
            records = [
                classifier.pull_message(_entry(c.server_seq, c.wire_id, c.envelope))  # type: ignore[arg-type]
                for c in page.candidates
            ]
            self.store.sync_apply_pull(
                self.key, records, SyncPullCursor(page.state.transport_cursor)
            )
            if not page.page.has_more:
                break
            after = page.page.next_after

    # -- invariants -------------------------------------------------------------------

    @invariant()
    def nothing_is_pushed_twice_and_imports_are_never_pushed(self) -> None:
        bodies = self._relay_bodies()
        assert len(bodies) == len(set(bodies))
        assert set(bodies) <= set(self.sent) | set(self.foreign)

    @invariant()
    def status_counts_equal_the_rows_in_each_state(self) -> None:
        """``status`` counts from the totals the writers keep and the partial
        indexes; through every prepare, reconcile (answer kept or lost), apply
        and reprocess they equal the grouped counts of the rows themselves."""
        from syncengine.ops.status import sync_status

        conn = self.store.conn
        status = sync_status(conn, self.key)
        if status.binding is None:
            return
        assert status.reservations == dict(
            conn.execute("SELECT state, count(*) FROM sync_push GROUP BY 1 ORDER BY 1")
        )
        assert status.quarantine == dict(
            conn.execute("SELECT status, count(*) FROM sync_quarantine GROUP BY 1 ORDER BY 1")
        )

    @invariant()
    def nothing_is_imported_twice_or_lost(self) -> None:
        stored = [(m.body, m.origin) for m in self.store.history("dev")]
        assert sorted(b for b, o in stored if o == "local") == sorted(self.sent)
        imported = [b for b, o in stored if o == "imported"]
        assert len(imported) == len(set(imported)) and set(imported) <= set(self.foreign)

    @invariant()
    def cursors_keep_their_discipline(self) -> None:
        binding = self.store.sync_binding(self.key)
        if binding is None:
            return
        conn = self.store.conn
        assert (
            conn.execute(
                "SELECT count(*) FROM sync_push WHERE local_position <= ? AND state != 'acked'",
                (binding.push_cursor,),
            ).fetchone()[0]
            == 0
        )
        outcomes = conn.execute(
            "SELECT count(*) FROM sync_quarantine WHERE server_seq <= ?",
            (binding.transport_cursor,),
        ).fetchone()[0]
        assert outcomes == binding.transport_cursor  # one durable outcome per passed sequence

    # -- quiescence -------------------------------------------------------------------

    def _converge(self) -> None:
        self.key_installed = True
        for _ in range(100):
            result = self.store.sync_prepare_push(self.key, self._request(), 1000)
            if result.candidates:
                self.store.sync_reconcile_push(self.key, self.relay.push(list(result.candidates)))
            page, cursor = self._classifier().page(self.relay, self._transport())
            self.store.sync_apply_pull(self.key, page, cursor)
            self.reprocess(1000)
            if not result.candidates and not page:
                break
        assert sorted(self._relay_bodies()) == sorted(self.sent + self.foreign)
        stored = [(m.body, m.origin) for m in self.store.history("dev")]
        assert sorted(b for b, o in stored if o == "imported") == sorted(self.foreign)
        binding = self.store.sync_binding(self.key)
        if binding is not None:
            assert binding.transport_cursor == self.relay.tip
            assert self.store.sync_status(self.key).reservations.keys() <= {"acked"}
            local_top = self.store.conn.execute(
                "SELECT coalesce(max(seq), 0) FROM messages WHERE origin = 'local'"
            ).fetchone()[0]
            assert binding.push_cursor == local_top


def _entry(seq: int, wire: str, envelope: object) -> object:
    from tests.syncengine.ops.helpers import RelayEntry

    return RelayEntry(seq, wire, envelope)  # type: ignore[arg-type]


class AgeSyncMachine(SyncMachine):
    cipher = "age-v1"


_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}

TestNoneSync = SyncMachine.TestCase
TestNoneSync.settings = settings(max_examples=40, stateful_step_count=25, **_COMMON)  # type: ignore[arg-type]
TestAgeSync = AgeSyncMachine.TestCase
TestAgeSync.settings = settings(max_examples=8, stateful_step_count=20, **_COMMON)  # type: ignore[arg-type]


def test_the_age_machine_really_seals_with_age() -> None:
    machine = AgeSyncMachine()
    try:
        machine.send()
        machine.prepare(1)
        ((wire, (_position, envelope)),) = machine.published.items()
        assert envelope.cipher == "age-v1"  # type: ignore[attr-defined]
        status, _, _ = Classifier(machine.key).evaluate(_entry(1, wire, envelope))  # type: ignore[arg-type]
        assert status == "pending_key"
    finally:
        machine.teardown()


pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
