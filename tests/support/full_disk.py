"""A small filesystem mounted to be filled: what the store's full-disk tests and the end-
to-end store-edge tests both run on."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest


def mount_tmpfs(directory: Path, size: str) -> None:
    directory.mkdir()
    if sys.platform != "linux" or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root on Linux")
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip()}")


def fill(directory: Path, leave: int = 0) -> Path:
    """Write zeros until the filesystem is full (or ``leave`` bytes remain)."""
    filler = directory / "filler"
    with open(filler, "wb") as handle:
        if leave:
            free = os.statvfs(directory).f_bfree * os.statvfs(directory).f_frsize
            handle.write(b"\0" * max(0, free - leave))
            return filler
        chunk = b"\0" * 65536
        with contextlib.suppress(OSError):
            while True:
                handle.write(chunk)
                handle.flush()
        with contextlib.suppress(OSError):
            while True:
                os.write(handle.fileno(), b"\0" * 512)
    return filler


def sizes(store: Path) -> dict[str, int]:
    return {
        p.name: p.stat().st_size for p in store.parent.iterdir() if p.name.startswith(store.name)
    }
