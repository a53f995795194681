"""What the whole-attempt guard (syncengine/http/guard.py) costs a pull.

Run: ``.venv/bin/python bench/bench_guard.py [--pairs N]``. Starts a real
relay on 127.0.0.1, stores 5,000 ``none`` messages, then reads the stream
in pages of 1,000 with two httpx clients, interleaved A B A B: A plain, B
with the guard below its transport and every request inside an attempt
(0.2 s read slices, a deadline and a stop check per socket read). Prints
the median wall time per pass of each, the median of the per-pair ratios
B/A, and the load average beside them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_relay import post_throughput  # noqa: E402
from syncengine.http.guard import AttemptGuard, guard_client  # noqa: E402
from tests.relay.live import provision, running_relay  # noqa: E402


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "relay.db"
        with running_relay(db, "--no-access-log") as live:
            team = provision(db, Path(tmp))
            headers = live.pair(team["team_id"])
            import bench.bench_relay as relay_bench

            relay_bench.POST_BATCHES = 5
            post_throughput(live, headers)
            plain = httpx.Client(base_url=live.base_url, timeout=30)
            guarded = httpx.Client(base_url=live.base_url, timeout=30)
            guard = AttemptGuard()
            assert guard_client(guarded, guard) == 1
            one_pass(plain, headers, None), one_pass(guarded, headers, guard)  # warm up
            pairs = []
            for _ in range(args.pairs):
                a = one_pass(plain, headers, None)
                b = one_pass(guarded, headers, guard)
                pairs.append((a, b))
            plain.close()
            guarded.close()
    a_med = statistics.median(a for a, _ in pairs)
    b_med = statistics.median(b for _, b in pairs)
    ratio = statistics.median(b / a for a, b in pairs)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"5,000 messages in pages of 1,000, {args.pairs} interleaved pairs")
    print(f"plain httpx  {a_med * 1000:8.1f} ms/pass")
    print(f"guarded      {b_med * 1000:8.1f} ms/pass")
    print(f"guarded/plain median per-pair ratio {ratio:.3f}")


if __name__ == "__main__":
    main()
