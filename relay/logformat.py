"""The relay's log lines: one access record per request, rendered as JSON or text.

An operator's log pipeline wants one JSON object per line; a person at a
terminal wants a short line. ``relay serve --log-format json|text`` picks the
formatter; both render the same :class:`AccessRecord`, whose fields are
exactly what may be logged about a request (specs/relay.md "Operations"):
time, method, route *template*, status, duration and bytes sent. There is no
field for the Authorization header, the query string (a pairing token or a
cursor could sit there), the team header, a member or credential ID, or any
body, so no formatter can print one.

Other relay loggers (retention, storage, errors, connection closings, the
live wait's listener, a worker group's supervisor) and uvicorn's own error
logger go through the same formatter, so a JSON log is JSON on every line.
Exception tracebacks are never printed: an exception's text can quote a
request byte; only the exception's type is kept.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Literal, TextIO, get_args

__all__ = [
    "ACCESS_ATTRIBUTE",
    "ACCESS_LOGGER",
    "LOG_FORMATS",
    "SERVED_LOGGERS",
    "AccessRecord",
    "JsonLineFormatter",
    "LogFormat",
    "TextLineFormatter",
    "configure_logging",
]

LogFormat = Literal["json", "text"]
LOG_FORMATS: tuple[str, ...] = get_args(LogFormat)
ACCESS_LOGGER = "relay.access"
#: Every logger a serving relay writes to; uvicorn's error logger is included
#: so its shutdown and protocol warnings share the format.
SERVED_LOGGERS = (
    ACCESS_LOGGER,
    "relay.retention",
    "relay.storage",
    "relay.errors",
    "relay.connections",
    "relay.live",
    "relay.workers",
    "uvicorn.error",
)
#: ``LogRecord`` attribute carrying the access record (``logger.info(…, extra=…)``).
ACCESS_ATTRIBUTE = "relay_access"


@dataclass(frozen=True, slots=True)
class AccessRecord:
    """One request as the access log and the request metrics see it.

    ``route`` is the matched route template (``/v1/credentials/{credential_id}/revoke``)
    or ``unmatched``; ``method`` is one of the methods the relay routes, or
    ``other``. ``status`` is 0 when the client left before a response began.
    """

    method: str
    route: str
    status: int
    duration_ms: float
    bytes_out: int


def _timestamp(created: float) -> str:
    """RFC 3339 UTC with milliseconds, the same shape whatever the host's zone."""
    moment = datetime.fromtimestamp(created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _access(record: logging.LogRecord) -> AccessRecord | None:
    access = getattr(record, ACCESS_ATTRIBUTE, None)
    return access if isinstance(access, AccessRecord) else None


def _exception_type(record: logging.LogRecord) -> str | None:
    if record.exc_info and record.exc_info[0] is not None:
        return record.exc_info[0].__name__
    return None


class JsonLineFormatter(logging.Formatter):
    """One JSON object per line: ``event`` ``access`` or ``log``, always with ``time``."""

    def format(self, record: logging.LogRecord) -> str:
        access = _access(record)
        document: dict[str, object]
        if access is not None:
            document = {"event": "access", "time": _timestamp(record.created), **asdict(access)}
        else:
            document = {
                "event": "log",
                "time": _timestamp(record.created),
                "level": record.levelname.lower(),
                "logger": record.name,
                "message": record.getMessage(),
            }
            exception = _exception_type(record)
            if exception is not None:
                document["exception"] = exception
        return json.dumps(document, sort_keys=True, ensure_ascii=True)


class TextLineFormatter(logging.Formatter):
    """``TIME METHOD ROUTE STATUS DURATIONms BYTESB`` for requests; ``TIME LEVEL LOGGER: …``."""

    def format(self, record: logging.LogRecord) -> str:
        when = _timestamp(record.created)
        access = _access(record)
        if access is not None:
            return (
                f"{when} {access.method} {access.route} {access.status} "
                f"{access.duration_ms:.1f}ms {access.bytes_out}B"
            )
        line = f"{when} {record.levelname.lower()} {record.name}: {record.getMessage()}"
        exception = _exception_type(record)
        return line if exception is None else f"{line} ({exception})"


_FORMATTERS: dict[str, type[logging.Formatter]] = {
    "json": JsonLineFormatter,
    "text": TextLineFormatter,
}


def configure_logging(
    log_format: LogFormat = "json",
    *,
    stream: TextIO = sys.stderr,
    access_log: bool = True,
) -> None:
    """Route every served logger to ``stream`` in one format.

    ``access_log=False`` silences the per-request lines only; warnings and
    errors of every logger still reach the stream.
    """
    handler = logging.StreamHandler(stream)
    handler.setFormatter(_FORMATTERS[log_format]())
    for name in SERVED_LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.propagate = False
        if name == ACCESS_LOGGER:
            logger.setLevel(logging.INFO if access_log else logging.WARNING)
        elif name == "uvicorn.error":
            logger.setLevel(logging.WARNING)
        else:
            logger.setLevel(logging.INFO)
