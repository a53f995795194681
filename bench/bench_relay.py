"""Relay throughput and latency against one real relay process on 127.0.0.1.

Run: ``.venv/bin/python bench/bench_relay.py``. Starts ``syncengine relay
serve`` on an ephemeral loopback port with a fresh database, then measures in
one run:

* POST throughput: 1,000-envelope ``none`` batches (messages stored per second);
* GET throughput: pages of ``limit=1000`` over the stored stream (messages served per second);
* single-message POST latency p50/p99 with 1 and with 4 concurrent clients.

Every loop is bounded in both count and wall time. Figures are printed as
throughputs and ratios to the targets (10,000 msg/s stored, 20,000 msg/s
served) measured in this run, never compared across machines.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.relay.live import LiveRelay, provision, running_relay  # noqa: E402

BATCH = 1000
POST_BATCHES = 30  # count bound
GET_PASSES = 3
LATENCY_REQUESTS = 300  # per client count
TIME_BOUND_S = 60.0  # wall bound per phase
STORE_TARGET = 10_000
SERVE_TARGET = 20_000


def envelope_batch(count: int) -> dict[str, Any]:
    import base64

    return {
        "messages": [
            {
                "id": str(uuid.uuid4()),
                "envelope": {
                    "v": 1,
                    "cipher": "none",
                    "key_id": None,
                    "blob": base64.b64encode(os.urandom(150)).decode(),
                },
            }
            for _ in range(count)
        ]
    }


def post_throughput(live: LiveRelay, headers: dict[str, str]) -> tuple[float, int]:
    bodies = [json.dumps(envelope_batch(BATCH)).encode() for _ in range(POST_BATCHES)]
    stored = 0
    with live.client() as client:
        started = time.perf_counter()
        for body in bodies:
            response = client.post(
                "/v1/messages",
                content=body,
                headers={**headers, "Content-Type": "application/json"},
            )
            response.raise_for_status()
            stored += BATCH
            if time.perf_counter() - started > TIME_BOUND_S:
                break
        elapsed = time.perf_counter() - started
    return stored / elapsed, stored


def get_throughput(live: LiveRelay, headers: dict[str, str], total: int) -> float:
    served = 0
    with live.client() as client:
        started = time.perf_counter()
        for _ in range(GET_PASSES):
            after = "0"
            while True:
                response = client.get(
                    "/v1/messages", params={"after": after, "limit": "1000"}, headers=headers
                )
                response.raise_for_status()
                page = response.json()
                served += len(page["messages"])
                after = page["next_after"]
                if not page["has_more"] or time.perf_counter() - started > TIME_BOUND_S:
                    break
        elapsed = time.perf_counter() - started
    assert served >= total
    return served / elapsed


def single_post_latency(
    live: LiveRelay, headers: list[dict[str, str]], clients: int
) -> tuple[float, float]:
    samples: list[float] = []
    lock = threading.Lock()
    deadline = time.perf_counter() + TIME_BOUND_S

    def worker(index: int) -> None:
        mine: list[float] = []
        # TCP_NODELAY: httpx writes headers and body separately; without it
        # Nagle plus delayed ACK adds ~40 ms that is the client's, not the relay's.
        transport = httpx.HTTPTransport(
            socket_options=[(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        )
        with httpx.Client(base_url=live.base_url, timeout=30, transport=transport) as client:
            for _ in range(LATENCY_REQUESTS // clients):
                body = json.dumps(envelope_batch(1)).encode()
                started = time.perf_counter()
                response = client.post(
                    "/v1/messages",
                    content=body,
                    headers={**headers[index], "Content-Type": "application/json"},
                )
                mine.append(time.perf_counter() - started)
                response.raise_for_status()
                if time.perf_counter() > deadline:
                    break
        with lock:
            samples.extend(mine)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    samples.sort()
    p50 = statistics.median(samples)
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    return p50 * 1000, p99 * 1000


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        db = tmp_path / "relay.db"
        with running_relay(db, "--no-access-log") as live:
            team = provision(db, tmp_path)
            headers = live.pair(team["team_id"])
            store_rate, stored = post_throughput(live, headers)
            serve_rate = get_throughput(live, headers, stored)
            latency_team = provision(db, tmp_path)
            latency_headers = [live.pair(latency_team["team_id"]) for _ in range(4)]
            p50_1, p99_1 = single_post_latency(live, latency_headers, 1)
            p50_4, p99_4 = single_post_latency(live, latency_headers, 4)
    print(
        f"POST 1000-envelope batches : {store_rate:10,.0f} msg/s stored "
        f"({store_rate / STORE_TARGET:.2f}x target {STORE_TARGET:,})"
    )
    print(
        f"GET limit=1000 pages       : {serve_rate:10,.0f} msg/s served "
        f"({serve_rate / SERVE_TARGET:.2f}x target {SERVE_TARGET:,})"
    )
    print(f"single POST, 1 client      : p50 {p50_1:6.2f} ms  p99 {p99_1:6.2f} ms")
    print(f"single POST, 4 clients     : p50 {p50_4:6.2f} ms  p99 {p99_4:6.2f} ms")
    print(f"served/stored ratio        : {serve_rate / store_rate:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
