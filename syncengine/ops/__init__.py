"""Stage-1 message synchronization as crash-safe state machines over the store.

Each operation is a pure core — stored facts and input records in, rows and
output records out — wrapped in exactly one storage transaction with named
crash points (specs/sync-stage1.md). The records are the agmsg driver ABI
(``sync_prepare`` … ``sync_reprocess_page``). The operations are reached
through :class:`syncengine.store.Store` (``sync_prepare_push`` …) or the
submodules; the package names only the types, so each submodule stays
importable under its own name.
"""

from syncengine.ops.apply_pull import ApplyResult
from syncengine.ops.bindings import BindingKey, SyncBinding
from syncengine.ops.errors import (
    BindingMismatch,
    StaleBinding,
    SyncCorruptState,
    SyncUsageError,
    UnsupportedOperation,
)
from syncengine.ops.prepare_push import PrepareResult
from syncengine.ops.reprocess import ReprocessResult

__all__ = [
    "ApplyResult",
    "BindingKey",
    "BindingMismatch",
    "PrepareResult",
    "ReprocessResult",
    "StaleBinding",
    "SyncBinding",
    "SyncCorruptState",
    "SyncUsageError",
    "UnsupportedOperation",
]
