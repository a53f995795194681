"""Every line a serving relay logs is in the chosen format (#33; specs/relay.md
"Access logs"): no logger of the relay package is left to Python's bare
last-resort handler, which would print an unformatted line into a JSON log.
"""

from __future__ import annotations

import ast
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

import relay
from relay.logformat import SERVED_LOGGERS, configure_logging

RELAY_PACKAGE = Path(relay.__file__).parent


def _logger_names() -> set[str]:
    """Every ``logging.getLogger("…")`` name written in the relay package."""
    names: set[str] = set()
    for path in RELAY_PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "getLogger"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                names.add(node.args[0].value)
    return names


def _served(name: str) -> bool:
    return any(name == served or name.startswith(served + ".") for served in SERVED_LOGGERS)


@pytest.fixture
def json_log() -> Iterator[io.StringIO]:
    saved = {
        name: (logging.getLogger(name).handlers[:], logging.getLogger(name).propagate)
        for name in SERVED_LOGGERS
    }
    stream = io.StringIO()
    configure_logging("json", stream=stream)
    try:
        yield stream
    finally:
        for name, (handlers, propagate) in saved.items():
            logger = logging.getLogger(name)
            logger.handlers[:] = handlers
            logger.propagate = propagate


def test_every_logger_the_relay_package_names_is_served() -> None:
    names = _logger_names()
    assert {"relay.connections", "relay.live", "relay.workers"} <= names
    assert sorted(name for name in names if not _served(name)) == []


@pytest.mark.parametrize("name", ["relay.connections", "relay.live", "relay.workers"])
def test_a_warning_of_the_connection_live_and_worker_loggers_is_one_json_line(
    name: str, json_log: io.StringIO
) -> None:
    logging.getLogger(name).warning("something %s", "happened")
    (line,) = json_log.getvalue().splitlines()
    document = json.loads(line)
    assert (document["event"], document["logger"], document["level"]) == ("log", name, "warning")
    assert document["message"] == "something happened"
