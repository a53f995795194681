"""A real relay process on 127.0.0.1 driven through the operator CLI.

``db`` is a SQLite file path or a PostgreSQL URL (``--database`` takes
either). A path is initialized on first use; a URL is initialized by the
caller, since several relay processes may share it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from relay.secrets import new_uuid7

PYTHON = sys.executable


Database = Path | str


def cli(
    db: Database, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "syncengine", "relay", *args, "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
        check=False,
    )


def provision(
    db: Database, tmp: Path, names: tuple[str, ...] = ("leader", "worker-1")
) -> dict[str, Any]:
    document = {
        "team_id": new_uuid7(),
        "team_name": "live-team",
        "members": [{"member_id": new_uuid7(), "name": n} for n in names],
    }
    path = tmp / f"team-{document['team_id']}.json"
    path.write_text(json.dumps(document))
    result = cli(db, "team", "apply", str(path), "--json")
    assert result.returncode == 0, result.stderr
    return document


def issue_token(db: Database, team_id: str) -> str:
    result = cli(db, "token", "issue", "--team", team_id, "--json")
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)["token"])


@dataclass
class LiveRelay:
    base_url: str
    db: Database
    process: subprocess.Popen[str]
    server_instance_id: str

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=30, follow_redirects=False)

    def pair(self, team_id: str) -> dict[str, str]:
        token = issue_token(self.db, team_id)
        with self.client() as client:
            response = client.post(
                "/v1/pairing/exchange",
                json={"token": token},
                headers={"Agmsg-Protocol-Version": "1"},
            )
        assert response.status_code == 200, response.text
        body = response.json()
        return {
            "Agmsg-Protocol-Version": "1",
            "Agmsg-Team-ID": team_id,
            "Authorization": f"Bearer {body['credential']}",
        }


@contextmanager
def running_relay(
    db: Database, *extra: str, env: dict[str, str] | None = None
) -> Iterator[LiveRelay]:
    if isinstance(db, Path) and not db.exists():
        assert cli(db, "init").returncode == 0
    process = subprocess.Popen(
        [
            PYTHON,
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
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(
                f"relay did not start: {process.stderr.read() if process.stderr else ''}"
            )
        ready = json.loads(line)
        url = f"http://127.0.0.1:{ready['port']}"
        # Generous: a relay that printed its port answers within moments on an
        # idle machine, but may need many seconds on a loaded one (load 10+).
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/v1/health", timeout=10).status_code in (200, 503):
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield LiveRelay(url, db, process, ready["server_instance_id"])
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
