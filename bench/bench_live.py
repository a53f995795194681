"""Live delivery (issue #32): send → visible on another machine, ``wait``, idle cost, relay fan-out.

Run: ``.venv/bin/python bench/bench_live.py [--quick] [--json PATH]``.
Everything is real processes on 127.0.0.1: one ``syncengine relay serve``
(SQLite), each machine a store of its own with its own ``syncengine run``,
sends and waits through the ``syncengine`` command a host would call.

1. **send → visible on the other machine.** Machines A and B both run
   ``syncengine run --interval 60`` (live: one wait held on the relay, local
   sends seen within 50 ms). At random moments the bench starts ``syncengine
   send crew alice bob -`` on A (body on stdin) and watches B's store
   (``PRAGMA data_version`` on a connection of its own, every 5 ms, then a
   look-up of the body): the time from just before the send process starts
   until the message is in B's store, the same minus the send process's own
   duration (what a host sees after its ``send`` returned), and from the
   send's commit on A (A's store watched the same way). For ``none`` and
   age-v1, the two interleaved (none, age, none, …). Beside it, in the same
   run, two more machine pairs run ``run --no-live`` at the default 5 s
   interval: their samples are sent between the live ones and delivered in
   the background (one outstanding per profile), so they cost no extra time.
2. **``wait`` on the receiving machine.** ``syncengine wait --team crew
   --agent bob --timeout 30 --mark-read`` on B (``run`` running there) and
   on a third machine C of the same team without ``run`` (``wait`` pulls
   itself through the relay's live wait), interleaved; each wait is started
   with nothing unread, and the send starts once the wait process went quiet
   (no CPU tick for 1.5 s: its live wait is held). A third side, "fresh",
   sends on C 0.3 s after the wait went quiet: a message arriving just after
   an agent started ``wait``, while its puller still sleeps the 1 s spacing
   after a first live wait that answered at once (it asks with
   ``read_after`` 0, and a team whose read state moved is past that). The
   time from the send's start to ``wait`` printing, and the same minus the
   send's duration.
3. **idle ``run`` CPU.** One ``run`` (live, default interval) and one ``run
   --no-live`` (polling every 5 s) on teams of their own with no traffic,
   measured at the same time as 1 and 2 over 60 s (``--quick``) or 600 s:
   CPU seconds of each process tree from ``/proc`` (utime + stime of every
   process, with its reaped children), extrapolated to 10 minutes.
4. **one relay holding 1,000 waits.** A fresh relay process; 250 paired
   credentials (the default cap is 4 waits per credential) hold 1,000 waits
   on one team from one asyncio process (1,000 connections, 20 per httpx
   client: one httpx pool of 1,000 spends seconds of CPU per 1,000 answers,
   which would time the bench, not the relay). Relay RSS
   before, holding and after; the relay's CPU over 10 s while holding them;
   one ``POST /v1/messages`` and the time until the last of the 1,000
   answers. The relay runs with ``--live-max-wait 55`` so that no wait times
   out while the bench holds them (the default 25 s would, in full mode).
5. **wake across two PostgreSQL relay processes** (only with PostgreSQL's
   binaries; else a printed note): a throw-away server (``initdb`` in a
   temporary directory, private socket directory, 127.0.0.1, free port),
   ``syncengine relay init`` and two ``relay serve`` on one database; a wait
   held on B, a POST on A: POST → B's answer over 20 rounds (50 in full).

Every figure is reported with its target (issue #32) and the load average at
the time it was measured; latencies as p50 and p95 (the targets are "at
load < 2", so a figure measured above that is flagged). Peak memory is the
whole process tree (relay, every ``run`` and its workers, the bench).
Bounded: every wait has a timeout and every phase a time budget; quick mode
takes about three minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import pwd
import random
import resource
import shutil
import signal
import socket
import sqlite3
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from _common import (
    Figure,
    Report,
    TreeMemorySampler,
    add_common_arguments,
    format_load,
    load_average,
    process_tree,
)

from relay.limits import PAIRING_TOKEN_TTL_SECONDS
from relay.provisioning import parse_provisioning_document
from relay.secrets import hash_secret, new_pairing_token, new_uuid7, timestamp, utc_now
from relay.storage import location
from syncengine.engine.connect import connect_store
from syncengine.http.credentials import Secret
from wire.age_keys import X25519Identity
from wire.http_v1.live import LIVE_WAIT

TEAM = "crew"
SOURCE = "#32"
P50_TARGET_MS, P95_TARGET_MS = 200.0, 1000.0
IDLE_TARGET_S = 1.0  # CPU seconds per 10 minutes of an idle live ``run``
FANOUT_WAITS, FANOUT_CREDENTIALS, FANOUT_TARGET_S = 1000, 250, 2.0
FANOUT_GROUP = 20  # connections per client of the bench's 1,000 waits
PG_P95_TARGET_MS = 200.0
LOAD_BOUND = 2.0  # the latency targets hold "at load < 2"
TICK = 0.005  # how often the bench looks at a store's change counter
SAMPLE_TIMEOUT = 75.0  # past run's 60 s safety net: a lost wake still ends
#: How long a ``wait`` process must have used no CPU before the send starts:
#: SETTLED is past the 1 s ANSWER_SPACING (syncengine/engine/live.py) a
#: waiter without ``run`` sleeps after its first live wait, which answers at
#: once whenever the team's read revision is past 0; FRESH sends within it,
#: as a message arriving just after an agent started its ``wait`` would.
SETTLED, FRESH = 1.5, 0.3
CLK_TCK = os.sysconf("SC_CLK_TCK")
PROTOCOL = {"Agmsg-Protocol-Version": "1"}


@dataclass(frozen=True)
class Settings:
    live_samples: int
    poll_samples: int
    wait_samples: int
    idle_window: float
    hold: float
    pg_rounds: int
    phase_budget: float  # seconds for phases 1 and 2 together

    @classmethod
    def of(cls, quick: bool) -> Settings:
        if quick:
            return cls(20, 6, 8, 60.0, 10.0, 20, 120.0)
        return cls(40, 12, 20, 600.0, 10.0, 50, 900.0)


# -- processes --------------------------------------------------------------------------


def syncengine_command() -> list[str]:
    """The ``syncengine`` a host runs: the installed console script beside
    this interpreter, else ``python -m syncengine``."""
    script = Path(sys.executable).with_name("syncengine")
    return [str(script)] if script.exists() else [sys.executable, "-m", "syncengine"]


SYNCENGINE = syncengine_command()


def child_env() -> dict[str, str]:
    """As installed: compiled bytecode is used (this workplace sets
    PYTHONDONTWRITEBYTECODE, which would recompile every module at every
    start), no crash point armed, no default store."""
    drop = {"SYNCENGINE_CRASH_AT", "PYTHONDONTWRITEBYTECODE", "SYNCENGINE_STORE"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def stop_process(process: subprocess.Popen[Any], sig: int = signal.SIGTERM) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def cpu_ticks(pid: int) -> int | None:
    """utime + stime + cutime + cstime of one process, in clock ticks."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15])


def thread_ticks(pid: int) -> dict[int, int]:
    """utime + stime of each thread of one process, in clock ticks."""
    out = {}
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                text = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
                out[int(tid)] = sum(int(x) for x in text.rsplit(")", 1)[1].split()[11:13])
    return out


def tree_cpu(root: int) -> dict[int, int]:
    out = {}
    for pid in process_tree(root):
        ticks = cpu_ticks(pid)
        if ticks is not None:
            out[pid] = ticks
    return out


def cpu_seconds_between(before: dict[int, int], after: dict[int, int]) -> float:
    """CPU used between two :func:`tree_cpu` readings (a process born in
    between counts from zero; one reaped in between is in its parent's
    cutime)."""
    return sum(t - before.get(pid, 0) for pid, t in after.items()) / CLK_TCK


def memory_mb(pid: int) -> tuple[float, float]:
    """(RSS, PSS) of one process in MiB."""
    rss = pss = 0
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Rss:"):
            rss = int(line.split()[1])
        elif line.startswith("Pss:"):
            pss = int(line.split()[1])
    return rss / 1024, pss / 1024


def quiet(pid: int, settle: float = 0.4, min_age: float = 0.5, limit: float = 15.0) -> float:
    """Wait until process ``pid`` used no CPU tick for ``settle`` seconds
    (and ran at least ``min_age``); returns the seconds waited."""
    started = time.perf_counter()
    last = cpu_ticks(pid)
    still_since = started
    while True:
        time.sleep(0.05)
        now = time.perf_counter()
        ticks = cpu_ticks(pid)
        if ticks is None:
            raise RuntimeError(f"process {pid} exited while the bench waited for it to idle")
        if ticks != last:
            last, still_since = ticks, now
        if now - started >= min_age and now - still_since >= settle:
            return now - started
        if now - started > limit:
            raise RuntimeError(f"process {pid} never went quiet within {limit:.0f} s")


# -- relays -----------------------------------------------------------------------------


@dataclass
class RelayProc:
    process: subprocess.Popen[str]
    base_url: str

    @property
    def pid(self) -> int:
        return self.process.pid

    def open_waits(self, client: httpx.Client) -> int:
        text = client.get(self.base_url + "/metrics").text
        for line in text.splitlines():
            if line.startswith("syncengine_relay_live_waits_open "):
                return int(float(line.split()[1]))
        raise RuntimeError("the relay's /metrics has no syncengine_relay_live_waits_open")


@contextmanager
def relay_process(database: str, log: Path, *extra: str) -> Iterator[RelayProc]:
    with log.open("a") as err:
        process = subprocess.Popen(
            [
                *SYNCENGINE,
                *("relay", "serve", "--db", database, "--host", "127.0.0.1", "--port", "0"),
                "--no-access-log",
                *extra,
            ],
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            text=True,
            env=child_env(),
        )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # the ready line; '' if it died
        if not line:
            raise RuntimeError(f"relay serve exited: see {log}")
        port = json.loads(line)["port"]
        yield RelayProc(process, f"http://127.0.0.1:{port}")
    finally:
        stop_process(process)


class RelayAdmin:
    """The operator's side, in-process on the relay's database (as the
    ``relay team apply`` and ``relay token issue`` commands do)."""

    def __init__(self, database: str) -> None:
        self.database = database

    def team(self, members: Sequence[str] = ("alice", "bob")) -> str:
        team_id = new_uuid7()
        document = {
            "team_id": team_id,
            "team_name": TEAM,
            "members": [{"member_id": new_uuid7(), "name": n} for n in members],
        }
        store = location.open_store(self.database)
        try:
            store.apply_provisioning(
                parse_provisioning_document(json.dumps(document).encode()), timestamp(utc_now())
            )
        finally:
            store.close()
        return team_id

    def tokens(self, team_id: str, count: int) -> list[str]:
        store = location.open_store(self.database)
        tokens = []
        try:
            now = utc_now()
            for _ in range(count):
                token = new_pairing_token()
                store.issue_pairing_token(
                    team_id,
                    hash_secret(token),
                    None,
                    timestamp(now),
                    timestamp(now + timedelta(seconds=PAIRING_TOKEN_TTL_SECONDS)),
                )
                tokens.append(token)
        finally:
            store.close()
        return tokens


def pair(base_url: str, token: str, team_id: str) -> dict[str, str]:
    """A device credential for ``token``: the headers of a team request."""
    response = httpx.post(
        base_url + "/v1/pairing/exchange", json={"token": token}, headers=PROTOCOL, timeout=30
    )
    response.raise_for_status()
    credential = response.json()["credential"]
    return {**PROTOCOL, "Agmsg-Team-ID": team_id, "Authorization": f"Bearer {credential}"}


def one_message() -> bytes:
    blob = base64.b64encode(os.urandom(64)).decode()
    envelope = {"v": 1, "cipher": "none", "key_id": None, "blob": blob}
    return json.dumps({"messages": [{"id": str(uuid.uuid4()), "envelope": envelope}]}).encode()


def wait_params(after: int, wait: int) -> dict[str, str]:
    return {"after": str(after), "read_after": "0", "wait": str(wait)}


# -- machines ---------------------------------------------------------------------------


@dataclass
class Machine:
    name: str
    store: Path


def connect_team(
    root: Path, endpoint: str, admin: RelayAdmin, profile: str, names: Sequence[str]
) -> list[Machine]:
    """A new team on the relay and one connected store per name (in-process,
    the code ``syncengine connect`` runs): ``none`` allows plaintext; age-v1
    gives each machine an identity and lists all of them as the epoch's
    recipients."""
    team_id = admin.team()
    tokens = admin.tokens(team_id, len(names))
    sealed = profile == "age-v1"
    root.mkdir(parents=True)
    identities = {name: X25519Identity.generate() for name in names}
    recipients = root / "epoch-1.recipients"
    if sealed:
        recipients.write_text("".join(i.recipient.to_string() + "\n" for i in identities.values()))
    machines = []
    for name, token in zip(names, tokens, strict=True):
        directory = root / name
        directory.mkdir()
        key = directory / "identity.key"
        if sealed:
            fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(identities[name].to_secret_string() + "\n")
        machine = Machine(name, directory / "store.db")
        connect_store(
            machine.store,
            endpoint=endpoint,
            token=Secret(token),
            team=TEAM,
            mode="e2ee-required" if sealed else "plaintext-allowed",
            key_id="epoch-1" if sealed else None,
            recipients_file=str(recipients) if sealed else None,
            identity_file=str(key) if sealed else None,
        )
        machines.append(machine)
    return machines


def seed(machine: Machine) -> None:
    """One message on the machine before its ``run`` starts: its first cycle
    pushes it, so every ``run`` of the team meets a head past 0 and its first
    live wait answers at once (on an empty team it would be held 25 s before
    the run reports ``delivery: live``)."""
    from syncengine.local_store import Store

    with Store(machine.store) as store:
        store.send(TEAM, "alice", "bob", "seed")


def mark_all_read(machine: Machine, agent: str = "bob") -> None:
    from syncengine.local_store import Store

    with Store(machine.store) as store:
        unread = store.list_unread(TEAM, agent)
        if unread:
            store.mark_read_batch(TEAM, agent, [m.id for m in unread])


def pull_in_process(machine: Machine) -> None:
    """Bring a machine without ``run`` up to date (the bench's own pull)."""
    from syncengine.engine import Engine

    with Engine(machine.store) as engine, engine.lock():
        engine.pull()


class RunProcess:
    """``syncengine run --json …`` on one machine; its events read on a thread."""

    def __init__(self, machine: Machine, args: Sequence[str], log: Path) -> None:
        self.machine = machine
        self.events: list[dict[str, Any]] = []
        self._changed = threading.Condition()
        with log.open("a") as err:
            self.process = subprocess.Popen(
                [*SYNCENGINE, "run", "--json", *args, "--store", str(machine.store)],
                stdout=subprocess.PIPE,
                stderr=err,
                stdin=subprocess.DEVNULL,
                text=True,
                env=child_env(),
            )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._changed:
                self.events.append(event)
                self._changed.notify_all()

    def wait_for(self, check: Callable[[dict[str, Any]], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        with self._changed:
            while not any(check(e) for e in self.events):
                left = deadline - time.monotonic()
                if left <= 0 or self.process.poll() is not None:
                    raise RuntimeError(
                        f"run on {self.machine.store}: no {what} within {timeout:.0f} s "
                        f"(exit {self.process.poll()}; events {self.events[-3:]})"
                    )
                self._changed.wait(min(left, 0.5))

    def wait_live(self, timeout: float = 60.0) -> None:
        self.wait_for(
            lambda e: e.get("event") == "delivery" and e.get("mode") == "live", timeout, "live"
        )

    def wait_cycled(self, timeout: float = 60.0) -> None:
        self.wait_for(lambda e: e.get("event") == "cycle" and bool(e.get("ok")), timeout, "cycle")

    def live_lost(self) -> bool:
        """Whether the run ever reported polling after it was live."""
        modes = [e.get("mode") for e in self.events if e.get("event") == "delivery"]
        return "live" in modes and modes[-1] != "live"

    def stop(self) -> None:
        stop_process(self.process)


# -- watching stores --------------------------------------------------------------------


class StoreProbe:
    """A connection of the bench's own to one store: SQLite's change counter,
    and a look-up of a body once it moved. Only reads."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.version: int | None = None

    def moved(self) -> bool:
        version = int(self.conn.execute("PRAGMA data_version").fetchone()[0])
        moved, self.version = version != self.version, version
        return moved

    def holds(self, body: str) -> bool:
        row = self.conn.execute("SELECT 1 FROM messages WHERE body = ? LIMIT 1", (body,))
        return row.fetchone() is not None

    def close(self) -> None:
        self.conn.close()


@dataclass(eq=False)
class Sample:
    """One send: when it started, its process exited, it was committed on A,
    and became visible on B (or was printed by ``wait``)."""

    side: str
    body: str
    started: float
    process: subprocess.Popen[str]
    source: StoreProbe
    target: StoreProbe | None
    exited: float | None = None
    committed: float | None = None
    visible: float | None = None
    done: threading.Event = field(default_factory=threading.Event)
    sent: threading.Event = field(default_factory=threading.Event)

    def check_exit(self) -> None:
        code = self.process.returncode
        if code != 0:
            err = self.process.stderr.read() if self.process.stderr else ""
            raise RuntimeError(f"{self.side}: send exited {code}: {err.strip()[:300]}")


class Watcher(threading.Thread):
    """Every :data:`TICK`: each pending send's process, its source store
    and its target store. A store's body look-up runs only after its change
    counter moved."""

    def __init__(self) -> None:
        super().__init__(name="bench-watcher", daemon=True)
        self._pending: list[Sample] = []
        self._lock = threading.Lock()
        self._halt = threading.Event()

    def add(self, sample: Sample) -> None:
        with self._lock:
            self._pending.append(sample)

    def drop(self, sample: Sample) -> None:
        with self._lock:
            if sample in self._pending:
                self._pending.remove(sample)

    def run(self) -> None:
        while not self._halt.wait(TICK):
            with self._lock:
                pending = list(self._pending)
            moved: dict[int, bool] = {}

            def changed(probe: StoreProbe, seen: dict[int, bool] = moved) -> bool:
                if id(probe) not in seen:  # the counter read once per store per tick
                    seen[id(probe)] = probe.moved()
                return seen[id(probe)]

            for s in pending:
                if s.exited is None and s.process.poll() is not None:
                    s.exited = time.perf_counter()
                if s.committed is None and changed(s.source) and s.source.holds(s.body):
                    s.committed = time.perf_counter()
                if s.exited is not None and s.committed is not None:
                    s.sent.set()
                if (
                    s.visible is None
                    and s.target is not None
                    and changed(s.target)
                    and s.target.holds(s.body)
                ):
                    s.visible = time.perf_counter()
                if s.sent.is_set() and (s.target is None or s.visible is not None):
                    s.done.set()
                    self.drop(s)

    def close(self) -> None:
        self._halt.set()
        if self.is_alive():
            self.join(timeout=5)


@dataclass
class Side:
    """One measured way of delivering: A sends, B (or ``wait``) receives."""

    name: str
    a: Machine
    b: Machine
    source: StoreProbe
    target: StoreProbe
    samples: list[Sample] = field(default_factory=list)
    failures: int = 0
    pending: Sample | None = None
    loads: list[float] = field(default_factory=list)


def start_send(side: Side, watcher: Watcher, target: bool = True) -> Sample:
    body = f"bench-live {side.name} {uuid.uuid4()}"
    started = time.perf_counter()
    process = subprocess.Popen(
        [*SYNCENGINE, "send", TEAM, "alice", "bob", "-", "--store", str(side.a.store)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    assert process.stdin is not None
    process.stdin.write(body + "\n")
    process.stdin.close()
    sample = Sample(side.name, body, started, process, side.source, side.target if target else None)
    watcher.add(sample)
    return sample


def ms(seconds: float) -> float:
    return seconds * 1000.0


# -- 1 and 2: delivery and wait ----------------------------------------------------------


@dataclass
class Fleet:
    """The machines and ``run`` processes of phases 1-3."""

    live: dict[str, Side]
    polling: dict[str, Side]
    waits: list[tuple[Side, bool, float]]  # (side, run on the receiver, settle seconds)
    idle: dict[str, RunProcess]
    runs: list[RunProcess]

    def close(self) -> None:
        sides = [*self.live.values(), *self.polling.values(), *(w[0] for w in self.waits)]
        for probe in {id(p): p for side in sides for p in (side.source, side.target)}.values():
            probe.close()


def build_fleet(root: Path, endpoint: str, admin: RelayAdmin, logs: Path) -> Fleet:
    started = time.perf_counter()
    live: dict[str, Side] = {}
    polling: dict[str, Side] = {}
    extra: dict[str, Machine] = {}
    live_runs: list[RunProcess] = []
    polling_runs: list[RunProcess] = []
    for profile in ("none", "age-v1"):
        names = ("a", "b", "c") if profile == "none" else ("a", "b")
        machines = connect_team(root / f"live-{profile}", endpoint, admin, profile, names)
        a, b = machines[0], machines[1]
        if profile == "none":
            extra["c"] = machines[2]
        seed(a)
        for m in (a, b):
            run = RunProcess(m, ["--interval", "60"], logs / f"run-live-{profile}-{m.name}.log")
            live_runs.append(run)
        live[profile] = Side(f"{profile}, live", a, b, StoreProbe(a.store), StoreProbe(b.store))
        a, b = connect_team(root / f"poll-{profile}", endpoint, admin, profile, ("a", "b"))
        for m in (a, b):
            run = RunProcess(m, ["--no-live"], logs / f"run-poll-{profile}-{m.name}.log")
            polling_runs.append(run)
        polling[profile] = Side(
            f"{profile}, polling (run --no-live, 5 s)",
            a,
            b,
            StoreProbe(a.store),
            StoreProbe(b.store),
        )
    (idle_live,) = connect_team(root / "idle-live", endpoint, admin, "none", ("a",))
    (idle_poll,) = connect_team(root / "idle-poll", endpoint, admin, "none", ("a",))
    seed(idle_live)
    idle = {
        "live": RunProcess(idle_live, [], logs / "run-idle-live.log"),
        "polling": RunProcess(idle_poll, ["--no-live"], logs / "run-idle-poll.log"),
    }
    runs = [*live_runs, *polling_runs, *idle.values()]
    for run in (*live_runs, idle["live"]):
        run.wait_live()
    for run in (*polling_runs, idle["polling"]):
        run.wait_cycled()
    none = live["none"]
    c = extra["c"]
    on_c = StoreProbe(c.store)
    waits = [
        (Side("wait, run on B", none.a, none.b, none.source, none.target), True, SETTLED),
        (Side("wait, no run on C", none.a, c, none.source, on_c), False, SETTLED),
        (Side("wait, no run on C, fresh", none.a, c, none.source, on_c), False, FRESH),
    ]
    print(
        f"  set-up: {len(runs)} run processes up and live in "
        f"{time.perf_counter() - started:.1f} s; {format_load()}",
        flush=True,
    )
    return Fleet(live, polling, waits, idle, runs)


def poll_due(fleet: Fleet, watcher: Watcher, quota: int) -> None:
    """Collect finished polling samples; start one per profile where none
    is outstanding, and wait for its send to be committed and exit (so no
    two sends overlap); its delivery is watched in the background."""
    for side in fleet.polling.values():
        if side.pending is not None and side.pending.done.is_set():
            side.samples.append(side.pending)
            side.loads.append(load_average()[0])
            side.pending = None
        elif side.pending is not None and time.perf_counter() - side.pending.started > (
            SAMPLE_TIMEOUT
        ):
            watcher.drop(side.pending)
            side.failures += 1
            side.pending = None
        if side.pending is None and len(side.samples) + side.failures < quota:
            sample = start_send(side, watcher)
            if not sample.sent.wait(30):
                raise RuntimeError(f"{side.name}: send did not finish in 30 s")
            sample.check_exit()
            side.pending = sample


def delivery_phase(fleet: Fleet, watcher: Watcher, s: Settings, deadline: float) -> None:
    rng = random.Random(32)
    warmup = 1
    for index in range(warmup + s.live_samples):
        if time.monotonic() > deadline:
            print(f"  delivery: stopped after {index} rounds, the phase's time is up")
            break
        for side in fleet.live.values():
            time.sleep(rng.uniform(0.25, 1.0))  # a random moment
            sample = start_send(side, watcher)
            if not sample.done.wait(SAMPLE_TIMEOUT):
                watcher.drop(sample)
                side.failures += 1
                continue
            sample.check_exit()
            if index >= warmup:
                side.samples.append(sample)
                side.loads.append(load_average()[0])
            poll_due(fleet, watcher, s.poll_samples)
        if index % 5 == 4:
            print(f"  delivery: round {index + 1 - warmup}; {format_load()}", flush=True)
    # Polling samples still short of their quota: only they run now.
    while any(
        len(p.samples) + p.failures < s.poll_samples or p.pending is not None
        for p in fleet.polling.values()
    ):
        if time.monotonic() > deadline:
            print("  polling: stopped, the phase's time is up")
            break
        poll_due(fleet, watcher, s.poll_samples)
        time.sleep(0.05)


def wait_phase(fleet: Fleet, watcher: Watcher, s: Settings, deadline: float) -> None:
    rng = random.Random(320)
    warmup = 1
    for index in range(warmup + s.wait_samples):
        if time.monotonic() > deadline:
            print(f"  wait: stopped after {index} rounds, the phase's time is up")
            break
        for side, with_run, settle in fleet.waits:
            if not with_run:
                pull_in_process(side.b)  # what the other samples sent to bob
            mark_all_read(side.b)
            waiter = subprocess.Popen(
                [
                    *SYNCENGINE,
                    *("wait", "--team", TEAM, "--agent", "bob", "--timeout", "30"),
                    *("--mark-read", "--store", str(side.b.store)),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
                env=child_env(),
            )
            try:
                quiet(waiter.pid, settle)
                time.sleep(rng.uniform(0.05, 0.3))
                printed: list[float] = []
                sample = start_send(side, watcher, target=False)

                def read(
                    process: subprocess.Popen[str] = waiter, out: list[float] = printed
                ) -> None:
                    assert process.stdout is not None
                    if process.stdout.readline():
                        out.append(time.perf_counter())

                reader = threading.Thread(target=read, daemon=True)
                reader.start()
                reader.join(40)
                if not sample.sent.wait(30):
                    raise RuntimeError(f"{side.name}: send did not finish in 30 s")
                sample.check_exit()
                code = waiter.wait(timeout=30)
                if not printed or code != 0:
                    err = waiter.stderr.read() if waiter.stderr else ""
                    print(f"  {side.name}: wait exited {code} {err.strip()[:200]}")
                    side.failures += 1
                    continue
                sample.visible = printed[0]
                if index >= warmup:
                    side.samples.append(sample)
                    side.loads.append(load_average()[0])
            finally:
                stop_process(waiter)
        if index % 4 == 3:
            print(f"  wait: round {index + 1 - warmup}; {format_load()}", flush=True)


@dataclass
class IdleMeter:
    """CPU of the idle ``run`` process trees over one window, on a thread."""

    runs: dict[str, RunProcess]
    window: float
    result: dict[str, float] = field(default_factory=dict)
    #: CPU seconds per 10 minutes of each run's main thread (the run loop:
    #: the 50 ms local-change tick) and of all its other threads together.
    threads: dict[str, tuple[float, float]] = field(default_factory=dict)
    loads: tuple[float, float, float] = (0.0, 0.0, 0.0)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self._measure, name="bench-idle", daemon=True)
        thread.start()
        return thread

    def _measure(self) -> None:
        before = {name: tree_cpu(run.pid) for name, run in self.runs.items()}
        threads = {name: thread_ticks(run.pid) for name, run in self.runs.items()}
        started = time.perf_counter()
        time.sleep(self.window)
        elapsed = time.perf_counter() - started
        scale = 600.0 / elapsed / CLK_TCK
        for name, run in self.runs.items():
            used = cpu_seconds_between(before[name], tree_cpu(run.pid))
            self.result[name] = used / elapsed * 600.0
            now = thread_ticks(run.pid)
            deltas = {tid: t - threads[name].get(tid, 0) for tid, t in now.items()}
            main = deltas.pop(run.pid, 0)
            self.threads[name] = (main * scale, sum(deltas.values()) * scale)
        self.result["window"] = elapsed
        self.loads = load_average()


# -- 4: one relay holding 1,000 waits ----------------------------------------------------


async def fanout(
    relay: RelayProc, waiters: list[dict[str, str]], poster: dict[str, str], hold: float
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    pid = relay.pid
    out["rss_before"], out["pss_before"] = memory_mb(pid)
    timeout = httpx.Timeout(120.0)
    # httpx's pool does work linear in its connections for every response:
    # one pool of 1,000 spent ~5 s of the bench's CPU answering them all, so
    # the waits are spread over clients of FANOUT_GROUP connections each.
    limits = httpx.Limits(max_connections=FANOUT_GROUP, max_keepalive_connections=FANOUT_GROUP)
    tls = ssl.create_default_context()  # loaded once, not once per client
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=relay.base_url, limits=limits, timeout=timeout, verify=tls
                )
            )
            for _ in range(-(-FANOUT_WAITS // FANOUT_GROUP))
        ]
        control = await stack.enter_async_context(
            httpx.AsyncClient(base_url=relay.base_url, timeout=timeout, verify=tls)
        )

        async def one(index: int) -> tuple[int, bool, float]:
            headers = waiters[index % len(waiters)]
            client = clients[index // FANOUT_GROUP]
            response = await client.get(LIVE_WAIT, params=wait_params(0, 55), headers=headers)
            at = time.perf_counter()
            woken = response.status_code == 200 and bool(response.json().get("woken"))
            return response.status_code, woken, at

        async def open_waits() -> int:
            text = (await control.get("/metrics")).text
            for line in text.splitlines():
                if line.startswith("syncengine_relay_live_waits_open "):
                    return int(float(line.split()[1]))
            return -1

        opening = time.perf_counter()
        tasks = [asyncio.create_task(one(i)) for i in range(FANOUT_WAITS)]
        deadline = opening + 60
        while (held := await open_waits()) < FANOUT_WAITS:
            if time.perf_counter() > deadline or any(t.done() for t in tasks):
                raise RuntimeError(f"only {held} of {FANOUT_WAITS} waits were held")
            await asyncio.sleep(0.05)
        out["open_s"] = time.perf_counter() - opening
        await asyncio.sleep(1.0)
        cpu_before, t0 = tree_cpu(pid), time.perf_counter()
        await asyncio.sleep(hold)
        out["idle_cpu_share"] = cpu_seconds_between(cpu_before, tree_cpu(pid)) / (
            time.perf_counter() - t0
        )
        out["hold_s"] = time.perf_counter() - t0
        out["rss_holding"], out["pss_holding"] = memory_mb(pid)
        out["load_holding"] = load_average()
        if await open_waits() != FANOUT_WAITS:
            raise RuntimeError("waits were answered before the POST")
        usage = resource.getrusage(resource.RUSAGE_SELF)
        posted = time.perf_counter()
        response = await control.post(
            "/v1/messages",
            content=one_message(),
            headers={**poster, "Content-Type": "application/json"},
        )
        stored = time.perf_counter()
        response.raise_for_status()
        answers = await asyncio.wait_for(asyncio.gather(*tasks), 60)
        after = resource.getrusage(resource.RUSAGE_SELF)
        out["client_cpu_s"] = (after.ru_utime + after.ru_stime) - (usage.ru_utime + usage.ru_stime)
        times = sorted(at for _, _, at in answers)
        out["woken"] = sum(1 for _, woken, _ in answers if woken)
        out["statuses"] = sorted({status for status, _, _ in answers})
        out["post_s"] = stored - posted
        out["last_s"] = times[-1] - posted
        out["median_s"] = statistics.median(times) - posted
        out["last_after_stored_s"] = times[-1] - stored
        out["load_wake"] = load_average()
    await asyncio.sleep(0.5)
    out["rss_after"], out["pss_after"] = memory_mb(pid)
    return out


async def pair_many(base_url: str, tokens: Sequence[str], team_id: str) -> list[dict[str, str]]:
    gate = asyncio.Semaphore(16)
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:

        async def one(token: str) -> dict[str, str]:
            async with gate:
                response = await client.post(
                    "/v1/pairing/exchange", json={"token": token}, headers=PROTOCOL
                )
            response.raise_for_status()
            credential = response.json()["credential"]
            return {**PROTOCOL, "Agmsg-Team-ID": team_id, "Authorization": f"Bearer {credential}"}

        return list(await asyncio.gather(*(one(t) for t in tokens)))


def fanout_phase(root: Path, hold: float, sampler: TreeMemorySampler) -> dict[str, Any]:
    db = root / "fanout-relay.db"
    location.initialize(str(db))
    admin = RelayAdmin(str(db))
    with relay_process(str(db), root / "fanout-relay.log", "--live-max-wait", "55") as relay:
        sampler.watch("relay holding 1,000 waits", relay.pid)
        team_id = admin.team()
        tokens = admin.tokens(team_id, FANOUT_CREDENTIALS + 1)
        started = time.perf_counter()
        headers = asyncio.run(pair_many(relay.base_url, tokens, team_id))
        print(
            f"  paired {len(headers)} credentials in {time.perf_counter() - started:.1f} s; "
            f"{format_load()}",
            flush=True,
        )
        return asyncio.run(fanout(relay, headers[:-1], headers[-1], hold))


# -- 5: PostgreSQL, two relay processes ------------------------------------------------


def pg_bin_dir() -> Path | None:
    """Debian's newest ``/usr/lib/postgresql/N/bin``, else ``initdb`` on PATH."""
    debian = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    if debian:
        return debian[-1].parent
    found = shutil.which("initdb")
    return Path(found).resolve().parent if found else None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def as_unprivileged() -> tuple[list[str], int | None, int | None]:
    """PostgreSQL refuses root: a command prefix and uid/gid to drop it."""
    if os.geteuid() != 0:
        return [], None, None
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        prefix = (
            ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups"]
            if shutil.which("setpriv")
            else ["runuser", "-u", name, "--"]
        )
        return prefix, entry.pw_uid, entry.pw_gid
    raise RuntimeError("running as root and no unprivileged account to run postgres")


@contextmanager
def postgres_server(bin_dir: Path) -> Iterator[str]:
    """A throw-away server: initdb in a temporary directory, trust for one
    local superuser, a private socket directory, 127.0.0.1 at a free port,
    durability off. Yields the URL of a new database."""
    prefix, uid, gid = as_unprivileged()
    root = Path(tempfile.mkdtemp(prefix="bench-live-pg-"))
    process: subprocess.Popen[bytes] | None = None
    try:
        (root / "sock").mkdir()
        if uid is not None and gid is not None:
            os.chown(root, uid, gid)
            os.chown(root / "sock", uid, gid)
        subprocess.run(
            [
                *prefix,
                str(bin_dir / "initdb"),
                *("-D", str(root / "data"), "-U", "bench", "--auth=trust", "-E", "UTF8"),
                *("--no-locale", "--no-sync"),
            ],
            capture_output=True,
            check=True,
            cwd=root,
            timeout=120,
        )
        port = free_port()
        with (root / "server.log").open("ab") as log:
            process = subprocess.Popen(
                [
                    *prefix,
                    str(bin_dir / "postgres"),
                    *("-D", str(root / "data"), "-k", str(root / "sock")),
                    *("-h", "127.0.0.1", "-p", str(port)),
                    *("-c", "fsync=off", "-c", "synchronous_commit=off"),
                    *("-c", "full_page_writes=off", "-c", "max_connections=100"),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        import psycopg

        admin_url = f"postgresql://bench@127.0.0.1:{port}/postgres"
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError("postgres exited: " + (root / "server.log").read_text()[-500:])
            try:
                with psycopg.connect(admin_url, connect_timeout=2, autocommit=True) as conn:
                    conn.execute('CREATE DATABASE "relay_bench" TEMPLATE template0')
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield f"postgresql://bench@127.0.0.1:{port}/relay_bench"
    finally:
        if process is not None:
            stop_process(process, signal.SIGINT)  # "fast" shutdown
        shutil.rmtree(root, ignore_errors=True)


def pg_phase(root: Path, rounds: int, sampler: TreeMemorySampler) -> dict[str, Any] | str:
    bin_dir = pg_bin_dir()
    if bin_dir is None or not (bin_dir / "postgres").exists():
        return "PostgreSQL is not installed here (no initdb/postgres): phase 5 skipped"
    with ExitStack() as stack:
        try:
            url = stack.enter_context(postgres_server(bin_dir))
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            return f"PostgreSQL would not start ({type(exc).__name__}: {exc}): phase 5 skipped"
        subprocess.run(
            [*SYNCENGINE, "relay", "init", "--database", url],
            check=True,
            capture_output=True,
            env=child_env(),
            timeout=120,
        )
        relays = [stack.enter_context(relay_process(url, root / f"pg-relay-{n}.log")) for n in "ab"]
        sampler.watch("two PostgreSQL relays", *(r.pid for r in relays))
        a, b = relays
        admin = RelayAdmin(url)
        team_id = admin.team()
        poster_token, waiter_token = admin.tokens(team_id, 2)
        poster, waiter = (
            pair(a.base_url, poster_token, team_id),
            pair(b.base_url, waiter_token, team_id),
        )
        rng = random.Random(3200)
        sent_to_answer: list[float] = []
        stored_to_answer: list[float] = []
        loads: list[float] = []
        with (
            httpx.Client(base_url=b.base_url, timeout=60) as wait_client,
            httpx.Client(base_url=a.base_url, timeout=60) as post_client,
            httpx.Client(timeout=10) as metrics,
        ):
            for index in range(1 + rounds):
                head = index  # the team's committed head: one message per round
                answer: dict[str, Any] = {}

                def hold(after: int = head, out: dict[str, Any] = answer) -> None:
                    response = wait_client.get(
                        LIVE_WAIT, params=wait_params(after, 25), headers=waiter
                    )
                    out["at"] = time.perf_counter()
                    out["response"] = response

                thread = threading.Thread(target=hold, daemon=True)
                thread.start()
                deadline = time.monotonic() + 10
                while b.open_waits(metrics) < 1:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the wait on relay B was never held")
                    time.sleep(0.01)
                time.sleep(rng.uniform(0.05, 0.15))
                posted = time.perf_counter()
                response = post_client.post(
                    "/v1/messages",
                    content=one_message(),
                    headers={**poster, "Content-Type": "application/json"},
                )
                stored = time.perf_counter()
                response.raise_for_status()
                thread.join(30)
                got = answer.get("response")
                if got is None or got.status_code != 200 or not got.json().get("woken"):
                    raise RuntimeError(
                        f"relay B's wait: {got and got.status_code} {got and got.text}"
                    )
                if int(got.json()["current_seq"]) != head + 1:
                    raise RuntimeError(f"relay B answered head {got.json()['current_seq']}")
                if index >= 1:
                    sent_to_answer.append(answer["at"] - posted)
                    stored_to_answer.append(answer["at"] - stored)
                    loads.append(load_average()[0])
        return {"sent": sent_to_answer, "stored": stored_to_answer, "loads": loads}


# -- report -----------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (``q`` in 0..100); the median at 50."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class Row:
    name: str
    p50: float
    p95: float | None
    unit: str
    n: int
    target: str
    met: str
    load: float
    detail: str = ""


class Table:
    """The rows printed at the end (and every figure in the report)."""

    def __init__(self, report: Report) -> None:
        self.report = report
        self.rows: list[Row] = []

    def latency(
        self,
        name: str,
        seconds: Sequence[float],
        loads: Sequence[float],
        targets: tuple[float | None, float | None] = (P50_TARGET_MS, P95_TARGET_MS),
        anchor: str | None = None,
        failures: int = 0,
        note: str = "",
    ) -> None:
        values = [ms(x) for x in seconds]
        if not values:
            self.report.note(f"{name}: no samples")
            return
        load = max(loads) if loads else load_average()[0]
        p50, p95 = percentile(values, 50), percentile(values, 95)
        verdicts = []
        for label, value, target in (("p50", p50, targets[0]), ("p95", p95, targets[1])):
            text = None if target is None else f"<= {target:.0f}"
            detail = (
                f"n={len(values)}, min {min(values):.0f} max {max(values):.0f} ms; "
                f"highest 1-min load during the samples {load:.2f}"
                + (f"; {failures} sample(s) timed out" if failures else "")
                + (f"; {note}" if note else "")
            )
            figure = self.report.add(
                Figure(
                    f"{name}, {label}",
                    round(value, 1),
                    "ms",
                    text,
                    anchor,
                    SOURCE if text else None,
                    detail=detail,
                ),
                show=False,
            )
            if figure.met is not None:
                verdicts.append(f"{label} {'met' if figure.met else 'MISSED'}")
        if failures:
            verdicts.append(f"{failures} timed out")
        if verdicts and load >= LOAD_BOUND:
            verdicts.append(f"load {load:.2f} >= {LOAD_BOUND:g}")
        target_text = " / ".join(
            f"{label} <= {t:.0f}" for label, t in (("p50", targets[0]), ("p95", targets[1])) if t
        )
        self.rows.append(
            Row(name, p50, p95, "ms", len(values), target_text, ", ".join(verdicts), load, note)
        )

    def value(
        self,
        name: str,
        value: float,
        unit: str,
        target: str | None = None,
        anchor: str | None = None,
        load: float | None = None,
        detail: str | None = None,
    ) -> None:
        load = load_average()[0] if load is None else load
        figure = self.report.add(
            Figure(
                name,
                round(value, 3),
                unit,
                target,
                anchor,
                SOURCE if target else None,
                detail=(detail + "; " if detail else "") + f"1-min load {load:.2f}",
            ),
            show=False,
        )
        met = {True: "met", False: "MISSED", None: ""}[figure.met]
        self.rows.append(Row(name, value, None, unit, 1, target or "", met, load, detail or ""))

    def print(self) -> None:
        width = max(len(r.name) for r in self.rows) + 2
        print(f"\n{'figure':<{width}}{'p50/value':>12}{'p95':>10}  {'n':>4}  {'load':>5}  target")
        print("-" * (width + 60))
        for r in self.rows:
            p95 = f"{r.p95:>10.0f}" if r.p95 is not None else " " * 10
            value = f"{r.p50:,.0f}" if abs(r.p50) >= 100 else f"{r.p50:.3g}"
            print(
                f"{r.name:<{width}}{value:>9} {r.unit:<2}{p95}  {r.n:>4}  {r.load:>5.2f}  "
                f"{r.target}{'  ' + r.met if r.met else ''}"
            )
        details = [r for r in self.rows if r.detail]
        if details:
            print("\ndetails:")
        for r in details:
            print(f"  {r.name}: {r.detail}")


def report_delivery(table: Table, fleet: Fleet) -> None:
    polled = {
        profile: statistics.median(x.visible - x.started for x in side.samples)  # type: ignore[operator]
        if side.samples
        else float("nan")
        for profile, side in fleet.polling.items()
    }
    for profile, side in fleet.live.items():
        anchor = f"polling at 5 s: p50 {ms(polled[profile]):,.0f} ms"
        got = side.samples
        table.latency(
            f"{profile}, live: send start -> visible on B",
            [x.visible - x.started for x in got],  # type: ignore[operator]
            side.loads,
            anchor=anchor,
            failures=side.failures,
        )
        table.latency(
            f"{profile}, live: send exited -> visible on B",
            [x.visible - x.exited for x in got],  # type: ignore[operator]
            side.loads,
            anchor=anchor,
        )
        table.latency(
            f"{profile}, live: commit on A -> visible on B",
            [x.visible - x.committed for x in got],  # type: ignore[operator]
            side.loads,
            targets=(None, None),
        )
        table.latency(
            f"{profile}: the send process itself",
            [x.exited - x.started for x in got],  # type: ignore[operator]
            side.loads,
            targets=(None, None),
        )
    for profile, side in fleet.polling.items():
        table.latency(
            f"{profile}, polling (--no-live, 5 s): send start -> visible on B",
            [x.visible - x.started for x in side.samples],  # type: ignore[operator]
            side.loads,
            targets=(None, None),
            failures=side.failures,
        )


def report_wait(table: Table, fleet: Fleet) -> None:
    for side, _, settle in fleet.waits:
        table.latency(
            f"{side.name}: send start -> wait printed",
            [x.visible - x.started for x in side.samples],  # type: ignore[operator]
            side.loads,
            failures=side.failures,
            note=f"sent once the wait process had used no CPU for {settle:g} s",
        )
        table.latency(
            f"{side.name}: send exited -> wait printed",
            [x.visible - x.exited for x in side.samples],  # type: ignore[operator]
            side.loads,
        )


def report_idle(table: Table, meter: IdleMeter) -> None:
    window = meter.result.get("window", 0.0)
    polling = meter.result.get("polling", float("nan"))

    def split(name: str) -> str:
        main, other = meter.threads.get(name, (float("nan"), float("nan")))
        return f"main thread {main:.2f} s, other threads {other:.2f} s"

    table.value(
        "idle run (live, default interval): CPU per 10 min",
        meter.result.get("live", float("nan")),
        "s",
        f"<= {IDLE_TARGET_S:g}",
        anchor=f"run --no-live at 5 s: {polling:.2f} s",
        load=meter.loads[0],
        detail=f"process tree over {window:.0f} s, extrapolated; {split('live')}",
    )
    table.value(
        "idle run --no-live (5 s): CPU per 10 min",
        polling,
        "s",
        load=meter.loads[0],
        detail=f"process tree over {window:.0f} s, extrapolated; {split('polling')}",
    )


def report_fanout(table: Table, f: dict[str, Any]) -> None:
    holding, wake = f["load_holding"][0], f["load_wake"][0]
    table.value("relay RSS before the waits", f["rss_before"], "MiB", load=holding)
    table.value(
        "relay RSS holding 1,000 waits",
        f["rss_holding"],
        "MiB",
        load=holding,
        detail=f"PSS {f['pss_holding']:.1f} MiB",
    )
    table.value(
        "relay RSS per held wait",
        (f["rss_holding"] - f["rss_before"]) * 1024 / FANOUT_WAITS,
        "KiB",
        load=holding,
    )
    table.value("relay RSS after the wake", f["rss_after"], "MiB", load=wake)
    table.value(
        "relay CPU holding 1,000 waits (idle)",
        f["idle_cpu_share"] * 100,
        "% core",
        load=holding,
        detail=f"over {f['hold_s']:.1f} s; each wait re-authorizes every 5 s",
    )
    table.value("time to open 1,000 waits", f["open_s"], "s", load=holding)
    table.value(
        "POST sent -> last of 1,000 waits answered",
        f["last_s"],
        "s",
        f"<= {FANOUT_TARGET_S:g}",
        load=wake,
        detail=(
            f"{f['woken']} woken; statuses {f['statuses']}; POST took {ms(f['post_s']):.0f} ms; "
            f"median answer {ms(f['median_s']):.0f} ms; client CPU {f['client_cpu_s']:.2f} s"
        ),
    )
    table.value("POST sent -> median wait answered", f["median_s"] * 1000, "ms", load=wake)
    table.value("POST answered -> last wait answered", f["last_after_stored_s"], "s", load=wake)
    table.value("waits woken by the one POST", f["woken"], "", f">= {FANOUT_WAITS}", load=wake)


def report_pg(table: Table, pg: dict[str, Any]) -> None:
    table.latency(
        "PostgreSQL: POST sent on A -> wait on B answered",
        pg["sent"],
        pg["loads"],
        targets=(None, PG_P95_TARGET_MS),
    )
    table.latency(
        "PostgreSQL: POST answered on A -> wait on B answered",
        pg["stored"],
        pg["loads"],
        targets=(None, None),
    )


# -- main -------------------------------------------------------------------------------


def phases_1_to_3(
    root: Path, s: Settings, table: Table, sampler: TreeMemorySampler, began: float
) -> None:
    """Delivery, ``wait`` and idle CPU on one relay, with every ``run`` up at once."""
    report = table.report
    logs = root / "logs"
    logs.mkdir()
    db = root / "relay.db"
    location.initialize(str(db))
    admin = RelayAdmin(str(db))
    watcher = Watcher()
    watcher.start()
    try:
        with relay_process(str(db), logs / "relay.log") as relay:
            sampler.watch("relay (phases 1-3)", relay.pid)
            fleet = build_fleet(root / "m", relay.base_url, admin, logs)
            try:
                sampler.watch("idle live run process tree", fleet.idle["live"].pid)
                sampler.watch("idle --no-live run process tree", fleet.idle["polling"].pid)
                meter = IdleMeter(fleet.idle, s.idle_window)
                time.sleep(2.0)  # the idle runs' first cycles and waits settle
                idle_thread = meter.start()
                deadline = time.monotonic() + s.phase_budget
                delivery_phase(fleet, watcher, s, deadline - 0.35 * s.phase_budget)
                print(f"  delivery done at {time.monotonic() - began:.0f} s; {format_load()}")
                wait_phase(fleet, watcher, s, deadline)
                print(f"  wait done at {time.monotonic() - began:.0f} s; {format_load()}")
                if idle_thread.is_alive():
                    print(f"  idle window: {s.idle_window:.0f} s, finishing", flush=True)
                idle_thread.join(s.idle_window + 30)
                lost = [r.machine.store.parent.name for r in fleet.runs if r.live_lost()]
                if lost:
                    report.note(f"runs that fell back to polling during the run: {lost}")
            finally:
                for run in fleet.runs:
                    run.stop()
                watcher.close()
                fleet.close()
    finally:
        watcher.close()
    report_delivery(table, fleet)
    report_wait(table, fleet)
    report_idle(table, meter)


def guarded(report: Report, phase: str, action: Callable[[], None]) -> None:
    """Run one phase; a failure is a note, and the other phases still run."""
    try:
        action()
    except Exception as exc:
        report.note(f"{phase} failed: {type(exc).__name__}: {str(exc)[:300]}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_arguments(parser)
    parser.add_argument("--skip-pg", action="store_true", help="skip phase 5 (PostgreSQL)")
    args = parser.parse_args(argv)
    s = Settings.of(args.quick)
    report = Report("live", args.quick)
    table = Table(report)
    began = time.monotonic()
    print(
        f"bench_live: {os.cpu_count()} CPUs; {format_load()}; {' '.join(SYNCENGINE)}; "
        f"{s.live_samples} live and {s.poll_samples} polling sends per profile, "
        f"{s.wait_samples} waits per side, idle window {s.idle_window:.0f} s",
        flush=True,
    )
    with (
        TreeMemorySampler(interval=0.2) as sampler,
        tempfile.TemporaryDirectory(prefix="bench-live-") as tmp,
    ):
        root = Path(tmp)
        print(f"1-3: machines, runs, delivery, wait, idle CPU; {format_load()}", flush=True)
        guarded(report, "phases 1-3", lambda: phases_1_to_3(root, s, table, sampler, began))
        print(f"4: one relay, {FANOUT_WAITS:,} waits; {format_load()}", flush=True)
        guarded(
            report, "phase 4", lambda: report_fanout(table, fanout_phase(root, s.hold, sampler))
        )
        if args.skip_pg:
            report.note("phase 5 (PostgreSQL) skipped: --skip-pg")
        else:
            print(f"5: two PostgreSQL relay processes; {format_load()}", flush=True)

            def phase_5() -> None:
                pg = pg_phase(root, s.pg_rounds, sampler)
                if isinstance(pg, str):
                    report.note(pg)
                else:
                    report_pg(table, pg)

            guarded(report, "phase 5", phase_5)
    if table.rows:
        table.print()
    print(
        "\n(latency targets hold at load < 2; 'load' is the highest 1-min load average "
        "seen during a figure's samples. Both machines, the relay and the bench share this "
        f"machine's {os.cpu_count()} CPUs.)"
    )
    for name in (
        "relay (phases 1-3)",
        "idle live run process tree",
        "idle --no-live run process tree",
        "relay holding 1,000 waits",
        "two PostgreSQL relays",
    ):
        peak = sampler.group(name)
        if peak.samples:
            report.add_memory(name, peak)
    report.add_memory("whole tree (bench, relays, every run, PostgreSQL)", sampler.peak)
    print(f"total {time.monotonic() - began:.0f} s")
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
