"""One logging set-up (issue #18, item 3): levels from -v/-q or
SYNCENGINE_LOG, one stderr handler with timestamps and logger names, JSON
lines on request, nothing left behind after a command."""

from __future__ import annotations

import json
import logging

import pytest

from syncengine.cli import main
from syncengine.cli.logsetup import LOGGERS, configured_logging, level_for


@pytest.mark.parametrize(
    ("verbose", "quiet", "env", "level"),
    [
        (0, False, {}, None),
        (1, False, {}, logging.INFO),
        (2, False, {}, logging.DEBUG),
        (0, True, {}, logging.ERROR),
        (0, False, {"SYNCENGINE_LOG": "debug"}, logging.DEBUG),
        (0, False, {"SYNCENGINE_LOG": "Info"}, logging.INFO),
        (1, False, {"SYNCENGINE_LOG": "error"}, logging.INFO),  # a flag wins
    ],
)
def test_the_level_comes_from_the_flags_then_the_environment(
    verbose: int, quiet: bool, env: dict[str, str], level: int | None
) -> None:
    assert level_for(verbose, quiet, env) == level


def test_an_unknown_log_level_is_named_and_the_default_kept(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert level_for(0, False, {"SYNCENGINE_LOG": "chatty"}) is None
    assert "SYNCENGINE_LOG='chatty'" in capsys.readouterr().err


def test_a_record_is_one_timestamped_line_with_the_logger_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with configured_logging(logging.INFO):
        logging.getLogger("syncengine.engine").info("cycle did work")
    (line,) = capsys.readouterr().err.splitlines()
    stamp, level, name, message = line.split(" ", 3)
    assert stamp.endswith("Z") and "T" in stamp
    assert (level, name, message) == ("INFO", "syncengine.engine:", "cycle did work")


def test_json_lines_carry_time_level_logger_and_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with configured_logging(logging.WARNING, "json"):
        logging.getLogger("relay.storage").warning("database slow")
        logging.getLogger("syncengine.http").info("not at this level")
    (line,) = capsys.readouterr().err.splitlines()
    obj = json.loads(line)
    assert (obj["level"], obj["logger"], obj["message"]) == (
        "warning",
        "relay.storage",
        "database slow",
    )


def test_a_command_leaves_no_handler_or_level_behind(
    capsys: pytest.CaptureFixture[str],
) -> None:
    before = [(logging.getLogger(n).level, list(logging.getLogger(n).handlers)) for n in LOGGERS]
    main(["-vv", "--log-format", "json", "status", "--store", "/nonexistent/s.db"])
    after = [(logging.getLogger(n).level, list(logging.getLogger(n).handlers)) for n in LOGGERS]
    assert after == before
