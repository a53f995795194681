"""Local store benchmark: costs that must grow with the page, not the log.

Builds two stores side by side (10,000 and 1,000,000 messages, the large one
in one bulk ``executemany`` transaction) and reports, in one run:

* ``send`` — one transaction per message, vs a bare APSW single-row
  insert + commit into the same table with the same pragmas (target ≤ 1.5×);
* ``send_many`` of 1,000 — vs a bare batched ``executemany`` (target ≤ 2×);
* ``list_unread`` with 100 unread, ``history --limit 50`` (team and agent),
  and ``watch_after`` with nothing new — each as the 1M / 10k ratio
  (target ≤ 1.5×).

Run: ``.venv/bin/python bench/bench_store.py [--large N]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from syncengine.ids import new_uuid7
from syncengine.store import OutgoingMessage, Store

AGENTS = [f"a{i}" for i in range(10)]
AT = "2026-01-01T00:00:00.000000Z"


def build(path: Path, size: int) -> Store:
    """``size`` messages among a0..a9; every 10th goes to ``reader`` and is
    read (exact event + frontier), and 100 more to ``reader`` stay unread."""
    store = Store(path)
    store.init()
    store.create_team("bench", [*AGENTS, "reader"])
    conn = store.conn
    members = dict(conn.execute("SELECT name, member_pk FROM members").fetchall())
    team = conn.execute("SELECT team_pk FROM teams").fetchone()[0]
    reader = members["reader"]

    def rows() -> Any:
        for seq in range(1, size + 1):
            sender = members[AGENTS[seq % 10]]
            recipient = reader if seq % 10 == 0 else members[AGENTS[(seq * 7 + 3) % 10]]
            yield (seq, f"legacy-{seq}", team, sender, recipient, f"body {seq}", AT, "local")

    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(
        "INSERT INTO messages (seq, id, team_pk, sender_pk, recipient_pk, body, at, origin)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows(),
    )
    conn.executemany(
        "INSERT INTO message_reads (id, msg_seq, reader_pk, at, log_position)"
        " VALUES (?, ?, ?, ?, ?)",
        ((f"r-{seq}", seq, reader, AT, seq) for seq in range(10, size + 1, 10)),
    )
    conn.execute(
        "INSERT INTO read_frontiers (member_pk, local_position) VALUES (?, ?)",
        (reader, size - size % 10),
    )
    conn.execute("COMMIT")
    store.send_many(OutgoingMessage("bench", "a1", "reader", f"unread {i}") for i in range(100))
    return store


def per_op(fn: Callable[[], object], repeat: int) -> float:
    """Median seconds per call over ``repeat`` calls (after one warm-up)."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def bare_rows(conn: Any, count: int) -> list[tuple[Any, ...]]:
    team = conn.execute("SELECT team_pk FROM teams").fetchone()[0]
    pk = conn.execute("SELECT member_pk FROM members WHERE name = 'a1'").fetchone()[0]
    return [(new_uuid7(), team, pk, pk, "bare body", AT, "local") for _ in range(count)]


INSERT = (
    "INSERT INTO messages (id, team_pk, sender_pk, recipient_pk, body, at, origin)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def bench_writes(store: Store, singles: int, batch: int) -> dict[str, float]:
    conn = store.conn
    rows = iter(bare_rows(conn, singles + 2))

    def bare_single() -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(INSERT, next(rows))
        conn.execute("COMMIT")

    def api_single() -> None:
        store.send("bench", "a1", "a2", "api body")

    batches = iter([bare_rows(conn, batch) for _ in range(9)])

    def bare_batch() -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(INSERT, next(batches))
        conn.execute("COMMIT")

    outgoing = [OutgoingMessage("bench", "a1", "a2", "api body")] * batch

    def api_batch() -> None:
        store.send_many(outgoing)

    # Alternate the two sides call by call so disk and timer conditions
    # (fsync completes on kernel ticks here) affect both alike.
    bare_single()
    api_single()
    singles_bare: list[float] = []
    singles_api: list[float] = []
    for _ in range(singles):
        singles_bare.append(timed(bare_single))
        singles_api.append(timed(api_single))
    batches_bare: list[float] = []
    batches_api: list[float] = []
    for _ in range(9):
        batches_bare.append(timed(bare_batch))
        batches_api.append(timed(api_batch))
    return {
        "bare_single": statistics.median(singles_bare),
        "send": statistics.median(singles_api),
        "bare_batch": statistics.median(batches_bare),
        "send_many": statistics.median(batches_api),
    }


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_reads(store: Store, repeat: int) -> dict[str, float]:
    tip = store.watch_tip(["bench:reader"])
    assert len(store.list_unread("bench", "reader")) == 100
    return {
        "list_unread(100 unread)": per_op(lambda: store.list_unread("bench", "reader"), repeat),
        "history --limit 50": per_op(lambda: store.history("bench", None, 50), repeat),
        "history a3 --limit 50": per_op(lambda: store.history("bench", "a3", 50), repeat),
        "watch_after (nothing new)": per_op(
            lambda: store.watch_after(tip, ["bench:reader", "bench:a3"]), repeat
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--singles", type=int, default=100)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=Path(__file__).resolve().parent.parent) as tmp:
        stores = {}
        for label, size in (("small", args.small), ("large", args.large)):
            started = time.perf_counter()
            stores[label] = build(Path(tmp) / f"{label}.db", size)
            print(f"built {label} store: {size:,} messages in {time.perf_counter() - started:.1f}s")
        reads = {label: bench_reads(store, args.repeat) for label, store in stores.items()}
        writes = bench_writes(stores["small"], args.singles, args.batch)
        print("\nwrites (10k store; median per operation)")
        print(f"  bare insert+commit     {writes['bare_single'] * 1e3:9.3f} ms")
        print(
            f"  send (one txn each)    {writes['send'] * 1e3:9.3f} ms   "
            f"ratio {writes['send'] / writes['bare_single']:.2f}x (target <= 1.5x)"
        )
        print(f"  bare batch of {args.batch}    {writes['bare_batch'] * 1e3:9.3f} ms")
        print(
            f"  send_many of {args.batch}     {writes['send_many'] * 1e3:9.3f} ms   "
            f"ratio {writes['send_many'] / writes['bare_batch']:.2f}x (target <= 2x)"
        )
        print(
            f"  send_many throughput   {args.batch / writes['send_many']:9.0f} msg/s; "
            f"send {1 / writes['send']:.0f} msg/s"
        )
        print(f"\nreads (median per call)      {args.small:>10,} {args.large:>12,}   ratio")
        for name in reads["small"]:
            small, large = reads["small"][name], reads["large"][name]
            print(
                f"  {name:26} {small * 1e6:8.1f}us {large * 1e6:10.1f}us   "
                f"{large / small:.2f}x (target <= 1.5x)"
            )
        for store in stores.values():
            store.close()


if __name__ == "__main__":
    main()
