"""Stage-1 sync benchmark: costs that must grow with the page, not history.

Builds two stores side by side — 10,000 and 1,000,000 messages by default —
each with a synced history: every message an acknowledged reservation, a
tenth of them pulled imports with quarantine rows, the transport cursor at
the end. Then, in one run, for each store (median of ``--rounds``):

* ``prepare none``   — prepare_push of 1,000 new messages, cipher none;
* ``reconcile``      — reconcile_push of those 1,000 acks;
* ``prepare age``    — prepare_push of 1,000 new messages, age-v1 to one
  recipient, beside 1,000 bare ``wire.profiles.seal`` calls (target ≤ 1.3×);
* ``apply none``     — apply_pull of a 1,000-message importable page;
* ``apply age``      — apply_pull of 1,000 sealed envelopes (pending_key),
  each looked up in the replay index first;
* ``reprocess page`` — reprocess of 1,000 quarantined (pending_key) rows;
* ``reprocess apply``— feeding those 1,000 back through apply, now importable.

Targets: large/small ≤ 1.5 for every operation; every ``none`` operation
on 1,000 messages ≤ 0.5 s.

Run: ``.venv/bin/python bench/bench_sync.py [--small N] [--large N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from syncengine.ids import new_uuid4, new_uuid7
from syncengine.ops.bindings import BindingKey
from syncengine.ops.records import SyncPrepare, SyncPullCursor, SyncPullMessage, SyncPushAck
from syncengine.store import OutgoingMessage, Store
from wire.age_keys import X25519Identity
from wire.envelope import Envelope
from wire.message import Message
from wire.profiles import Binding, SealParams, seal

AT = "2026-01-01T00:00:00.000000Z"
PAGE = 1000
NONE = SyncPrepare(1, "none", None, (), 1024 * 1024, True)


def _sealed_text() -> str:
    return base64.b64encode(os.urandom(240)).decode()


def build(path: Path, size: int, key: BindingKey) -> Store:
    store = Store(path)
    store.init()
    store.create_team("bench", ["alice", "bob", "zed"])
    binding = store.sync_bind(key)
    conn = store.conn
    blob = seal(Message("history", AT, "alice", "bob"), "none").blob
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        "INSERT INTO messages (seq, id, team_pk, sender_pk, recipient_pk, body, at, origin)"
        " VALUES (?, ?, 1, ?, 2, 'history', ?, ?)",
        (
            (n, f"h-{n}", 3 if n % 10 == 0 else 1, AT, "imported" if n % 10 == 0 else "local")
            for n in range(1, size + 1)
        ),
    )
    conn.executemany(
        "INSERT INTO sync_push (binding_pk, local_position, state, wire_id, envelope_v, cipher,"
        " key_id, blob, server_seq) VALUES (?, ?, 'acked', ?, 1, 'none', NULL, ?, ?)",
        ((binding.pk, n, new_uuid4(), blob, n) for n in range(1, size + 1) if n % 10),
    )
    # Imported rows alternate plaintext and sealed envelopes, so the replay
    # index (migration 9) holds a tenth of the history; a sealed blob here is
    # random text of an age header's length (only its head is indexed).
    conn.executemany(
        "INSERT INTO sync_quarantine (binding_pk, wire_id, server_seq, server_received_at,"
        " envelope_v, cipher, key_id, blob, status, policy_revision, local_security_revision,"
        " reason, local_position) VALUES (?, ?, ?, ?, 1, ?, ?, ?, 'imported', 0, 0,"
        " NULL, ?)",
        (
            (binding.pk, new_uuid4(), n, AT, "none", None, blob, n)
            if n % 20
            else (binding.pk, new_uuid4(), n, AT, "age-v1", "epoch-1", _sealed_text(), n)
            for n in range(10, size + 1, 10)
        ),
    )
    conn.execute(
        "UPDATE sync_bindings SET push_cursor = ?, transport_cursor = ?, revision = 2",
        (size - 1, size),
    )
    conn.execute("COMMIT")
    conn.execute("ANALYZE")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return store


class Bench:
    def __init__(self, store: Store, key: BindingKey, identity: X25519Identity) -> None:
        self.store = store
        self.key = key
        self.age = SyncPrepare(
            1, "age-v1", "epoch-1", (identity.recipient.to_string(),), 1024 * 1024, True
        )
        self.recipients = (identity.recipient.to_string(),)
        self.acks: list[SyncPushAck] = []
        self.relay_seq = store.sync_binding(key).transport_cursor  # type: ignore[union-attr]

    def _send(self) -> None:
        self.store.send_many(
            OutgoingMessage("bench", "alice", "bob", f"new message {i}") for i in range(PAGE)
        )

    def _acks(self, candidates: Any) -> list[SyncPushAck]:
        acks = []
        for c in candidates:
            self.relay_seq += 1
            acks.append(SyncPushAck(c.local_position, c.wire_id, self.relay_seq, "stored"))
        return acks

    def prepare_none(self) -> Callable[[], object]:
        if self.acks:  # acknowledge the previous round outside the timing
            self.store.sync_reconcile_push(self.key, self.acks)
            self.acks = []
        self._send()

        def run() -> object:
            result = self.store.sync_prepare_push(self.key, NONE, PAGE)
            assert len(result.candidates) == PAGE
            self.acks = self._acks(result.candidates)
            return result

        return run

    def reconcile(self) -> Callable[[], object]:
        return lambda: self.store.sync_reconcile_push(self.key, self.acks)

    def prepare_age(self) -> Callable[[], object]:
        if self.acks:  # acknowledge the previous round outside the timing
            self.store.sync_reconcile_push(self.key, self.acks)
            self.acks = []
        self._send()

        def run() -> object:
            result = self.store.sync_prepare_push(self.key, self.age, PAGE)
            assert len(result.candidates) == PAGE
            self.acks = self._acks(result.candidates)
            return result

        return run

    def _page(self, status: str) -> list[SyncPullMessage]:
        page = []
        for i in range(PAGE):
            self.relay_seq += 1
            message = Message(f"pulled {self.relay_seq}", AT, "zed", "alice")
            env = seal(message, "none")
            projection = message if status == "importable" else None
            page.append(
                SyncPullMessage(
                    self.relay_seq, new_uuid4(), AT, env, status, 0, 0, None, projection
                )
            )
            del i
        return page

    def apply_age(self) -> Callable[[], object]:
        """A page of sealed envelopes this machine cannot open yet: each is
        looked up in the replay index before it is quarantined."""
        page = []
        for _ in range(PAGE):
            self.relay_seq += 1
            wire = new_uuid4()
            env = seal(
                Message(f"sealed {self.relay_seq}", AT, "zed", "alice"),
                "age-v1",
                SealParams(Binding(self.key.remote_team_id, wire, 1), "epoch-1", self.recipients),
            )
            page.append(
                SyncPullMessage(self.relay_seq, wire, AT, env, "pending_key", 0, 0, None, None)
            )
        cursor = SyncPullCursor(self.relay_seq)
        return lambda: self.store.sync_apply_pull(self.key, page, cursor)

    def apply_none(self) -> Callable[[], object]:
        page = self._page("importable")
        cursor = SyncPullCursor(self.relay_seq)
        return lambda: self.store.sync_apply_pull(self.key, page, cursor)

    def reprocess_page(self) -> Callable[[], object]:
        page = self._page("pending_key")
        self.store.sync_apply_pull(self.key, page, SyncPullCursor(self.relay_seq))
        self.pending = page

        def run() -> object:
            result = self.store.sync_reprocess(self.key, PAGE)
            assert len(result.candidates) == PAGE
            return result

        return run

    def reprocess_apply(self) -> Callable[[], object]:
        fixed = [
            SyncPullMessage(
                m.server_seq,
                m.wire_id,
                AT,
                m.envelope,
                "importable",
                0,
                0,
                None,
                Message.from_jcs(m.envelope.blob_bytes()),
            )
            for m in self.pending
        ]
        cursor = SyncPullCursor(self.relay_seq)
        return lambda: self.store.sync_apply_pull(self.key, fixed, cursor)


def bare_seals(identity: X25519Identity, team_id: str) -> Callable[[], object]:
    messages = [Message(f"new message {i}", AT, "alice", "bob") for i in range(PAGE)]
    recipients = (identity.recipient.to_string(),)

    def run() -> list[Envelope]:
        return [
            seal(
                m,
                "age-v1",
                SealParams(Binding(team_id, new_uuid4(), 1), "epoch-1", recipients),
            )
            for m in messages
        ]

    return run


def timed(setup: Callable[[], Callable[[], object]], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        run = setup()
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def age_ratio(bench: Bench, identity: X25519Identity, rounds: int) -> tuple[float, float, float]:
    """Median of per-round (age prepare / bare seals), each pair measured
    back to back so machine noise hits both alike."""
    pairs = []
    for _ in range(rounds):
        bare = timed(lambda: bare_seals(identity, bench.key.remote_team_id), 1)
        prepared = timed(bench.prepare_age, 1)
        pairs.append((prepared / bare, prepared, bare))
    pairs.sort()
    return pairs[len(pairs) // 2]


OPERATIONS = [
    "prepare_none",
    "reconcile",
    "prepare_age",
    "apply_none",
    "apply_age",
    "reprocess_page",
    "reprocess_apply",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    identity = X25519Identity.generate()
    results: dict[str, dict[int, float]] = {op: {} for op in OPERATIONS}
    with tempfile.TemporaryDirectory() as tmp:
        benches = {}
        for size in (args.small, args.large):
            key = BindingKey("bench", new_uuid7(), new_uuid7(), 1)
            start = time.perf_counter()
            store = build(Path(tmp) / f"s{size}.db", size, key)
            print(f"built {size:,}-message store in {time.perf_counter() - start:.1f} s")
            benches[size] = Bench(store, key, identity)
        for op in OPERATIONS:
            for size, bench in benches.items():
                # reconcile / reprocess_apply consume the state the op before set up.
                once = op in ("reconcile", "reprocess_apply")
                results[op][size] = timed(getattr(bench, op), 1 if once else args.rounds)
        ratios = {size: age_ratio(bench, identity, args.rounds) for size, bench in benches.items()}
        for bench in benches.values():
            bench.store.close()
    print(f"\n{'operation (1,000 messages)':<28}{args.small:>12,}{args.large:>12,}{'ratio':>8}")
    worst = 0.0
    for op in OPERATIONS:
        small, large = results[op][args.small], results[op][args.large]
        worst = max(worst, large / small)
        print(f"{op:<28}{small * 1000:>10.1f}ms{large * 1000:>10.1f}ms{large / small:>8.2f}")
    for size in (args.small, args.large):
        ratio, prepared, bare = ratios[size]
        print(
            f"age prepare / bare seals @ {size:,}: {prepared * 1000:.1f}ms / {bare * 1000:.1f}ms"
            f" = {ratio:.2f} (target <= 1.3)"
        )
    print(f"worst large/small ratio: {worst:.2f} (target <= 1.5)")
    slow = [op for op in OPERATIONS if op != "prepare_age" and max(results[op].values()) > 0.5]
    print("none ops over 0.5 s: " + (", ".join(slow) if slow else "none"))


if __name__ == "__main__":
    main()
