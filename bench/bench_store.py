"""Local store benchmark: costs that must grow with the page, not the log.

Builds two stores side by side (10,000 and 1,000,000 messages, the large one
in one bulk ``executemany`` transaction) and reports, in one run:

* ``send`` — one transaction per message, vs a bare APSW single-row
  insert + commit into the same table with the same pragmas (target ≤ 1.5×);
* ``send_many`` of 1,000 — vs a bare batched ``executemany`` (target ≤ 2×);
* ``list_unread`` with 100 unread, ``history --limit 50`` (team and agent),
  and ``watch_after`` with nothing new — each as the 1M / 10k ratio
  (target ≤ 1.5×), the two sizes interleaved call by call.

Every comparison is interleaved (A B A B …) and reported as the medians and
the median of the per-pair ratios, with the load average and the process
tree's peak memory beside.

Run: ``.venv/bin/python bench/bench_store.py [--quick] [--json PATH] [--large N]``.
``--quick`` builds 200,000 messages as the large store and repeats less.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import (
    Figure,
    Pairing,
    Report,
    TreeMemorySampler,
    add_common_arguments,
    format_load,
    summarize,
)

from syncengine.ids import new_uuid7
from syncengine.local_store import Store
from syncengine.store import OutgoingMessage
from syncengine.store.connection import all_rows, one_row

AGENTS = [f"a{i}" for i in range(10)]
AT = "2026-01-01T00:00:00.000000Z"


def build(path: Path, size: int) -> Store:
    """``size`` messages among a0..a9; every 10th goes to ``reader`` and is
    read (exact event + frontier), and 100 more to ``reader`` stay unread."""
    store = Store(path)
    store.init()
    store.create_team("bench", [*AGENTS, "reader"])
    conn = store.conn
    members: dict[str, int] = dict(all_rows(conn.execute("SELECT name, member_pk FROM members")))
    team = one_row(conn.execute("SELECT team_pk FROM teams"))[0]
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
        "INSERT INTO message_reads (id, team_pk, msg_seq, reader_pk, at, log_position)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        ((f"r-{seq}", team, seq, reader, AT, seq) for seq in range(10, size + 1, 10)),
    )
    conn.execute(
        "INSERT INTO read_frontiers (member_pk, local_position) VALUES (?, ?)",
        (reader, size - size % 10),
    )
    conn.execute("COMMIT")
    store.send_many(OutgoingMessage("bench", "a1", "reader", f"unread {i}") for i in range(100))
    return store


def bare_rows(conn: Any, count: int) -> list[tuple[Any, ...]]:
    team = conn.execute("SELECT team_pk FROM teams").fetchone()[0]
    pk = conn.execute("SELECT member_pk FROM members WHERE name = 'a1'").fetchone()[0]
    return [(new_uuid7(), team, pk, pk, "bare body", AT, "local") for _ in range(count)]


INSERT = (
    "INSERT INTO messages (id, team_pk, sender_pk, recipient_pk, body, at, origin)"
    " VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def bench_writes(store: Store, singles: int, batch: int) -> dict[str, Pairing]:
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
        "send": summarize(singles_api, singles_bare),
        "send_many": summarize(batches_api, batches_bare),
    }


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_reads(small: Store, large: Store, repeat: int) -> dict[str, Pairing]:
    """Each read on the large store over the same read on the small one,
    the two sizes interleaved call by call (after one warm-up of each)."""

    def reads(store: Store) -> dict[str, Callable[[], object]]:
        tip = store.watch_tip(["bench:reader"])
        assert len(store.list_unread("bench", "reader")) == 100
        return {
            "list_unread(100 unread)": lambda: store.list_unread("bench", "reader"),
            "history --limit 50": lambda: store.history("bench", None, 50),
            "history a3 --limit 50": lambda: store.history("bench", "a3", 50),
            "watch_after (nothing new)": lambda: store.watch_after(
                tip, ["bench:reader", "bench:a3"]
            ),
        }

    a, b = reads(small), reads(large)
    out = {}
    for name in a:
        a[name](), b[name]()
        smalls, larges = [], []
        for _ in range(repeat):
            smalls.append(timed(a[name]))
            larges.append(timed(b[name]))
        out[name] = summarize(larges, smalls)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser)
    parser.add_argument("--large", type=int, default=None, help="1,000,000; quick 200,000")
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--singles", type=int, default=None, help="100; quick 50")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=None, help="200; quick 50")
    args = parser.parse_args()
    large_size = args.large or (200_000 if args.quick else 1_000_000)
    singles = args.singles or (50 if args.quick else 100)
    repeat = args.repeat or (50 if args.quick else 200)
    report = Report("store", args.quick)
    with (
        TreeMemorySampler(interval=0.5) as sampler,
        tempfile.TemporaryDirectory(dir=Path(__file__).resolve().parent.parent) as tmp,
    ):
        stores = {}
        for label, size in (("small", args.small), ("large", large_size)):
            started = time.perf_counter()
            stores[label] = build(Path(tmp) / f"{label}.db", size)
            print(f"built {label} store: {size:,} messages in {time.perf_counter() - started:.1f}s")
        print(f"interleaved; {format_load()}")
        reads = bench_reads(stores["small"], stores["large"], repeat)
        writes = bench_writes(stores["small"], singles, args.batch)
        for store in stores.values():
            store.close()
    send, many = writes["send"], writes["send_many"]
    print(f"\nwrites ({args.small:,} store; medians, {send.pairs} and {many.pairs} pairs)")
    print(f"  bare insert+commit     {send.b * 1e3:9.3f} ms")
    print(f"  send (one txn each)    {send.a * 1e3:9.3f} ms   per-pair ratio {send.ratio:.2f}x")
    print(f"  bare batch of {args.batch}    {many.b * 1e3:9.3f} ms")
    print(
        f"  send_many of {args.batch}     {many.a * 1e3:9.3f} ms   per-pair ratio {many.ratio:.2f}x"
    )
    print(f"  send_many throughput   {args.batch / many.a:9.0f} msg/s; send {1 / send.a:.0f} msg/s")
    report.add(
        Figure("send / bare insert+commit", send.ratio, "x", "<= 1.5", "bare APSW insert", "#4")
    )
    report.add(
        Figure(
            f"send_many of {args.batch} / bare executemany",
            many.ratio,
            "x",
            "<= 2",
            "bare APSW executemany",
            "#4",
        )
    )
    print(f"\nreads (median per call)      {args.small:>10,} {large_size:>12,}   per-pair ratio")
    for name, pair in reads.items():
        print(f"  {name:26} {pair.b * 1e6:8.1f}us {pair.a * 1e6:10.1f}us   {pair.ratio:.2f}x")
        report.add(
            Figure(
                f"{name} @ {large_size:,} / @ {args.small:,}",
                pair.ratio,
                "x",
                "<= 1.5",
                f"{args.small:,} store",
                "#4",
            ),
            show=False,
        )
    report.add_memory("process tree (one process)", sampler.peak)
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
