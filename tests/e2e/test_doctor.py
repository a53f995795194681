"""``syncengine doctor`` (issue #18, item 2): one verdict and remedy per
check, exit 0 only when nothing failed — against a live relay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from syncengine.engine import Engine
from tests.support.live_relay import LiveRelay
from tests.support.machines import LeanTeam, Machine, run_cli


def _doctor(machine: Machine) -> tuple[int, dict[str, dict[str, Any]]]:
    result = run_cli(machine, "doctor", "--json")
    obj = json.loads(result.stdout)
    return result.returncode, {c["check"]: c for c in obj["checks"]}


def test_a_healthy_machine_passes_every_check(live: LiveRelay, tmp_path: Path) -> None:
    a = LeanTeam(live, tmp_path).machine("a")
    code, checks = _doctor(a)
    assert code == 0, checks
    for name in ("store-modes", "schema", "binding", "credential", "relay", "clock",
                 "integrity", "quarantine", "status-counts", "pending-push",
                 "engine-lock"):  # fmt: skip
        assert checks[name]["verdict"] == "ok", checks[name]


def test_a_readable_credential_fails_with_its_remedy(live: LiveRelay, tmp_path: Path) -> None:
    a = LeanTeam(live, tmp_path).machine("a")
    with Engine(a.store) as engine:
        Path(engine.connection.credential_path).chmod(0o644)
    code, checks = _doctor(a)
    assert code == 1
    assert checks["credential"]["verdict"] == "fail"
    assert "connect --replace" in checks["credential"]["remedy"]


def test_pending_messages_warn_without_failing(live: LiveRelay, tmp_path: Path) -> None:
    a = LeanTeam(live, tmp_path).machine("a")
    a.send("alice", "bob", "not yet pushed")
    code, checks = _doctor(a)
    assert code == 0
    assert checks["pending-push"]["verdict"] == "warn"
    assert checks["pending-push"]["remedy"] == "syncengine sync"


def test_status_counts_that_drifted_from_the_rows_warn_with_both_figures(
    live: LiveRelay, tmp_path: Path
) -> None:
    a = LeanTeam(live, tmp_path).machine("a")
    a.send("alice", "bob", "one")
    a.sync()
    code, checks = _doctor(a)
    assert checks["status-counts"]["verdict"] == "ok"
    with Engine(a.store) as engine:
        engine.store.conn.execute("UPDATE sync_history_counts SET push_rows = push_rows + 2")
    code, checks = _doctor(a)
    assert code == 0  # a warning: sync is unaffected
    assert checks["status-counts"]["verdict"] == "warn"
    assert "reservations 3 kept, 1 stored" in checks["status-counts"]["detail"]


def test_an_unreachable_relay_fails_the_relay_check(live: LiveRelay, tmp_path: Path) -> None:
    team = LeanTeam(live, tmp_path)
    a = team.machine("a")
    with Engine(a.store) as engine:
        engine.store.conn.execute("UPDATE engine_bindings SET endpoint = 'http://127.0.0.1:9'")
    code, checks = _doctor(a)
    assert code == 1
    assert checks["relay"]["verdict"] == "fail"
    assert "127.0.0.1:9" in checks["relay"]["detail"]


def test_a_store_that_does_not_exist_fails_first_and_alone(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    code, checks = _doctor(Machine("x", tmp_path / "x" / "store.db"))
    assert code == 1 and list(checks) == ["store"]
    assert not (tmp_path / "x" / "store.db").exists()
