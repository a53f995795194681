"""``syncengine send`` to a store that knows no team (issue #33; specs/store.md §4).

Every README journey creates or joins its team before the first ``send``,
so a store without a team is a mistyped ``--store`` or a skipped step: the
command refuses with how to get the team and writes nothing. The storage
contract's own ``send`` (``syncengine driver send``) still interns names on
first use — the host keeps its own registry.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from syncengine.local_store import Store


def _cli(*args: str, store: Path, stdin: str = "hello") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "syncengine", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SYNCENGINE_STORE": str(store)},
        check=False,
    )


def _rows(store: Path) -> tuple[int, int]:
    conn = sqlite3.connect(store)
    try:
        messages = conn.execute("SELECT count(*) FROM messages").fetchone()[0]
        teams = conn.execute("SELECT count(*) FROM teams").fetchone()[0]
    finally:
        conn.close()
    return int(messages), int(teams)


def test_send_on_a_store_that_does_not_exist_is_refused_and_creates_no_file(
    tmp_path: Path,
) -> None:
    store = tmp_path / "stor.db"  # a mistyped --store
    done = _cli("send", "crew", "alice", "bob", "-", store=store)
    assert done.returncode == 13, done
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"store {store} has no team yet" in done.stderr
    assert "'syncengine team create crew --member alice --member bob'" in done.stderr
    assert "'syncengine connect'" in done.stderr
    assert done.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_send_on_an_initialized_store_without_teams_is_refused_and_writes_nothing(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store.db"
    with Store(store) as opened:
        opened.init()
    done = _cli("send", "crew", "alice", "bob", "-", store=store)
    assert done.returncode == 13, done
    assert "has no team yet" in done.stderr
    assert _rows(store) == (0, 0)


def test_the_refusals_remedy_works_as_written(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    refused = _cli("send", "crew", "alice", "bob", "-", store=store)
    remedy = refused.stderr.split("create it with '")[1].split("'")[0]
    assert remedy.startswith("syncengine team create ")
    created = _cli(*remedy.split()[1:], store=store)
    assert created.returncode == 0, created
    sent = _cli("send", "crew", "alice", "bob", "-", store=store)
    assert sent.returncode == 0, sent
    assert _rows(store) == (1, 1)


def test_a_malformed_team_name_on_a_team_less_store_is_named_as_malformed(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store.db"
    done = _cli("send", "cr:ew", "alice", "bob", "-", store=store)
    assert done.returncode == 13, done
    assert "team" in done.stderr and "has no team yet" not in done.stderr
    assert not store.exists()


def test_the_driver_send_of_the_contract_still_interns_a_team_on_first_use(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store.db"
    done = _cli("driver", "send", "crew", "alice", "bob", store=store)
    assert done.returncode == 0, done
    assert _rows(store) == (1, 1)
