"""CLI hygiene (issue #18, item 5): a version, quiet broken pipes, and
options never taken for file names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from syncengine import __version__
from syncengine.cli import main
from syncengine.local_store import Store


def _syncengine(*args: str, cwd: Path, store: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "syncengine", *args],
        capture_output=True,
        cwd=cwd,
        env={**os.environ, "SYNCENGINE_STORE": str(store)},
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_the_version_is_printed(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([flag]) == 0
    assert capsys.readouterr().out == f"syncengine {__version__}\n"


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    with Store(store) as s:
        s.init()
        s.create_team("crew", ["alice", "bob"])
        for i in range(2000):
            s.send("crew", "alice", "bob", f"line {i} " * 20)
    command = f"{sys.executable} -m syncengine history crew"
    script = f"{command} | head -n 1 >/dev/null; echo ${{PIPESTATUS[0]}}"
    result = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "SYNCENGINE_STORE": str(store)},
        timeout=60,
        check=False,
    )
    assert result.stdout.strip() == "141"  # as if killed by SIGPIPE
    assert "Traceback" not in result.stderr and "BrokenPipe" not in result.stderr


def test_driver_export_help_prints_help_and_writes_no_file(tmp_path: Path) -> None:
    """#18: ``driver export --help`` wrote a file named ``--help``."""
    result = _syncengine("driver", "export", "--help", cwd=tmp_path, store=tmp_path / "s.db")
    assert result.returncode == 0
    assert b"usage: syncengine driver" in result.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("op", ["export", "import"])
def test_a_file_operand_that_looks_like_an_option_is_refused(tmp_path: Path, op: str) -> None:
    store = tmp_path / "s.db"
    with Store(store) as s:
        s.init()
    result = _syncengine("driver", op, "-x", cwd=tmp_path, store=store)
    assert result.returncode != 0
    assert b"looks like an option" in result.stderr
    assert not (tmp_path / "-x").exists()


def _tree(parser: object, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    found = [(path, parser)]
    for action in parser._actions:  # type: ignore[attr-defined]
        if action.__class__.__name__ == "_SubParsersAction":
            for name, child in action.choices.items():
                found += _tree(child, (*path, name))
    return found


def test_every_command_s_help_lists_its_exit_codes() -> None:
    """#18: only three command groups listed their exit codes."""
    from syncengine.cli import build_parser

    commands = _tree(build_parser())
    assert len(commands) > 40
    missing = [" ".join(path) for path, p in commands if "exit code" not in p.format_help()]  # type: ignore[attr-defined]
    assert missing == []
