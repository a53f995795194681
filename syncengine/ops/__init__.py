"""Stage-1 message synchronization as crash-safe state machines over the store.

Each operation is a pure core — stored facts and input records in, rows and
output records out — wrapped in exactly one storage transaction with named
crash points (specs/sync-stage1.md). The records are the agmsg driver ABI
(``sync_prepare`` … ``sync_reprocess_page``). The operations are reached
through :class:`syncengine.local_store.Store` (``sync_prepare_push`` …) or the
submodules; the package names only the types, so each submodule stays
importable under its own name.
"""

from typing import TYPE_CHECKING

from syncengine._lazy import lazy_exports

if TYPE_CHECKING:
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

_EXPORTS: dict[str, str] = {
    "ApplyResult": "syncengine.ops.apply_pull",
    "BindingKey": "syncengine.ops.bindings",
    "SyncBinding": "syncengine.ops.bindings",
    "BindingMismatch": "syncengine.ops.errors",
    "StaleBinding": "syncengine.ops.errors",
    "SyncCorruptState": "syncengine.ops.errors",
    "SyncUsageError": "syncengine.ops.errors",
    "UnsupportedOperation": "syncengine.ops.errors",
    "PrepareResult": "syncengine.ops.prepare_push",
    "ReprocessResult": "syncengine.ops.reprocess",
}

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


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
