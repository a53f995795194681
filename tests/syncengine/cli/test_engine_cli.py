"""The engine and people's commands at the CLI: argv never carries a secret,
exit codes follow the table, start-up stays lazy, messages commands follow
the storage contract's argument order."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from syncengine.cli import COMMAND_MODULES, COMMANDS, main
from tests.support.cli import syncengine


def run(*args: str, store: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return syncengine(*args, store=store, stdin=stdin)


def test_a_literal_token_is_refused_with_exit_2_and_never_echoed(tmp_path: Path) -> None:
    result = run(
        "connect", "--endpoint", "http://127.0.0.1:9", "--token", "agmsg_pair_SECRETVALUE",
        "--team", "crew", "--security", "plaintext-allowed", store=tmp_path / "s.db",
    )  # fmt: skip
    assert result.returncode == 2
    assert "SECRETVALUE" not in result.stdout + result.stderr
    assert "--token -" in result.stderr and "argv" in result.stderr
    assert not (tmp_path / "s.db").exists()  # refused before anything was created


def test_engine_commands_on_an_unconnected_store_exit_7_with_a_remedy(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    assert run("team", "create", "crew", "--member", "alice", store=store).returncode == 0
    for command in ("push", "pull", "sync", "status", "reprocess", "resync"):
        extra = ("--team", "crew", "--accept-floor", "5") if command == "resync" else ()
        result = run(command, "--json", *extra, store=store)
        assert result.returncode == 7, (command, result.stderr)
        error = json.loads(result.stdout)["error"]
        assert error["code"] == "not-connected" and "syncengine connect" in error["remediation"]


def test_send_inbox_history_follow_the_storage_contract_order(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    assert (
        run(
            "team", "create", "crew", "--member", "alice", "--member", "bob", store=store
        ).returncode
        == 0
    )
    assert run("send", "crew", "alice", "bob", "first", store=store).returncode == 0
    piped = run("send", "crew", "bob", "alice", "-", "--json", store=store, stdin="from stdin")
    assert json.loads(piped.stdout)["body"] == "from stdin"
    inbox = run("inbox", "crew", "bob", "--json", "--mark-read", store=store)
    assert [json.loads(line)["body"] for line in inbox.stdout.splitlines()] == ["first"]
    assert run("inbox", "crew", "bob", store=store).stdout == ""
    history = run("history", "crew", "--limit", "1", "--json", store=store)
    assert [json.loads(line)["body"] for line in history.stdout.splitlines()] == ["from stdin"]
    agent = run("history", "crew", "alice", store=store)
    assert agent.stdout.count("\n") == 2
    missing = run("send", "crew", "alice", "nobody", "x", store=store)
    assert missing.returncode == 13 and "nobody" in missing.stderr


def test_every_engine_command_is_registered_and_each_module_loads_once() -> None:
    for name in (
        "connect", "push", "pull", "sync", "run", "status", "resync", "reprocess", "security",
    ):  # fmt: skip
        assert COMMANDS[name] == "syncengine.cli.engine_commands"
    for name in ("send", "inbox", "history"):
        assert COMMANDS[name] == "syncengine.cli.messages"
    assert len(COMMAND_MODULES) == len(set(COMMAND_MODULES))


def test_invoking_status_imports_only_its_own_command_module(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from syncengine.cli import main\n"
        "try:\n    main(['status', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('syncengine.cli.')))\n"
        "print('httpx' in sys.modules, 'syncengine.engine' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    lines = result.stdout.strip().splitlines()
    assert lines[-2] == "['syncengine.cli.engine_commands']"
    assert lines[-1] == "False False"


#: The HTTP stack under the relay client. A command that never talks to the
#: relay loads none of it (issue #18, item 8: ``status`` once did).
HTTP_STACK = ("httpx", "httpcore", "h11", "tenacity")


def _connected_store(tmp_path: Path) -> Path:
    """A store with team ``crew`` (alice, bob) paired to an in-process fake
    relay, and one message from alice to bob; no network, no relay process."""
    from syncengine.engine.connect import connect_store
    from syncengine.http.credentials import Secret
    from syncengine.local_store import Store
    from tests.syncengine.engine.fakerelay import TOKEN, FakeRelay

    store = tmp_path / "store.db"
    connect_store(
        store,
        endpoint="http://127.0.0.1:9",
        token=Secret(TOKEN),
        team="crew",
        mode="plaintext-allowed",
        transport=FakeRelay().transport(),
    )
    with Store(store) as s:
        s.send("crew", "alice", "bob", "hello bob")
    return store


def _run_and_list_http_stack(argv: list[str]) -> tuple[int, str, list[str]]:
    """Run ``main(argv)`` in a fresh interpreter; its exit code, its output,
    and which HTTP-stack packages it left imported. A package is in
    ``sys.modules`` once any module of it is imported, so the top-level names
    are enough (``httpx._main`` is syncengine's stand-in for httpx's CLI,
    registered at start-up, and is not httpx)."""
    code = (
        "import json, sys\n"
        "from syncengine.cli import main\n"
        f"code = main({argv!r})\n"
        f"print(json.dumps(sorted(name for name in {HTTP_STACK!r} if name in sys.modules)))\n"
        "sys.exit(code)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    *output, loaded = result.stdout.splitlines()
    assert loaded.startswith("["), result.stdout + result.stderr
    return result.returncode, "\n".join(output), json.loads(loaded)


def test_status_of_a_connected_store_imports_nothing_of_the_http_stack(tmp_path: Path) -> None:
    store = _connected_store(tmp_path)
    code, output, loaded = _run_and_list_http_stack(["status", "--store", str(store)])
    assert code == 0 and "crew -> fake-team" in output  # it really answered
    assert loaded == []


@pytest.mark.parametrize(
    ("argv", "shows"),
    [
        (["send", "crew", "alice", "bob", "hi again"], ""),
        (["inbox", "crew", "bob"], "hello bob"),
        (["history", "crew"], "hello bob"),
    ],
)
def test_the_local_message_commands_import_nothing_of_the_http_stack(
    tmp_path: Path, argv: list[str], shows: str
) -> None:
    store = _connected_store(tmp_path)
    code, output, loaded = _run_and_list_http_stack([*argv, "--store", str(store)])
    assert code == 0 and output and shows in output
    assert loaded == []


def test_run_rejects_an_interval_below_the_minimum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--interval", "0.01", "--store", str(tmp_path / "s.db")]) == 2


@pytest.mark.parametrize("value", ["nan", "inf", "1e9"])
def test_run_refuses_an_interval_that_is_not_a_finite_bounded_number(
    tmp_path: Path, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """#14: ``--interval nan`` once spun the loop and printed NaN."""
    store = tmp_path / "s.db"
    assert main(["run", "--interval", value, "--store", str(store)]) == 2
    assert "interval must be" in capsys.readouterr().err
    assert not store.exists()


@pytest.mark.parametrize("command", ["push", "pull", "sync", "reprocess"])
@pytest.mark.parametrize("value", ["0", "1001", "-1", "1e3", "99999999999999999999999", "ten"])
def test_an_absurd_limit_is_a_usage_error_naming_the_range(
    tmp_path: Path, command: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """#14: an absurd ``--limit`` once ended in a traceback or exit 1."""
    store = tmp_path / "s.db"
    with pytest.raises(SystemExit) as exited:
        main([command, "--limit", value, "--store", str(store)])
    assert exited.value.code == 2
    assert "--limit: must be an integer within 1..1000" in capsys.readouterr().err
    assert not store.exists()


@pytest.mark.parametrize("command", ["push", "pull", "sync"])
@pytest.mark.parametrize("value", ["nan", "inf", "0", "-5", "1e9", "soon"])
def test_a_deadline_that_is_not_a_finite_bounded_number_is_a_usage_error(
    tmp_path: Path, command: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.db"
    with pytest.raises(SystemExit) as exited:
        main([command, "--deadline", value, "--store", str(store)])
    assert exited.value.code == 2
    assert "--deadline" in capsys.readouterr().err
    assert not store.exists()


def test_the_deadline_help_names_the_default_the_engine_applies(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from syncengine.engine.limits import DEFAULT_COMMAND_DEADLINE

    with pytest.raises(SystemExit):
        main(["sync", "--help"])
    assert f"default: {DEFAULT_COMMAND_DEADLINE:g}" in capsys.readouterr().out


@pytest.mark.parametrize("floor", ["04", "-1", "1e3", "abc", "9223372036854775808"])
def test_resync_refuses_a_floor_that_is_not_a_canonical_sequence(
    tmp_path: Path, floor: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.db"
    with pytest.raises(SystemExit) as exited:
        main(["resync", "--team", "crew", "--accept-floor", floor, "--store", str(store)])
    assert exited.value.code == 2
    assert "--accept-floor" in capsys.readouterr().err
    assert not store.exists()


def test_resync_needs_the_team_and_the_floor_named_explicitly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["resync", "--accept-floor", "5"], ["resync", "--team", "crew"]):
        with pytest.raises(SystemExit) as exited:
            main([*argv, "--store", str(tmp_path / "s.db")])
        assert exited.value.code == 2


def test_top_level_help_lists_resync_and_the_exit_codes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "resync" in text and "5 resync required" in text
    with pytest.raises(SystemExit):
        main(["resync", "--help"])
    assert "exit codes: 0 accepted" in capsys.readouterr().out


def test_send_with_a_body_that_is_not_utf8_is_a_clear_error_not_a_traceback(
    tmp_path: Path,
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "syncengine", "send", "crew", "alice", "bob", "-"],
        input=b"ab\xffcd",
        capture_output=True,
        timeout=60,
        env={**os.environ, "SYNCENGINE_STORE": str(tmp_path / "s.db")},
        check=False,
    )
    assert result.returncode == 13
    assert b"not UTF-8" in result.stderr and b"Traceback" not in result.stderr


def test_send_from_stdin_drops_the_one_line_end_a_shell_adds(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    assert run("team", "create", "crew", store=store).returncode == 0
    assert (
        run("send", "crew", "alice", "bob", "-", store=store, stdin="two\nlines\n").returncode == 0
    )
    shown = run("inbox", "crew", "bob", "--json", store=store)
    assert json.loads(shown.stdout)["body"] == "two\nlines"


def test_team_rename_member_moves_the_agents_messages_to_the_new_name(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    # The contract's send interns both names (people's ``send`` needs a team).
    assert run("driver", "send", "crew", "alice", "bob", store=store, stdin="hi").returncode == 0
    renamed = run("team", "rename-member", "crew", "bob", "robert", store=store)
    assert renamed.returncode == 0, renamed.stderr
    shown = run("inbox", "crew", "robert", "--json", store=store)
    assert json.loads(shown.stdout)["body"] == "hi"
    again = run("team", "rename-member", "crew", "bob", "robert", store=store)
    assert again.returncode == 13 and "bob" in again.stderr


def test_read_state_unblock_on_an_unconnected_store_exits_7_with_a_remedy(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    assert run("team", "create", "crew", "--member", "bob", store=store).returncode == 0
    result = run("read-state", "unblock", "--member", "bob", "--json", store=store)
    assert result.returncode == 7
    assert json.loads(result.stdout)["error"]["code"] == "not-connected"
