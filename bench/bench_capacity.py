"""How many connected machines one relay serves at agent-team rates (issue #35, 3).

Run: ``.venv/bin/python bench/bench_capacity.py [--quick] [--json PATH]
[--machines 100,300,1000] [--cap N] [--window S] [--interval S] ...``
(``--help`` lists every knob). The full run, on a quiet host:
``.venv/bin/python bench/bench_capacity.py --json capacity.json`` (at most
about 15 minutes: a 14-minute step budget plus start-up and shut-down).

**What a simulated machine does.** Each machine is a device of a team of
3-5 machines, with a pairing-exchanged credential of its own (real
``POST /v1/pairing/exchange``), and its own HTTP connections (one httpx
client per machine, two connections: what ``syncengine run`` holds — one for
its sync cycles, one for its live wait). Every ``--interval`` seconds on
average (uniform jitter of ``±--jitter`` of it) it posts a
small batch (``--batch 1-5`` ``none`` envelopes of ``--blob`` random bytes)
and then pulls. It pulls — ``GET /v1/messages?after=<cursor>`` page by
page until ``has_more`` is false — whenever its live wait
(``GET /x-syncengine/live/v1/wait``, specs/live.md §4) says the team's head
passed its cursor, and re-opens the wait with its new cursor, as
``syncengine run``'s watch does (specs/live.md §6). A wait that answers at
once with nothing new is re-asked at most once a second. On a relay without
the live wait (or with ``--mode poll``) it polls every interval instead.
Failed requests are retried after a second and counted as errors — except
a request that went out on a kept-alive connection the relay closed at that
moment (its idle timeout; httpx raises ReadError/RemoteProtocolError), which
is sent again at once on a new connection, as a client does, and counted
apart ("re"); a second failure is an error. Machines
come online at random moments of the first part of the warm-up (a first
pull, then the wait), and each one's first post falls at a random moment of
its first interval, so the fleet does not march in step.

**Configurations**, measured interleaved step by step (at each machine count:
sqlite-1, pg-1, pg-workers, then the next count), each on its own database:

* ``sqlite-1``: one ``syncengine relay serve`` on a SQLite file;
* ``pg-1``: one relay process on a throw-away PostgreSQL server
  (tests/relay/pg_server.py: ``initdb`` in a temporary directory, 127.0.0.1,
  a free port), restarted with durability **on** (fsync, synchronous commit,
  full-page writes), as deployed and as the SQLite relay's
  ``synchronous=FULL`` commits are (``--pg-durability off`` keeps the test
  suite's setting, for figures of the relay alone);
* ``pg-workers``: ``relay serve --workers N`` (default: the core count) on
  the same server, another database. When ``relay serve --help`` offers no
  ``--workers`` the configuration is skipped with a printed reason; it is
  picked up by itself once the option exists.

Every relay runs with ``--no-access-log``, ``--live-max-waits`` raised past
the largest machine count, and ``SYNCENGINE_RELAY_MAX_CONNECTIONS_PER_PEER``
raised (every simulated machine connects from 127.0.0.1, so the per-peer
cap, 64 by default, would otherwise close all but 64 of their connections).
This process raises its soft open-files limit for the connections, and the
relays and load generators inherit it.

**A step** (one configuration, one machine count): the machines connect and
run for a warm-up (``--warmup``), then for a measurement window
(``--window``); a figure counts the requests *started* inside the window,
and every request in flight when the window closes is awaited, so a slow
tail is never cut off. Per request kind (POST, GET; the live wait is
counted, not timed, since it is held on purpose) p50 and p99; the delivery
time (a POST's start until a teammate's pull returned the message);
errors (any transport failure or non-200 answer, warm-up included: must be
0 — they are printed and the bench exits 1); the relay's CPU over the window
(its whole process tree, with exited children reaped into their parent) and
the PostgreSQL server's (postmaster and every backend) separately, as cores
used and per 100 machines; the relay tree's RSS at the window's end, and its
growth per 100 more machines since the previous step (the slope, so the
relay's fixed size is not spread over the machines; the idle relay before
the first step); the PostgreSQL server's PSS (its shared buffers would be
counted once per backend in RSS). Beside every row: the
load average at the step's end, the load generators' own CPU, and their
event-loop lag (p99 of how late a 100 ms timer fired), since a late loop
makes every latency it measures longer.

**The ramp**: the steps are the counts of ``--machines`` and, in full
mode, the points of :data:`RAMP_POINTS` from the smallest of them up to
``--cap`` (100, 200, 300, 500, 700, 1,000, 1,500, 2,000, 3,000). The first
step whose POST or GET p99 passed 1 s is reported as where p99 passes 1 s
(with the step under it); from then on — or after a step with errors — a
configuration still measures the ``--machines`` counts it has not reached
(the figures asked for), but no ramp point in between or past them.

**The load generators share this host with the relays** (2 cores here): the
machines run as asyncio tasks in ``--loadgen`` spawned processes (a team
lives in one of them, so delivery is timed on one clock), and their CPU is
CPU the relay did not get. The figures are therefore a floor for a relay
with the host to itself; the output says so beside the table.

Bounded: quick mode (``--quick``: 20 and 50 machines, 4 s warm-up, 6 s
window) takes about 1.5 minutes; the full mode (6 s warm-up, 20 s window
per step) stays within a 14-minute budget: a step is started only while the
longest step so far still fits before it ends, and a run cut short says so.
Everything listens on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import dataclasses
import json
import math
import multiprocessing
import os
import random
import resource
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _common import (  # noqa: E402
    Figure,
    Report,
    TreeMemorySampler,
    add_common_arguments,
    format_load,
    load_average,
    process_tree,
    raise_open_files_limit,
    tree_cpu_seconds,
    tree_rss_mb,
)

from wire.http_v1.headers import LIVE_HEADER, LIVE_HEADER_VALUE  # noqa: E402
from wire.http_v1.live import LIVE_WAIT  # noqa: E402
from wire.http_v1.paths import CAPABILITIES, HEALTH, MESSAGES, PAIRING_EXCHANGE  # noqa: E402

#: The latency past which a step ends a configuration's ramp (issue #35).
P99_LIMIT_S = 1.0
#: Page size of a pull (the protocol's largest).
PAGE = 1000
#: Seconds a wait asks for (the relay's default cap is 25).
WAIT_S = 25
#: Beyond a wait's own seconds, how long its answer may take (specs/live.md §5).
WAIT_MARGIN_S = 15.0
#: A wait answered sooner than this with nothing new is re-asked only after it.
WAIT_SPACING_S = 1.0
#: A failed request is retried after this long.
RETRY_S = 1.0
#: What httpx raises when a request went out on a connection the relay had
#: just closed (kept-alive past its idle timeout): retried once (Machine.request).
STALE_CONNECTION = (httpx.ReadError, httpx.RemoteProtocolError, httpx.WriteError)
#: Per-request deadline of a POST or GET.
REQUEST_TIMEOUT_S = 60.0
#: How often the event-loop lag probe fires.
LAG_TICK_S = 0.1
#: Concurrent pairing exchanges while machines are added.
PAIRING_CONCURRENCY = 16
#: File descriptors per machine: two in the load generator, two in the relay,
#: plus room for the relay's and PostgreSQL's own.
FDS_PER_MACHINE = 4
FD_SLACK = 1024
#: What SYNCENGINE_RELAY_MAX_CONNECTIONS_PER_PEER is set to for the relays.
PER_PEER_FOR_BENCH = 1_000_000
PER_PEER_ENV = "SYNCENGINE_RELAY_MAX_CONNECTIONS_PER_PEER"

PROTOCOL = {"Agmsg-Protocol-Version": "1"}
SQLITE_1, PG_1, PG_WORKERS = "sqlite-1", "pg-1", "pg-workers"
CONFIGS = (SQLITE_1, PG_1, PG_WORKERS)
KINDS = ("POST", "GET")


@dataclass(frozen=True)
class Settings:
    """Everything one run is parameterized by (``--help`` describes each)."""

    machines: tuple[int, ...]
    cap: int
    warmup: float
    window: float
    interval: float
    jitter: float
    batch: tuple[int, int]
    blob: tuple[int, int]
    team: tuple[int, int]
    mode: str
    configs: tuple[str, ...]
    pg_durable: bool
    workers: int
    loadgen: int
    budget: float
    seed: int


def _range(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    pair = (int(low), int(high or low))
    if pair[0] < 1 or pair[1] < pair[0]:
        raise argparse.ArgumentTypeError(f"{text!r} is not a range like 1-5")
    return pair


def _counts(text: str) -> tuple[int, ...]:
    try:
        values = tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list like 100,300,1000") from None
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError("machine counts must be 1 or more")
    return values


def _configs(text: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    unknown = [x for x in names if x not in CONFIGS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"configurations are {', '.join(CONFIGS)}")
    return names


def parse_settings(argv: Sequence[str] | None) -> tuple[Settings, argparse.Namespace]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    add_common_arguments(parser)
    parser.add_argument("--machines", type=_counts, default=None, help="counts to report")
    parser.add_argument("--cap", type=int, default=None, help="largest count the ramp tries")
    parser.add_argument("--warmup", type=float, default=None, help="seconds before a window")
    parser.add_argument("--window", type=float, default=None, help="seconds measured per step")
    parser.add_argument("--interval", type=float, default=5.0, help="mean seconds between posts")
    parser.add_argument("--jitter", type=float, default=0.5, help="± share of the interval")
    parser.add_argument("--batch", type=_range, default=(1, 5), help="envelopes per post")
    parser.add_argument("--blob", type=_range, default=(200, 1500), help="bytes per envelope")
    parser.add_argument("--team", type=_range, default=(3, 5), help="machines per team")
    parser.add_argument("--mode", choices=("auto", "live", "poll"), default="auto")
    parser.add_argument(
        "--configs",
        type=_configs,
        default=CONFIGS,
        help=f"which of {','.join(CONFIGS)} to run (default all)",
    )
    parser.add_argument(
        "--pg-durability",
        choices=("on", "off"),
        default="on",
        help="PostgreSQL's fsync, synchronous_commit and full_page_writes (default on, "
        "as deployed; the test suite's server runs with them off)",
    )
    parser.add_argument(
        "--workers", type=int, default=os.cpu_count() or 2, help="processes of pg-workers"
    )
    parser.add_argument("--loadgen", type=int, default=2, help="load generator processes")
    parser.add_argument("--budget", type=float, default=None, help="seconds for the whole run")
    parser.add_argument("--seed", type=int, default=35)
    args = parser.parse_args(argv)
    for name in ("interval", "window", "warmup", "budget"):
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and value > 0):
            parser.error(f"--{name} must be a positive number of seconds")
    if args.cap is not None and args.cap < 1:
        parser.error("--cap must be 1 or more machines")
    machines = args.machines or ((20, 50) if args.quick else (100, 300, 1000))
    settings = Settings(
        machines=machines,
        cap=max(args.cap if args.cap is not None else (0 if args.quick else 3000), machines[-1]),
        warmup=args.warmup if args.warmup is not None else (4.0 if args.quick else 6.0),
        window=args.window if args.window is not None else (6.0 if args.quick else 20.0),
        interval=args.interval,
        jitter=min(max(args.jitter, 0.0), 0.95),
        batch=args.batch,
        blob=args.blob,
        team=args.team,
        mode=args.mode,
        configs=args.configs,
        pg_durable=args.pg_durability == "on",
        workers=max(args.workers, 1),
        loadgen=max(args.loadgen, 1),
        budget=args.budget if args.budget is not None else (150.0 if args.quick else 840.0),
        seed=args.seed,
    )
    return settings, args


#: Ramp points between and past the reported counts (full mode): where p99
#: passes 1 s is known to within one of these steps.
RAMP_POINTS = (10, 20, 30, 50, 70, 100, 200, 300, 500, 700, 1000, 1500, 2000, 3000, 5000)


def ramp(settings: Settings, fill: bool) -> list[int]:
    """The reported counts and, with ``fill``, the ramp points from the
    smallest of them up to the cap (the cap itself included)."""
    steps = set(settings.machines) | {settings.cap}
    if fill:
        low = settings.machines[0]
        steps |= {n for n in RAMP_POINTS if low < n <= settings.cap}
    return sorted(steps)


# -- what crosses to a load generator ----------------------------------------------------


@dataclass(frozen=True)
class MachineSpec:
    """One simulated machine: its team, its relay, its own credential."""

    key: str
    team: str
    base_url: str
    headers: dict[str, str]


@dataclass(frozen=True)
class StepPlan:
    """One step for one load generator: its share of the machines (whole teams)."""

    config: str
    machines: list[MachineSpec]
    live: bool
    interval: float
    jitter: float
    batch: tuple[int, int]
    blob: tuple[int, int]
    warmup: float
    window: float
    seed: int


@dataclass
class StepResult:
    """What one load generator saw in one step."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    requests: Counter[str] = field(default_factory=Counter)
    errors: Counter[str] = field(default_factory=Counter)
    reconnects: Counter[str] = field(default_factory=Counter)
    waits_woken: int = 0
    waits_timed_out: int = 0
    cpu_s: float = 0.0
    lag: list[float] = field(default_factory=list)
    drain_s: float = 0.0


# -- the load generator (a spawned process) ------------------------------------------------


@dataclass
class MachineState:
    """What a machine keeps from step to step: its transport cursor, its read revision."""

    cursor: int = 0
    read_revision: int = 0


class Recorder:
    """Samples of the requests started inside the window, and every error."""

    def __init__(self, window_start: float, window_end: float) -> None:
        self.window_start = window_start
        self.window_end = window_end
        self.result = StepResult()

    def inside(self, started: float) -> bool:
        return self.window_start <= started < self.window_end

    def sample(self, kind: str, started: float, seconds: float) -> None:
        self.result.requests[kind] += 1
        if kind != "wait" and self.inside(started):  # a wait is held on purpose
            self.result.latencies.setdefault(kind, []).append(seconds)

    def error(self, kind: str, what: str) -> None:
        self.result.errors[f"{kind}: {what}"] += 1


class Machine:
    """One simulated device: a cycle loop (post, pull) and, live, a watch."""

    def __init__(
        self,
        spec: MachineSpec,
        state: MachineState,
        client: httpx.AsyncClient,
        plan: StepPlan,
        sent: dict[str, tuple[float, str]],
        recorder: Recorder,
        rng: random.Random,
    ) -> None:
        self.spec = spec
        self.state = state
        self.client = client
        self.plan = plan
        self.sent = sent  # wire ID -> (POST start, poster key), shared by the team
        self.recorder = recorder
        self.rng = rng
        self.post_headers = {**spec.headers, "Content-Type": "application/json"}
        self.kick = asyncio.Event()
        self.cycled = asyncio.Event()
        self.online = asyncio.Event()
        self.news_seq = 0
        self.stopping = False

    def gap(self) -> float:
        j = self.plan.jitter
        return self.plan.interval * self.rng.uniform(1 - j, 1 + j)

    async def request(
        self, kind: str, method: str, url: str, **kwargs: Any
    ) -> httpx.Response | None:
        started = time.monotonic()
        for attempt in (1, 2):
            try:
                response = await self.client.request(method, url, **kwargs)
                break
            except STALE_CONNECTION as exc:
                # The relay closed a kept-alive connection (its idle timeout) just
                # as this request went out on it: sent again on a new connection,
                # as a client does (a POST is idempotent by its wire IDs), and
                # counted apart. A second failure is an error.
                if attempt == 2:
                    self.recorder.error(kind, type(exc).__name__)
                    return None
                self.recorder.result.reconnects[f"{kind}: {type(exc).__name__}"] += 1
            except httpx.HTTPError as exc:
                self.recorder.error(kind, type(exc).__name__)
                return None
        seconds = time.monotonic() - started
        if response.status_code != 200:
            code = ""
            with contextlib.suppress(ValueError, AttributeError, TypeError, KeyError):
                code = " " + str(response.json()["error"]["code"])
            self.recorder.error(kind, f"HTTP {response.status_code}{code}")
            return None
        self.recorder.sample(kind, started, seconds)
        return response

    async def post(self) -> bool:
        count = self.rng.randint(*self.plan.batch)
        messages = []
        for _ in range(count):
            wire_id = str(uuid.uuid4())
            blob = base64.b64encode(os.urandom(self.rng.randint(*self.plan.blob))).decode()
            messages.append(
                {
                    "id": wire_id,
                    "envelope": {"v": 1, "cipher": "none", "key_id": None, "blob": blob},
                }
            )
        started = time.monotonic()
        for message in messages:  # before sending: a teammate may pull it first
            self.sent[str(message["id"])] = (started, self.spec.key)
        body = json.dumps({"messages": messages}).encode()
        response = await self.request(
            "POST", "POST", MESSAGES, content=body, headers=self.post_headers
        )
        return response is not None

    async def pull(self) -> bool:
        while True:
            response = await self.request(
                "GET",
                "GET",
                MESSAGES,
                params={"after": str(self.state.cursor), "limit": str(PAGE)},
                headers=self.spec.headers,
            )
            if response is None:
                return False
            now = time.monotonic()
            try:
                page = response.json()
                ids = [str(message["id"]) for message in page["messages"]]
                next_after, more = int(page["next_after"]), bool(page["has_more"])
            except (ValueError, KeyError, TypeError) as exc:
                self.recorder.error("GET", f"malformed page ({type(exc).__name__})")
                return False
            for wire_id in ids:
                origin = self.sent.get(wire_id)
                if origin is None or origin[1] == self.spec.key:
                    continue
                if self.recorder.inside(origin[0]):
                    delivery = self.recorder.result.latencies.setdefault("delivery", [])
                    delivery.append(now - origin[0])
            self.state.cursor = max(self.state.cursor, next_after)
            if not more:
                return True

    async def cycles(self) -> None:
        """Come online, pull, then post when due and pull when posted, woken or
        (polling) due; until stopped."""
        # Machines come online spread over the first part of the warm-up, as a
        # fleet does, rather than all in the same millisecond.
        await asyncio.sleep(self.rng.uniform(0, min(self.plan.interval, self.plan.warmup / 2)))
        if not self.stopping and not await self.pull():
            await asyncio.sleep(RETRY_S)
        self.online.set()
        now = time.monotonic()
        next_post = now + self.rng.uniform(0, self.plan.interval)
        next_poll = now + self.rng.uniform(0, self.plan.interval)
        while not self.stopping:
            due = next_post if self.plan.live else min(next_post, next_poll)
            delay = due - time.monotonic()
            if delay > 0 and not self.kick.is_set():
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await self.kick.wait()
            self.kick.clear()
            if self.stopping:
                break
            now = time.monotonic()
            work = self.news_seq > self.state.cursor
            if now >= next_post:
                next_post = now + self.gap()
                work = True
                if not await self.post():
                    await asyncio.sleep(RETRY_S)
            if not self.plan.live and now >= next_poll:
                next_poll = now + self.gap()
                work = True
            if work and not await self.pull():
                await asyncio.sleep(RETRY_S)
            self.cycled.set()

    async def watch(self) -> None:
        """Hold the live wait; on news past the cursor, kick a cycle and wait for it."""
        await self.online.wait()
        while True:
            asked = time.monotonic()
            response = await self.request(
                "wait",
                "GET",
                LIVE_WAIT,
                params={
                    "after": str(self.state.cursor),
                    "read_after": str(self.state.read_revision),
                    "wait": str(WAIT_S),
                },
                headers=self.spec.headers,
                timeout=WAIT_S + WAIT_MARGIN_S,
            )
            if response is None:
                await asyncio.sleep(RETRY_S)
                continue
            try:
                answer = response.json()
                self.state.read_revision = int(answer["read_revision"])
                head, woken = int(answer["current_seq"]), bool(answer["woken"])
            except (ValueError, KeyError, TypeError) as exc:
                self.recorder.error("wait", f"malformed answer ({type(exc).__name__})")
                await asyncio.sleep(RETRY_S)
                continue
            if woken:
                self.recorder.result.waits_woken += 1
            else:
                self.recorder.result.waits_timed_out += 1
            if head > self.state.cursor:
                self.news_seq = head
                self.cycled.clear()
                self.kick.set()
                await self.cycled.wait()
            elif time.monotonic() - asked < WAIT_SPACING_S:
                await asyncio.sleep(WAIT_SPACING_S - (time.monotonic() - asked))


async def _lag_probe(recorder: Recorder, out: list[float]) -> None:
    while True:
        before = time.monotonic()
        await asyncio.sleep(LAG_TICK_S)
        late = time.monotonic() - before - LAG_TICK_S
        if recorder.inside(before):
            out.append(max(late, 0.0))


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def _run_step(
    plan: StepPlan, conn: Connection, states: dict[str, MachineState]
) -> StepResult:
    tls = ssl.create_default_context()  # one context, not one per client
    limits = httpx.Limits(max_connections=2, max_keepalive_connections=2)
    timeout = httpx.Timeout(REQUEST_TIMEOUT_S)
    clients = [
        httpx.AsyncClient(base_url=m.base_url, limits=limits, timeout=timeout, verify=tls)
        for m in plan.machines
    ]
    conn.send("ready")
    start_at: float = await asyncio.to_thread(conn.recv)
    window_start = start_at + plan.warmup
    window_end = window_start + plan.window
    recorder = Recorder(window_start, window_end)
    teams: dict[str, dict[str, tuple[float, str]]] = {}
    rng = random.Random(plan.seed)
    machines = [
        Machine(
            spec,
            states.setdefault(f"{plan.config}/{spec.key}", MachineState()),
            client,
            plan,
            teams.setdefault(spec.team, {}),
            recorder,
            random.Random(rng.random()),
        )
        for spec, client in zip(plan.machines, clients, strict=True)
    ]
    await asyncio.sleep(max(0.0, start_at - time.monotonic()))
    lag = asyncio.create_task(_lag_probe(recorder, recorder.result.lag))
    cycles = [asyncio.create_task(m.cycles()) for m in machines]
    watches = [asyncio.create_task(m.watch()) for m in machines] if plan.live else []
    await asyncio.sleep(max(0.0, window_start - time.monotonic()))
    cpu_before = _cpu_s()
    await asyncio.sleep(max(0.0, window_end - time.monotonic()))
    recorder.result.cpu_s = _cpu_s() - cpu_before
    drain = time.monotonic()
    for machine in machines:
        machine.stopping = True
        machine.kick.set()
    await asyncio.gather(*cycles)
    recorder.result.drain_s = time.monotonic() - drain
    for task in [*watches, lag]:
        task.cancel()
    await asyncio.gather(*watches, lag, return_exceptions=True)
    await asyncio.gather(*(client.aclose() for client in clients))
    return recorder.result


def loadgen_main(conn: Connection) -> None:
    """A load generator process: one step at a time, machine state kept between steps."""
    states: dict[str, MachineState] = {}
    while True:
        plan: StepPlan | None = conn.recv()
        if plan is None:
            break
        conn.send(asyncio.run(_run_step(plan, conn, states)))


class LoadGenerators:
    """Spawned load generator processes; teams are dealt to them whole."""

    def __init__(self, count: int) -> None:
        context = multiprocessing.get_context("spawn")  # no fork of a threaded process
        self.pipes: list[Connection] = []
        self.processes: list[Any] = []
        for _ in range(count):
            parent, child = context.Pipe()
            process = context.Process(target=loadgen_main, args=(child,), daemon=True)
            process.start()
            child.close()
            self.pipes.append(parent)
            self.processes.append(process)

    def plans(self, base: StepPlan) -> list[StepPlan]:
        teams: dict[str, list[MachineSpec]] = {}
        for spec in base.machines:
            teams.setdefault(spec.team, []).append(spec)
        shares: list[list[MachineSpec]] = [[] for _ in self.pipes]
        for index, members in enumerate(teams.values()):
            shares[index % len(shares)].extend(members)
        return [
            dataclasses.replace(base, machines=share, seed=base.seed * 100 + i)
            for i, share in enumerate(shares)
        ]

    def close(self) -> None:
        for pipe in self.pipes:
            with contextlib.suppress(OSError):
                pipe.send(None)
        for process in self.processes:
            process.join(timeout=10)
            if process.is_alive():
                process.terminate()


# -- relays ---------------------------------------------------------------------------------


def workers_supported() -> bool:
    """Whether ``relay serve`` offers ``--workers`` (issue #35, deliverable 1)."""
    result = subprocess.run(
        [sys.executable, "-m", "syncengine", "relay", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return "--workers" in result.stdout


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class RelayGroup:
    """One configuration's relay: a ``relay serve`` process (and its workers)."""

    name: str
    database: str
    process: subprocess.Popen[str]
    base_url: str
    live: bool
    log: Path
    lines: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_tail(self, lines: int = 8) -> list[str]:
        """The relay's last stderr lines (shown beside failed requests)."""
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return []
        return text.strip().splitlines()[-lines:]

    def stop(self) -> None:
        tree = process_tree(self.pid)
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        for pid in tree[1:]:  # a worker that outlived its parent: only ones this run started
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def start_relay(
    name: str, database: str, log: Path, extra: Sequence[str], waits: int
) -> RelayGroup:
    env = {**os.environ, PER_PEER_ENV: str(PER_PEER_FOR_BENCH)}
    port = _free_port() if "--workers" in extra else 0
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "syncengine",
            "relay",
            "serve",
            "--db",
            database,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-access-log",
            "--live-max-waits",
            str(waits),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=log.open("ab"),
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    if not first:
        process.wait(timeout=10)
        raise RuntimeError(f"{name}: relay did not start: {log.read_text()[-1500:]}")
    ready = json.loads(first)
    url = f"http://127.0.0.1:{ready['port']}"
    group = RelayGroup(name, database, process, url, bool(ready.get("live")), log)
    group.lines.append(first.strip())
    stdout = process.stdout

    def drain() -> None:  # nothing the relay prints may block it
        for line in stdout:
            group.lines.append(line.strip())

    threading.Thread(target=drain, name=f"{name}-stdout", daemon=True).start()
    deadline = time.monotonic() + 60
    while True:
        try:
            response = httpx.get(group.base_url + HEALTH, timeout=5)
            if response.status_code == 200:
                break
            answer = f"health answered HTTP {response.status_code}"
        except httpx.TransportError as exc:
            answer = f"health: {type(exc).__name__}"
        if time.monotonic() > deadline or process.poll() is not None:
            group.stop()
            raise RuntimeError(f"{name}: relay not ready ({answer}): {log.read_text()[-1500:]}")
        time.sleep(0.1)
    return group


# -- teams and credentials ------------------------------------------------------------------


@dataclass
class Fleet:
    """The machines of one configuration so far (teams are added whole)."""

    group: RelayGroup
    machines: list[MachineSpec] = field(default_factory=list)


async def _pair_all(base_url: str, wanted: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    gate = asyncio.Semaphore(PAIRING_CONCURRENCY)
    protocol = PROTOCOL
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:

        async def one(team_id: str, token: str) -> dict[str, str]:
            async with gate:
                response = await client.post(
                    PAIRING_EXCHANGE, json={"token": token}, headers=protocol
                )
            response.raise_for_status()
            credential = response.json()["credential"]
            return {**protocol, "Agmsg-Team-ID": team_id, "Authorization": f"Bearer {credential}"}

        return list(await asyncio.gather(*(one(t, k) for t, k in wanted)))


def grow(fleet: Fleet, count: int, settings: Settings, rng: random.Random) -> float:
    """Add whole teams (sizes from ``--team``, the last one cut to fit) until
    ``count`` machines, each paired with its own credential; seconds taken."""
    from relay.secrets import utc_now
    from relay.storage import location
    from tests.relay.helpers import issue_token, provision

    started = time.monotonic()
    wanted: list[tuple[str, str]] = []
    store = location.open_store(fleet.group.database)
    try:
        missing = count - len(fleet.machines)
        while missing > 0:
            size = min(rng.randint(*settings.team), missing)
            team = provision(store, tuple(f"agent-{i}" for i in range(size))).team_id
            wanted.extend((team, issue_token(store, team, utc_now())) for _ in range(size))
            missing -= size
    finally:
        store.close()
    try:
        headers = asyncio.run(_pair_all(fleet.group.base_url, wanted))
    except httpx.HTTPError as exc:
        raise RuntimeError(
            f"{fleet.group.name}: pairing {len(wanted)} more machines failed "
            f"({type(exc).__name__}: {exc})"
        ) from None
    if not fleet.machines and headers:  # the capabilities answer is the truth (live.md §3)
        response = httpx.get(fleet.group.base_url + CAPABILITIES, headers=headers[0], timeout=30)
        response.raise_for_status()
        fleet.group.live = response.headers.get(LIVE_HEADER) == LIVE_HEADER_VALUE
    for (team, _), header in zip(wanted, headers, strict=True):
        key = f"m{len(fleet.machines)}"
        fleet.machines.append(MachineSpec(key, team, fleet.group.base_url, header))
    return time.monotonic() - started


# -- one step --------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (``q`` in 0..100)."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = (len(ordered) - 1) * q / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class Row:
    """One configuration at one machine count."""

    config: str
    machines: int
    p50: dict[str, float]
    p99: dict[str, float]
    samples: dict[str, int]
    errors: Counter[str]
    reconnects: Counter[str]
    waits_woken: int
    waits_timed_out: int
    relay_cpu_cores: float
    pg_cpu_cores: float | None
    relay_rss_mb: float
    #: The RSS growth is measured from here: (machines, relay RSS MiB) of this
    #: configuration's previous step, or (0, its idle RSS) before the first.
    rss_base: tuple[int, float]
    pg_pss_mb: float | None
    loadgen_cpu_cores: float
    loadgen_lag_p99: float
    machine_busy: float
    load: tuple[float, float, float]
    drain_s: float

    @property
    def worst_p99(self) -> float:
        return max((self.p99.get(k, float("nan")) for k in KINDS), default=float("nan"))

    def passed_limit(self) -> bool:
        return any(self.p99.get(k, 0.0) > P99_LIMIT_S for k in KINDS)

    def per_100(self, value: float) -> float:
        return value / (self.machines / 100)

    def rss_growth_per_100(self) -> float:
        """MiB the relay grew per 100 more machines since the previous step
        (the slope, so the relay's fixed size is not spread over the machines)."""
        machines, rss = self.rss_base
        return (self.relay_rss_mb - rss) / max(self.machines - machines, 1) * 100


def _machine_ticks() -> tuple[int, int]:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def _receive(pipe: Connection) -> Any:
    try:
        return pipe.recv()
    except EOFError:
        raise RuntimeError("a load generator exited (its traceback is above)") from None


def run_step(
    loadgen: LoadGenerators,
    fleet: Fleet,
    settings: Settings,
    live: bool,
    pg_pid: int | None,
    rss_base: tuple[int, float],
    step_seed: int,
) -> Row:
    group = fleet.group
    base = StepPlan(
        group.name,
        list(fleet.machines),
        live,
        settings.interval,
        settings.jitter,
        settings.batch,
        settings.blob,
        settings.warmup,
        settings.window,
        step_seed,
    )
    for pipe, plan in zip(loadgen.pipes, loadgen.plans(base), strict=True):
        pipe.send(plan)
    for pipe in loadgen.pipes:
        if _receive(pipe) != "ready":
            raise RuntimeError("a load generator did not get ready")
    start_at = time.monotonic() + 0.2
    for pipe in loadgen.pipes:
        pipe.send(start_at)
    window_start = start_at + settings.warmup
    window_end = window_start + settings.window
    time.sleep(max(0.0, window_start - time.monotonic()))
    relay_before = tree_cpu_seconds(group.pid)
    pg_before = tree_cpu_seconds(pg_pid) if pg_pid is not None else 0.0
    ticks_before = _machine_ticks()
    measured_from = time.monotonic()
    rss = pg_pss = 0.0
    while (left := window_end - time.monotonic()) > 0:  # the largest RSS seen in the window
        time.sleep(min(left, 1.0))
        rss = max(rss, tree_rss_mb(group.pid)[0])
        if pg_pid is not None:
            pg_pss = max(pg_pss, tree_rss_mb(pg_pid)[1])
    relay_cpu = tree_cpu_seconds(group.pid) - relay_before
    pg_cpu = tree_cpu_seconds(pg_pid) - pg_before if pg_pid is not None else None
    ticks_after = _machine_ticks()
    measured = time.monotonic() - measured_from
    results: list[StepResult] = [_receive(pipe) for pipe in loadgen.pipes]
    load = load_average()
    latencies: dict[str, list[float]] = {}
    errors: Counter[str] = Counter()
    reconnects: Counter[str] = Counter()
    for result in results:
        for kind, values in result.latencies.items():
            latencies.setdefault(kind, []).extend(values)
        errors.update(result.errors)
        reconnects.update(result.reconnects)
    lags = [x for r in results for x in r.lag]
    total_ticks = ticks_after[1] - ticks_before[1]
    return Row(
        config=group.name,
        machines=len(fleet.machines),
        p50={k: percentile(v, 50) for k, v in latencies.items()},
        p99={k: percentile(v, 99) for k, v in latencies.items()},
        samples={k: len(v) for k, v in latencies.items()},
        errors=errors,
        reconnects=reconnects,
        waits_woken=sum(r.waits_woken for r in results),
        waits_timed_out=sum(r.waits_timed_out for r in results),
        relay_cpu_cores=relay_cpu / measured,
        pg_cpu_cores=None if pg_cpu is None else pg_cpu / measured,
        relay_rss_mb=rss,
        rss_base=rss_base,
        pg_pss_mb=pg_pss if pg_pid is not None else None,
        loadgen_cpu_cores=sum(r.cpu_s for r in results) / settings.window,
        loadgen_lag_p99=percentile(lags, 99),
        machine_busy=(ticks_after[0] - ticks_before[0]) / total_ticks if total_ticks else math.nan,
        load=load,
        drain_s=max(r.drain_s for r in results),
    )


# -- report ----------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return "-" if seconds != seconds else f"{seconds * 1000:.0f}"


HEADER = (
    f"{'config':<11}{'machines':>8} {'POST p50/p99 ms':>16} {'GET p50/p99 ms':>15} "
    f"{'deliv p50/p99':>14} {'err':>4} {'re':>3} {'relay cores':>11} {'/100m':>6} "
    f"{'pg cores':>8} {'/100m':>6} {'relay RSS':>9} {'+/100m':>7} {'pg PSS':>7} "
    f"{'gen cores':>9} {'gen lag99':>9} {'busy':>5}  load 1/5/15"
)


def row_line(row: Row) -> str:
    def pair(kind: str) -> str:
        return f"{_ms(row.p50.get(kind, math.nan))}/{_ms(row.p99.get(kind, math.nan))}"

    pg_cores = "-" if row.pg_cpu_cores is None else f"{row.pg_cpu_cores:.2f}"
    pg_per = "-" if row.pg_cpu_cores is None else f"{row.per_100(row.pg_cpu_cores):.3f}"
    pg_pss = "-" if row.pg_pss_mb is None else f"{row.pg_pss_mb:.0f}"
    grown = row.rss_growth_per_100()
    return (
        f"{row.config:<11}{row.machines:>8} {pair('POST'):>16} {pair('GET'):>15} "
        f"{pair('delivery'):>14} {sum(row.errors.values()):>4} "
        f"{sum(row.reconnects.values()):>3} "
        f"{row.relay_cpu_cores:>11.2f} {row.per_100(row.relay_cpu_cores):>6.3f} "
        f"{pg_cores:>8} {pg_per:>6} {row.relay_rss_mb:>9.0f} {grown:>7.1f} {pg_pss:>7} "
        f"{row.loadgen_cpu_cores:>9.2f} {_ms(row.loadgen_lag_p99):>7}ms "
        f"{row.machine_busy:>5.0%}  {' '.join(f'{x:.2f}' for x in row.load)}"
    )


def record(report: Report, row: Row) -> None:
    """Every figure of a row into the JSON report (the table is printed apart)."""
    load = " ".join(f"{x:.2f}" for x in row.load)
    name = f"{row.config} {row.machines}m"
    for kind in (*KINDS, "delivery"):
        if kind not in row.p99:
            continue
        for q, values in (("p50", row.p50), ("p99", row.p99)):
            target = f"<= {P99_LIMIT_S}" if q == "p99" and kind in KINDS else None
            report.add(
                Figure(
                    f"{name} {kind} {q}",
                    round(values[kind], 4),
                    "s",
                    target=target,
                    source="#35" if target else None,
                    detail=f"{row.samples[kind]} samples; load average {load}",
                ),
                show=False,
            )
    report.add(
        Figure(
            f"{name} errors",
            sum(row.errors.values()),
            "requests",
            target="<= 0",
            source="#35",
            detail="; ".join(f"{n} x {what}" for what, n in row.errors.most_common()) or None,
        ),
        show=False,
    )
    report.add(
        Figure(
            f"{name} requests resent after a closed kept-alive connection",
            sum(row.reconnects.values()),
            "requests",
            detail="; ".join(f"{n} x {what}" for what, n in row.reconnects.most_common()) or None,
        ),
        show=False,
    )
    report.add(
        Figure(
            f"{name} live waits answered",
            row.waits_woken + row.waits_timed_out,
            "waits",
            detail=f"{row.waits_woken} woken by news, {row.waits_timed_out} at their time "
            "limit (warm-up included)",
        ),
        show=False,
    )
    report.add(
        Figure(
            f"{name} relay CPU per 100 machines",
            round(row.per_100(row.relay_cpu_cores), 4),
            "cores",
            detail=f"whole relay process tree; load average {load}",
        ),
        show=False,
    )
    if row.pg_cpu_cores is not None:
        report.add(
            Figure(
                f"{name} PostgreSQL CPU per 100 machines",
                round(row.per_100(row.pg_cpu_cores), 4),
                "cores",
                detail=f"postmaster and backends; load average {load}",
            ),
            show=False,
        )
    report.add(
        Figure(
            f"{name} relay RSS",
            round(row.relay_rss_mb, 1),
            "MiB",
            detail=f"whole relay process tree; load average {load}",
        ),
        show=False,
    )
    report.add(
        Figure(
            f"{name} relay RSS growth per 100 machines",
            round(row.rss_growth_per_100(), 2),
            "MiB",
            detail=f"slope from {row.rss_base[0]} machines ({row.rss_base[1]:.1f} MiB)",
        ),
        show=False,
    )
    report.add(
        Figure(
            f"{name} load generator CPU",
            round(row.loadgen_cpu_cores, 3),
            "cores",
            detail="shares the host with the relay",
        ),
        show=False,
    )


# -- the run ----------------------------------------------------------------------------------


@contextlib.contextmanager
def postgres(wanted: bool, durable: bool) -> Iterator[Any]:
    """A throw-away PostgreSQL server, or the reason there is none.

    tests/relay/pg_server.py runs it with durability off, which is right for
    tests; a capacity figure is for a deployment, and the SQLite relay beside
    it commits with ``synchronous=FULL``. With ``durable`` the same data
    directory is restarted on the same port with fsync, synchronous commit
    and full-page writes on, so both backends pay for their commits.
    """
    from tests.relay import pg_server

    if not wanted:
        yield RuntimeError("not asked for")
        return
    try:
        server = pg_server.start_server()
        if durable:
            server.halt()
            server.process = _launch_durable(server.root, server.port)
            pg_server._wait_ready(server)
    except pg_server.PostgresUnavailable as exc:
        yield exc
        return
    try:
        yield server
    finally:
        server.stop()


def _launch_durable(root: Path, port: int) -> subprocess.Popen[bytes]:
    """``postgres`` on ``root`` as tests/relay/pg_server.py starts it, but durable."""
    from tests.relay import pg_server

    bin_dir = pg_server.find_bin_dir()
    if bin_dir is None:
        raise pg_server.PostgresUnavailable("no PostgreSQL binaries (initdb) found")
    prefix, _, _ = pg_server._as_user()
    settings = ("fsync=on", "synchronous_commit=on", "full_page_writes=on", "max_connections=200")
    with (root / "server.log").open("ab") as log:
        return subprocess.Popen(
            [
                *prefix,
                str(bin_dir / "postgres"),
                *("-D", str(root / "data"), "-k", str(root / "sock")),
                *("-h", "127.0.0.1", "-p", str(port)),
                *(arg for setting in settings for arg in ("-c", setting)),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


def start_groups(
    settings: Settings,
    tmp: Path,
    server: Any,
    waits: int,
    groups: list[RelayGroup],
    skipped: dict[str, str],
) -> int | None:
    """Start the relays of ``settings.configs`` into ``groups`` (each on a
    database of its own); note in ``skipped`` why any cannot run. Returns the
    PostgreSQL server's pid, if there is one."""
    from relay.storage import location

    if SQLITE_1 in settings.configs:
        sqlite_db = str(tmp / "relay.db")
        location.initialize(sqlite_db)
        groups.append(start_relay(SQLITE_1, sqlite_db, tmp / "sqlite.log", (), waits))
    wanted = [name for name in (PG_1, PG_WORKERS) if name in settings.configs]
    if isinstance(server, Exception):
        skipped.update((name, f"no PostgreSQL here ({server})") for name in wanted)
        return None
    if PG_WORKERS in wanted and not workers_supported():
        wanted.remove(PG_WORKERS)
        skipped[PG_WORKERS] = (
            "relay serve has no --workers option yet (issue #35, deliverable 1); "
            "this configuration runs once it has"
        )
    for name in wanted:
        url = server.create_database()
        location.initialize(url)
        extra = ("--workers", str(settings.workers)) if name == PG_WORKERS else ()
        group = start_relay(name, url, tmp / f"{name}.log", extra, waits)
        if name == PG_WORKERS:
            group.name = f"pg-{settings.workers}w"
        groups.append(group)
    return int(server.process.pid)


class StepClock:
    """How long the next step will take, from the steps so far: the warm-up
    and the window, the longest overrun past them (start, drain), and the
    pairing rate of the largest batch paired so far (a small batch's fixed
    cost would inflate it) times the machines it adds — so a 1,000-machine
    step after a 300-machine one is not projected as short as that one."""

    def __init__(self, fixed: float) -> None:
        self.fixed = fixed
        self.overrun = 5.0
        self.per_machine = 0.05
        self.largest = 0

    def projected(self, adding: int) -> float:
        return self.fixed + self.overrun + self.per_machine * max(adding, 0)

    def taken(self, added: int, pairing: float, running: float) -> None:
        self.overrun = max(self.overrun, running - self.fixed)
        if added >= self.largest and added > 0:
            self.largest = added
            self.per_machine = pairing / added


def _filesystem(path: Path) -> str:
    """The filesystem type holding ``path`` (from /proc/mounts), e.g. ``ext4 at /``."""
    best = ("?", "")
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            parts = line.split()
            inside = len(parts) >= 3 and str(path.resolve()).startswith(parts[1])
            if inside and len(parts[1]) >= len(best[1]):
                best = (parts[2], parts[1])
    return f"{best[0]} at {best[1] or '?'}"


def main(argv: Sequence[str] | None = None) -> int:
    settings, args = parse_settings(argv)
    steps = ramp(settings, fill=not args.quick)
    report = Report("capacity", args.quick)
    started = time.monotonic()
    budget_end = started + settings.budget
    fds_needed = steps[-1] * FDS_PER_MACHINE + FD_SLACK
    fd_limit = raise_open_files_limit(fds_needed)
    if fd_limit < fds_needed:
        print(
            f"  warning: the open-files limit is {fd_limit} (hard) but {steps[-1]} machines may "
            f"need {fds_needed}; raise it (ulimit -Hn) or lower --cap, else the largest steps "
            "fail to connect (counted as errors)",
            flush=True,
        )
    print(
        f"bench_capacity: start, {format_load()}, {os.cpu_count()} cores, open-files limit "
        f"{fd_limit}; steps {steps} machines, warm-up {settings.warmup:g} s + window "
        f"{settings.window:g} s each; a post every {settings.interval:g} s "
        f"±{settings.jitter:.0%} of {settings.batch[0]}-{settings.batch[1]} envelopes; "
        f"teams of {settings.team[0]}-{settings.team[1]}",
        flush=True,
    )
    print(
        f"  note: the {settings.loadgen} load generator processes run on this host and "
        "compete with the relay for its cores; their CPU is printed beside each row",
        flush=True,
    )
    durability = "on" if settings.pg_durable else "OFF (--pg-durability off)"
    print(
        f"  note: PostgreSQL durability (fsync, synchronous_commit, full_page_writes) "
        f"{durability}; the SQLite relay commits with synchronous=FULL; both on "
        f"{_filesystem(Path(tempfile.gettempdir()))}",
        flush=True,
    )
    print(
        f"  note: every relay runs with {PER_PEER_ENV}={PER_PEER_FOR_BENCH} (all machines "
        "share 127.0.0.1, whose default cap is 64 connections) and --no-access-log",
        flush=True,
    )
    waits = steps[-1] * 2 + 100
    rows: list[Row] = []
    skipped: dict[str, str] = {}
    loadgen = LoadGenerators(settings.loadgen)
    groups: list[RelayGroup] = []
    failed = False
    try:
        with (
            TreeMemorySampler(interval=1.0) as memory,
            tempfile.TemporaryDirectory(prefix="bench-capacity-") as tmp,
            postgres(
                PG_1 in settings.configs or PG_WORKERS in settings.configs,
                settings.pg_durable,
            ) as server,
        ):
            pg_pid = start_groups(settings, Path(tmp), server, waits, groups, skipped)
            for name, reason in skipped.items():
                print(f"  skipped {name}: {reason}", flush=True)
                report.note(f"{name} skipped: {reason}")
            for group in groups:
                memory.watch(group.name, group.pid)
            idle = {g.name: tree_rss_mb(g.pid)[0] for g in groups}
            baseline = {name: (0, rss) for name, rss in idle.items()}
            print(
                "  relays up in "
                f"{time.monotonic() - started:.1f} s: "
                + ", ".join(
                    f"{g.name} ({'live wait offered' if g.live else 'no live wait'}, "
                    f"idle RSS {idle[g.name]:.0f} MiB, {len(process_tree(g.pid))} processes)"
                    for g in groups
                ),
                flush=True,
            )
            fleets = {g.name: Fleet(g) for g in groups}
            active = [g.name for g in groups]
            #: Configurations past their limit (p99 over 1 s, or errors): they
            #: still run the reported counts, not the ramp points between them.
            beyond: set[str] = set()
            rng = random.Random(settings.seed)
            clock = StepClock(settings.warmup + settings.window)
            print("\n" + HEADER)
            print("-" * len(HEADER), flush=True)
            for count in steps:
                for name in list(active):
                    if name in beyond and count not in settings.machines:
                        continue  # past its limit: only the reported counts are still measured
                    fleet = fleets[name]
                    projected = clock.projected(count - len(fleet.machines))
                    if time.monotonic() + projected > budget_end:
                        print(f"  stopping: {name} at {count} would pass the time budget")
                        report.note(f"time budget reached before {name} at {count} machines")
                        active.clear()
                        break
                    added = count - len(fleet.machines)
                    pairing = grow(fleet, count, settings, rng)
                    live = fleet.group.live if settings.mode == "auto" else settings.mode == "live"
                    step_started = time.monotonic()
                    row = run_step(
                        loadgen,
                        fleet,
                        settings,
                        live,
                        pg_pid if name != SQLITE_1 else None,
                        baseline[name],
                        rng.randrange(1 << 30),
                    )
                    clock.taken(added, pairing, time.monotonic() - step_started)
                    baseline[name] = (row.machines, row.relay_rss_mb)
                    rows.append(row)
                    record(report, row)
                    print(row_line(row), flush=True)
                    if row.reconnects:
                        resent = ", ".join(f"{n} x {w}" for w, n in row.reconnects.most_common())
                        print(f"    resent on a new connection: {resent}", flush=True)
                    if row.errors:
                        failed = True
                        for what, times in row.errors.most_common():
                            print(f"    ERROR x{times}: {what}", flush=True)
                        for line in fleet.group.log_tail():
                            print(f"    relay log: {line}", flush=True)
                    if row.errors or row.passed_limit():
                        beyond.add(name)
                        if count >= settings.machines[-1]:
                            active.remove(name)
                if not active:
                    break
            for group in groups:
                report.add_memory(f"relay {group.name}", memory.group(group.name))
            report.add_memory("whole tree (relays, PostgreSQL, load generators)", memory.peak)
    finally:
        for group in groups:
            group.stop()
        loadgen.close()
    _summary(report, rows, groups, settings)
    print(f"total {time.monotonic() - started:.1f} s")
    code = report.finish(args.json)
    if failed:
        print("FAILED: requests failed (listed above); errors must be 0", file=sys.stderr)
        return 1
    return int(code)


def verdict(mine: Sequence[Row]) -> tuple[str, int, str, str]:
    """Where one configuration's p99 first passed the limit: (text, machines,
    unit, the load average then); errors are named beside it."""
    first = next((i for i, r in enumerate(mine) if r.passed_limit()), None)
    failing = next((r for r in mine if r.errors), None)
    errors = f"; requests failed from {failing.machines} machines on" if failing is not None else ""
    if first is None:
        last = mine[-1]
        text = f"not passed up to {last.machines} machines (the ramp's cap or the time budget)"
        return text + errors, last.machines, "machines (a lower bound)", _load(last)
    row = mine[first]
    under = f"under it at {mine[first - 1].machines}" if first else "already at the first step"
    return (
        f"passed at {row.machines} machines ({under}){errors}",
        row.machines,
        "machines",
        _load(row),
    )


def _load(row: Row) -> str:
    return " ".join(f"{x:.2f}" for x in row.load)


def _summary(
    report: Report,
    rows: Sequence[Row],
    groups: Sequence[RelayGroup],
    settings: Settings,
) -> None:
    print(
        "\nlatencies: requests started in the window (delivery: a POST's start until a "
        "teammate's pull returned it); err: failed requests, warm-up included; re: requests "
        "sent again because the relay had just closed their kept-alive connection (not "
        "errors); cores: CPU "
        "seconds per second over the window (relay: its whole process tree; pg: the "
        "PostgreSQL server, postmaster and backends), /100m per 100 machines; RSS MiB at "
        "the window's end, +/100m its growth per 100 more machines since the previous step "
        "(the idle relay before the first); pg PSS: the PostgreSQL server's; gen: the "
        f"load generators, which share the {os.cpu_count()} cores with the relay (their lag "
        "p99 is added to every latency they measure); busy: the whole machine's CPU."
    )
    print(f"\nwhere POST or GET p99 passes {P99_LIMIT_S:g} s on this host:")
    for group in groups:
        name = group.name
        mine = [r for r in rows if r.config == name]
        if not mine:
            continue
        text, machines, unit, load = verdict(mine)
        print(f"  {name}: {text}; load average {load}")
        report.add(
            Figure(
                f"{name} machines where p99 passes {P99_LIMIT_S:g} s",
                float(machines),
                unit,
                detail=text,
                source="#35",
            ),
            show=False,
        )
        for count in settings.machines:
            row = next((r for r in mine if r.machines == count), None)
            if row is not None:
                per = row.per_100(row.relay_cpu_cores)
                print(
                    f"    {count} machines: p99 POST {_ms(row.p99.get('POST', math.nan))} ms, "
                    f"GET {_ms(row.p99.get('GET', math.nan))} ms; relay {per:.3f} cores "
                    f"and +{row.rss_growth_per_100():.1f} MiB "
                    "per 100 machines"
                )


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, httpx.HTTPError, OSError) as exc:
        print(f"bench_capacity: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
