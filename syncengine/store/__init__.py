"""The local store: one SQLite file holding the team registry, the message
log and local read state, behind the agmsg storage-driver contract
(driver-interface §2; specs/store.md).

The :class:`Store` facade over it is one layer up, in
:mod:`syncengine.local_store`: its sync verbs call :mod:`syncengine.ops`,
which imports this package, so it cannot live here without a cycle.
"""

from syncengine.store.errors import (
    Conflict,
    CorruptStore,
    InvalidInput,
    MissingDependency,
    Status,
    StoreBusy,
    StoreError,
    StoreFull,
    StoreIOError,
    StoreNotInitialized,
    StoreTooNew,
    StoreUnsafe,
    UnknownAgent,
    UnknownMessage,
    UnknownTeam,
)
from syncengine.store.log_records import Member, MessageRead, MessageSent, Team, WatchResult
from syncengine.store.messages import OutgoingMessage
from syncengine.store.paths import default_store_path, resolve_store_path

__all__ = [
    "Conflict",
    "CorruptStore",
    "InvalidInput",
    "Member",
    "MessageRead",
    "MessageSent",
    "MissingDependency",
    "OutgoingMessage",
    "Status",
    "StoreBusy",
    "StoreError",
    "StoreFull",
    "StoreIOError",
    "StoreNotInitialized",
    "StoreTooNew",
    "StoreUnsafe",
    "Team",
    "UnknownAgent",
    "UnknownMessage",
    "UnknownTeam",
    "WatchResult",
    "default_store_path",
    "resolve_store_path",
]
