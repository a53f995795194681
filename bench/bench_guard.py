"""What the whole-attempt guard (syncengine/http/guard.py) costs a pull.

Run: ``.venv/bin/python bench/bench_guard.py [--quick] [--json PATH] [--pairs N]``. Starts a real
relay on 127.0.0.1, stores 5,000 ``none`` messages, then reads the stream
in pages of 1,000 with two httpx clients, interleaved A B A B: A plain, B
with the guard below its transport and every request inside an attempt
(0.2 s read slices, a deadline and a stop check per socket read). Prints
the median wall time per pass of each, the median of the per-pair ratios
B/A, the load average beside them, and the peak memory of the process
tree (bench + relay).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import (  # noqa: E402
    Figure,
    Report,
    TreeMemorySampler,
    add_common_arguments,
    format_load,
    summarize,
)

from syncengine.http.guard import AttemptGuard, guard_client  # noqa: E402
from tests.support.live_relay import LiveRelay, provision, running_relay  # noqa: E402

MESSAGES = 5000


def store_messages(live: LiveRelay, headers: dict[str, str]) -> None:
    """POST ``MESSAGES`` ``none`` envelopes in batches of 1,000."""
    with live.client() as client:
        for _ in range(MESSAGES // 1000):
            batch = {
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
                    for _ in range(1000)
                ]
            }
            response = client.post(
                "/v1/messages",
                content=json.dumps(batch).encode(),
                headers={**headers, "Content-Type": "application/json"},
            )
            response.raise_for_status()


def one_pass(client: httpx.Client, headers: dict[str, str], guard: AttemptGuard | None) -> float:
    started = time.perf_counter()
    after = "0"
    while True:
        params = {"after": after, "limit": "1000"}
        if guard is None:
            response = client.get("/v1/messages", params=params, headers=headers)
        else:
            with guard.attempt(120.0):
                response = client.get("/v1/messages", params=params, headers=headers)
        page = response.json()
        after = page["next_after"]
        if not page["has_more"]:
            return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(parser)
    parser.add_argument("--pairs", type=int, default=None, help="interleaved pairs (21; quick 9)")
    args = parser.parse_args()
    count = args.pairs or (9 if args.quick else 21)
    report = Report("guard", args.quick)
    with TreeMemorySampler(interval=0.2) as sampler, tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "relay.db"
        with running_relay(db, "--no-access-log") as live:
            team = provision(db, Path(tmp))
            headers = live.pair(team["team_id"])
            store_messages(live, headers)
            plain = httpx.Client(base_url=live.base_url, timeout=30)
            guarded = httpx.Client(base_url=live.base_url, timeout=30)
            guard = AttemptGuard()
            assert guard_client(guarded, guard) == 1
            one_pass(plain, headers, None), one_pass(guarded, headers, guard)  # warm up
            print(f"bench_guard: {count} interleaved pairs; {format_load()}")
            pairs = []
            for _ in range(count):
                a = one_pass(plain, headers, None)
                b = one_pass(guarded, headers, guard)
                pairs.append((a, b))
            plain.close()
            guarded.close()
    pair = summarize([b for _, b in pairs], [a for a, _ in pairs])
    print(f"{MESSAGES:,} messages in pages of 1,000, {count} interleaved pairs")
    print(f"plain httpx  {pair.b * 1000:8.1f} ms/pass")
    print(f"guarded      {pair.a * 1000:8.1f} ms/pass")
    report.add(
        Figure(
            "guarded/plain pull pass (median per-pair ratio)",
            pair.ratio,
            "x",
            anchor="plain httpx",
            detail=f"plain {pair.b * 1000:.1f} ms, guarded {pair.a * 1000:.1f} ms median",
        )
    )
    report.add(Figure("plain httpx pull of 5,000 (relay GET)", MESSAGES / pair.b, "msg/s"))
    report.add_memory("process tree (bench + relay)", sampler.peak)
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
