"""``connect --replace`` resolves the failure it answers (issue #33).

After a revoked or lost credential, ``status`` told the operator to pair
again; once they had, it still showed that failure with the same remedy, as
if nothing had happened (``resync`` and ``resume`` had the same fault and
were fixed first). A completed replace leaves the binding ``ok`` and the
failure shown as resolved; a failure a new credential cannot answer keeps
its remedy (``syncengine/engine/state.py`` ``REPLACE_RESOLVES``).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from relay.secrets import timestamp, utc_now
from relay.storage.sqlite import SqliteRelayStore
from syncengine.engine import Engine
from tests.support.live_relay import LiveRelay
from tests.support.machines import LeanTeam, Machine, run_cli


def _replace(team: LeanTeam, machine: Machine) -> None:
    token = machine.store.parent / "token"
    token.write_text(team.token().reveal() + "\n")
    token.chmod(0o600)
    done = run_cli(machine, "connect", "--replace", "--team", "crew", "--token", f"@{token}")
    assert done.returncode == 0, done.stderr


def _status(machine: Machine) -> tuple[str, dict[str, Any]]:
    text = run_cli(machine, "status")
    assert text.returncode == 0, text.stderr
    as_json = run_cli(machine, "status", "--json")
    assert as_json.returncode == 0, as_json.stderr
    return text.stdout, json.loads(as_json.stdout)


def _revoke(live: LiveRelay, team: LeanTeam, machine: Machine) -> None:
    with Engine(machine.store) as engine:
        credential_id = engine.connection.credential_id
    relay = SqliteRelayStore(live.db)
    try:
        relay.revoke_credential(team.id, credential_id, timestamp(utc_now()))
    finally:
        relay.close()


def test_replacing_a_revoked_credential_shows_the_refusal_as_resolved_without_its_remedy(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = LeanTeam(live, tmp_path)
    a = team.machine("a")
    a.sync()
    _revoke(live, team, a)
    assert run_cli(a, "sync").returncode == 4
    before, _ = _status(a)
    remedy = next(line for line in before.splitlines() if line.strip().startswith("remedy"))
    assert "unauthenticated" in before  # the failure stands, with its remedy

    _replace(team, a)
    after, obj = _status(a)
    assert remedy not in after
    assert "unauthenticated (resolved" in after
    assert "connect --replace" in after
    assert obj["last_failure"]["resolved"] is True
    assert obj["state"] == "ok"
    assert obj["failures_since_success"] == 1  # kept for the record, not rewritten


def test_replacing_a_lost_credential_file_shows_that_failure_as_resolved(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = LeanTeam(live, tmp_path)
    a = team.machine("a")
    a.sync()
    with Engine(a.store) as engine:
        Path(engine.connection.credential_path).unlink()
    assert run_cli(a, "sync").returncode == 7
    assert _status(a)[1]["last_failure"]["resolved"] is False

    _replace(team, a)
    after, obj = _status(a)
    assert obj["last_failure"]["resolved"] is True
    assert "remedy" not in after


@pytest.mark.parametrize(
    ("state", "error_class", "code"),
    [
        ("refused", "StoreFull", "store-error"),
        ("refused", "RequestTooLarge", "request-too-large"),
        ("halted", "MessageConflict", "message-uuid-conflict"),
    ],
)
def test_a_failure_a_new_credential_cannot_answer_keeps_its_remedy_after_replace(
    live: LiveRelay, tmp_path: Path, state: str, error_class: str, code: str
) -> None:
    team = LeanTeam(live, tmp_path)
    a = team.machine("a")
    a.sync()
    conn = sqlite3.connect(a.store)
    try:
        # What a failed sync records for it (the relay cannot be made to
        # answer these on demand; the row is the engine's own shape).
        conn.execute(
            "UPDATE engine_status SET state = ?, last_failure_at = '2099-01-01T00:00:00Z',"
            " failures_since_success = 1, last_error_code = ?, last_error_class = ?,"
            " last_error_message = 'it failed', last_error_remediation = 'STILL NEEDED'",
            (state, code, error_class),
        )
        conn.commit()
    finally:
        conn.close()

    _replace(team, a)
    after, obj = _status(a)
    assert "STILL NEEDED" in after
    assert obj["last_failure"]["resolved"] is False
    assert obj["state"] == state
