"""``relay serve --workers N``: N real processes on one address over one
PostgreSQL database (#35; specs/relay.md "Several processes, one address").

Which worker answers a connection is the kernel's choice, so these tests
make it a fact instead of a hope: a worker stopped with SIGSTOP cannot
accept, so with every other worker stopped a new connection can only be
served by the one left running. No verdict depends on speed: every wait is
for an event (a line, an exit, a metric reaching a value) within a
generous bound.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from relay.workers import RestartBudget
from tests.relay.backends import Backend
from tests.relay.helpers import batch
from tests.support.live_relay import Database
from tests.support.live_relay import provision as live_provision
from tests.support.worker_group import BOUND_S, Group, alive, running_group, start_group
from wire.http_v1.live import LIVE_WAIT

#: A wake these tests see came from a notification, never the safety tick.
NO_TICK = ("--live-tick-seconds", "600", "--live-max-wait", "55")


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)


def parent_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no PPid for {pid}")


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=4) as executor:
        yield executor


def health(group: Group) -> int:
    # A new connection each time: a kept-alive one stays with the worker that took it.
    return httpx.get(group.url + "/v1/health", timeout=BOUND_S).status_code


def post(group: Group, headers: dict[str, str], count: int = 1) -> list[int]:
    response = httpx.post(
        group.url + "/v1/messages",
        json={"messages": batch(count)},
        headers=headers,
        timeout=BOUND_S,
    )
    assert response.status_code == 200, response.text
    return [int(ack["server_seq"]) for ack in response.json()["acks"]]


def pulled(group: Group, headers: dict[str, str]) -> list[int]:
    response = httpx.get(
        group.url + "/v1/messages", params={"after": "0"}, headers=headers, timeout=BOUND_S
    )
    assert response.status_code == 200, response.text
    return [int(m["server_seq"]) for m in response.json()["messages"]]


def metric(group: Group, name: str, labels: str = "") -> float:
    body = httpx.get(group.url + "/metrics", timeout=BOUND_S).text
    prefix = f"{name}{{{labels}}} " if labels else f"{name} "
    for line in body.splitlines():
        if line.startswith(prefix):
            return float(line.split()[-1])
    return 0.0


# -- starting: one address, one line ------------------------------------------------------------


def test_the_listening_line_names_every_worker_pid_each_a_child_of_the_supervisor(
    postgres_backend: Backend,
) -> None:
    with running_group(postgres_backend.location, "--workers", "2") as group:
        assert group.ready["workers"] == 2
        assert len(set(group.pids)) == 2
        assert group.ready["supervisor_pid"] == group.process.pid
        for pid in group.pids:
            assert alive(pid) and parent_of(pid) == group.process.pid


def test_each_of_two_workers_serves_the_one_address_alone(postgres_backend: Backend) -> None:
    with running_group(postgres_backend.location, "--workers", "2") as group:
        for pid in group.pids:
            with group.only(pid):
                assert health(group) == 200


def test_a_message_posted_through_one_worker_is_pulled_through_the_other(
    postgres_backend: Backend, tmp_path: Path
) -> None:
    url = postgres_backend.location
    with running_group(url, "--workers", "2") as group:
        first, second = group.pids
        team = live_provision(url, tmp_path)
        with group.only(first):
            writer = group.pair(team["team_id"])
            assert post(group, writer, 3) == [1, 2, 3]
        with group.only(second):
            reader = group.pair(team["team_id"])
            assert pulled(group, reader) == [1, 2, 3]


def test_a_live_wait_held_by_one_worker_is_woken_by_a_post_through_the_other(
    postgres_backend: Backend, tmp_path: Path, pool: ThreadPoolExecutor
) -> None:
    url = postgres_backend.location
    with running_group(url, "--workers", "2", *NO_TICK) as group:
        waiter_pid, poster_pid = group.pids
        team = live_provision(url, tmp_path)
        headers = group.pair(team["team_id"])
        with group.only(waiter_pid):
            future: Future[httpx.Response] = pool.submit(
                httpx.get,
                group.url + LIVE_WAIT,
                params={"after": "0", "read_after": "0", "wait": "55"},
                headers=headers,
                timeout=BOUND_S + 55,
            )
            until(
                lambda: metric(group, "syncengine_relay_live_waits_open") == 1.0,
                "the wait to be held by the one running worker",
            )
        with group.only(poster_pid):
            assert post(group, headers) == [1]
        answer = future.result(timeout=BOUND_S).json()
        assert (answer["current_seq"], answer["woken"]) == ("1", True)


# -- stopping -----------------------------------------------------------------------------------


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=10).close()
    except ConnectionRefusedError:
        return True
    return False


def test_sigterm_to_the_supervisor_drains_every_worker_closes_the_address_and_exits_0(
    postgres_backend: Backend, tmp_path: Path
) -> None:
    """A POST whose body is held back across the signal is still answered:
    the workers drain (they are not killed), then the address refuses."""
    url = postgres_backend.location
    group = start_group(url, "--workers", "2", "--shutdown-timeout", "30")
    port = int(group.ready["port"])
    try:
        team = live_provision(url, tmp_path)
        headers = group.pair(team["team_id"])
        body = json.dumps({"messages": batch(5)}).encode()
        head = [
            "POST /v1/messages HTTP/1.1",
            f"Host: 127.0.0.1:{port}",
            "Content-Type: application/json",
            f"Content-Length: {len(body)}",
            *(f"{name}: {value}" for name, value in headers.items()),
        ]
        with socket.create_connection(("127.0.0.1", port), timeout=BOUND_S) as held:
            held.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body[:10])
            # A worker has accepted it (the scrape's own connection is the other one).
            until(
                lambda: metric(group, "syncengine_relay_connections_open") >= 2,
                "a worker to accept the held POST",
            )
            group.process.send_signal(signal.SIGTERM)
            until(lambda: _refused(port), "the address to refuse new connections")
            assert group.process.poll() is None  # still draining the POST in flight
            held.sendall(body[10:])
            answer = b""
            while chunk := held.recv(65536):
                answer += chunk
        assert answer.split(b" ", 2)[1] == b"200", answer[:200]
        assert group.process.wait(timeout=BOUND_S) == 0
        for pid in group.pids:
            until(lambda pid=pid: not alive(pid), f"worker {pid} to exit")  # type: ignore[misc]
    finally:
        if group.process.poll() is None:
            group.process.kill()
            group.process.wait(timeout=10)
    logged = []
    while not group.log.empty():
        logged.append(group.log.get())
    assert not any("did not stop in time" in line for line in logged), logged


def test_a_worker_killed_with_sigkill_is_reported_and_replaced_and_nothing_is_lost(
    postgres_backend: Backend, tmp_path: Path
) -> None:
    url = postgres_backend.location
    with running_group(url, "--workers", "2", "--log-format", "json") as group:
        victim, survivor = group.pids
        team = live_provision(url, tmp_path)
        headers = group.pair(team["team_id"])
        with group.only(victim):
            assert post(group, headers, 2) == [1, 2]
        os.kill(victim, signal.SIGKILL)
        died = json.loads(group.log_line(f"relay worker {victim} exited"))
        assert died["level"] == "warning" and "killed by SIGKILL" in died["message"]
        replaced = json.loads(group.log_line(f"in place of {victim}"))
        replacement = int(replaced["message"].split()[2])
        assert replacement not in (victim, survivor)
        assert alive(replacement) and parent_of(replacement) == group.process.pid
        group.ready["pids"] = [replacement, survivor]
        with group.only(replacement):
            assert post(group, headers) == [3]
            assert pulled(group, headers) == [1, 2, 3]


# -- refusals -----------------------------------------------------------------------------------


def _serve(
    db: Database, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "syncengine",
            "relay",
            "serve",
            "--db",
            str(db),
            "--port",
            "0",
            *args,
        ],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=BOUND_S,
        check=False,
    )


def _assert_sqlite_refused(result: subprocess.CompletedProcess[str], workers: int) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [
        f"error: --workers {workers} needs a PostgreSQL database; a SQLite file takes one process"
    ]
    assert "remedy: " in result.stderr
    assert "listening" not in result.stdout


def test_workers_on_a_sqlite_file_are_refused_before_anything_listens(tmp_path: Path) -> None:
    db = tmp_path / "relay.db"
    _assert_sqlite_refused(_serve(db, "--workers", "2"), 2)


def test_the_workers_variable_on_a_sqlite_file_is_refused_like_the_option(tmp_path: Path) -> None:
    db = tmp_path / "relay.db"
    _assert_sqlite_refused(_serve(db, env={"SYNCENGINE_RELAY_WORKERS": "3"}), 3)


def test_a_worker_group_whose_database_is_unreachable_exits_3_before_listening() -> None:
    with socket.socket() as holder:  # a port nothing listens on
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
    result = _serve(f"postgresql://nobody@127.0.0.1:{port}/none", "--workers", "2")
    assert result.returncode == 3, result.stderr
    assert "Traceback" not in result.stderr
    assert "listening" not in result.stdout


# -- metrics ------------------------------------------------------------------------------------


def test_metrics_at_the_one_address_add_up_the_requests_of_every_worker(
    postgres_backend: Backend,
) -> None:
    with running_group(postgres_backend.location, "--workers", "2", "--metrics") as group:
        first, second = group.pids
        with group.only(first):
            for _ in range(3):
                assert health(group) == 200
        with group.only(second):
            for _ in range(4):
                assert health(group) == 200
        health_total = 'method="GET",route="/v1/health",status="200"'
        until(
            lambda: metric(group, "syncengine_relay_http_requests_total", health_total) == 7.0,
            "the group's metrics to count 3 + 4 health requests",
        )
        assert metric(group, "syncengine_relay_database_up") == 1.0


def test_a_worker_that_cannot_start_stops_the_group_with_its_one_error_line(
    postgres_backend: Backend, tmp_path: Path
) -> None:
    """Each worker loads the TLS files itself; unreadable ones are exit 2 and
    one ``error:`` line, never a traceback, and no ``listening`` line."""
    missing = tmp_path / "missing.pem"
    result = _serve(
        postgres_backend.location,
        "--workers",
        "2",
        "--tls-certfile",
        str(missing),
        "--tls-keyfile",
        str(missing),
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors == ["error: cannot load the TLS certificate or key (FileNotFoundError)"]
    assert "listening" not in result.stdout


# -- the crash-loop budget (pure: times are given, not measured) --------------------------------


def test_five_worker_deaths_within_a_minute_are_replaced_and_the_sixth_stops_the_group() -> None:
    budget = RestartBudget()
    assert all(budget.death(float(second)) for second in range(0, 50, 10))
    assert not budget.death(55.0)
    assert budget.recent == 6


def test_deaths_older_than_the_window_no_longer_count_against_the_group() -> None:
    budget = RestartBudget(limit=2, window=60.0)
    assert budget.death(0.0) and budget.death(30.0)
    assert budget.death(61.0)  # the first has left the window: 2 within it
    assert not budget.death(62.0)
