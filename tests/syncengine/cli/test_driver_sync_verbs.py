"""``syncengine driver`` sync verbs: argv, JSONL framing and adapter exit
codes (UPSTREAM-RECORDS §1.1–§1.2; specs/sync-stage1.md §7)."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import pytest

from syncengine.cli.driver.command import run_op
from syncengine.local_store import Store
from syncengine.ops.bindings import BindingKey
from tests.support.cli import json_lines, run_driver
from tests.syncengine.ops.helpers import foreign_envelope, new_key, pull_record, table

PREPARE = (
    b'{"type":"sync_prepare","envelope_v":1,"cipher":"none","key_id":null,'
    b'"recipients":[],"max_blob_bytes":1048576,"allow_new":true}\n'
)
REPO = Path(__file__).resolve().parents[3]


def run(
    path: Path, op: str, *args: str, stdin: bytes = b""
) -> tuple[int, list[dict[str, object]], str]:
    code, out, err = run_driver(path, op, *args, stdin=stdin)
    return code, json_lines(out.decode()), err


@pytest.fixture
def path(tmp_path: Path) -> Path:
    target = tmp_path / "store.db"
    with Store(target) as store:
        store.init()
        store.create_team("dev", ["alice", "bob"])
        store.send("dev", "alice", "bob", "hello")
    return target


def _argv(key: BindingKey) -> list[str]:
    return [key.local_team, key.server_instance_id, key.remote_team_id, str(key.protocol_version)]


def test_capabilities_prints_one_record_advertising_every_sync_capability(path: Path) -> None:
    code, lines, _ = run(path, "capabilities", *_argv(new_key()))
    assert code == 0
    assert lines == [
        {
            "type": "sync_driver_capabilities",
            "capabilities": ["stage1-sync", "stage1-resync", "stage2-read-state"],
        }
    ]


def test_prepare_reconcile_apply_reprocess_round_trip_through_the_command(path: Path) -> None:
    key = new_key()
    code, lines, _ = run(path, "prepare", *_argv(key), "10", stdin=PREPARE)
    assert code == 0 and [line["type"] for line in lines] == ["sync_state", "sync_push_candidate"]
    candidate = lines[1]
    ack = {
        "type": "sync_push_ack",
        "local_position": candidate["local_position"],
        "id": candidate["id"],
        "server_seq": "1",
        "disposition": "stored",
    }
    code, lines, _ = run(path, "reconcile", *_argv(key), stdin=(json.dumps(ack) + "\n").encode())
    assert (code, lines) == (
        0,
        [{"type": "sync_reconcile_result", "push_cursor": candidate["local_position"]}],
    )
    wire, env = foreign_envelope(key, "hi", "bob", "alice")
    page = json.dumps(pull_record(2, wire, env, "pending_key").to_obj()) + "\n"
    page += '{"type":"sync_pull_cursor","next_after":"2"}\n'
    code, lines, _ = run(path, "apply", *_argv(key), stdin=page.encode())
    assert lines == [
        {"type": "sync_apply_result", "transport_cursor": "2", "corrupt_count": 0},
        {"type": "sync_apply_outcome", "id": wire, "server_seq": "2", "status": "pending_key"},
    ]
    code, lines, _ = run(path, "reprocess", *_argv(key), "5")
    assert [line["type"] for line in lines] == [
        "sync_state",
        "sync_reprocess_candidate",
        "sync_reprocess_page",
    ]


def test_a_repeated_prepare_prints_byte_identical_output(path: Path) -> None:
    key = new_key()
    outputs = []
    for _ in range(2):
        out = io.BytesIO()
        run_op(
            "prepare",
            [*_argv(key), "10"],
            store_path=str(path),
            stdin=io.BytesIO(PREPARE),
            stdout=out,
            stderr=io.BytesIO(),
        )
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize(
    ("op", "args"),
    [
        ("prepare", ["10", "extra"]),
        ("prepare", ["0"]),
        ("prepare", ["1001"]),
        ("prepare", ["ten"]),
        ("reconcile", ["extra"]),
        ("reprocess", ["0"]),
        ("reprocess", ["10", "1:x", "more"]),
    ],
)
def test_wrong_argv_is_a_usage_error_exit_2_with_no_output(
    path: Path, op: str, args: list[str]
) -> None:
    code, lines, err = run(path, op, *_argv(new_key()), *args, stdin=PREPARE)
    assert code == 2 and lines == [] and "usage" in err


def test_bad_binding_arguments_are_a_usage_error(path: Path) -> None:
    code, lines, err = run(path, "prepare", "dev", "nope", "nope", "1", "10", stdin=PREPARE)
    assert code == 2 and lines == [] and "server-instance-id" in err


def test_bad_input_is_exit_13_naming_the_line_and_changes_nothing(path: Path) -> None:
    key = new_key()
    code, lines, err = run(path, "prepare", *_argv(key), "10", stdin=PREPARE.replace(b"true", b"1"))
    assert (code, lines) == (13, []) and "stdin line 1.allow_new" in err and "runtime_error" in err
    with Store(path) as store:
        assert table(store.conn, "SELECT count(*) FROM sync_bindings") == [(0,)]


def test_prepare_needs_exactly_one_input_record(path: Path) -> None:
    code, _, err = run(path, "prepare", *_argv(new_key()), "10", stdin=PREPARE * 2)
    assert code == 13 and "exactly one" in err


def test_apply_needs_one_final_cursor_record(path: Path) -> None:
    key = new_key()
    code, _, err = run(path, "apply", *_argv(key), stdin=b"")
    assert code == 13 and "sync_pull_cursor" in err
    cursor = b'{"type":"sync_pull_cursor","next_after":"2"}\n'
    code, _, err = run(path, "apply", *_argv(key), stdin=cursor * 2)
    assert code == 13 and "follow" in err


def test_a_reconcile_conflict_exits_12_corrupt_state(path: Path) -> None:
    key = new_key()
    _, lines, _ = run(path, "prepare", *_argv(key), "10", stdin=PREPARE)
    base = {
        "type": "sync_push_ack",
        "local_position": lines[1]["local_position"],
        "id": lines[1]["id"],
        "disposition": "stored",
    }
    run(
        path,
        "reconcile",
        *_argv(key),
        stdin=(json.dumps({**base, "server_seq": "1"}) + "\n").encode(),
    )
    code, out, err = run(
        path,
        "reconcile",
        *_argv(key),
        stdin=(json.dumps({**base, "server_seq": "2"}) + "\n").encode(),
    )
    assert (code, out) == (12, []) and "corrupt_state" in err


def test_a_busy_store_exits_11_so_the_engine_retries(path: Path) -> None:
    from unittest import mock

    import apsw

    def impatient(p: object = None, **kw: object) -> Store:
        return Store(p, busy_timeout_ms=50)  # type: ignore[arg-type]

    holder = apsw.Connection(str(path))
    holder.execute("BEGIN IMMEDIATE")
    try:
        with mock.patch("syncengine.local_store.Store", impatient):
            code, lines, err = run(path, "prepare", *_argv(new_key()), "10", stdin=PREPARE)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (code, lines) == (11, []) and "busy" in err


def test_reprocess_on_a_missing_store_answers_an_empty_page_and_binds_nothing(
    tmp_path: Path,
) -> None:
    """A host may reprocess first on a fresh machine; the answer names the
    store's generation, so the empty store is created — nothing else."""
    missing = tmp_path / "none.db"
    code, lines, _ = run(missing, "reprocess", *_argv(new_key()), "5")
    assert code == 0
    state, page = lines
    assert (state["type"], state["transport_cursor"]) == ("sync_state", "0")
    assert page == {"type": "sync_reprocess_page", "next_after": None, "has_more": False}
    with Store(missing) as store:
        assert table(store.conn, "SELECT count(*) FROM sync_bindings") == [(0,)]
        assert state["driver_generation"] == store.driver_generation()


def test_the_module_entry_point_runs_a_sync_verb_end_to_end(path: Path) -> None:
    proc = subprocess.run(
        [
            str(REPO / ".venv/bin/python"),
            "-m",
            "syncengine",
            "driver",
            "--store",
            str(path),
            "prepare",
            *_argv(new_key()),
            "5",
        ],
        input=PREPARE,
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(x)["type"] for x in proc.stdout.splitlines()] == [
        "sync_state",
        "sync_push_candidate",
    ]
