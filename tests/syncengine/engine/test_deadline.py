"""A one-shot command's whole time budget (issue #14, item 2)."""

from __future__ import annotations

import pytest

from syncengine.engine.deadline import CommandDeadline, check_deadline_seconds
from syncengine.engine.errors import EXIT_TRANSIENT, CommandDeadlineExceeded, classify
from syncengine.engine.limits import DEFAULT_COMMAND_DEADLINE, MAX_COMMAND_DEADLINE
from syncengine.http.errors import EngineState
from tests.syncengine.http.helpers import FakeTime


def deadline(seconds: float, time: FakeTime) -> CommandDeadline:
    return CommandDeadline(seconds, clock=time.clock, sleeper=time.sleep)


def test_the_check_passes_until_the_budget_is_spent_then_fails() -> None:
    time = FakeTime()
    budget = deadline(10.0, time)
    time.now += 9.9
    budget.check()
    time.now += 0.1
    with pytest.raises(CommandDeadlineExceeded, match="deadline of 10 s"):
        budget.check()


def test_a_retry_wait_that_would_end_past_the_deadline_fails_without_sleeping() -> None:
    time = FakeTime()
    budget = deadline(10.0, time)
    budget.sleep(4.0)
    with pytest.raises(CommandDeadlineExceeded):
        budget.sleep(6.0)
    assert time.sleeps == [4.0]


def test_running_out_of_time_is_a_transient_failure_with_exit_3() -> None:
    failure = classify(CommandDeadlineExceeded("out of time"))
    assert (failure.state, failure.code, failure.exit_code) == (
        EngineState.BACKOFF,
        "deadline",
        EXIT_TRANSIENT,
    )
    assert "committed" in failure.remediation


@pytest.mark.parametrize("seconds", [0.0, -1.0, float("nan"), float("inf"), 1e12])
def test_a_deadline_must_be_finite_positive_and_at_most_a_day(seconds: float) -> None:
    with pytest.raises(ValueError, match="deadline"):
        check_deadline_seconds(seconds)


def test_the_default_deadline_is_itself_valid() -> None:
    assert check_deadline_seconds(DEFAULT_COMMAND_DEADLINE) == DEFAULT_COMMAND_DEADLINE
    assert DEFAULT_COMMAND_DEADLINE <= MAX_COMMAND_DEADLINE
