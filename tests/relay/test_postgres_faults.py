"""PostgreSQL crashing under load: 503 while it is down, recovery by itself, nothing lost.

Issue #16 "Database faults": a database restart gives 503 with the protocol
body and ``Retry-After`` (never a 500, never a process crash), the relay
recovers by itself when the database is back, and no acknowledged message is
ever lost. ``test_postgres.py::test_database_down_is_503_everywhere_and_the_relay_recovers``
proves the quiet case (one in-process relay, a clean stop, nothing in
flight). This module proves the loaded one, once for the whole module:

two ``syncengine relay serve`` processes share one throw-away server; several
writer threads post batches to one team as fast as they can, each retrying a
failed batch with the *same bytes* (alternately on the other process, as a
client behind a load balancer would); the server is killed mid-load with an
immediate shutdown (no checkpoint: commits in flight are either in the WAL
or never happened), kept down, then restarted on the same directory and
port, where it replays its WAL. Each test below then checks one rule on what
the run recorded.

The shared test server runs with ``synchronous_commit=off`` for speed, which
lets a crash forget commits already reported to the client; that is a server
configured to lose acknowledged writes, not a relay fault, so this database
turns it back on (the PostgreSQL default a deployment keeps).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from relay.secrets import utc_now
from relay.storage import location
from tests.relay.helpers import batch, issue_token, provision, team_headers
from tests.relay.pg_server import PgServer, PostgresUnavailable, start_server
from tests.support.live_relay import LiveRelay, running_relay
from wire.http_v1.errors import ErrorResponse

RELAYS = 2
WRITERS = 6
BATCH_SIZE = 20
#: Acknowledged batches before the crash, so it lands under load.
BATCHES_BEFORE_CRASH = 2 * WRITERS
OUTAGE_S = 2.0
#: Each writer keeps posting until this many of its batches were sent after the restart.
BATCHES_AFTER_RESTART = 3
MAX_BATCHES_PER_WRITER = 200
#: The relay's pool checkout and lock wait; a request during the outage is answered this soon.
BUSY_TIMEOUT_MS = 300
RUN_DEADLINE_S = 60.0
#: Cap on honouring Retry-After, so the run stays short; the relay sends 1 s.
MAX_BACKOFF_S = 1.0


@dataclass(frozen=True)
class Answer:
    """One HTTP exchange a writer or probe had with a relay (status 0: no answer at all)."""

    relay: int
    status: int
    body: Any
    headers: dict[str, str]
    at: float


@dataclass
class PostedBatch:
    """A batch as first sent and the acknowledgements it finally got."""

    writer: int
    body: bytes
    wire_ids: list[str]
    acks: list[tuple[str, int, str]] = field(default_factory=list)
    attempts: int = 0
    sent_at: float = 0.0


@dataclass
class CrashRun:
    """Everything the loaded crash-and-restart run recorded, for the rules to check."""

    answers: list[Answer] = field(default_factory=list)
    outage_probes: list[Answer] = field(default_factory=list)
    batches: list[PostedBatch] = field(default_factory=list)
    writer_failures: list[str] = field(default_factory=list)
    crashed_at: float = 0.0
    restarted_at: float = 0.0
    stored: dict[int, list[tuple[int, str]]] = field(default_factory=dict)
    reposted: list[tuple[PostedBatch, Answer]] = field(default_factory=list)
    alive_after: list[bool] = field(default_factory=list)
    stderr: list[str] = field(default_factory=list)


def _answer(relay: int, response: httpx.Response) -> Answer:
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    return Answer(relay, response.status_code, body, dict(response.headers), time.monotonic())


def _acks(answer: Answer) -> list[tuple[str, int, str]]:
    return [(a["id"], int(a["server_seq"]), a["disposition"]) for a in answer.body["acks"]]


def _full_stream(client: httpx.Client, headers: dict[str, str]) -> list[tuple[int, str]]:
    """Every stored message of the team as ``(seq, wire_id)``, in pages of 1,000."""
    out: list[tuple[int, str]] = []
    after = "0"
    for _ in range(1000):  # bounded: far more pages than the run can store
        page = client.get(
            "/v1/messages", params={"after": after, "limit": "1000"}, headers=headers
        ).json()
        out.extend((int(m["server_seq"]), m["id"]) for m in page["messages"])
        after = page["next_after"]
        if not page["has_more"]:
            break
    return out


class _Writers:
    """Writer threads that post until told to stop, retrying each batch until acknowledged."""

    def __init__(
        self, relays: list[LiveRelay], headers: list[dict[str, str]], run: CrashRun
    ) -> None:
        self.relays = relays
        self.headers = headers
        self.run = run
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.acked_batches = 0
        self.deadline = time.monotonic() + RUN_DEADLINE_S
        self.threads = [
            threading.Thread(target=self._write, args=(i,), daemon=True) for i in range(WRITERS)
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=RUN_DEADLINE_S)

    def _write(self, index: int) -> None:
        clients = [relay.client() for relay in self.relays]
        try:
            for _ in range(MAX_BATCHES_PER_WRITER):
                if self.stop.is_set():
                    return
                if not self._post_until_acked(index, clients):
                    return
        finally:
            for client in clients:
                client.close()

    def _post_until_acked(self, index: int, clients: list[httpx.Client]) -> bool:
        messages = batch(BATCH_SIZE)
        posted = PostedBatch(
            index,
            json.dumps({"messages": messages}).encode(),
            [m["id"] for m in messages],
            sent_at=time.monotonic(),
        )
        with self.lock:
            self.run.batches.append(posted)
        headers = {**self.headers[index], "Content-Type": "application/json"}
        while time.monotonic() < self.deadline:
            target = (index + posted.attempts) % len(clients)  # a retry may land elsewhere
            posted.attempts += 1
            try:
                response = clients[target].post(
                    "/v1/messages", content=posted.body, headers=headers
                )
            except httpx.TransportError as exc:
                with self.lock:
                    self.run.answers.append(Answer(target, 0, repr(exc), {}, time.monotonic()))
                time.sleep(0.2)
                continue
            answer = _answer(target, response)
            with self.lock:
                self.run.answers.append(answer)
            if answer.status == 200:
                posted.acks = _acks(answer)
                with self.lock:
                    self.acked_batches += 1
                return True
            if answer.status != 503:
                return True  # recorded; the rules below report it
            time.sleep(min(float(answer.headers.get("retry-after", "1")), MAX_BACKOFF_S))
        with self.lock:
            self.run.writer_failures.append(f"writer {index}: batch never acknowledged")
        return False

    def wait_for_acked(self, count: int) -> None:
        while time.monotonic() < self.deadline:
            with self.lock:
                if self.acked_batches >= count:
                    return
            time.sleep(0.01)
        raise AssertionError(f"fewer than {count} batches acknowledged before the crash")

    def each_sent_after(self, moment: float) -> bool:
        """Whether every writer had BATCHES_AFTER_RESTART batches begun after ``moment`` acked."""
        with self.lock:
            done = [b.writer for b in self.run.batches if b.sent_at > moment and b.acks]
        return all(done.count(i) >= BATCHES_AFTER_RESTART for i in range(WRITERS))


def _probe(relays: list[LiveRelay], headers: dict[str, str]) -> list[Answer]:
    """A write and a read at every relay while the server is down."""
    out: list[Answer] = []
    for index, relay in enumerate(relays):
        with relay.client() as client:
            out.append(
                _answer(
                    index,
                    client.post("/v1/messages", json={"messages": batch(1)}, headers=headers),
                )
            )
            out.append(
                _answer(
                    index,
                    client.get(
                        "/v1/messages", params={"after": "0", "limit": "1000"}, headers=headers
                    ),
                )
            )
    return out


def _run(server: PgServer) -> CrashRun:
    url = server.create_database()
    with server.admin() as admin:
        admin.execute(f'ALTER DATABASE "{url.rsplit("/", 1)[1]}" SET synchronous_commit = on')
    location.initialize(url)
    store = location.open_store(url)
    try:
        team = provision(store)
        tokens = [issue_token(store, team.team_id, utc_now()) for _ in range(WRITERS + 1)]
    finally:
        store.close()
    run = CrashRun()
    with ExitStack() as stack:
        relays = [
            stack.enter_context(
                running_relay(url, "--no-access-log", "--busy-timeout-ms", str(BUSY_TIMEOUT_MS))
            )
            for _ in range(RELAYS)
        ]
        headers = []
        for index, token in enumerate(tokens):
            with relays[index % RELAYS].client() as client:
                paired = client.post(
                    "/v1/pairing/exchange",
                    json={"token": token},
                    headers={"Agmsg-Protocol-Version": "1"},
                )
            assert paired.status_code == 200, paired.text
            headers.append(team_headers(team.team_id, paired.json()["credential"]))
        probe_headers = headers.pop()

        writers = _Writers(relays, headers, run)
        writers.start()
        try:
            writers.wait_for_acked(BATCHES_BEFORE_CRASH)
            server.crash()
            run.crashed_at = time.monotonic()
            run.outage_probes = _probe(relays, probe_headers)
            time.sleep(max(0.0, run.crashed_at + OUTAGE_S - time.monotonic()))
            server.restart()
            run.restarted_at = time.monotonic()
            while time.monotonic() < writers.deadline and not writers.each_sent_after(
                run.restarted_at
            ):
                time.sleep(0.05)
        finally:
            writers.stop.set()
            writers.join()

        for index, relay in enumerate(relays):
            with relay.client() as client:
                run.stored[index] = _full_stream(client, probe_headers)
        with relays[1].client() as first, relays[0].client() as second:
            clients = [first, second]
            for number, posted in enumerate(run.batches):
                if not posted.acks:
                    continue
                response = clients[number % RELAYS].post(
                    "/v1/messages",
                    content=posted.body,
                    headers={**headers[0], "Content-Type": "application/json"},
                )
                run.reposted.append((posted, _answer(number % RELAYS, response)))
        run.alive_after = [relay.process.poll() is None for relay in relays]
        processes = [relay.process for relay in relays]
    for process in processes:  # stopped by running_relay; what did each say on stderr?
        assert process.stderr is not None
        run.stderr.append(process.stderr.read())
    return run


@pytest.fixture(scope="module")
def crash_run() -> Iterator[CrashRun]:
    try:
        server = start_server()
    except PostgresUnavailable as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"PostgreSQL is not available here: {exc}")
    try:
        yield _run(server)
    finally:
        server.stop()


def _failures(run: CrashRun) -> list[Answer]:
    return [a for a in run.answers + run.outage_probes if a.status != 200]


def test_every_failed_request_under_a_crash_is_503_with_the_protocol_body_and_retry_after(
    crash_run: CrashRun,
) -> None:
    probed = {a.relay for a in crash_run.outage_probes}
    assert probed == set(range(RELAYS))
    assert all(a.status == 503 for a in crash_run.outage_probes), crash_run.outage_probes
    failures = _failures(crash_run)
    assert {a.relay for a in failures if a.at > crash_run.crashed_at} == set(range(RELAYS))
    for answer in failures:
        assert answer.status == 503, answer  # never a 500, never a dropped connection (0)
        assert ErrorResponse.from_obj(answer.body, 503).code == "unavailable"
        assert answer.headers["retry-after"] == "1"
        assert answer.headers["agmsg-protocol-version"] == "1"


def test_both_relay_processes_survive_the_crash_and_recover_by_themselves(
    crash_run: CrashRun,
) -> None:
    assert crash_run.alive_after == [True] * RELAYS
    recovered = {
        a.relay for a in crash_run.answers if a.status == 200 and a.at > crash_run.restarted_at
    }
    assert recovered == set(range(RELAYS))
    assert not crash_run.writer_failures
    for text in crash_run.stderr:
        assert "Traceback" not in text and "database error" not in text, text[-2000:]


def test_every_acknowledged_message_is_stored_exactly_once_and_the_sequence_is_gap_free(
    crash_run: CrashRun,
) -> None:
    acked = {(seq, wire_id) for posted in crash_run.batches for wire_id, seq, _ in posted.acks}
    sent = [wire_id for posted in crash_run.batches for wire_id in posted.wire_ids]
    assert len(sent) == len(set(sent)) > BATCHES_BEFORE_CRASH * BATCH_SIZE
    assert {wire_id for _, wire_id in acked} == set(sent)  # every batch got its acks
    for stream in crash_run.stored.values():  # both processes serve the same stream
        assert [seq for seq, _ in stream] == list(range(1, len(stream) + 1))
        assert len({wire_id for _, wire_id in stream}) == len(stream)
        assert set(stream) == acked


def test_a_batch_posted_again_after_recovery_gets_its_first_acks_as_duplicates(
    crash_run: CrashRun,
) -> None:
    assert len(crash_run.reposted) == len(crash_run.batches)
    for posted, answer in crash_run.reposted:
        assert answer.status == 200, answer
        again = _acks(answer)
        assert [(i, s) for i, s, _ in again] == [(i, s) for i, s, _ in posted.acks]
        assert {d for _, _, d in again} == {"duplicate"}
