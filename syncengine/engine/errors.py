"""Failures of the sync engine itself, and the CLI exit code of every failure.

The relay client's errors (:mod:`syncengine.http.errors`) and the store's
(:mod:`syncengine.store.errors`) pass through the engine unchanged; this
module adds the engine's own conditions, each with remediation text for
the operator, and :func:`classify` — the one place that turns *any* failure
into the durable record ``status`` shows and the exit code a command
returns::

    EngineError                    exit  state
    ├── NotConnected               7     refused   no binding for this store/team
    ├── AlreadyConnected           7     refused   connect on a connected team
    ├── ConfigurationError         7     refused   security mode, epoch, identity, token
    ├── TokenSourceRefused         2     refused   a literal --token (secrets never on argv)
    ├── EngineLocked               8     refused   another engine holds this binding
    ├── CommandDeadlineExceeded    3     backoff   a one-shot command ran out of --deadline
    ├── PushOversized              4     refused   one message the relay refuses even alone
    ├── ResyncRefused              4     refused   a resync approval that does not hold now
    ├── ResyncUnsupported          7     refused   the driver lacks stage1-resync
    ├── IntegrityHalted            6     halted    a durable halt stands; an operator resumes
    └── ConnectFailed              7     refused   persisting a connection failed; rolled back

Exit codes (specs/engine.md §8.3): 0 ok, 2 usage, 3 transient (try
again), 4 refused by the relay, 5 resync-required, 6 halted (another stream
answered, or a conflict was recorded), 7 not connected / local
configuration, 8 locked, and the store's own 10/12/13.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from syncengine.http.errors import (
    ClientUsageError,
    CredentialStoreError,
    EngineState,
    RelayClientError,
)
from syncengine.ops.errors import SyncCorruptState
from syncengine.store.errors import CorruptStore, MissingDependency, StoreBusy, StoreError

__all__ = [
    "EXIT_HALTED",
    "EXIT_LOCKED",
    "EXIT_NOT_CONNECTED",
    "EXIT_OK",
    "EXIT_REFUSED",
    "EXIT_RESYNC_REQUIRED",
    "EXIT_TRANSIENT",
    "EXIT_USAGE",
    "AlreadyConnected",
    "CommandDeadlineExceeded",
    "ConfigurationError",
    "ConnectFailed",
    "EngineError",
    "EngineLocked",
    "FailureRecord",
    "IntegrityHalted",
    "NotConnected",
    "PushOversized",
    "ResyncRefused",
    "ResyncUnsupported",
    "StopRequested",
    "TokenSourceRefused",
    "classify",
]

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_TRANSIENT = 3
EXIT_REFUSED = 4
EXIT_RESYNC_REQUIRED = 5
EXIT_HALTED = 6
EXIT_NOT_CONNECTED = 7
EXIT_LOCKED = 8

_EXIT_BY_STATE: dict[EngineState, int] = {
    EngineState.BACKOFF: EXIT_TRANSIENT,
    EngineState.ADJUST: EXIT_REFUSED,
    EngineState.REFUSED: EXIT_REFUSED,
    EngineState.RESYNC_REQUIRED: EXIT_RESYNC_REQUIRED,
    EngineState.WRITES_STOPPED: EXIT_REFUSED,
    EngineState.HALTED: EXIT_HALTED,
}


class StopRequested(Exception):
    """SIGTERM/SIGINT arrived while the engine waited; unwind without recording."""


class EngineError(Exception):
    """Base of the engine's own failures; every one tells the operator what to do."""

    code: ClassVar[str] = "engine-error"
    state: ClassVar[EngineState] = EngineState.REFUSED
    exit_code: ClassVar[int] = EXIT_NOT_CONNECTED
    remediation: ClassVar[str] = "See the message."

    def __init__(self, message: str, *, remediation: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if remediation is not None:
            self.remediation = remediation  # type: ignore[misc]

    def __str__(self) -> str:
        return self.message


class NotConnected(EngineError):
    code = "not-connected"
    remediation = (
        "Connect the team first: syncengine connect --endpoint URL --token @FILE "
        "--team TEAM --security MODE"
    )


class AlreadyConnected(EngineError):
    code = "already-connected"
    remediation = "This team is already connected; use 'syncengine status' to see its binding."


class ConfigurationError(EngineError):
    code = "configuration"
    remediation = "Fix the named option or file and try again."


class TokenSourceRefused(EngineError):
    code = "token-on-argv"
    exit_code = EXIT_USAGE
    remediation = (
        "Pass '--token -' and write the token to standard input, or '--token @PATH' "
        "with the token in a file only you can read."
    )


class EngineLocked(EngineError):
    code = "engine-locked"
    exit_code = EXIT_LOCKED
    remediation = (
        "Another syncengine process is syncing this binding; stop it (or wait for it) first."
    )


class CommandDeadlineExceeded(EngineError):
    """A one-shot command's whole time budget ran out (issue #14: every relay
    interaction bounded in total time). Every page and acknowledgement
    committed before it stays committed; the next run resumes from there."""

    code = "deadline"
    state = EngineState.BACKOFF
    exit_code = EXIT_TRANSIENT
    remediation = (
        "Everything committed before the deadline is kept; run the command again "
        "(or give it longer with --deadline SECONDS)."
    )


class PushOversized(EngineError):
    code = "push-oversized"
    exit_code = EXIT_REFUSED
    remediation = (
        "The relay refuses this message even alone (413); raise the relay's request limit. "
        "Later messages wait behind it, in order."
    )


class IntegrityHalted(EngineError):
    """The relay contradicted this machine earlier (a conflicting page, a
    rolled-back snapshot, another instance answering); the binding stays
    stopped, with no request made, until an operator resumes it."""

    code = "integrity-halt"
    state = EngineState.HALTED
    exit_code = EXIT_HALTED
    remediation = (
        "Verify the relay (its database, its endpoint) before syncing again, then run "
        "'syncengine resume'. Nothing was moved past the contradiction."
    )


class ResyncRefused(EngineError):
    """A retention-gap approval that the relay's answers or the store's
    cursor no longer support; nothing was changed
    (retention-gap-resynchronization.md "Explicit gap acceptance")."""

    code = "resync-refused"
    exit_code = EXIT_REFUSED
    remediation = (
        "Nothing was changed. Run 'syncengine status' to see the relay's current floor and "
        "approve exactly that floor."
    )


class ResyncUnsupported(EngineError):
    code = "resync-unsupported"
    remediation = "Use a storage driver that advertises stage1-resync (syncengine driver describe)."


class ConnectFailed(EngineError):
    code = "connect-failed"
    remediation = (
        "Nothing was connected locally. The relay may have issued a credential: ask the "
        "operator to revoke it ('syncengine relay credential revoke') and issue a new token."
    )


@dataclass(frozen=True, slots=True)
class FailureRecord:
    """What ``status`` keeps about a failure, and what a command exits with."""

    state: EngineState
    code: str
    error_class: str
    message: str
    remediation: str
    http_status: int | None
    exit_code: int
    retry_after: float | None = None


def classify(exc: BaseException) -> FailureRecord:
    """The one mapping from any failure to its durable record and exit code."""
    name = type(exc).__name__
    if isinstance(exc, EngineError):
        return FailureRecord(
            exc.state, exc.code, name, exc.message, exc.remediation, None, exc.exit_code
        )
    if isinstance(exc, RelayClientError):
        exit_code = (
            EXIT_NOT_CONNECTED
            if isinstance(exc, CredentialStoreError)
            else _EXIT_BY_STATE[exc.state]
        )
        return FailureRecord(
            exc.state,
            exc.code,
            name,
            exc.message,
            exc.remediation,
            exc.status,
            exit_code,
            exc.retry_after,
        )
    if isinstance(exc, ClientUsageError):
        return FailureRecord(
            EngineState.REFUSED,
            "usage",
            name,
            str(exc),
            "Fix the endpoint or option named in the message.",
            None,
            EXIT_USAGE,
        )
    if isinstance(exc, StoreError):
        if isinstance(exc, SyncCorruptState):
            return FailureRecord(
                EngineState.HALTED,
                "corrupt-state",
                name,
                str(exc),
                "The relay contradicted durable sync state; the conflict is recorded. "
                "Investigate before syncing again.",
                None,
                EXIT_HALTED,
            )
        if isinstance(exc, StoreBusy):
            state, remedy = EngineState.BACKOFF, "Another process holds the store; retried."
            return FailureRecord(state, "store-busy", name, str(exc), remedy, None, EXIT_TRANSIENT)
        # A store failure that carries its own fix (a full disk, a store
        # others can write) says it; the others named their rule already.
        own = getattr(exc, "remediation", None)
        remedy = (
            own
            if isinstance(own, str) and own
            else ("See the message; the store named the rule that failed.")
        )
        code = "store-corrupt" if isinstance(exc, CorruptStore) else "store-error"
        if isinstance(exc, MissingDependency):
            code = "missing-deps"
        return FailureRecord(
            EngineState.REFUSED, code, name, str(exc), remedy, None, exc.status.exit_code
        )
    return FailureRecord(
        EngineState.REFUSED,
        "internal-error",
        name,
        str(exc) or name,
        "An unexpected error; report it with the engine log.",
        None,
        1,
    )
