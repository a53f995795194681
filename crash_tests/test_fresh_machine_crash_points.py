"""Kill every writing sync verb on a fresh machine at its crash points
(issue #31; specs/store.md §11.1): the first sync call a host makes on a
machine that never named the team interns the local team and creates the
binding inside the verb's own transaction — a new durable transition.

Each verb runs as the real ``syncengine driver <verb>`` against a store
with no team and no binding, killed by ``SYNCENGINE_CRASH_AT`` at the
verb's ``before_commit`` and ``after_commit`` points. Then:

* before the commit: no team, member or binding was written (the empty
  store the verb created before its transaction is all there is);
* after the commit: the team and the binding are there, once;
* replaying the verb in-process succeeds and leaves exactly one team row
  and one binding for the stream — the crash-free result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from syncengine.crash import CRASH_EXIT_CODE, CRASH_POINTS
from syncengine.ids import new_uuid7
from syncengine.local_store import Store
from syncengine.ops.bindings import BindingKey
from tests.syncengine.ops.helpers import foreign_envelope, pull_record

TEAM = "crew"
MEMBERS = [{"member_id": new_uuid7(), "name": "alice"}, {"member_id": new_uuid7(), "name": "bob"}]


def _stdin(verb: str, key: BindingKey) -> bytes:
    records: list[dict[str, Any]]
    if verb == "apply":
        wire, envelope = foreign_envelope(key, "first", "alice", "bob")
        records = [
            pull_record(1, wire, envelope).to_obj(),
            {"type": "sync_pull_cursor", "next_after": "1"},
        ]
    elif verb == "resync":
        records = [
            {
                "type": "sync_resync",
                "expected_transport_cursor": "0",
                "min_available_seq": "5",
                "current_seq": "9",
                "reason": "retention-gap-accepted",
            }
        ]
    elif verb == "read-prepare":
        records = [
            {
                "type": "sync_read_context",
                "min_available_seq": "0",
                "current_seq": "0",
                "members": MEMBERS,
                "local_agents": [],
            }
        ]
    elif verb == "read-apply":
        records = [{"type": "sync_read_snapshot", "min_available_seq": "0", "current_seq": "0"}]
    elif verb == "prepare":
        records = [
            {
                "type": "sync_prepare",
                "envelope_v": 1,
                "cipher": "none",
                "key_id": None,
                "recipients": [],
                "max_blob_bytes": 1048576,
                "allow_new": True,
            }
        ]
    else:  # reconcile: no acknowledgements, the binding alone
        records = []
    return "".join(json.dumps(r) + "\n" for r in records).encode()


#: verb -> the transaction whose crash points bound its first write.
TRANSACTIONS = {
    "apply": "apply.commit",
    "resync": "resync.commit",
    "read-prepare": "read.prepare",
    "read-apply": "read.apply",
    "prepare": "prepare.begin",
    "reconcile": "reconcile.commit",
}
CASES = [(verb, f"{name}.{when}_commit") for verb, name in TRANSACTIONS.items()
         for when in ("before", "after")]  # fmt: skip


def _argv(key: BindingKey) -> list[str]:
    return [key.local_team, key.server_instance_id, key.remote_team_id, "1"]


def _drive(
    path: Path, verb: str, key: BindingKey, stdin: bytes, crash_at: str | None
) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "SYNCENGINE_CRASH_AT"}
    env["SYNCENGINE_DRIVER_SERVER"] = "0"
    if crash_at is not None:
        env["SYNCENGINE_CRASH_AT"] = crash_at
    return subprocess.run(
        [sys.executable, "-m", "syncengine", "driver", "--store", str(path), verb, *_argv(key)],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=120,
        check=False,
    )


def _counts(path: Path) -> tuple[int, int, int]:
    """(team rows named TEAM, member rows, bindings)."""
    with Store(path) as store:
        conn = store.conn
        teams = conn.execute("SELECT count(*) FROM teams WHERE name = ?", (TEAM,)).fetchone()[0]
        members = conn.execute("SELECT count(*) FROM members").fetchone()[0]
        bindings = conn.execute("SELECT count(*) FROM sync_bindings").fetchone()[0]
    return int(teams), int(members), int(bindings)


def test_every_case_names_a_registered_crash_point() -> None:
    assert {point for _, point in CASES} <= set(CRASH_POINTS)


@pytest.mark.parametrize(("verb", "point"), CASES, ids=[f"{v}@{p}" for v, p in CASES])
def test_a_first_sync_write_killed_at_its_crash_point_is_all_or_nothing_and_replays(
    tmp_path: Path, verb: str, point: str
) -> None:
    path = tmp_path / "fresh" / "store.db"
    path.parent.mkdir(mode=0o700)
    key = BindingKey(TEAM, new_uuid7(), new_uuid7(), 1)
    stdin = _stdin(verb, key)  # the same records for the crash and the replay
    crashed = _drive(path, verb, key, stdin, point)
    assert crashed.returncode == CRASH_EXIT_CODE, (crashed.returncode, crashed.stderr)
    teams, _, bindings = _counts(path)
    if point.endswith("before_commit"):
        assert (teams, bindings) == (0, 0)
        assert _counts(path)[1] == 0
    else:
        assert (teams, bindings) == (1, 1)
    replayed = _drive(path, verb, key, stdin, None)
    if verb == "resync" and point.endswith("after_commit"):
        # The approval is recorded once: a second one for the same floor is refused.
        assert replayed.returncode == 13 and b"already accepted" in replayed.stderr
    else:
        assert replayed.returncode == 0, replayed.stderr
    teams, members, bindings = _counts(path)
    assert (teams, bindings) == (1, 1)
    if verb == "read-prepare":
        assert members == len(MEMBERS)
