"""The waits and further attempts of one request, after its first attempt failed.

:func:`syncengine.http.retry.call_with_retry` makes the first attempt itself;
only when that attempt fails retryably does it hand over to
:func:`retry_after_failure`, so a request answered at once — every request
of an idle scheduled ``pull`` — never imports tenacity (start-up cost,
issue #17). The loop is the one server/spec/v1.md "Error and retry
semantics" asks for, as :mod:`syncengine.http.retry` describes it:
``Retry-After`` when given, else full-jitter capped exponential backoff
(tenacity's ``wait_random_exponential``); stop after ``max_attempts``, or
before a wait that would overrun ``max_elapsed`` counted from the first
attempt; the error that surfaces carries ``attempts``.

The failed first attempt is replayed to tenacity as its attempt 1 (its
exception raised again, nothing sent), so attempt numbers, waits, the stop
rule and the log lines are those of a loop that made every attempt itself.
This module decides nothing: the retry predicate and the policy come from
the caller (which is why it imports nothing of :mod:`syncengine.http.retry`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NoReturn, Protocol, TypeVar

import tenacity

from syncengine.http import errors as e

__all__ = ["Budget", "retry_after_failure"]

T = TypeVar("T")

_log = logging.getLogger("syncengine.http")


class Budget(Protocol):
    """What the loop reads of :class:`~syncengine.http.retry.RetryPolicy`."""

    @property
    def max_attempts(self) -> int: ...

    @property
    def backoff_base(self) -> float: ...

    @property
    def backoff_cap(self) -> float: ...

    @property
    def max_elapsed(self) -> float: ...


class _RetryAfterOrBackoff(tenacity.wait.wait_base):
    """Wait exactly ``Retry-After`` when given, else full-jitter capped backoff."""

    def __init__(self, policy: Budget) -> None:
        self._backoff = tenacity.wait_random_exponential(
            multiplier=policy.backoff_base, max=policy.backoff_cap
        )

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        if isinstance(exc, e.RelayClientError) and exc.retry_after is not None:
            return exc.retry_after
        return float(self._backoff(retry_state))


class _StopByBudget(tenacity.stop.stop_base):
    """Stop after ``max_attempts``, or when the next wait would overrun
    ``max_elapsed`` since ``started`` (the first attempt's start)."""

    def __init__(self, policy: Budget, clock: Callable[[], float], started: float) -> None:
        self._policy = policy
        self._clock = clock
        self._start = started

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        if retry_state.attempt_number >= self._policy.max_attempts:
            return True
        elapsed = self._clock() - self._start
        return elapsed + retry_state.upcoming_sleep > self._policy.max_elapsed


def _give_up(retry_state: tenacity.RetryCallState) -> NoReturn:
    outcome = retry_state.outcome
    assert outcome is not None  # tenacity calls this only after an attempt
    exc = outcome.exception()
    assert exc is not None  # only failed attempts are retried
    if isinstance(exc, e.RelayClientError):
        exc.attempts = retry_state.attempt_number
    raise exc


def retry_after_failure(
    attempt: Callable[[], T],
    first_failure: BaseException,
    policy: Budget,
    *,
    is_retryable: Callable[[BaseException], bool],
    describe: str,
    sleep: Callable[[float], None],
    clock: Callable[[], float],
    started: float,
) -> T:
    """Go on after ``first_failure`` (attempt 1, begun at ``started`` on
    ``clock``): wait, try ``attempt`` again, until it succeeds, fails
    definitively or the budget is spent."""
    replay: list[BaseException] = [first_failure]

    def attempts() -> T:
        if replay:
            raise replay.pop()
        return attempt()

    def log_retry(retry_state: tenacity.RetryCallState) -> None:
        outcome = retry_state.outcome
        exc = outcome.exception() if outcome is not None else None
        _log.warning(
            "retrying %s after %s in %.2fs (attempt %d of %d)",
            describe,
            str(exc) if isinstance(exc, e.RelayClientError) else type(exc).__name__,
            retry_state.upcoming_sleep,
            retry_state.attempt_number + 1,
            policy.max_attempts,
        )

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(is_retryable),
        wait=_RetryAfterOrBackoff(policy),
        stop=_StopByBudget(policy, clock, started),
        sleep=sleep,
        before_sleep=log_retry,
        retry_error_callback=_give_up,
    )
    result: T = retrying(attempts)
    return result
