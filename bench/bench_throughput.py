"""Client throughput beside the relay's own rate (issue #17, deliverable 2).

Does one ``syncengine`` process keep up with the relay it talks to? Each
round, on fresh stores connected to a fresh relay team (``none`` profile,
N messages of ~100 characters sent on A untimed), four sides run one after
the other — the same four in every round, so the machine's background load
falls on all of them alike (A B A B …):

* ``push``      — one ``syncengine push --all`` process drains A's backlog
  (start-up included: it is what a scheduled run pays);
* ``pull``      — one ``syncengine pull`` process applies the whole backlog on B;
* ``relay GET`` — the relay's own GET rate: the very pages B just pulled
  (``limit=1000`` from cursor 0, with B's credential), read to the end and
  JSON-decoded, nothing validated or stored;
* ``idle pull`` — one more ``pull`` with nothing new: the fixed cost of a
  process (start-up, store open, one capabilities round trip), so the
  steady rate ``N / (pull - idle pull)`` can be quoted beside the whole one;
* ``relay POST`` — the relay's own POST rate: as many ``none`` envelopes of
  the same size (fresh wire IDs, into A's team once B has pulled), encoded
  beforehand in batches of 1,000 and posted by one plain HTTP client on one
  connection, nothing parsed but the status.

Each side is reported as its median; each comparison as the median of the
per-round ratios client rate / relay rate. Targets (#17): pull ≥ 0.5 of the
relay's GET rate, ``push --all`` ≥ 0.7 of its POST rate. The load average is
printed before and after; peak memory is the whole process tree (engine
processes with their workers, the relay, this process: RSS and PSS sums).

Run: ``.venv/bin/python bench/bench_throughput.py [--quick] [--json PATH]
[--messages N] [--rounds R] [--pull-only]``. Default N = 50,000 in 3 rounds;
``--quick`` is N = 10,000 in 2 rounds. A warm-up round (N/10) runs first and
is dropped. ``--pull-only`` (for work on the pull path) still pushes A's
backlog each round but does not report it, and skips the relay POST side:
the three pull sides keep their order, A B A B, in every round. Everything
listens on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import bench_e2e as e2e
import httpx
from _common import (
    Figure,
    Report,
    TreeMemorySampler,
    add_common_arguments,
    format_load,
    summarize,
)

from wire.message import Message
from wire.profiles import seal

PAGE = 1000
ENGINE = "one engine process tree (engine + workers)"
TARGET_PULL, TARGET_PUSH = 0.5, 0.7


def _headers(credential_file: Path) -> dict[str, str]:
    """Bearer headers of a device's credential file (the bench's own temporary
    device: the relay side is measured as that same device)."""
    data = json.loads(credential_file.read_text())
    return {
        "Agmsg-Protocol-Version": "1",
        "Agmsg-Team-ID": data["team_id"],
        "Authorization": f"Bearer {data['credential']}",
    }


def _credential_file(store: Path) -> Path:
    files = sorted((store.parent / "credentials").glob("*.json"))
    if len(files) != 1:
        raise RuntimeError(f"expected one credential file beside {store}, found {files}")
    return files[0]


def _post_bodies(count: int) -> list[bytes]:
    """Request bodies of ``count`` fresh ``none`` envelopes, 1,000 a batch,
    the same text size as the backlog's (so the relay does the same work)."""
    bodies = []
    for first in range(0, count, PAGE):
        items = []
        for n in range(first, min(first + PAGE, count)):
            env = seal(
                Message(f"{e2e.BODY} {n}", "2026-01-01T00:00:00.000000Z", "alice", "bob"), "none"
            )
            items.append(
                {
                    "id": str(uuid.uuid4()),
                    "envelope": {"v": 1, "cipher": "none", "key_id": None, "blob": env.blob},
                }
            )
        bodies.append(json.dumps({"messages": items}, separators=(",", ":")).encode())
    return bodies


def relay_post(endpoint: str, headers: dict[str, str], bodies: list[bytes]) -> float:
    """Seconds to POST every body, one after another on one connection."""
    with httpx.Client(base_url=endpoint, timeout=60) as client:
        started = time.perf_counter()
        for body in bodies:
            response = client.post(
                "/v1/messages",
                content=body,
                headers={**headers, "Content-Type": "application/json"},
            )
            response.raise_for_status()
        return time.perf_counter() - started


def relay_get(endpoint: str, headers: dict[str, str], expected: int) -> float:
    """Seconds to GET every page of the stream from cursor 0 (JSON-decoded)."""
    received = 0
    after = "0"
    with httpx.Client(base_url=endpoint, timeout=60) as client:
        started = time.perf_counter()
        while True:
            response = client.get(
                "/v1/messages", params={"after": after, "limit": PAGE}, headers=headers
            )
            response.raise_for_status()
            page = json.loads(response.content)
            received += len(page["messages"])
            if not page["has_more"]:
                break
            after = page["next_after"]
        seconds = time.perf_counter() - started
    if received != expected:
        raise RuntimeError(f"relay GET returned {received} messages, expected {expected}")
    return seconds


def one_round(
    root: Path, endpoint: str, db: Path, count: int, pull_only: bool = False
) -> dict[str, float]:
    """The five sides of one round on fresh stores and a fresh team (the
    three pull sides with ``pull_only``: push then only fills the relay)."""
    profile = e2e.Profile("none", "none", 0, count)
    a, b = e2e.connect_pair(root, endpoint, db, profile)
    e2e.send_backlog(a, count)
    bodies = [] if pull_only else _post_bodies(count)
    push = e2e.run_child(["push", "--all", "--json"], a, ENGINE)
    pushed = json.loads(push.stdout)["push"]
    if pushed["stored"] != count:
        raise RuntimeError(f"push stored {pushed['stored']} of {count}")
    # Posted to A's team after A's push and B's pages are fixed by cursor
    # ranges below, so B pulls exactly N: the POST side runs after the pull.
    pull = e2e.run_child(["pull", "--json"], b, ENGINE)
    pulled = json.loads(pull.stdout)["pull"]
    if pulled["outcomes"] != {"imported": count}:
        raise RuntimeError(f"pull: {pulled}")
    get_s = relay_get(endpoint, _headers(_credential_file(b)), count)
    idle = e2e.run_child(["pull"], b, ENGINE)
    post_s = (
        float("nan") if pull_only else relay_post(endpoint, _headers(_credential_file(a)), bodies)
    )
    return {
        "push": push.seconds,
        "post": post_s,
        "pull": pull.seconds,
        "get": get_s,
        "idle": idle.seconds,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument("--messages", type=int, default=None, help="N (50,000; quick 10,000)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds (3; quick 2)")
    parser.add_argument(
        "--pull-only", action="store_true", help="report only pull, relay GET and idle pull"
    )
    args = parser.parse_args()
    count = args.messages or (10_000 if args.quick else 50_000)
    rounds = args.rounds or (2 if args.quick else 3)
    report = Report("throughput", args.quick)
    print(
        f"bench_throughput: {count:,} none messages per round, {rounds} round(s) + a warm-up, "
        f"sides in the same order every round; {format_load()}"
    )
    samples: list[dict[str, float]] = []
    with (
        TreeMemorySampler(interval=0.1) as sampler,
        tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp,
        e2e.relay_process(Path(tmp)) as (endpoint, db, relay_pid),
    ):
        e2e.SAMPLER = sampler
        sampler.watch("relay", relay_pid)
        for index in range(rounds + 1):
            root = Path(tmp) / f"round{index}"
            root.mkdir()
            size = count if index else max(PAGE, count // 10)
            row = one_round(root, endpoint, db, size, args.pull_only)
            if index:
                samples.append(row)
                pushed = (
                    ""
                    if args.pull_only
                    else f"push {row['push']:.2f} s, relay POST {row['post']:.2f} s, "
                )
                print(
                    f"  round {index}: {pushed}"
                    f"pull {row['pull']:.2f} s, relay GET {row['get']:.2f} s, "
                    f"idle pull {row['idle']:.2f} s, pull/GET rate {row['get'] / row['pull']:.3f}; "
                    f"{format_load()}"
                )
        e2e.SAMPLER = None

    def side(name: str) -> list[float]:
        return [row[name] for row in samples]

    # Rates are count / seconds, so client/relay rate = relay s / client s.
    pull = summarize(side("get"), side("pull"))
    steady = summarize(side("get"), [r["pull"] - r["idle"] for r in samples])
    sides = (
        ("push --all (one process)", "push"),
        ("relay POST (bare HTTP client)", "post"),
        ("pull (one process)", "pull"),
        ("relay GET (bare HTTP client)", "get"),
        ("idle pull (nothing new)", "idle"),
    )
    print(f"\n{'side':<34}{'median s':>10}{'msg/s':>10}")
    for label, key in sides[2:] if args.pull_only else sides:
        seconds = statistics.median(side(key))
        rate = f"{count / seconds:,.0f}" if key != "idle" else "-"
        print(f"{label:<34}{seconds:>10.3f}{rate:>10}")
    print()
    report.add(
        Figure(
            f"pull of {count:,} / relay GET rate",
            pull.ratio,
            "x",
            target=f">= {TARGET_PULL}",
            anchor="bare HTTP GET of the same pages",
            source="#17",
            detail=f"pull {count / pull.b:,.0f} msg/s, relay GET {count / pull.a:,.0f} msg/s"
            f" (per-round ratios {pull.ratio_min:.3f}..{pull.ratio_max:.3f})",
        )
    )
    if not args.pull_only:
        push = summarize(side("post"), side("push"))
        report.add(
            Figure(
                f"push --all of {count:,} / relay POST rate",
                push.ratio,
                "x",
                target=f">= {TARGET_PUSH}",
                anchor="bare HTTP POST of as many envelopes",
                source="#17",
                detail=f"push {count / push.b:,.0f} msg/s, relay POST {count / push.a:,.0f} msg/s"
                f" (per-round ratios {push.ratio_min:.3f}..{push.ratio_max:.3f})",
            )
        )
    report.add(
        Figure(
            f"pull of {count:,} less an idle pull / relay GET rate",
            steady.ratio,
            "x",
            anchor="bare HTTP GET of the same pages",
            detail="the process's fixed cost (start-up, store open, capabilities) taken out",
        )
    )
    report.add(Figure("idle pull process", statistics.median(side("idle")) * 1000, "ms"))
    report.add_memory(ENGINE + ", the largest seen", sampler.group(ENGINE))
    report.add_memory("relay", sampler.group("relay"))
    report.add_memory("whole tree (bench + relay + engines + workers)", sampler.peak)
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
