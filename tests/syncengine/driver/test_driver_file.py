"""The driver file as a host uses it: sourced from where ``syncengine driver
path`` says it is installed, every advertised function callable, the whole
stage1-sync extension present (driver-interface §2.8), and a host-style
session on a fresh machine that never registered a team."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from syncengine.ids import new_uuid7
from syncengine.ops.sync_records import SyncPushCandidate
from tests.syncengine.driver.contract import DRIVER_FILE, REPO, SYNCENGINE_BIN
from tests.syncengine.ops.helpers import ack, foreign_envelope, new_key, pull_record

#: The functions each capability obliges the file to define (driver-interface §2.8).
CAPABILITY_FUNCTIONS = {
    "stage1-sync": (
        "storage_sync_prepare_push",
        "storage_sync_reconcile_push",
        "storage_sync_apply_pull",
        "storage_sync_reprocess",
    ),
    "stage1-resync": ("storage_sync_resync_status", "storage_sync_resync"),
    "stage2-read-state": ("storage_sync_prepare_read_state", "storage_sync_apply_read_state"),
}
STORAGE_FUNCTIONS = [
    "storage_check",
    "storage_describe",
    "storage_init",
    "storage_store_exists",
    "storage_send",
    "storage_list_unread",
    "storage_mark_read_batch",
    "storage_read_cursor_get",
    "storage_read_cursor_consume",
    "storage_watch_tip",
    "storage_watch_after",
    "storage_history",
    "storage_export",
    "storage_import",
    "storage_compact",
]
PREPARE = (
    '{"type":"sync_prepare","envelope_v":1,"cipher":"none","key_id":null,'
    '"recipients":[],"max_blob_bytes":1048576,"allow_new":true}\n'
)


def bash(
    script: str, store: Path, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a bash that sourced the installed driver file, with
    the environment a host gives it (no SYNCENGINE_BIN: the file finds the
    executable installed beside it)."""
    base = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "SYNCENGINE_DRIVER_SERVER": os.environ.get("SYNCENGINE_DRIVER_SERVER", "0"),
    }
    return subprocess.run(
        ["bash", "--norc", "-c", f'source "{DRIVER_FILE}"\n{script}'],
        capture_output=True,
        text=True,
        input=stdin,
        env={**base, "SYNCENGINE_STORE": str(store), **(env or {})},
        timeout=120,
    )


def test_driver_path_prints_the_installed_file_and_the_repository_link_points_at_it() -> None:
    done = subprocess.run(
        [str(SYNCENGINE_BIN), "driver", "path"], capture_output=True, text=True, check=True
    )
    installed = Path(done.stdout.strip())
    assert installed.is_file() and installed == DRIVER_FILE
    assert (REPO / "drivers" / "storage" / "syncengine.sh").resolve() == installed.resolve()


def test_the_file_finds_the_syncengine_installed_beside_it_without_path(tmp_path: Path) -> None:
    done = bash("storage__syncengine_bin", tmp_path / "s.db")
    assert done.returncode == 0
    assert Path(done.stdout.strip()).resolve() == SYNCENGINE_BIN.resolve()


def test_every_advertised_capability_has_its_functions_in_the_file(tmp_path: Path) -> None:
    done = bash("storage_describe; compgen -A function", tmp_path / "s.db")
    lines = done.stdout.splitlines()
    [caps] = [
        line.removeprefix("capabilities=")
        for line in lines
        if "=" in line and line.startswith("capabilities=")
    ]
    advertised = [cap for cap in caps.split(",") if cap]
    assert "stage1-sync" in advertised
    defined = {line for line in lines if "=" not in line}
    for cap in advertised:
        assert set(CAPABILITY_FUNCTIONS[cap]) <= defined, cap
    assert set(STORAGE_FUNCTIONS) <= defined


def test_the_sync_extension_round_trips_through_the_sourced_file(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    key = new_key("crew")
    binding = f"crew {key.server_instance_id} {key.remote_team_id} 1"
    assert bash("storage_send crew alice bob hello", store).returncode == 0

    prepared = bash(f"storage_sync_prepare_push {binding} 10", store, stdin=PREPARE)
    assert prepared.returncode == 0, prepared.stderr
    state, candidate = (json.loads(line) for line in prepared.stdout.splitlines())
    assert state["type"] == "sync_state" and candidate["type"] == "sync_push_candidate"
    default_limit = bash(f"storage_sync_prepare_push {binding}", store, stdin=PREPARE)
    assert default_limit.stdout == prepared.stdout, "a re-entrant prepare re-emits the same bytes"

    acked = ack(SyncPushCandidate.from_obj(candidate), 1).to_obj()
    reconciled = bash(f"storage_sync_reconcile_push {binding}", store, json.dumps(acked) + "\n")
    assert json.loads(reconciled.stdout) == {
        "type": "sync_reconcile_result",
        "push_cursor": candidate["local_position"],
    }

    wire, envelope = foreign_envelope(key, "from afar", "carol", "bob")
    page = json.dumps(pull_record(2, wire, envelope).to_obj()) + "\n"
    page += '{"type":"sync_pull_cursor","next_after":"2"}\n'
    applied = bash(f"storage_sync_apply_pull {binding}", store, page)
    assert applied.returncode == 0, applied.stderr
    assert [json.loads(line)["type"] for line in applied.stdout.splitlines()] == [
        "sync_apply_result",
        "sync_apply_outcome",
    ]
    unread = bash("storage_list_unread crew bob", store)
    assert [json.loads(line)["body"] for line in unread.stdout.splitlines()] == [
        "hello",
        "from afar",
    ]

    reprocessed = bash(f"storage_sync_reprocess {binding}", store)
    assert reprocessed.returncode == 0, reprocessed.stderr
    lines = [json.loads(line) for line in reprocessed.stdout.splitlines()]
    assert [line["type"] for line in lines] == ["sync_state", "sync_reprocess_page"]
    assert lines[-1] == {"type": "sync_reprocess_page", "next_after": None, "has_more": False}


def test_a_sync_function_with_a_bad_binding_is_a_usage_error(tmp_path: Path) -> None:
    done = bash("storage_sync_reprocess crew not-a-uuid 0190 1", tmp_path / "s.db")
    assert done.returncode == 2 and done.stdout == "" and done.stderr


def test_missing_command_directive_names_this_projects_setup(tmp_path: Path) -> None:
    done = bash("storage_init", tmp_path / "s.db", env={"SYNCENGINE_BIN": "/nonexistent/x"})
    first, last = done.stdout.splitlines()[0], done.stdout.splitlines()[-1]
    directive = json.loads(first.removeprefix("AGMSG-DIRECTIVE: "))
    assert (done.returncode, last) == (10, "missing_deps")
    assert directive["commands"] == [f"bash '{REPO}/scripts/setup.sh'"]


HOST_SESSION = textwrap.dedent(
    """
    set -u
    fail() { echo "FAIL: $*" >&2; exit 1; }
    storage_store_exists crew && fail "a fresh machine has no store"
    [ "$(storage_list_unread crew bob)" = "" ] || fail "unread on a fresh machine"
    storage_store_exists crew && fail "a read created the store"
    a=$(storage_send crew alice bob "one") || fail "first send"
    b=$(storage_send crew carol bob "two, with 'quotes' and $(printf '\\n')newline") || fail send
    c=$(storage_send crew bob alice "three") || fail send
    storage_store_exists crew || fail "the first write creates the store"
    [ "$(storage_list_unread crew bob | wc -l)" = 2 ] || fail "bob has two unread"
    tip=$(storage_watch_tip crew:bob crew:alice) || fail tip
    [ "$tip" = 3 ] || fail "tip is $tip"
    [ "$(storage_mark_read_batch crew alice "$a" | tail -n1)" = ok ] || fail "cross-agent mark"
    [ "$(storage_list_unread crew bob | wc -l)" = 2 ] || fail "alice's mark touched bob"
    [ "$(storage_mark_read_batch crew bob "$b" | tail -n1)" = ok ] || fail "mark b"
    cur=$(storage_read_cursor_get crew bob) || fail cursor
    [ "$cur" = 0 ] || fail "bob's frontier jumped the hole at one: $cur"
    watched=$(storage_watch_after "$cur" crew:bob) || fail watch
    [ "$(printf '%s\\n' "$watched" | wc -l)" = 2 ] || fail "watch: one message and the cursor"
    printf '%s\\n' "$watched" | head -n1 | grep -q "\\"id\\":\\"$a\\"" || fail "watch shows one"
    [ "$(storage_read_cursor_consume crew bob 3 "$a" | tail -n1)" = ok ] || fail consume
    [ "$(storage_read_cursor_get crew bob)" = 3 ] || fail "consume to the tip"
    [ "$(storage_list_unread crew bob)" = "" ] || fail "bob read everything"
    [ -z "$(storage_export crew "$EXPORT")" ] || fail "export printed on stdout"
    out=$(SYNCENGINE_STORE="$OTHER" storage_import crew "$EXPORT") || fail import
    [ -z "$out" ] || fail "import printed on stdout"
    # upstream's "compact is idempotent" captures the export beside the file
    [ "$(storage_export crew "$EXPORT.cap"; cat "$EXPORT.cap")" = "$(cat "$EXPORT")" ] ||
        fail "the captured export differs from the file"
    SYNCENGINE_STORE="$OTHER" storage_export crew "$EXPORT.again" >/dev/null || fail export2
    cmp -s "$EXPORT" "$EXPORT.again" || fail "the imported store exports the same log"
    [ "$(storage_compact crew | tail -n1)" = ok ] || fail compact
    storage_export crew "$EXPORT.c1" >/dev/null
    [ "$(storage_compact crew | tail -n1)" = ok ] || fail compact2
    storage_export crew "$EXPORT.c2" >/dev/null
    cmp -s "$EXPORT.c1" "$EXPORT.c2" || fail "a second compact changed the export"
    [ "$(storage_history crew --limit 2 | wc -l)" = 2 ] || fail history
    other_unread=$(SYNCENGINE_STORE="$OTHER" storage_list_unread crew alice)
    printf '%s' "$other_unread" | grep -q "\\"id\\":\\"$c\\"" || fail "alice unread"
    [ "$(SYNCENGINE_STORE="$OTHER" storage_list_unread crew bob)" = "" ] || fail "and bob's reads"
    echo done
    """
)


@pytest.mark.parametrize("server", ["0", "1"], ids=["per-process", "served"])
def test_a_host_session_on_a_fresh_machine_gets_what_the_contract_requires(
    tmp_path: Path, server: str
) -> None:
    env = {
        "EXPORT": str(tmp_path / "log.jsonl"),
        "OTHER": str(tmp_path / "other" / "store.db"),
        "SYNCENGINE_DRIVER_SERVER": server,
    }
    done = bash(HOST_SESSION, tmp_path / "fresh" / "store.db", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done"


def test_new_uuid7_is_what_the_file_returns_for_a_send(tmp_path: Path) -> None:
    sent = bash("storage_send crew alice bob hi", tmp_path / "s.db").stdout.strip()
    assert len(sent) == len(new_uuid7()) and sent[14] == "7"
