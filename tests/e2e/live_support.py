"""What the live-delivery end-to-end tests share: ``run`` as a process and
its ``delivery`` events (specs/live.md §9), and the generous bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.machines import Machine

__all__ = ["BOUND", "delivery", "running"]

#: Far below the 60 s interval; far above a live delivery on a busy host.
BOUND = 30.0


@contextmanager
def running(machine: Machine, *args: str) -> Iterator[subprocess.Popen[str]]:
    """``syncengine run --json`` for ``machine`` until the block ends."""
    process = subprocess.Popen(
        [sys.executable, "-m", "syncengine", "run", "--json", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SYNCENGINE_STORE": str(machine.store)},
    )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def delivery(process: subprocess.Popen[str], mode: str) -> dict[str, Any]:
    """Read ``run``'s events until it reports delivery ``mode``."""
    assert process.stdout is not None
    deadline = time.monotonic() + BOUND * 2
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        event: dict[str, Any] = json.loads(line)
        if event["event"] == "delivery" and event["mode"] == mode:
            return event
    raise AssertionError(f"run never reported delivery {mode!r}")
