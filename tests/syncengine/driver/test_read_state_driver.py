"""The stage2-read-state verbs through ``syncengine driver`` and through the
sourced driver file (specs/read-state.md §5; UPSTREAM-RECORDS §1.1–§1.2,
§2.7; driver-interface §2.8).

``read-prepare|read-apply|read-block|read-unblock <binding>`` read strict
JSONL on stdin. Stdout carries records only, and nothing at all on failure;
stderr names the problem; the exit code is the adapter's (2 usage, 13 a
failed check). A refused call leaves the store exactly as it was.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from syncengine.ids import new_uuid4, new_uuid7
from syncengine.local_store import Store
from syncengine.ops.bindings import BindingKey
from syncengine.ops.sync_records import SyncPullCursor
from syncengine.store import teams as team_rows
from syncengine.store.connection import write_transaction
from tests.support.cli import run_driver
from tests.syncengine.driver.contract import DRIVER_FILE
from tests.syncengine.ops.helpers import foreign_envelope, new_key, pull_record, table

ALICE, BOB = new_uuid7(), new_uuid7()
VERBS = ["read-prepare", "read-apply", "read-block", "read-unblock"]


def _stdin(*records: dict[str, Any]) -> bytes:
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records).encode()


def _context(floor: str = "0", current: str = "10", bob: str = "bob") -> dict[str, Any]:
    return {
        "type": "sync_read_context",
        "min_available_seq": floor,
        "current_seq": current,
        "members": [{"member_id": ALICE, "name": "alice"}, {"member_id": BOB, "name": bob}],
        "local_agents": ["alice", "bob"],
    }


def _snapshot(floor: str = "0", current: str = "10") -> dict[str, Any]:
    return {"type": "sync_read_snapshot", "min_available_seq": floor, "current_seq": current}


def _frontier(member: str, seq: str) -> dict[str, Any]:
    return {"type": "sync_read_frontier", "member_id": member, "server_seq": seq}


def _exact(member: str, wire: str) -> dict[str, Any]:
    return {"type": "sync_read_exact", "member_id": member, "wire_id": wire}


def _block(member: str = BOB, reason: str = "read-state-limit-exceeded") -> dict[str, Any]:
    return {"type": "sync_read_block", "member_id": member, "reason": reason}


def _unblock(member: str = BOB) -> dict[str, Any]:
    return {"type": "sync_read_unblock", "member_id": member}


GOOD_STDIN = {
    "read-prepare": _stdin(_context()),
    "read-apply": _stdin(_snapshot(), _frontier(BOB, "1")),
    "read-block": _stdin(_block()),
    "read-unblock": _stdin(_unblock()),
}


def run(path: Path, op: str, *args: str, stdin: bytes = b"") -> tuple[int, bytes, str]:
    """One in-process ``syncengine driver <op>``: exit code, raw stdout, stderr."""
    return run_driver(path, op, *args, stdin=stdin)


def _lines(stdout: bytes) -> list[dict[str, Any]]:
    assert stdout == b"" or stdout.endswith(b"\n"), stdout
    return [json.loads(line) for line in stdout.splitlines()]


def _argv(key: BindingKey) -> list[str]:
    return [key.local_team, key.server_instance_id, key.remote_team_id, str(key.protocol_version)]


def _everything(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    with Store(path) as store:
        names = [
            r[0] for r in table(store.conn, "SELECT name FROM sqlite_master WHERE type='table'")
        ]
        return {n: sorted(table(store.conn, f"SELECT * FROM {n}"), key=repr) for n in names}


def _unread(path: Path, agent: str = "bob") -> list[str]:
    with Store(path) as store:
        return [m.body for m in store.list_unread("dev", agent)]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    target = tmp_path / "store.db"
    with Store(target) as store:
        store.init()
        store.create_team("dev", ["alice", "bob"])
        with write_transaction(store.conn, store.path, "engine.roster") as conn:
            roster = [(ALICE, "alice"), (BOB, "bob")]
            team_rows.adopt_roster(conn, team_rows.team_pk(conn, "dev"), roster, "t")
    return target


@pytest.fixture
def key(path: Path) -> BindingKey:
    """A binding of team ``dev`` holding bob's imports at 1 (read), 2 (unread)
    and 3 (read); the transport cursor is at 5 and the read floor at 0."""
    bound = new_key()
    records = []
    for seq in (1, 2, 3):
        wire, envelope = foreign_envelope(bound, f"m{seq}", "carol", "bob")
        records.append(pull_record(seq, wire, envelope))
    with Store(path) as store:
        store.sync_apply_pull(bound, records, SyncPullCursor(5))
        history = store.history("dev")
        store.mark_read_batch("dev", "bob", [history[0].id, history[2].id])
    return bound


def _wire_of(path: Path, seq: int) -> str:
    with Store(path) as store:
        ((wire,),) = table(
            store.conn, "SELECT wire_id FROM sync_quarantine WHERE server_seq = ?", seq
        )
        return str(wire)


# -- what each verb prints ---------------------------------------------------------------


def test_read_prepare_prints_each_members_frontier_and_its_exact_reads(
    path: Path, key: BindingKey
) -> None:
    code, out, err = run(path, "read-prepare", *_argv(key), stdin=GOOD_STDIN["read-prepare"])
    assert (code, err) == (0, "")
    assert _lines(out) == [
        _frontier(ALICE, "5"),
        _frontier(BOB, "1"),
        _exact(BOB, _wire_of(path, 3)),
    ]


def test_a_retried_read_prepare_prints_byte_identical_output(path: Path, key: BindingKey) -> None:
    outputs = [
        run(path, "read-prepare", *_argv(key), stdin=_stdin(_context(bob="robert")))[1]
        for _ in range(2)
    ]
    assert outputs[0] == outputs[1]
    assert b"member-name-mismatch" in outputs[0]


def test_read_apply_prints_one_result_line_and_projects_the_page(
    path: Path, key: BindingKey
) -> None:
    stdin = _stdin(_snapshot(floor="0"), _frontier(BOB, "2"), _exact(ALICE, new_uuid4()))
    code, out, err = run(path, "read-apply", *_argv(key), stdin=stdin)
    assert (code, err) == (0, "")
    assert _lines(out) == [
        {"type": "sync_read_apply_result", "min_available_seq": "0", "member_count": 2}
    ]
    assert _unread(path) == []


def test_read_apply_with_only_a_snapshot_merges_the_floor(path: Path, key: BindingKey) -> None:
    code, out, _ = run(path, "read-apply", *_argv(key), stdin=_stdin(_snapshot(floor="2")))
    assert code == 0
    assert _lines(out) == [
        {"type": "sync_read_apply_result", "min_available_seq": "2", "member_count": 0}
    ]
    assert _unread(path) == []


def test_read_block_prints_the_block_and_read_prepare_reports_it(
    path: Path, key: BindingKey
) -> None:
    code, out, err = run(path, "read-block", *_argv(key), stdin=GOOD_STDIN["read-block"])
    assert (code, err) == (0, "")
    blocked = {"type": "sync_read_blocked", "member_id": BOB, "reason": "read-state-limit-exceeded"}
    assert _lines(out) == [blocked]
    _, out, _ = run(path, "read-prepare", *_argv(key), stdin=GOOD_STDIN["read-prepare"])
    assert _lines(out) == [_frontier(ALICE, "5"), blocked]


def test_read_unblock_prints_the_unblocked_member_and_prepare_reports_it_again(
    path: Path, key: BindingKey
) -> None:
    run(path, "read-block", *_argv(key), stdin=GOOD_STDIN["read-block"])
    code, out, err = run(path, "read-unblock", *_argv(key), stdin=GOOD_STDIN["read-unblock"])
    assert (code, err) == (0, "")
    assert _lines(out) == [{"type": "sync_read_unblocked", "member_id": BOB}]
    _, out, _ = run(path, "read-prepare", *_argv(key), stdin=GOOD_STDIN["read-prepare"])
    assert _frontier(BOB, "1") in _lines(out)


# -- usage errors: exit 2 ------------------------------------------------------------------


@pytest.mark.parametrize("verb", VERBS)
def test_an_extra_argument_is_a_usage_error_and_changes_nothing(
    path: Path, key: BindingKey, verb: str
) -> None:
    before = _everything(path)
    code, out, err = run(path, verb, *_argv(key), "10", stdin=GOOD_STDIN[verb])
    assert (code, out) == (2, b"")
    assert "usage" in err and verb in err
    assert _everything(path) == before


@pytest.mark.parametrize("verb", VERBS)
def test_too_few_binding_arguments_are_a_usage_error(
    path: Path, key: BindingKey, verb: str
) -> None:
    code, out, err = run(path, verb, *_argv(key)[:3], stdin=GOOD_STDIN[verb])
    assert (code, out) == (2, b"") and "usage" in err


@pytest.mark.parametrize("verb", VERBS)
def test_a_malformed_binding_argument_is_a_usage_error_naming_it(path: Path, verb: str) -> None:
    argv = ["dev", new_uuid7(), "not-a-team-id", "1"]
    code, out, err = run(path, verb, *argv, stdin=GOOD_STDIN[verb])
    assert (code, out) == (2, b"") and "remote-team-id" in err


# -- failed checks: exit 13, no output, nothing changed --------------------------------


def _failed(path: Path, key: BindingKey, verb: str, stdin: bytes, named: str) -> None:
    before = _everything(path)
    code, out, err = run(path, verb, *_argv(key), stdin=stdin)
    assert (code, out) == (13, b""), err
    assert "runtime_error" in err and named in err, err
    assert _everything(path) == before


@pytest.mark.parametrize(
    ("stdin", "named"),
    [
        (_stdin(_snapshot(), _frontier(BOB, "11")), "item 1.server_seq"),
        (_stdin(_snapshot(), _frontier(BOB, "1"), _frontier(BOB, "2")), "one frontier per page"),
        (_stdin(_snapshot(current="4")), "transport cursor 5"),
        (_stdin(_snapshot(), _frontier(BOB, "01")), "stdin line 2.server_seq"),
        (_stdin(_snapshot(current="010")), "stdin line 1.current_seq"),
        (_stdin(_snapshot(), {**_frontier(BOB, "1"), "page": "x"}), "stdin line 2.page"),
        (_stdin(_snapshot())[:-2] + b',"current_seq":"10"}\n', "duplicate"),
        (_stdin(_snapshot(), _exact(BOB, new_uuid7())), "stdin line 2.wire_id"),
        (_stdin(_frontier(BOB, "1")), "stdin line 1.type"),
        (_stdin(_snapshot(), _snapshot()), "stdin line 2.type"),
        (_stdin(_snapshot(floor="11")), "stdin line 1.min_available_seq"),
        (b"", "sync_read_snapshot"),
        (_stdin(_snapshot())[:-1], "truncated"),
        (_stdin(_snapshot()).replace(b"\n", b"\r\n"), "carriage return"),
    ],
    ids=[
        "frontier-beyond-current",
        "two-frontiers",
        "current-below-cursor",
        "noncanonical-frontier",
        "noncanonical-current",
        "unknown-key",
        "duplicate-key",
        "exact-not-uuid4",
        "item-first",
        "two-snapshots",
        "floor-beyond-current",
        "empty",
        "no-final-newline",
        "crlf",
    ],
)
def test_bad_read_apply_input_exits_13_naming_the_problem_and_changes_nothing(
    path: Path, key: BindingKey, stdin: bytes, named: str
) -> None:
    _failed(path, key, "read-apply", stdin, named)


def test_a_read_apply_floor_below_the_stored_floor_exits_13_and_changes_nothing(
    path: Path, key: BindingKey
) -> None:
    assert run(path, "read-apply", *_argv(key), stdin=_stdin(_snapshot(floor="3")))[0] == 0
    _failed(path, key, "read-apply", _stdin(_snapshot(floor="2")), "below the floor 3")


@pytest.mark.parametrize(
    ("stdin", "named"),
    [
        (b"", "exactly one"),
        (_stdin(_context(), _context()), "exactly one"),
        (_stdin(_context(floor="2")) + b"\n", "blank line"),
        (_stdin(_context(current="4")), "transport cursor 5"),
        (_stdin(_context(current="+10")), "stdin line 1.current_seq"),
        (_stdin({**_context(), "cursor": "1"}), "stdin line 1.cursor"),
        (_stdin({**_context(), "local_agents": ["bob", "bob"]}), "stdin line 1.local_agents"),
        (_stdin(_snapshot()), "stdin line 1.type"),
    ],
    ids=[
        "no-record",
        "two-records",
        "blank-line",
        "current-below-cursor",
        "noncanonical",
        "unknown-key",
        "repeated-agent",
        "wrong-type",
    ],
)
def test_bad_read_prepare_input_exits_13_naming_the_problem_and_changes_nothing(
    path: Path, key: BindingKey, stdin: bytes, named: str
) -> None:
    _failed(path, key, "read-prepare", stdin, named)


def test_a_read_prepare_floor_below_the_stored_floor_exits_13_and_changes_nothing(
    path: Path, key: BindingKey
) -> None:
    assert run(path, "read-prepare", *_argv(key), stdin=_stdin(_context(floor="3")))[0] == 0
    _failed(path, key, "read-prepare", _stdin(_context(floor="2")), "below the floor 3")


@pytest.mark.parametrize(
    ("verb", "stdin", "named"),
    [
        ("read-block", _stdin(_block(new_uuid7())), "not on the roster"),
        ("read-block", _stdin(_block(reason="tired")), "stdin line 1.reason"),
        ("read-block", _stdin({"type": "sync_read_block", "member_id": BOB}), "reason"),
        ("read-block", _stdin(_block(), _block()), "exactly one"),
        ("read-unblock", _stdin({**_unblock(), "reason": "x"}), "stdin line 1.reason"),
        ("read-unblock", _stdin(_unblock(new_uuid4())), "stdin line 1.member_id"),
        ("read-unblock", b"", "exactly one"),
    ],
    ids=[
        "block-stranger",
        "block-reason",
        "block-without-reason",
        "block-twice-in-one-call",
        "unblock-unknown-key",
        "unblock-uuid4",
        "unblock-nothing",
    ],
)
def test_bad_block_input_exits_13_naming_the_problem_and_changes_nothing(
    path: Path, key: BindingKey, verb: str, stdin: bytes, named: str
) -> None:
    _failed(path, key, verb, stdin, named)


def test_read_apply_passes_over_items_about_members_this_store_does_not_hold(
    path: Path, key: BindingKey
) -> None:
    """A host hands read-apply every item of the relay's page."""
    before = _everything(path)
    stdin = _stdin(_snapshot(), _frontier(new_uuid7(), "1"), _exact(new_uuid7(), new_uuid4()))
    code, out, err = run(path, "read-apply", *_argv(key), stdin=stdin)
    assert (code, err) == (0, "")
    assert _lines(out) == [
        {"type": "sync_read_apply_result", "min_available_seq": "0", "member_count": 0}
    ]
    assert _everything(path) == before


@pytest.mark.parametrize("verb", ["read-prepare", "read-apply", "read-unblock"])
def test_a_verb_on_a_stream_never_bound_here_binds_it_and_succeeds(
    path: Path, key: BindingKey, verb: str
) -> None:
    fresh = new_key()
    code, _, err = run(path, verb, *_argv(fresh), stdin=GOOD_STDIN[verb])
    assert (code, err) == (0, "")
    with Store(path) as store:
        assert store.sync_binding(fresh) is not None


@pytest.mark.parametrize("verb", ["read-prepare", "read-apply", "read-unblock"])
def test_a_verb_on_a_missing_store_creates_it_with_the_team_and_binding(
    tmp_path: Path, verb: str
) -> None:
    """A host's read-state phase on a fresh machine needs nothing
    registered first (driver-interface §2)."""
    missing = tmp_path / "none.db"
    fresh = new_key("crew")
    code, _, err = run(missing, verb, *_argv(fresh), stdin=GOOD_STDIN[verb])
    assert (code, err) == (0, "")
    with Store(missing) as store:
        assert store.sync_binding(fresh) is not None


def test_read_prepare_on_a_fresh_store_answers_every_member_of_the_context(
    tmp_path: Path,
) -> None:
    fresh = new_key("crew")
    code, out, err = run(tmp_path / "s.db", "read-prepare", *_argv(fresh), stdin=_stdin(_context()))
    assert (code, err) == (0, "")
    assert _lines(out) == [_frontier(ALICE, "0"), _frontier(BOB, "0")]


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


def test_the_sourced_file_runs_a_whole_read_state_cycle(path: Path, key: BindingKey) -> None:
    binding = " ".join(_argv(key))
    context = _stdin(_context()).decode().strip()
    page = _stdin(_snapshot(), _frontier(BOB, "3")).decode()
    script = (
        f"storage_sync_block_read_state {binding} <<< '{json.dumps(_block())}' || exit 91\n"
        f"storage_sync_prepare_read_state {binding} <<< '{context}' || exit 92\n"
        f"storage_sync_unblock_read_state {binding} <<< '{json.dumps(_unblock())}' || exit 93\n"
        f"printf '%s' '{page}' | storage_sync_apply_read_state {binding} || exit 94\n"
        f"storage_sync_prepare_read_state {binding} <<< '{context}' || exit 95\n"
    )
    done = bash(script, path)
    assert (done.returncode, done.stderr) == (0, "")
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["type"] for line in lines] == [
        "sync_read_blocked",
        "sync_read_frontier",
        "sync_read_blocked",
        "sync_read_unblocked",
        "sync_read_apply_result",
        "sync_read_frontier",
        "sync_read_frontier",
    ]
    assert lines[-2:] == [_frontier(ALICE, "5"), _frontier(BOB, "5")]
    assert _unread(path) == []


def test_the_sourced_file_passes_on_a_failed_check_as_exit_13_with_no_output(
    path: Path, key: BindingKey
) -> None:
    stdin = _stdin(_snapshot(), _frontier(BOB, "11")).decode()
    done = bash(f"storage_sync_apply_read_state {' '.join(_argv(key))}", path, stdin)
    assert (done.returncode, done.stdout) == (13, "")
    assert "beyond current_seq" in done.stderr


def test_the_sourced_file_passes_on_wrong_argv_as_a_usage_error(
    path: Path, key: BindingKey
) -> None:
    done = bash(
        f"storage_sync_prepare_read_state {' '.join(_argv(key))} extra",
        path,
        GOOD_STDIN["read-prepare"].decode(),
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert "usage" in done.stderr and "read-prepare" in done.stderr
