"""The one CLI runner: ``syncengine`` as its own process, or its entry points in-process.

Three doors, one answer shape (exit code, stdout, stderr):

* ``syncengine(*args, store=...)`` — ``python -m syncengine ARGS`` against a
  store, as a user runs it; a ``subprocess.CompletedProcess``.
* ``run_main(capsys, argv)`` — ``syncengine.cli.main`` in this process
  (no interpreter start-up: ~0.5 s saved per call on a loaded machine).
* ``run_driver(store, op, *args)`` — one ``syncengine driver OP`` through
  ``run_op`` with byte streams, as the host's driver scripts call it.

The test modules keep a short local ``run`` only where they add something of
their own (a fixed ``relay`` prefix, decoding JSON lines), so their call
sites stay as they read.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from unittest import mock

import pytest

from syncengine.cli import main
from syncengine.cli.driver.command import run_op

#: Armed crash points belong to the process a test arms, never to a CLI
#: process it starts for another purpose.
CRASH_VARIABLE = "SYNCENGINE_CRASH_AT"


def syncengine(
    *args: str,
    store: Path,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """``syncengine ARGS`` as its own process against ``store``."""
    base = {k: v for k, v in os.environ.items() if k != CRASH_VARIABLE}
    return subprocess.run(
        [sys.executable, "-m", "syncengine", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**base, "SYNCENGINE_STORE": str(store), **(env or {})},
        check=False,
    )


def run_main(
    capsys: pytest.CaptureFixture[str], argv: Sequence[str], *, stdin: str | None = None
) -> tuple[int, str, str]:
    """``syncengine ARGV`` in this process: exit code, stdout, stderr."""
    with mock.patch.object(sys, "stdin", io.StringIO(stdin) if stdin is not None else sys.stdin):
        code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def json_lines(text: str) -> list[dict[str, object]]:
    """Each line of a ``--json`` answer, decoded."""
    return [json.loads(line) for line in text.splitlines()]


def run_driver(store: Path, op: str, *args: str, stdin: bytes = b"") -> tuple[int, bytes, str]:
    """One in-process ``syncengine driver OP``: exit code, raw stdout, stderr."""
    out, err = io.BytesIO(), io.BytesIO()
    code = run_op(
        op, list(args), store_path=str(store), stdin=io.BytesIO(stdin), stdout=out, stderr=err
    )
    return code, out.getvalue(), err.getvalue().decode()
