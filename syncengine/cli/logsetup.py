"""One logging set-up for every command (issue #18, item 3).

Before this, logging was never configured: library warnings appeared raw
and ``-v`` did not exist. The level comes from ``-v``/``-q`` (each ``-v``
one step more verbose from the default ``warning``; ``-q`` only errors) or,
when neither is given, ``SYNCENGINE_LOG=debug|info|warning|error``. One
handler on stderr, with a UTC timestamp and the logger name, or one JSON
object per line with ``--log-format json``. Messages never carry secrets:
the client scrubs them before logging (specs/engine.md §1.6).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["LEVELS", "LOGGERS", "configured_logging", "level_for"]

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR}  # fmt: skip

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _UtcFormatter(logging.Formatter):
    """``2026-12-02T04:25:00.123Z``: UTC, ISO 8601, one token."""

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        moment = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        return f"{moment}.{int(record.msecs):03d}Z"


class _JsonLines(_UtcFormatter):
    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, Any] = {
            "at": self.formatTime(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            obj["error"] = self.formatException(record.exc_info)
        return json.dumps(obj, ensure_ascii=False)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record is emitted."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


#: The loggers this project writes to; nothing else is touched.
LOGGERS = ("syncengine", "relay")


def level_for(verbose: int, quiet: bool, environ: dict[str, str] | None = None) -> int | None:
    """The level the flags (or, without flags, ``SYNCENGINE_LOG``) ask for;
    ``None`` leaves the default (warnings and errors)."""
    if quiet:
        return logging.ERROR
    if verbose:
        return logging.INFO if verbose == 1 else logging.DEBUG
    env = os.environ if environ is None else environ
    name = env.get("SYNCENGINE_LOG", "").strip().lower()
    if name and name not in LEVELS:
        sys.stderr.write(
            f"syncengine: SYNCENGINE_LOG={name[:20]!r} is not one of {', '.join(LEVELS)}; "
            "using warning\n"
        )
    return LEVELS.get(name)


@contextmanager
def configured_logging(level: int | None, log_format: str = "text") -> Iterator[None]:
    """One stderr handler on this project's loggers for the command's
    duration; levels and handlers are restored afterwards (a test calling
    ``main`` leaves no logging state behind for the next one)."""
    handler = _StderrHandler()
    formatter: logging.Formatter = _JsonLines() if log_format == "json" else _UtcFormatter(_FORMAT)
    handler.setFormatter(formatter)
    saved = []
    for name in LOGGERS:
        logger = logging.getLogger(name)
        saved.append((logger, logger.level))
        logger.addHandler(handler)
        if level is not None:
            logger.setLevel(level)
        elif logger.level == logging.NOTSET:
            logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, previous in saved:
            logger.removeHandler(handler)
            logger.setLevel(previous)
