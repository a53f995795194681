"""Start-up stays cheap: httpx's optional CLI (click, rich) is never
imported, and a command process does not collect garbage while it starts."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from syncengine._startup import START_UP_ALLOCATIONS, PostponedCollection
from syncengine.cli import main
from syncengine.local_store import Store


def test_importing_the_http_client_does_not_load_httpx_cli_dependencies() -> None:
    code = (
        "import sys, syncengine.http.client\n"
        "loaded = sorted(m for m in ('click', 'rich', 'pygments') if m in sys.modules)\n"
        "assert not loaded, loaded\n"
        "assert 'httpx' in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.fixture
def default_thresholds() -> Iterator[tuple[int, int, int]]:
    """The interpreter's thresholds, whatever a test does to them."""
    saved = gc.get_threshold()
    yield saved
    gc.set_threshold(*saved)


def test_collection_is_postponed_while_a_command_starts(
    default_thresholds: tuple[int, int, int],
) -> None:
    with PostponedCollection():
        assert gc.get_threshold() == (START_UP_ALLOCATIONS, *default_thresholds[1:])


def test_the_first_collection_restores_the_interpreters_thresholds(
    default_thresholds: tuple[int, int, int],
) -> None:
    # A long run loop or a large pull collects as before once it passed start-up.
    with PostponedCollection():
        gc.collect()
        assert gc.get_threshold() == default_thresholds


def test_leaving_restores_the_thresholds_and_the_callback_list(
    default_thresholds: tuple[int, int, int],
) -> None:
    callbacks = list(gc.callbacks)
    with PostponedCollection():
        pass
    assert gc.get_threshold() == default_thresholds
    assert gc.callbacks == callbacks


def test_main_run_in_process_leaves_the_callers_thresholds(
    default_thresholds: tuple[int, int, int], capsys: pytest.CaptureFixture[str]
) -> None:
    gc.set_threshold(1234, 5, 6)
    assert main(["--version"]) == 0
    assert gc.get_threshold() == (1234, 5, 6)


def test_an_inbox_process_makes_no_collection_once_main_runs(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    with Store(store) as opened:
        opened.init()
        opened.create_team("crew", ["alice", "bob"])
    code = (
        "import gc, sys\n"
        "from syncengine.cli import main\n"
        "seen = []\n"
        "gc.callbacks.append(lambda phase, info: seen.append(phase))\n"
        "main(sys.argv[1:])\n"
        "print(len(seen))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "inbox", "crew", "bob", "--store", str(store)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "0"
