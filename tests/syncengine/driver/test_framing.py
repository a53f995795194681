"""Stdout framing and status codes of ``syncengine driver`` and the bash file
(driver-interface §1.4, §1.6, §2.1)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from syncengine.cli.driver.command import CONTROL_OPS
from syncengine.local_store import Store
from tests.support.cli import run_driver
from tests.syncengine.driver.contract import DRIVER_FILE, BashDriver


def run(op: str, *args: str, path: Path, stdin: bytes = b"") -> tuple[int, list[str], str]:
    code, out, err = run_driver(path, op, *args, stdin=stdin)
    return code, out.decode().splitlines(), err


@pytest.fixture
def path(tmp_path: Path) -> Path:
    target = tmp_path / "store.db"
    with Store(target) as store:
        store.init()
        store.create_team("dev", ["alice", "bob"])
    return target


def test_describe_prints_only_key_value_metadata_with_a_capabilities_line(path: Path) -> None:
    code, lines, _ = run("describe", path=path)
    assert code == 0
    assert all("=" in line and line.split("=", 1)[0].isidentifier() for line in lines)
    assert "capabilities=stage1-sync,stage1-resync,stage2-read-state" in lines
    assert not {"ok", "runtime_error"} & set(lines)


def test_describe_exits_zero_even_without_a_store(tmp_path: Path) -> None:
    code, lines, _ = run("describe", path=tmp_path / "none" / "x.db")
    assert code == 0 and "capabilities=stage1-sync,stage1-resync,stage2-read-state" in lines


@pytest.mark.parametrize("op", sorted(CONTROL_OPS))
def test_every_control_op_ends_with_a_status_line_matching_its_exit_code(
    path: Path, op: str
) -> None:
    code, lines, err = run(op, "bad:arg", "x", path=path)
    assert lines[-1] == "runtime_error" and code == 13 and err


@pytest.mark.parametrize("op", ["export", "import"])
def test_export_and_import_print_nothing_on_stdout_and_fail_by_exit_code(
    path: Path, tmp_path: Path, op: str
) -> None:
    """As the bundled drivers: a host that captures the output beside the
    file (upstream's "compact is idempotent" does) sees only the file."""
    log = tmp_path / "log.jsonl"
    assert run("export", "dev", str(log), path=path)[:2] == (0, [])
    assert run(op, "dev", str(log), path=path)[:2] == (0, [])
    code, lines, err = run(op, "dev", str(tmp_path / "no" / "such" / "dir" / "f"), path=path)
    assert (code, lines) == (13, []) and err


def test_record_ops_print_data_only_and_fail_by_exit_code(path: Path) -> None:
    code, lines, err = run("list_unread", "dev", "gh:ost", path=path)
    assert (code, lines) == (13, [])
    assert "agent" in err
    code, lines, _ = run("send", "dev", "alice", "bob", path=path, stdin="héllo".encode())
    assert code == 0 and len(lines) == 1
    code, lines, _ = run("list_unread", "dev", "bob", path=path)
    assert json.loads(lines[0])["body"] == "héllo"


def test_send_batch_reads_jsonl_and_prints_one_id_per_message(path: Path) -> None:
    batch = b"".join(
        json.dumps({"team": "dev", "from": "alice", "to": "bob", "body": f"m{i}"}).encode() + b"\n"
        for i in range(3)
    )
    code, lines, _ = run("send_batch", path=path, stdin=batch)
    assert code == 0 and len(lines) == 3
    code, lines, err = run("send_batch", path=path, stdin=batch[:-5])
    assert code == 13 and lines == [] and "truncated" in err
    with Store(path) as store:
        assert len(store.history("dev")) == 3


def test_a_body_that_is_not_utf8_is_refused(path: Path) -> None:
    code, _, err = run("send", "dev", "alice", "bob", path=path, stdin=b"\xff\xfe")
    assert code == 13 and "UTF-8" in err


def test_missing_apsw_emits_an_install_directive_and_missing_deps(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "apsw", None)
    code, lines, _ = run("check", path=path)
    assert code == 10 and lines[-1] == "missing_deps"
    assert lines[0].startswith("AGMSG-DIRECTIVE: ")
    directive = json.loads(lines[0].removeprefix("AGMSG-DIRECTIVE: "))
    assert directive["type"] == "install_deps" and directive["reason"]
    # installed into the interpreter that runs syncengine, not some python3
    assert directive["commands"][0].startswith(sys.executable)


def test_bash_check_without_the_command_emits_a_directive_and_missing_deps(path: Path) -> None:
    done = BashDriver(path, bin_path="/nonexistent/syncengine").raw("storage_check")
    lines = done.stdout.decode().splitlines()
    assert done.returncode == 10
    assert lines[0].startswith("AGMSG-DIRECTIVE: ") and lines[-1] == "missing_deps"
    json.loads(lines[0].removeprefix("AGMSG-DIRECTIVE: "))


def test_bash_directive_outside_a_checkout_tells_a_wheel_user_what_to_do(tmp_path: Path) -> None:
    """#33: an installed package has no scripts/setup.sh; the directive must
    not send its user to a source checkout."""
    storage = tmp_path / "env/lib/python3.11/site-packages/syncengine/drivers/storage"
    storage.mkdir(parents=True)
    driver = storage / "syncengine.sh"
    driver.write_bytes(DRIVER_FILE.read_bytes())
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SYNCENGINE_STORE": str(tmp_path / "s")}
    done = subprocess.run(
        ["bash", "-c", f'source "{driver}"; storage_check'],
        capture_output=True,
        env=env,
        timeout=60,
        check=False,
    )
    lines = done.stdout.decode().splitlines()
    assert done.returncode == 10 and lines[-1] == "missing_deps"
    directive = json.loads(lines[0].removeprefix("AGMSG-DIRECTIVE: "))
    assert directive["commands"] == []
    assert "setup.sh" not in directive["reason"] and "checkout" not in directive["reason"]
    assert "SYNCENGINE_BIN" in directive["reason"] and "bin/syncengine" in directive["reason"]


def test_bash_send_never_puts_the_body_on_the_child_argv(path: Path, tmp_path: Path) -> None:
    recorder = tmp_path / "recorder"
    log = tmp_path / "argv.log"
    recorder.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > "{log}"\ncat >/dev/null\necho id\n')
    recorder.chmod(recorder.stat().st_mode | stat.S_IXUSR)
    done = BashDriver(path, bin_path=recorder).raw(
        "storage_send", "dev", "alice", "bob", "TOP-SECRET body"
    )
    assert done.returncode == 0
    assert "TOP-SECRET" not in log.read_text()
    assert log.read_text().split() == ["driver", "send", "dev", "alice", "bob"]


def test_bash_driver_defines_only_storage_prefixed_functions() -> None:
    script = f'source "{DRIVER_FILE}"; compgen -A function'
    names = subprocess.run(
        ["bash", "--norc", "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": os.environ["PATH"]},
    ).stdout.split()
    assert names and all(name.startswith("storage_") for name in names)


def test_a_driver_call_parses_its_argv_without_loading_argparse(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    probe = (
        "import sys\nfrom syncengine.cli import main\n"
        f"code = main(['driver', '--store', {str(store)!r}, 'init'])\n"
        "code += main(['driver', '--store=' + " + repr(str(store)) + ", 'store_exists'])\n"
        "assert 'argparse' not in sys.modules, 'argparse was imported'\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr


def test_driver_help_and_unknown_ops_still_get_the_full_parser() -> None:
    from syncengine.cli.driver.command import run_plain_argv

    assert run_plain_argv(["--help"]) is None
    assert run_plain_argv(["bogus"]) is None
    assert run_plain_argv([]) is None
    assert run_plain_argv(["--store"]) is None


def test_a_driver_file_outside_a_checkout_suggests_no_package_index_install(
    tmp_path: Path,
) -> None:
    """#18: the hint named ``pip install syncengine`` — someone else's package."""
    from syncengine.cli.driver.command import driver_file

    copy = tmp_path / "elsewhere" / "syncengine.sh"
    copy.parent.mkdir()
    copy.write_bytes(Path(driver_file()).read_bytes())
    done = subprocess.run(
        ["bash", "-c", f"source '{copy}'; storage_check"],
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "SYNCENGINE_BIN": "/nonexistent/syncengine"},
        timeout=30,
        check=False,
    )
    directive = json.loads(done.stdout.decode().splitlines()[0].removeprefix("AGMSG-DIRECTIVE: "))
    assert directive["commands"] == []
    assert "SYNCENGINE_BIN" in directive["reason"] and "pip install" not in done.stdout.decode()
