"""Several processes sending, reading and consuming on one store at once lose
nothing and never deliver a message twice (specs/store.md §2)."""

from __future__ import annotations

import multiprocessing
import time
from pathlib import Path

from syncengine.local_store import Store
from syncengine.store import StoreBusy

SENDERS = 3
PER_SENDER = 25


def _send(path: str, index: int) -> list[str]:
    sent: list[str] = []
    with Store(path, busy_timeout_ms=20_000) as store:
        for n in range(PER_SENDER):
            sent.append(store.send("dev", f"s{index}", "reader", f"{index}-{n}").id)
    return sent


def _consume(path: str, stop_after: int) -> list[str]:
    """A watcher loop: read cursor, watch after it, consume what it saw."""
    seen: list[str] = []
    # A deadline, not an idle-poll count: under load the senders may start
    # seconds after the consumer, and giving up early would be a false alarm.
    deadline = time.monotonic() + 80
    with Store(path, busy_timeout_ms=20_000) as store:
        while len(seen) < stop_after and time.monotonic() < deadline:
            cursor = store.read_cursor_get("dev", "reader")
            result = store.watch_after(cursor, ["dev:reader"])
            fresh = [m.id for m in result.messages]
            try:
                store.read_cursor_consume("dev", "reader", result.cursor, fresh)
            except StoreBusy:
                continue
            seen += fresh
            if not fresh:
                time.sleep(0.005)
    return seen


def test_concurrent_senders_and_a_consumer_lose_nothing_and_deliver_once(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    with Store(path) as store:
        store.init()
        store.create_team("dev", ["reader", *(f"s{i}" for i in range(SENDERS))])
    total = SENDERS * PER_SENDER
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(SENDERS + 1) as pool:
        consumer = pool.apply_async(_consume, (str(path), total))
        senders = [pool.apply_async(_send, (str(path), i)) for i in range(SENDERS)]
        sent = [mid for job in senders for mid in job.get(timeout=90)]
        seen = consumer.get(timeout=90)
    assert len(sent) == total == len(set(sent))
    assert sorted(seen) == sorted(sent), "a message was lost or delivered twice"
    with Store(path) as store:
        assert store.list_unread("dev", "reader") == []
        assert len(store.history("dev")) == total
        assert store.read_cursor_get("dev", "reader") == str(total)
