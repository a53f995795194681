"""Failures of the Stage-1 sync operations and the exit codes they map to.

The sync operations extend the store hierarchy (``syncengine.store.errors``),
so every failure still carries a driver status name; the ``syncengine
driver`` sync verbs additionally report the upstream adapter exit codes
(UPSTREAM-RECORDS §1.2) so an agmsg engine reacts as it would to its own
driver — in particular it retries a busy store (11)::

    StoreError                          status          adapter exit
    ├── SyncUsageError                  runtime_error   2   bad op / argv
    ├── StoreBusy                       runtime_error   11  retry with backoff
    ├── SyncCorruptState                corrupt_state   12  durable conflict recorded
    ├── CorruptStore                    corrupt_state   12  damaged file
    ├── StaleBinding                    runtime_error   13  revision moved on; re-read
    ├── BindingMismatch (InvalidInput)  runtime_error   13  binding/local team clash
    ├── InvalidInput, Conflict, …       runtime_error   13  a driver check failed
    ├── UnsupportedOperation            runtime_error   14  not implemented here
    └── MissingDependency               missing_deps    10

Messages name the field and the rule; they never echo a body or a blob.
"""

from __future__ import annotations

from syncengine.store.errors import (
    CorruptStore,
    InvalidInput,
    MissingDependency,
    Status,
    StoreBusy,
    StoreError,
)

__all__ = [
    "BindingMismatch",
    "StaleBinding",
    "SyncCorruptState",
    "SyncUsageError",
    "UnsupportedOperation",
    "adapter_exit_code",
]


class SyncUsageError(StoreError):
    """Wrong verb or argv shape for a sync operation (adapter exit 2)."""


class SyncCorruptState(StoreError):
    """Input contradicted durable sync state; the contradiction was recorded.

    Raised *after* the transaction that recorded the conflict committed, so
    the corrupt_state is durable and visible (``sync_conflicts``) while the
    operation still reports the contract's status.
    """

    status = Status.CORRUPT_STATE


class StaleBinding(StoreError):
    """A binding write named a revision that is no longer current."""


class BindingMismatch(InvalidInput):
    """The binding arguments contradict the stored binding (e.g. another local team)."""


class UnsupportedOperation(StoreError):
    """The operation or capability is not implemented by this driver (exit 14)."""


def adapter_exit_code(exc: BaseException) -> int:
    """The upstream adapter exit code for a failure of a sync verb."""
    if isinstance(exc, SyncUsageError):
        return 2
    if isinstance(exc, MissingDependency):
        return 10
    if isinstance(exc, StoreBusy):
        return 11
    if isinstance(exc, SyncCorruptState | CorruptStore):
        return 12
    if isinstance(exc, UnsupportedOperation):
        return 14
    return 13
