"""A relay worker group (relay serve --workers N) as its own process on 127.0.0.1, for the
relay's worker tests and the end-to-end ones."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.live_relay import Database, issue_token, serve_argv

BOUND_S = 60.0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie has exited; only its parent has not reaped it yet
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


@dataclass
class Group:
    process: subprocess.Popen[str]
    ready: dict[str, Any]
    db: Database
    log: queue.Queue[str] = field(default_factory=queue.Queue)
    stopped: set[int] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.ready['port']}"

    @property
    def pids(self) -> list[int]:
        return [int(p) for p in self.ready["pids"]]

    def pair(self, team_id: str) -> dict[str, str]:
        token = issue_token(self.db, team_id)
        response = httpx.post(
            self.url + "/v1/pairing/exchange",
            json={"token": token},
            headers={"Agmsg-Protocol-Version": "1"},
            timeout=BOUND_S,
        )
        assert response.status_code == 200, response.text
        return {
            "Agmsg-Protocol-Version": "1",
            "Agmsg-Team-ID": team_id,
            "Authorization": f"Bearer {response.json()['credential']}",
        }

    @contextmanager
    def only(self, pid: int) -> Iterator[None]:
        """Every worker but ``pid`` stopped: a new connection reaches ``pid`` alone."""
        others = [p for p in self.pids if p != pid]
        for other in others:
            os.kill(other, signal.SIGSTOP)
            self.stopped.add(other)
        try:
            yield
        finally:
            for other in others:
                os.kill(other, signal.SIGCONT)
                self.stopped.discard(other)

    def log_line(self, needle: str) -> str:
        deadline = time.monotonic() + BOUND_S
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no log line with {needle!r}"
            line = self.log.get(timeout=remaining)
            if needle in line:
                return line


def start_group(db: Database, *extra: str) -> Group:
    process = subprocess.Popen(
        serve_argv(db, "--no-access-log", *extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "SYNCENGINE_RELAY_WORKERS"},
    )
    assert process.stdout is not None and process.stderr is not None
    line = process.stdout.readline()
    if not line:
        raise AssertionError(f"the group did not start: {process.stderr.read()}")
    group = Group(process, json.loads(line), db)
    stderr = process.stderr

    def pump() -> None:
        for text in stderr:
            group.log.put(text)

    threading.Thread(target=pump, daemon=True).start()
    return group


@contextmanager
def running_group(db: Database, *extra: str) -> Iterator[Group]:
    group = start_group(db, *extra)
    try:
        yield group
    finally:
        for pid in list(group.stopped):
            os.kill(pid, signal.SIGCONT)
        if group.process.poll() is None:
            group.process.terminate()
            try:
                group.process.wait(timeout=BOUND_S)
            except subprocess.TimeoutExpired:
                group.process.kill()
                group.process.wait(timeout=10)
        for pid in group.pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
