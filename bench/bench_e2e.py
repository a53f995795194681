"""End-to-end benchmark: store A → relay (loopback process) → store B.

For each profile — ``none``, ``age-v1`` to one recipient, ``age-v1`` to
ten — on fresh stores and a fresh relay team, the profiles interleaved round
by round (none, age1, age10, none, …; medians over ``--rounds``):

* ``send``  — N messages appended on A through the Python store API
  (``Store.send_many`` in chunks, as an agent host would);
* ``push``  — one ``syncengine push --all`` process drains A's backlog;
* ``pull``  — one ``syncengine pull`` process applies everything on B;

with wall time and messages/s per phase, end-to-end messages/s (push +
pull, store to store), and the same measured with push and pull running at
once on fresh stores (``none`` and age-v1 to one recipient). Then, on the
synced stores, interleaved: an idle ``sync`` and ``pull`` process when
nothing is new (and the in-process ``Engine.sync()``), and process start-up
(``python -c pass``, ``syncengine pull --help``, importing everything a real
pull imports).

Peak memory is the whole process tree, sampled every 50 ms (RSS and PSS
sums, and the sum of each process's VmHWM as an upper bound): each engine
process with its worker processes, the relay, and everything together.

Targets (issue #7): ≥ 5,000 msg/s end to end with ``none``, ≥ 1,500 with
age-v1 to one recipient, peak RSS of an engine process tree (engine plus
workers) < 200 MB whatever the backlog, idle cycle < 50 ms, ``syncengine
pull --help`` start-up < 250 ms.

Run: ``.venv/bin/python bench/bench_e2e.py [--quick] [--json PATH]
[--messages N] [--age10-messages M] [--rounds R]``. Default N = 100,000 and
one round; ``--quick`` is N = 3,000 in two rounds. age-v1 to ten recipients
costs ten X25519 wraps per message, so it runs ``--age10-messages`` (default
N/5). Everything listens on 127.0.0.1 only; every loop is bounded by N.
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

from _common import (
    Figure,
    Report,
    TreeMemorySampler,
    add_common_arguments,
    format_load,
    interleaved,
)

from relay.limits import PAIRING_TOKEN_TTL_SECONDS
from relay.provisioning import parse_provisioning_document
from relay.secrets import hash_secret, new_pairing_token, new_uuid7, timestamp, utc_now
from relay.storage.sqlite import SqliteRelayStore
from syncengine.engine import Engine
from syncengine.engine.connect import connect_store
from syncengine.http.credentials import Secret
from syncengine.local_store import Store
from syncengine.store import OutgoingMessage
from syncengine.store.connection import one_row
from wire.age_keys import X25519Identity

TEAM = "bench"
CHUNK = 10_000
BODY = "benchmark message: " + "x" * 80  # ~100 characters, a typical agent note
PROCESS_TIMEOUT = 900.0
TARGET_NONE, TARGET_AGE1 = 5_000.0, 1_500.0
TARGET_RSS_MB, TARGET_IDLE_MS, TARGET_STARTUP_MS = 200.0, 50.0, 250.0
ENGINE_GROUP = "one engine process tree (engine + workers)"


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


#: Samples the bench's whole process tree; set in main().
SAMPLER: TreeMemorySampler | None = None


def run_child(args: Sequence[str], store: Path, group: str | None = None) -> ChildRun:
    """One ``syncengine`` process; its own peak RSS from ``wait4``, and its
    tree's (with its workers) in the sampler under ``group``."""
    env = child_env()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "syncengine", *args, "--store", str(store)],
            stdout=out,
            stderr=err,
            env=env,
        )
        if SAMPLER is not None and group is not None:
            SAMPLER.watch(group, process.pid)
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
    identities = [X25519Identity.generate() for _ in range(profile.recipients)]
    sealed = profile.cipher == "age-v1"
    manifest = root / "recipients"
    if sealed:
        manifest.write_text("".join(i.recipient.to_string() + "\n" for i in identities))
    stores = []
    for name, token in zip(("a", "b"), tokens, strict=True):
        directory = root / name
        directory.mkdir()
        key = directory / "identity.key"
        if sealed:
            # Created private from the start: the secret never sits in a readable file.
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(identities[0 if name == "a" else -1].to_secret_string() + "\n")
        store = directory / "store.db"
        connect_store(
            store,
            endpoint=endpoint,
            token=token,
            team=TEAM,
            mode="e2ee-required" if sealed else "plaintext-allowed",
            key_id="epoch-1" if sealed else None,
            recipients_file=str(manifest) if sealed else None,
            identity_file=str(key) if sealed else None,
        )
        stores.append(store)
    return stores[0], stores[1]


def count_messages(store: Path) -> int:
    with Store(store) as s:
        return int(one_row(s.conn.execute("SELECT count(*) FROM messages"))[0])


def run_profile(root: Path, endpoint: str, db: Path, relay_pid: int, p: Profile) -> dict[str, Any]:
    a, b = connect_pair(root, endpoint, db, p)
    send_s = send_backlog(a, p.messages)
    push = run_child(["push", "--all", "--json"], a, ENGINE_GROUP)
    pushed = json.loads(push.stdout)["push"]
    pull = run_child(["pull", "--json"], b, ENGINE_GROUP)
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
    if SAMPLER is not None:
        SAMPLER.watch("concurrent push + pulls (engines + workers)", push.pid)
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


def idle_cycle(a: Path, rounds: int) -> tuple[float, float, float]:
    """(in-process Engine.sync() median, ``syncengine sync`` process median,
    ``syncengine pull`` process median), all with nothing new; the two
    processes interleaved."""
    with Engine(a) as engine:
        engine.sync()
        in_process = median_seconds(engine.sync, 21)
    samples = interleaved(
        {
            "sync": lambda: run_child(["sync"], a, ENGINE_GROUP).seconds,
            "pull": lambda: run_child(["pull"], a, ENGINE_GROUP).seconds,
        },
        rounds,
    )
    return in_process, statistics.median(samples["sync"]), statistics.median(samples["pull"])


def startup(rounds: int) -> dict[str, float]:
    """Median wall time of each process start, the three interleaved."""
    # An installed syncengine runs from compiled bytecode. This workplace sets
    # PYTHONDONTWRITEBYTECODE, which would make every start recompile every
    # module from source; measure as installed: bytecode written once, used after.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def process(*args: str) -> Any:
        def once() -> float:
            started = time.perf_counter()
            subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL, env=env)
            return time.perf_counter() - started

        return once

    sides = {
        "python -c pass": process("-c", "pass"),
        "syncengine pull --help": process("-m", "syncengine", "pull", "--help"),
        "imports of a real pull": process(
            "-c",
            "import syncengine.cli.engine_commands, syncengine.engine, syncengine.engine.cycle",
        ),
    }
    samples = interleaved(sides, rounds)  # the warm-up round writes the bytecode
    return {name: statistics.median(values) for name, values in samples.items()}


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def main() -> int:
    global SAMPLER
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument("--messages", type=int, default=None, help="N (100,000; quick 3,000)")
    parser.add_argument("--age10-messages", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=None, help="rounds (1; quick 2)")
    parser.add_argument(
        "--profiles",
        default="none,age1,age10",
        help="comma-separated subset of none,age1,age10 (default: all three)",
    )
    args = parser.parse_args()
    n = args.messages or (3_000 if args.quick else 100_000)
    rounds = args.rounds or (2 if args.quick else 1)
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
    report = Report("e2e", args.quick)
    print(
        f"bench_e2e: {n:,} messages (age-v1 to 10 recipients: {n10:,}"
        f"{'' if n10 == n else ', reduced to keep the run short'}), loopback relay, "
        f"{rounds} round(s) with the profiles interleaved; {format_load()}"
    )
    runs: dict[str, list[dict[str, Any]]] = {p.name: [] for p in profiles}
    with (
        TreeMemorySampler(interval=0.05) as sampler,
        tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp,
        relay_process(Path(tmp)) as (endpoint, db, relay_pid),
    ):
        SAMPLER = sampler
        sampler.watch("relay", relay_pid)
        for round_index in range(rounds):
            for index, profile in enumerate(profiles):
                root = Path(tmp) / f"r{round_index}p{index}"
                root.mkdir()
                row = run_profile(root, endpoint, db, relay_pid, profile)
                if profile.recipients <= 1:
                    concurrent = root / "concurrent"
                    concurrent.mkdir()
                    seconds = run_concurrent(concurrent, endpoint, db, profile)
                    row["concurrent"] = profile.messages / seconds
                runs[profile.name].append(row)
                print(f"  done: {profile.name}, round {round_index + 1}; {format_load()}")
        first = runs[profiles[0].name][0]["stores"][0]
        idle_in, idle_cli, idle_pull = idle_cycle(first, 3 if args.quick else 5)
        starts = startup(5 if args.quick else 7)
        SAMPLER = None

    def med(rows: list[dict[str, Any]], key: str) -> float:
        return float(statistics.median(r[key] for r in rows))

    print(
        f"\n{'profile':<12}{'N':>9}  {'send msg/s':>11}{'push msg/s':>11}{'pull msg/s':>11}"
        f"{'e2e msg/s':>11}{'conc. msg/s':>12}  {'push s':>7}{'pull s':>7}"
    )
    targets = {"none": TARGET_NONE, "age-v1 ×1": TARGET_AGE1}
    for name, rows in runs.items():
        m = rows[0]["messages"]
        for r in rows:
            r["send_rate"] = m / r["send_s"]
            r["push_rate"] = m / r["push_s"]
            r["pull_rate"] = m / r["pull_s"]
            r["e2e"] = m / (r["push_s"] + r["pull_s"])
            r["pipeline"] = min(r["push_rate"], r["pull_rate"])
        conc = med(rows, "concurrent") if "concurrent" in rows[0] else None
        print(
            f"{name:<12}{m:>9,}  {med(rows, 'send_rate'):>11,.0f}{med(rows, 'push_rate'):>11,.0f}"
            f"{med(rows, 'pull_rate'):>11,.0f}{med(rows, 'e2e'):>11,.0f}"
            f"{(format(conc, ',.0f') if conc is not None else '-'):>12}"
            f"  {med(rows, 'push_s'):>7.2f}{med(rows, 'pull_s'):>7.2f}"
        )
        target = targets.get(name)
        for kind, label in (("e2e", "serial e2e"), ("pipeline", "pipeline")):
            report.add(
                Figure(
                    f"{name} {label} ({m:,} messages)",
                    med(rows, kind),
                    "msg/s",
                    target=None if target is None else f">= {target:.0f}",
                    source=None if target is None else "#7",
                ),
                show=False,
            )
        if conc is not None:
            report.add(Figure(f"{name} concurrent push+pull", conc, "msg/s"), show=False)
    print("(medians over the rounds. e2e = N / (push + pull wall time), one after the other:")
    print(" store A to imported on store B. conc. = N / the wall time from starting push")
    print(" --all on fresh store A until fresh store B, pulling at the same time, holds all")
    print(" N: both clients and the relay on this machine's CPUs. pipeline = min(push,")
    print(" pull) msg/s, what two machines with their own CPUs would sustain.)")
    print(
        f"\nidle sync, nothing new: Engine.sync() {idle_in * 1000:.1f} ms in-process; "
        f"'syncengine sync' process {idle_cli * 1000:.0f} ms; "
        f"'syncengine pull' process {idle_pull * 1000:.0f} ms"
    )
    print("start-up: " + "; ".join(f"{k} {v * 1000:.0f} ms" for k, v in starts.items()))
    print()
    engine = sampler.group(ENGINE_GROUP)
    report.add(
        Figure(
            "peak RSS of one engine process tree (engine + workers)",
            engine.rss_mb,
            "MiB",
            target=f"< {TARGET_RSS_MB:.0f}",
            source="#7",
            detail=f"PSS {engine.pss_mb:.1f} MiB; VmHWM sum {engine.hwm_sum_mb:.1f} MiB",
        )
    )
    report.add(Figure("peak PSS of one engine process tree", engine.pss_mb, "MiB"))
    report.add(
        Figure(
            "idle Engine.sync() in-process",
            idle_in * 1000,
            "ms",
            f"< {TARGET_IDLE_MS:.0f}",
            source="#7",
        )
    )
    report.add(Figure("idle 'syncengine sync' process", idle_cli * 1000, "ms"))
    report.add(Figure("idle 'syncengine pull' process", idle_pull * 1000, "ms"))
    report.add(Figure("python -c pass", starts["python -c pass"] * 1000, "ms"))
    report.add(
        Figure(
            "'syncengine pull --help' start-up",
            starts["syncengine pull --help"] * 1000,
            "ms",
            f"< {TARGET_STARTUP_MS:.0f}",
            source="#7",
        )
    )
    report.add(
        Figure(
            "imports of a real pull",
            starts["imports of a real pull"] * 1000,
            "ms",
            f"< {TARGET_STARTUP_MS:.0f}",
            source="#7",
        )
    )
    for name, peak in (
        (ENGINE_GROUP + ", the largest seen", engine),
        (
            "concurrent push + pulls (engines + workers)",
            sampler.group("concurrent push + pulls (engines + workers)"),
        ),
        ("relay", sampler.group("relay")),
        ("whole tree (bench + relay + engines + workers)", sampler.peak),
    ):
        report.add_memory(name, peak)
    print(f"(wait4 of the largest single child process: {largest_child():.1f} MiB)")
    return report.finish(args.json)


def largest_child() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


if __name__ == "__main__":
    sys.exit(main())
