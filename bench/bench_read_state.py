"""Read-state benchmark: prepare and apply cost the page, not the history.

Builds two stores side by side — 10,000 and 1,000,000 imported messages by
default — for one team of 100 roster members, each message addressed to one
of them in turn, every member's local and remote frontier 8,000 sequences
behind the tip. Each round (outside the timing) every member reads its next
five unread messages, one of them out of order, so prepare has a frontier
and an exact read to report for everyone; then, timed:

* ``prepare`` — read-prepare of the 100-member context;
* ``apply``   — read-apply of a page moving all 100 frontiers five messages
  on, with one exact read each.

The two sizes are interleaved round by round (A B A B …); the report gives
the median of each side, the median of the per-round ratios large/small, the
load average beside them, and the peak memory of the process tree (RSS and
PSS sums, sampled). Target: every ratio ≤ 1.5.

Then, against a relay process on 127.0.0.1 with a team of 1,000 members and
one connected machine, interleaved: the message phase of an idle cycle
(push and pull with nothing new) beside one read-state round (members
snapshot beside the pull's capabilities — fresh capabilities only when their
floors disagree —, roster adoption, prepare, POST, apply). Target: the round
≤ 2× the idle message phase. The process tree here includes the relay.

Run: ``.venv/bin/python bench/bench_read_state.py [--quick] [--json PATH]
[--small N] [--large N] [--rounds R]``. ``--quick`` builds 200,000 messages
as the large store instead of 1,000,000 and runs 5 rounds.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from _common import (
    Figure,
    Report,
    TreeMemorySampler,
    add_common_arguments,
    format_load,
    summarize,
)

from syncengine.ids import new_uuid4, new_uuid7
from syncengine.local_store import Store
from syncengine.ops.bindings import BindingKey
from syncengine.ops.read_records import (
    SyncReadContext,
    SyncReadExact,
    SyncReadFrontier,
    SyncReadSnapshot,
)
from syncengine.store.connection import write_transaction
from syncengine.store.teams import adopt_roster, team_pk
from wire.message import Message
from wire.profiles import seal

AT = "2026-01-01T00:00:00.000000Z"
MEMBERS = 100
BEHIND = 8000
PER_ROUND = 5


class World:
    """One store and the relay-side facts the benchmark feeds it."""

    def __init__(self, path: Path, size: int) -> None:
        self.size = size
        self.key = BindingKey("bench", new_uuid7(), new_uuid7(), 1)
        self.members = [(new_uuid7(), f"agent{i:03d}") for i in range(MEMBERS)]
        self.store = Store(path)
        self._build()
        # The relay's view: each member's frontier, advanced by apply rounds.
        self.remote = {mid: size - BEHIND for mid, _ in self.members}

    def _build(self) -> None:
        store = self.store
        store.init()
        store.create_team("bench", ["sender"])
        binding = store.sync_bind(self.key)
        with write_transaction(store.conn, store.path) as conn:
            adopt_roster(conn, team_pk(conn, "bench"), self.members, AT)
        conn = store.conn
        pks = {
            name: pk for pk, name in conn.execute("SELECT member_pk, name FROM members").fetchall()
        }
        sender = pks["sender"]
        recipients = [pks[name] for _, name in self.members]
        blob = seal(Message("history", AT, "sender", "agent000"), "none").blob
        size = self.size
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO messages (seq, id, team_pk, sender_pk, recipient_pk, body, at, origin)"
            " VALUES (?, ?, 1, ?, ?, 'history', ?, 'imported')",
            ((n, f"h-{n}", sender, recipients[n % MEMBERS], AT) for n in range(1, size + 1)),
        )
        conn.executemany(
            "INSERT INTO sync_quarantine (binding_pk, wire_id, server_seq, server_received_at,"
            " envelope_v, cipher, key_id, blob, status, policy_revision, local_security_revision,"
            " reason, local_position) VALUES (?, ?, ?, ?, 1, 'none', NULL, ?, 'imported', 0, 0,"
            " NULL, ?)",
            ((binding.pk, new_uuid4(), n, AT, blob, n) for n in range(1, size + 1)),
        )
        conn.executemany(
            "INSERT INTO read_frontiers (member_pk, local_position) VALUES (?, ?)",
            ((pk, size - BEHIND) for pk in recipients),
        )
        conn.executemany(
            "INSERT INTO read_remote_frontiers (binding_pk, member_id, server_seq)"
            " VALUES (?, ?, ?)",
            ((binding.pk, mid, size - BEHIND) for mid, _ in self.members),
        )
        conn.execute("UPDATE sync_bindings SET transport_cursor = ?, revision = 2", (size,))
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def context(self) -> SyncReadContext:
        return SyncReadContext(0, self.size, tuple(self.members), tuple(n for _, n in self.members))

    def read_some(self) -> None:
        """Every member reads its next unread messages, the last one skipping
        a message (an exact read above a hole)."""
        for _, name in self.members:
            unread = self.store.list_unread("bench", name, PER_ROUND + 1)
            chosen = [m.id for m in unread[: PER_ROUND - 1]] + [unread[PER_ROUND].id]
            self.store.mark_read_batch("bench", name, chosen)

    def page(self) -> list[SyncReadFrontier | SyncReadExact]:
        """The relay moves every frontier PER_ROUND of that member's messages on."""
        items: list[SyncReadFrontier | SyncReadExact] = []
        for index, (mid, _) in enumerate(self.members):
            self.remote[mid] += PER_ROUND * MEMBERS
            items.append(SyncReadFrontier(mid, min(self.remote[mid], self.size)))
            del index
        return items

    def prepare(self) -> float:
        self.read_some()
        start = time.perf_counter()
        result = self.store.sync_prepare_read_state(self.key, self.context())
        elapsed = time.perf_counter() - start
        assert len(result.frontiers) == MEMBERS, len(result.frontiers)
        return elapsed

    def apply(self) -> float:
        items = self.page()
        start = time.perf_counter()
        self.store.sync_apply_read_state(self.key, SyncReadSnapshot(0, self.size), items)
        return time.perf_counter() - start


def relay_round(rounds: int, report: Report, sampler: TreeMemorySampler) -> None:
    """The 1,000-member read-state round beside the idle message phase."""
    import json
    from datetime import timedelta

    from bench_e2e import relay_process

    from relay.limits import PAIRING_TOKEN_TTL_SECONDS
    from relay.provisioning import parse_provisioning_document
    from relay.secrets import hash_secret, new_pairing_token, timestamp, utc_now
    from relay.storage.sqlite import SqliteRelayStore
    from syncengine.engine import Engine
    from syncengine.engine.connect import connect_store
    from syncengine.engine.cycle import pull_all, push_once
    from syncengine.http.credentials import Secret

    with tempfile.TemporaryDirectory() as tmp, relay_process(Path(tmp)) as (endpoint, db, pid):
        sampler.watch("relay", pid)
        team_id = new_uuid7()
        document = {
            "team_id": team_id,
            "team_name": "bench",
            "members": [{"member_id": new_uuid7(), "name": f"agent{i:04d}"} for i in range(1000)],
        }
        relay = SqliteRelayStore(db)
        try:
            now = utc_now()
            relay.apply_provisioning(
                parse_provisioning_document(json.dumps(document).encode()), timestamp(now)
            )
            token = new_pairing_token()
            relay.issue_pairing_token(
                team_id,
                hash_secret(token),
                None,
                timestamp(now),
                timestamp(now + timedelta(seconds=PAIRING_TOKEN_TTL_SECONDS)),
            )
        finally:
            relay.close()
        store = Path(tmp) / "a.db"
        connect_store(
            store, endpoint=endpoint, token=Secret(token), team="bench", mode="plaintext-allowed"
        )
        with Engine(store) as engine:
            engine.sync()  # warm: roster adopted, frontiers known
            pairs = []
            for _ in range(rounds):
                start = time.perf_counter()
                context = engine._context()
                push_once(context, 100)
                pulled = pull_all(context, 1000)
                idle = time.perf_counter() - start
                start = time.perf_counter()
                # As in a real cycle: the phase may reuse the pull's capability snapshot.
                outcome = engine._after_pull(pulled)
                read = time.perf_counter() - start
                assert outcome.skipped is None
                pairs.append((idle, read))
        pair = summarize([b for _, b in pairs], [a for a, _ in pairs])
        print(
            f"1,000-member read-state round: {pair.a * 1000:.1f} ms"
            f"   idle message phase: {pair.b * 1000:.1f} ms   ratio median {pair.ratio:.2f}"
            f" (min {pair.ratio_min:.2f}, max {pair.ratio_max:.2f}); {format_load()}"
        )
        report.add(
            Figure(
                "1,000-member read-state round / idle message phase",
                pair.ratio,
                "x",
                target="<= 2",
                anchor="idle message phase",
                source="#13",
                detail=f"round {pair.a * 1000:.1f} ms, idle {pair.b * 1000:.1f} ms median",
            ),
            show=False,
        )
        report.add_memory("relay", sampler.group("relay"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=None, help="1,000,000; quick 200,000")
    parser.add_argument("--rounds", type=int, default=None, help="7; quick 5")
    parser.add_argument("--round-only", action="store_true", help="only the relay round")
    args = parser.parse_args()
    large_size = args.large or (200_000 if args.quick else 1_000_000)
    rounds = args.rounds or (5 if args.quick else 7)
    report = Report("read_state", args.quick)
    with TreeMemorySampler(interval=0.5) as sampler:
        if not args.round_only:
            stores(args.small, large_size, rounds, report)
        relay_round(rounds, report, sampler)
    report.add_memory("whole process tree (bench + relay)", sampler.peak)
    return report.finish(args.json)


def stores(small_size: int, large_size: int, rounds: int, report: Report) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        worlds = {}
        for size in (small_size, large_size):
            start = time.perf_counter()
            worlds[size] = World(Path(tmp) / f"s{size}.db", size)
            print(f"built {size:,}-message store in {time.perf_counter() - start:.1f} s")
        small, large = worlds[small_size], worlds[large_size]
        print(f"sizes interleaved, {rounds} rounds; {format_load()}")
        for op in ("prepare", "apply"):
            pairs = []
            for _ in range(rounds):
                a = getattr(small, op)()
                b = getattr(large, op)()
                pairs.append((a, b))
            pair = summarize([b for _, b in pairs], [a for a, _ in pairs])
            print(
                f"{op:8s} {small_size:>9,}: {pair.b * 1000:7.1f} ms   "
                f"{large_size:>9,}: {pair.a * 1000:7.1f} ms   "
                f"ratio median {pair.ratio:.2f} "
                f"(min {pair.ratio_min:.2f}, max {pair.ratio_max:.2f})"
            )
            report.add(
                Figure(
                    f"read-state {op} @ {large_size:,} / @ {small_size:,}",
                    pair.ratio,
                    "x",
                    target="<= 1.5",
                    anchor=f"{small_size:,} store",
                    source="#13",
                ),
                show=False,
            )
        for world in worlds.values():
            world.store.close()


if __name__ == "__main__":
    sys.exit(main())
