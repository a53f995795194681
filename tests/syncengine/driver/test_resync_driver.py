"""The stage1-resync verbs through ``syncengine driver`` and through the
sourced driver file (retention-gap-resynchronization.md; UPSTREAM-RECORDS
§1.1–§1.2, §2.6; driver-interface §2.8).

``resync-status <binding> [<accepted-floor>]`` and ``resync <binding>``
(one ``sync_resync`` on stdin): stdout carries exactly one record on success
and nothing on failure; stderr names the problem; the exit code is the
adapter's (2 usage, 13 a failed check).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from syncengine.local_store import Store
from syncengine.ops.bindings import BindingKey
from syncengine.ops.resync import SyncResyncResult, SyncResyncStatus
from syncengine.ops.sync_records import SyncPullCursor
from tests.support.cli import run_driver
from tests.syncengine.driver.contract import DRIVER_FILE
from tests.syncengine.ops.helpers import foreign_envelope, new_key, pull_record, table

RESYNC = {
    "type": "sync_resync",
    "expected_transport_cursor": "42",
    "min_available_seq": "100",
    "current_seq": "120",
    "reason": "retention-gap-accepted",
}
AUDIT = {
    "expected_transport_cursor": "42",
    "accepted_floor": "100",
    "gap_start": "43",
    "gap_end": "100",
    "reason": "retention-gap-accepted",
}


def _stdin(*records: dict[str, Any]) -> bytes:
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()


def run(path: Path, op: str, *args: str, stdin: bytes = b"") -> tuple[int, bytes, str]:
    """One in-process ``syncengine driver <op>``: exit code, raw stdout, stderr."""
    return run_driver(path, op, *args, stdin=stdin)


def _one(stdout: bytes) -> dict[str, Any]:
    """The single JSONL record a successful call prints."""
    assert stdout.endswith(b"\n") and stdout.count(b"\n") == 1, stdout
    value: dict[str, Any] = json.loads(stdout)
    return value


def _argv(key: BindingKey) -> list[str]:
    return [key.local_team, key.server_instance_id, key.remote_team_id, str(key.protocol_version)]


def _snapshot(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with Store(path) as store:
        names = [
            r[0] for r in table(store.conn, "SELECT name FROM sqlite_master WHERE type='table'")
        ]
        return {n: sorted(table(store.conn, f"SELECT * FROM {n}"), key=repr) for n in names}


def _generation(path: Path) -> str:
    with Store(path) as store:
        return store.driver_generation()


@pytest.fixture
def path(tmp_path: Path) -> Path:
    target = tmp_path / "store.db"
    with Store(target) as store:
        store.init()
        store.create_team("dev", ["alice", "bob"])
    return target


@pytest.fixture
def key(path: Path) -> BindingKey:
    """A binding of team ``dev`` whose transport cursor is at 42, holding
    one pending_key quarantine row."""
    bound = new_key()
    wire, env = foreign_envelope(bound, "held back", "carol", "bob")
    with Store(path) as store:
        store.sync_apply_pull(bound, [pull_record(7, wire, env, "pending_key")], SyncPullCursor(42))
    return bound


# -- resync-status ---------------------------------------------------------------------


def test_resync_status_prints_one_status_line_with_a_null_audit(
    path: Path, key: BindingKey
) -> None:
    code, out, err = run(path, "resync-status", *_argv(key))
    assert (code, err) == (0, "")
    assert _one(out) == {
        "type": "sync_resync_status",
        "driver_generation": _generation(path),
        "transport_cursor": "42",
        "audit": None,
    }


def test_resync_status_for_an_accepted_floor_prints_its_audit(path: Path, key: BindingKey) -> None:
    run(path, "resync", *_argv(key), stdin=_stdin(RESYNC))
    code, out, _ = run(path, "resync-status", *_argv(key), "100")
    assert code == 0
    status = _one(out)
    assert status == {
        "type": "sync_resync_status",
        "driver_generation": _generation(path),
        "transport_cursor": "100",
        "audit": AUDIT,
    }
    assert SyncResyncStatus.from_obj(status, requested_floor=100).audit is not None


def test_resync_status_for_a_floor_never_accepted_prints_a_null_audit(
    path: Path, key: BindingKey
) -> None:
    code, out, _ = run(path, "resync-status", *_argv(key), "100")
    assert code == 0 and _one(out)["audit"] is None


def test_resync_status_changes_nothing_in_the_store(path: Path, key: BindingKey) -> None:
    run(path, "resync", *_argv(key), stdin=_stdin(RESYNC))
    before = _snapshot(path)
    for floor in ([], ["100"], ["5"]):
        assert run(path, "resync-status", *_argv(key), *floor)[0] == 0
    assert _snapshot(path) == before


def test_resync_status_ignores_whatever_is_on_stdin(path: Path, key: BindingKey) -> None:
    code, out, _ = run(path, "resync-status", *_argv(key), stdin=b"not json at all")
    assert code == 0 and _one(out)["transport_cursor"] == "42"


def test_resync_status_of_a_stream_never_bound_here_answers_cursor_0_and_writes_nothing(
    path: Path,
) -> None:
    before = _snapshot(path)
    code, out, err = run(path, "resync-status", *_argv(new_key()), "100")
    assert (code, err) == (0, "")
    assert _one(out) == {
        "type": "sync_resync_status",
        "driver_generation": _generation(path),
        "transport_cursor": "0",
        "audit": None,
    }
    assert _snapshot(path) == before


def test_resync_status_of_a_local_team_never_seen_answers_cursor_0(path: Path) -> None:
    code, out, _ = run(path, "resync-status", *_argv(new_key("ghost")))
    assert code == 0 and _one(out)["transport_cursor"] == "0"


def test_resync_status_on_a_missing_store_creates_only_the_empty_store(tmp_path: Path) -> None:
    """Its answer names the store's generation, which exists once the store
    does; no team or binding is written (specs/store.md §10.7)."""
    missing = tmp_path / "none.db"
    code, out, _ = run(missing, "resync-status", *_argv(new_key()))
    assert code == 0 and _one(out)["driver_generation"] == _generation(missing)
    with Store(missing) as store:
        assert store.list_teams() == []
        assert table(store.conn, "SELECT count(*) FROM sync_bindings") == [(0,)]


@pytest.mark.parametrize(
    "floor",
    ["042", "1e2", "-1", "+1", str(2**63), "", "ten", " 1", "1.0", "\u0661"],
    ids=[
        "leading-zero",
        "exponent",
        "negative",
        "plus",
        "above-int64",
        "empty",
        "word",
        "space",
        "decimal-point",
        "non-ascii-digit",
    ],
)
def test_a_noncanonical_accepted_floor_is_a_usage_error(
    path: Path, key: BindingKey, floor: str
) -> None:
    code, out, err = run(path, "resync-status", *_argv(key), floor)
    assert (code, out) == (2, b"")
    assert "usage" in err and "accepted-floor" in err


@pytest.mark.parametrize(
    ("op", "extra"),
    [
        ("resync-status", ["100", "extra"]),
        ("resync", ["100"]),
    ],
    ids=["status-two-floors", "resync-with-a-floor"],
)
def test_extra_argv_is_a_usage_error_exit_2(
    path: Path, key: BindingKey, op: str, extra: list[str]
) -> None:
    before = _snapshot(path)
    code, out, err = run(path, op, *_argv(key), *extra, stdin=_stdin(RESYNC))
    assert (code, out) == (2, b"") and "usage" in err
    assert _snapshot(path) == before


@pytest.mark.parametrize("op", ["resync-status", "resync"])
def test_too_few_binding_arguments_are_a_usage_error(path: Path, key: BindingKey, op: str) -> None:
    code, out, err = run(path, op, *_argv(key)[:3], stdin=_stdin(RESYNC))
    assert (code, out) == (2, b"") and "usage" in err


@pytest.mark.parametrize("op", ["resync-status", "resync"])
def test_a_malformed_binding_argument_is_a_usage_error_naming_it(path: Path, op: str) -> None:
    code, out, err = run(
        path, op, "dev", "nope", new_key().remote_team_id, "1", stdin=_stdin(RESYNC)
    )
    assert (code, out) == (2, b"") and "server-instance-id" in err


# -- resync ------------------------------------------------------------------------------


def test_resync_prints_one_result_line_and_moves_the_cursor_to_the_floor(
    path: Path, key: BindingKey
) -> None:
    code, out, err = run(path, "resync", *_argv(key), stdin=_stdin(RESYNC))
    assert (code, err) == (0, "")
    result = _one(out)
    assert result == {
        "type": "sync_resync_result",
        "driver_generation": _generation(path),
        "expected_transport_cursor": "42",
        "transport_cursor": "100",
        "accepted_floor": "100",
        "gap_start": "43",
        "gap_end": "100",
        "reason": "retention-gap-accepted",
    }
    assert SyncResyncResult.from_obj(result).transport_cursor == 100
    with Store(path) as store:
        assert store.sync_binding(key).transport_cursor == 100  # type: ignore[union-attr]


def test_resync_through_the_command_keeps_the_quarantine(path: Path, key: BindingKey) -> None:
    run(path, "resync", *_argv(key), stdin=_stdin(RESYNC))
    code, out, _ = run(path, "reprocess", *_argv(key))
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert [line["type"] for line in lines] == [
        "sync_state",
        "sync_reprocess_candidate",
        "sync_reprocess_page",
    ]
    assert lines[0]["transport_cursor"] == "100" and lines[1]["server_seq"] == "7"


@pytest.mark.parametrize("expected", ["41", "43", "0"])
def test_a_stale_expected_cursor_exits_13_with_no_output_and_changes_nothing(
    path: Path, key: BindingKey, expected: str
) -> None:
    before = _snapshot(path)
    stale = {**RESYNC, "expected_transport_cursor": expected}
    code, out, err = run(path, "resync", *_argv(key), stdin=_stdin(stale))
    assert (code, out) == (13, b"")
    assert "runtime_error" in err and "stale" in err and "42" in err
    assert _snapshot(path) == before


def test_a_second_resync_to_the_same_floor_exits_13_and_changes_nothing(
    path: Path, key: BindingKey
) -> None:
    assert run(path, "resync", *_argv(key), stdin=_stdin(RESYNC))[0] == 0
    before = _snapshot(path)
    code, out, err = run(path, "resync", *_argv(key), stdin=_stdin(RESYNC))
    assert (code, out) == (13, b"") and "already accepted" in err
    assert _snapshot(path) == before


def test_resync_of_a_stream_never_bound_here_expecting_cursor_0_binds_it_at_the_floor(
    path: Path,
) -> None:
    fresh = new_key("ghost")
    request = {**RESYNC, "expected_transport_cursor": "0"}
    code, out, err = run(path, "resync", *_argv(fresh), stdin=_stdin(request))
    assert (code, err) == (0, "")
    assert _one(out)["transport_cursor"] == RESYNC["min_available_seq"]


def test_resync_of_a_never_bound_stream_expecting_another_cursor_exits_13_and_writes_nothing(
    path: Path,
) -> None:
    before = _snapshot(path)
    code, out, err = run(path, "resync", *_argv(new_key()), stdin=_stdin(RESYNC))
    assert (code, out) == (13, b"") and "transport cursor is 0" in err
    assert _snapshot(path) == before


def test_resync_of_a_retired_binding_exits_13(path: Path, key: BindingKey) -> None:
    with Store(path) as store:
        store.sync_retire_binding(key, store.sync_binding(key).revision)  # type: ignore[union-attr]
    before = _snapshot(path)
    code, out, err = run(path, "resync", *_argv(key), stdin=_stdin(RESYNC))
    assert (code, out) == (13, b"") and "retired" in err
    assert _snapshot(path) == before


@pytest.mark.parametrize(
    ("stdin", "named"),
    [
        (_stdin({**RESYNC, "current_seq": "0120"}), "stdin line 1.current_seq"),
        (_stdin({**RESYNC, "min_available_seq": 100}), "stdin line 1.min_available_seq"),
        (_stdin({**RESYNC, "token": "x"}), "stdin line 1.token"),
        (_stdin({k: v for k, v in RESYNC.items() if k != "reason"}), "stdin line 1.reason"),
        (_stdin({**RESYNC, "reason": "why-not"}), "stdin line 1.reason"),
        (_stdin({**RESYNC, "min_available_seq": "42"}), "stdin line 1.min_available_seq"),
        (_stdin({**RESYNC, "current_seq": "99"}), "stdin line 1.min_available_seq"),
        (_stdin({**RESYNC, "type": "sync_resync_result"}), "stdin line 1.type"),
        (_stdin(RESYNC)[:-2] + b',"reason":"retention-gap-accepted"}\n', "duplicate"),
        (_stdin(RESYNC)[:-1], "truncated"),
        (_stdin(RESYNC).replace(b"\n", b"\r\n"), "carriage return"),
        (b"", "exactly one"),
        (_stdin(RESYNC, RESYNC), "exactly one"),
    ],
    ids=[
        "noncanonical",
        "number",
        "unknown-member",
        "missing-member",
        "reason",
        "floor-at-expected",
        "floor-beyond-current",
        "wrong-type",
        "duplicate-member",
        "no-final-newline",
        "crlf",
        "no-record",
        "two-records",
    ],
)
def test_bad_resync_input_exits_13_naming_the_problem_and_changes_nothing(
    path: Path, key: BindingKey, stdin: bytes, named: str
) -> None:
    before = _snapshot(path)
    code, out, err = run(path, "resync", *_argv(key), stdin=stdin)
    assert (code, out) == (13, b"")
    assert named in err and "runtime_error" in err
    assert _snapshot(path) == before


# -- through the sourced driver file -----------------------------------------------------


def bash(script: str, store: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``script`` in a bash that sourced the installed driver file, with only
    the environment a host gives it."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "SYNCENGINE_STORE": str(store),
        "SYNCENGINE_DRIVER_SERVER": os.environ.get("SYNCENGINE_DRIVER_SERVER", "0"),
    }
    return subprocess.run(
        ["bash", "--norc", "-c", f'source "{DRIVER_FILE}"\n{script}'],
        capture_output=True,
        text=True,
        input=stdin,
        env=env,
        timeout=120,
    )


def test_the_sourced_file_reads_status_resyncs_and_reads_the_audit(
    path: Path, key: BindingKey
) -> None:
    binding = " ".join(_argv(key))
    script = (
        f"storage_sync_resync_status {binding} || exit 91\n"
        f"storage_sync_resync {binding} || exit 92\n"
        f"storage_sync_resync_status {binding} 100 || exit 93\n"
    )
    done = bash(script, path, stdin=_stdin(RESYNC).decode())
    assert (done.returncode, done.stderr) == (0, "")
    before, result, after = (json.loads(line) for line in done.stdout.splitlines())
    assert (before["transport_cursor"], before["audit"]) == ("42", None)
    assert result["type"] == "sync_resync_result" and result["transport_cursor"] == "100"
    assert (after["transport_cursor"], after["audit"]) == ("100", AUDIT)


def test_the_sourced_file_passes_on_a_stale_resync_as_exit_13_with_no_output(
    path: Path, key: BindingKey
) -> None:
    stale = {**RESYNC, "expected_transport_cursor": "41"}
    done = bash(f"storage_sync_resync {' '.join(_argv(key))}", path, _stdin(stale).decode())
    assert (done.returncode, done.stdout) == (13, "")
    assert "stale" in done.stderr


def test_the_sourced_file_passes_on_a_noncanonical_floor_as_a_usage_error(
    path: Path, key: BindingKey
) -> None:
    done = bash(f"storage_sync_resync_status {' '.join(_argv(key))} 042", path)
    assert (done.returncode, done.stdout) == (2, "")
    assert "accepted-floor" in done.stderr
