"""Shared plumbing for commands that read and write JSON Lines."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any, TextIO


class InputError(Exception):
    """A line of input is unusable; the message names the line and the rule."""


def read_lines(stream: TextIO | None = None) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, text) for every non-blank input line.

    A trailing carriage return is an error, never silently stripped: stray
    CRs once corrupted wire IDs for days (agmsg field issue #829).
    """
    source = stream if stream is not None else sys.stdin
    for number, line in enumerate(source, start=1):
        text = line[:-1] if line.endswith("\n") else line
        if text.endswith("\r"):
            raise InputError(f"line {number}: carriage return at end of line (use LF line endings)")
        if text.strip():
            yield number, text


def write_record(record: Any, stream: TextIO | None = None) -> None:
    """One compact JSON object per line, UTF-8, no ASCII escaping."""
    out = stream if stream is not None else sys.stdout
    out.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
