"""The sync engine: cycles of push and pull between a local store and a relay.

Public surface (specs/engine.md §2.2):

- :class:`Engine` — ``Engine(store_path, team=None, ...)`` with
  :meth:`~Engine.push`, :meth:`~Engine.pull`, :meth:`~Engine.sync`,
  :meth:`~Engine.reprocess`, :meth:`~Engine.status`,
  :meth:`~Engine.set_security_mode`, :meth:`~Engine.set_identity`,
  :meth:`~Engine.lock`;
- :func:`connect_store` and :func:`read_token` — pairing a store's team;
- :class:`RunLoop`, :class:`StopSignal`, :class:`RunSettings` — ``run``;
- :func:`classify` — any failure → durable record and exit code.

Submodules are imported lazily by the CLI, so ``syncengine status`` pays
only for what it uses.
"""

from typing import TYPE_CHECKING

from syncengine._lazy import lazy_exports

if TYPE_CHECKING:
    from syncengine.engine.connect import Connected, connect_store, read_token
    from syncengine.engine.engine import Engine, EngineStatus, SyncReport
    from syncengine.engine.errors import (
        AlreadyConnected,
        ConfigurationError,
        ConnectFailed,
        EngineError,
        EngineLocked,
        FailureRecord,
        NotConnected,
        PushOversized,
        StopRequested,
        TokenSourceRefused,
        classify,
    )
    from syncengine.engine.limits import RunSettings
    from syncengine.engine.reports import PullReport, PushReport, ReprocessReport
    from syncengine.engine.runloop import CycleOutcome, RunLoop, StopSignal
    from syncengine.engine.security import SecurityEntry, SecurityHistory, SecurityMode

_EXPORTS: dict[str, str] = {
    "Connected": "syncengine.engine.connect",
    "connect_store": "syncengine.engine.connect",
    "read_token": "syncengine.engine.connect",
    "Engine": "syncengine.engine.engine",
    "EngineStatus": "syncengine.engine.engine",
    "SyncReport": "syncengine.engine.engine",
    "AlreadyConnected": "syncengine.engine.errors",
    "ConfigurationError": "syncengine.engine.errors",
    "ConnectFailed": "syncengine.engine.errors",
    "EngineError": "syncengine.engine.errors",
    "EngineLocked": "syncengine.engine.errors",
    "FailureRecord": "syncengine.engine.errors",
    "NotConnected": "syncengine.engine.errors",
    "PushOversized": "syncengine.engine.errors",
    "StopRequested": "syncengine.engine.errors",
    "TokenSourceRefused": "syncengine.engine.errors",
    "classify": "syncengine.engine.errors",
    "RunSettings": "syncengine.engine.limits",
    "PullReport": "syncengine.engine.reports",
    "PushReport": "syncengine.engine.reports",
    "ReprocessReport": "syncengine.engine.reports",
    "CycleOutcome": "syncengine.engine.runloop",
    "RunLoop": "syncengine.engine.runloop",
    "StopSignal": "syncengine.engine.runloop",
    "SecurityEntry": "syncengine.engine.security",
    "SecurityHistory": "syncengine.engine.security",
    "SecurityMode": "syncengine.engine.security",
}

__all__ = [
    "AlreadyConnected",
    "ConfigurationError",
    "ConnectFailed",
    "Connected",
    "CycleOutcome",
    "Engine",
    "EngineError",
    "EngineLocked",
    "EngineStatus",
    "FailureRecord",
    "NotConnected",
    "PullReport",
    "PushOversized",
    "PushReport",
    "ReprocessReport",
    "RunLoop",
    "RunSettings",
    "SecurityEntry",
    "SecurityHistory",
    "SecurityMode",
    "StopRequested",
    "StopSignal",
    "SyncReport",
    "TokenSourceRefused",
    "classify",
    "connect_store",
    "read_token",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
