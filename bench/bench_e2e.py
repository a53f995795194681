"""End-to-end benchmark: store A → relay (loopback process) → store B.

For each profile side by side in one run — ``none``, ``age-v1`` to one
recipient, ``age-v1`` to ten — on fresh stores and a fresh relay team:

* ``send``  — N messages appended on A through the Python store API
  (``Store.send_many`` in chunks, as an agent host would);
* ``push``  — one ``syncengine push --all`` process drains A's backlog;
* ``pull``  — one ``syncengine pull`` process applies everything on B;

with wall time and messages/s per phase, end-to-end messages/s (push +
pull, store to store), the same measured with push and pull running at
once on fresh stores (``none`` and age-v1 to one recipient), and the peak
RSS of each process (``os.wait4`` of
that child; the relay's ``VmHWM`` from /proc). Then, on the synced stores:
an idle ``sync`` when nothing is new (in-process ``Engine.sync()`` and as a
``syncengine sync`` process), and process start-up (``python -c pass``,
``syncengine pull --help``, importing everything a real pull imports).

Targets (issue #7): ≥ 5,000 msg/s end to end with ``none``, ≥ 1,500 with
age-v1 to one recipient, peak RSS < 200 MB whatever the backlog, idle cycle
< 50 ms, ``syncengine pull`` start-up < 250 ms.

Run: ``.venv/bin/python bench/bench_e2e.py [--messages N] [--age10-messages M]``.
Default N = 100,000. age-v1 to ten recipients costs ten X25519 wraps per
message, so it runs ``--age10-messages`` (default N/5) to keep the whole run
near ten minutes on a loaded 2-core machine; the output says so.
Everything listens on 127.0.0.1 only; every loop is bounded by N.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from relay.limits import PAIRING_TOKEN_TTL_SECONDS
from relay.provisioning import parse_provisioning_document
from relay.secrets import hash_secret, new_pairing_token, new_uuid7, timestamp, utc_now
from relay.storage.sqlite import SqliteRelayStore
from syncengine.engine import Engine
from syncengine.engine.connect import connect_store
from syncengine.http.credentials import Secret
from syncengine.store import OutgoingMessage, Store
from wire.age_keys import X25519Identity

TEAM = "bench"
CHUNK = 10_000
BODY = "benchmark message: " + "x" * 80  # ~100 characters, a typical agent note
PROCESS_TIMEOUT = 900.0
TARGET_NONE, TARGET_AGE1 = 5_000.0, 1_500.0
TARGET_RSS_MB, TARGET_IDLE_MS, TARGET_STARTUP_MS = 200.0, 50.0, 250.0


@dataclass(frozen=True)
class Profile:
    name: str
    cipher: str
    recipients: int
    messages: int


@dataclass
class ChildRun:
    seconds: float
    max_rss_mb: float
    stdout: str


def child_env() -> dict[str, str]:
    """A ``syncengine`` child's environment: as installed, compiled bytecode
    is used (see startup() for why), and no crash point is armed."""
    drop = {"SYNCENGINE_CRASH_AT", "PYTHONDONTWRITEBYTECODE"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def run_child(args: Sequence[str], store: Path) -> ChildRun:
    """One ``syncengine`` process; its own peak RSS from ``wait4``."""
    env = child_env()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "syncengine", *args, "--store", str(store)],
            stdout=out,
            stderr=err,
            env=env,
        )
        deadline = started + PROCESS_TIMEOUT
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                process.kill()
                raise RuntimeError(f"syncengine {args[0]} did not finish in time")
            time.sleep(0.005)
        seconds = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            raise RuntimeError(f"syncengine {args[0]} exited {process.returncode}: {err.read()}")
        return ChildRun(seconds, usage.ru_maxrss / 1024, out.read())


def median_seconds(action: Any, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


@contextmanager
def relay_process(root: Path) -> Iterator[tuple[str, Path, int]]:
    db = root / "relay.db"
    SqliteRelayStore.initialize(db)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "syncengine",
            "relay",
            "serve",
            "--db",
            str(db),
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--no-access-log",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = json.loads(process.stdout.readline())["port"]
        yield f"http://127.0.0.1:{port}", db, process.pid
    finally:
        process.terminate()
        process.wait(timeout=30)


def relay_peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def provision(db: Path) -> tuple[str, list[Secret]]:
    team_id = new_uuid7()
    document = {
        "team_id": team_id,
        "team_name": TEAM,
        "members": [{"member_id": new_uuid7(), "name": n} for n in ("alice", "bob")],
    }
    relay = SqliteRelayStore(db)
    try:
        now = utc_now()
        relay.apply_provisioning(
            parse_provisioning_document(json.dumps(document).encode()), timestamp(now)
        )
        tokens = []
        for _ in range(2):
            token = new_pairing_token()
            relay.issue_pairing_token(
                team_id,
                hash_secret(token),
                None,
                timestamp(now),
                timestamp(now + timedelta(seconds=PAIRING_TOKEN_TTL_SECONDS)),
            )
            tokens.append(Secret(token))
    finally:
        relay.close()
    return team_id, tokens


def connect_pair(root: Path, endpoint: str, db: Path, profile: Profile) -> tuple[Path, Path]:
    _, tokens = provision(db)
    epoch: dict[str, str] = {}
    identities = [X25519Identity.generate() for _ in range(profile.recipients)]
    if profile.cipher == "age-v1":
        manifest = root / "recipients"
        manifest.write_text("".join(i.recipient.to_string() + "\n" for i in identities))
        epoch = {"key_id": "epoch-1", "recipients_file": str(manifest)}
    stores = []
    for name, token in zip(("a", "b"), tokens, strict=True):
        directory = root / name
        directory.mkdir()
        keys = dict(epoch)
        if epoch:
            key = directory / "identity.key"
            key.write_text(identities[0 if name == "a" else -1].to_secret_string() + "\n")
            key.chmod(0o600)
            keys["identity_file"] = str(key)
        mode = "e2ee-required" if epoch else "plaintext-allowed"
        store = directory / "store.db"
        connect_store(store, endpoint=endpoint, token=token, team=TEAM, mode=mode, **keys)
        stores.append(store)
    return stores[0], stores[1]


def count_messages(store: Path) -> int:
    with Store(store) as s:
        return int(s.conn.execute("SELECT count(*) FROM messages").fetchone()[0])


def run_profile(root: Path, endpoint: str, db: Path, relay_pid: int, p: Profile) -> dict[str, Any]:
    a, b = connect_pair(root, endpoint, db, p)
    send_s = send_backlog(a, p.messages)
    push = run_child(["push", "--all", "--json"], a)
    pushed = json.loads(push.stdout)["push"]
    pull = run_child(["pull", "--json"], b)
    pulled = json.loads(pull.stdout)["pull"]
    if pushed["stored"] != p.messages or pulled["outcomes"] != {"imported": p.messages}:
        raise RuntimeError(f"{p.name}: pushed {pushed}, pulled {pulled}")
    if count_messages(b) != p.messages:
        raise RuntimeError(f"{p.name}: store B holds {count_messages(b)} messages")
    return {
        "profile": p.name,
        "messages": p.messages,
        "send_s": send_s,
        "push_s": push.seconds,
        "pull_s": pull.seconds,
        "push_rss_mb": push.max_rss_mb,
        "pull_rss_mb": pull.max_rss_mb,
        "relay_peak_mb": relay_peak_mb(relay_pid),
        "stores": (a, b),
    }


def send_backlog(store_path: Path, count: int) -> float:
    started = time.perf_counter()
    with Store(store_path) as store:
        for first in range(0, count, CHUNK):
            store.send_many(
                OutgoingMessage(TEAM, "alice", "bob", f"{BODY} {n}")
                for n in range(first, min(first + CHUNK, count))
            )
    return time.perf_counter() - started


def run_concurrent(root: Path, endpoint: str, db: Path, p: Profile) -> float:
    """Seconds from starting ``push --all`` on A until B holds the whole
    backlog, while B pulls at the same time (``pull`` again as soon as the
    previous one ends, as a busy ``run`` loop would): the two-machine case,
    measured rather than inferred. Both clients and the relay share this
    machine's CPUs, which two real machines would not."""
    a, b = connect_pair(root, endpoint, db, p)
    send_backlog(a, p.messages)
    env = child_env()
    started = time.perf_counter()
    push = subprocess.Popen(
        [sys.executable, "-m", "syncengine", "push", "--all", "--store", str(a)],
        stdout=subprocess.DEVNULL,
        env=env,
    )
    try:
        deadline = started + PROCESS_TIMEOUT
        while count_messages(b) < p.messages:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"{p.name}: concurrent pull did not finish in time")
            run_child(["pull"], b)
        elapsed = time.perf_counter() - started
    finally:
        if push.wait(timeout=PROCESS_TIMEOUT) != 0:
            raise RuntimeError(f"{p.name}: concurrent push exited {push.returncode}")
    if count_messages(b) != p.messages:
        raise RuntimeError(f"{p.name}: store B holds {count_messages(b)} messages")
    return elapsed


def idle_cycle(a: Path) -> tuple[float, float, float]:
    """(in-process Engine.sync() median, ``syncengine sync`` process median,
    ``syncengine pull`` process median), all with nothing new."""
    with Engine(a) as engine:
        engine.sync()
        in_process = median_seconds(engine.sync, 21)
    cli = statistics.median(run_child(["sync"], a).seconds for _ in range(5))
    pull = statistics.median(run_child(["pull"], a).seconds for _ in range(5))
    return in_process, cli, pull


def startup() -> dict[str, float]:
    # An installed syncengine runs from compiled bytecode. This workplace sets
    # PYTHONDONTWRITEBYTECODE, which would make every start recompile every
    # module from source; measure as installed: bytecode written once, used after.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def process(*args: str) -> float:
        def once() -> None:
            subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL, env=env)

        once()  # writes the bytecode cache
        return median_seconds(once, 7)

    return {
        "python -c pass": process("-c", "pass"),
        "syncengine pull --help": process("-m", "syncengine", "pull", "--help"),
        "imports of a real pull": process(
            "-c", "import syncengine.cli.engine, syncengine.engine, syncengine.engine.cycle"
        ),
    }


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--age10-messages", type=int, default=None)
    parser.add_argument(
        "--profiles",
        default="none,age1,age10",
        help="comma-separated subset of none,age1,age10 (default: all three)",
    )
    args = parser.parse_args()
    n = args.messages
    n10 = args.age10_messages if args.age10_messages is not None else max(1, n // 5)
    every = {
        "none": Profile("none", "none", 0, n),
        "age1": Profile("age-v1 ×1", "age-v1", 1, n),
        "age10": Profile("age-v1 ×10", "age-v1", 10, n10),
    }
    chosen = args.profiles.split(",")
    unknown = [name for name in chosen if name not in every]
    if unknown or not chosen:
        parser.error(f"unknown profile(s) {unknown}; choose from {', '.join(every)}")
    profiles = [every[name] for name in chosen]
    print(
        f"bench_e2e: {n:,} messages (age-v1 to 10 recipients: {n10:,}"
        f"{'' if n10 == n else ', reduced to keep the run near 10 minutes'}), loopback relay"
    )
    rows = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp,
        relay_process(Path(tmp)) as (endpoint, db, relay_pid),
    ):
        for index, profile in enumerate(profiles):
            root = Path(tmp) / f"p{index}"
            root.mkdir()
            rows.append(run_profile(root, endpoint, db, relay_pid, profile))
            if profile.recipients <= 1:
                concurrent = root / "concurrent"
                concurrent.mkdir()
                seconds = run_concurrent(concurrent, endpoint, db, profile)
                rows[-1]["concurrent"] = profile.messages / seconds
            print(f"  done: {profile.name}", flush=True)
        idle_in, idle_cli, idle_pull = idle_cycle(rows[0]["stores"][0])
        starts = startup()

    print(
        f"\n{'profile':<12}{'N':>9}  {'send msg/s':>11}{'push msg/s':>11}{'pull msg/s':>11}"
        f"{'e2e msg/s':>11}{'conc. msg/s':>12}  {'push s':>7}{'pull s':>7}"
        f"  {'push MB':>8}{'pull MB':>8}{'relay MB':>9}"
    )
    for r in rows:
        m = r["messages"]
        e2e = m / (r["push_s"] + r["pull_s"])
        r["e2e"] = e2e
        r["pipeline"] = min(m / r["push_s"], m / r["pull_s"])
        print(
            f"{r['profile']:<12}{m:>9,}  {m / r['send_s']:>11,.0f}{m / r['push_s']:>11,.0f}"
            f"{m / r['pull_s']:>11,.0f}{e2e:>11,.0f}"
            f"{(format(r['concurrent'], ',.0f') if 'concurrent' in r else '-'):>12}"
            f"  {r['push_s']:>7.1f}{r['pull_s']:>7.1f}"
            f"  {r['push_rss_mb']:>8.1f}{r['pull_rss_mb']:>8.1f}{r['relay_peak_mb']:>9.1f}"
        )
    print("(e2e = N / (push + pull wall time), one after the other: store A to imported on")
    print(" store B. conc. = N / the wall time from starting push --all on fresh store A")
    print(" until fresh store B, pulling at the same time, holds all N: the two-machine")
    print(" case, with both clients and the relay on this machine's CPUs. pipeline =")
    print(" min(push, pull) msg/s, what two machines with their own CPUs would sustain.")
    print(" The relay figure is its VmHWM since start, cumulative over the profiles.)")
    print(
        f"\nidle sync, nothing new: Engine.sync() {idle_in * 1000:.1f} ms in-process; "
        f"'syncengine sync' process {idle_cli * 1000:.0f} ms; "
        f"'syncengine pull' process {idle_pull * 1000:.0f} ms"
    )
    print("start-up: " + "; ".join(f"{k} {v * 1000:.0f} ms" for k, v in starts.items()))

    peak = max(max(r["push_rss_mb"], r["pull_rss_mb"], r["relay_peak_mb"]) for r in rows)
    targets = {"none": TARGET_NONE, "age-v1 ×1": TARGET_AGE1}
    checks = []
    for r in rows:
        target = targets.get(r["profile"])
        if target is None:
            continue
        # conc. is reported, not judged: on one machine the two clients and
        # the relay share two CPUs, which no two-machine setup does.
        for kind in ("pipeline", "e2e"):
            label = "serial e2e" if kind == "e2e" else kind
            checks.append(
                (
                    f"{r['profile']} {label} {r[kind]:,.0f} ≥ {target:,.0f} msg/s",
                    r[kind] >= target,
                )
            )
    checks += [
        (f"peak RSS < {TARGET_RSS_MB:.0f} MB (max {peak:.1f})", peak < TARGET_RSS_MB),
        (f"idle Engine.sync() < {TARGET_IDLE_MS:.0f} ms", idle_in * 1000 < TARGET_IDLE_MS),
        (
            f"'syncengine pull --help' start-up < {TARGET_STARTUP_MS:.0f} ms",
            starts["syncengine pull --help"] * 1000 < TARGET_STARTUP_MS,
        ),
        (
            f"imports of a real pull < {TARGET_STARTUP_MS:.0f} ms",
            starts["imports of a real pull"] * 1000 < TARGET_STARTUP_MS,
        ),
    ]
    print()
    for label, ok in checks:
        print(f"  [{verdict(ok)}] {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
