"""A bell that rings when another process may have committed to a store
(specs/live.md §6; issue #32).

A waiter that asks SQLite's change counter twenty times a second pays a
wake-up each time — about 80 µs of CPU on a small VM, 1 s every ten
minutes for nothing. On Linux the kernel says when the store's files are
written instead: a commit in WAL mode appends to ``<store>-wal`` (and a
checkpoint or a rollback-journal commit writes the database file), so an
inotify watch on the store's directory, filtered to those two names, rings
:attr:`StoreBell.bell` at once and costs nothing while nobody writes. Only
the bell is trusted for *when*; *whether* something changed is still the
caller's cheap check (``PRAGMA data_version``, then its own fingerprint),
because our own writes ring it too.

Elsewhere — another OS, no ``inotify_simple``, a watch the kernel refuses
(its per-user limit) — the bell rings every :data:`FALLBACK_TICK` seconds
instead: the caller's check then runs as a poll, as before.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path
from typing import Any

__all__ = ["FALLBACK_TICK", "StoreBell"]

_log = logging.getLogger("syncengine.store")

#: How often the bell rings when the kernel cannot tell us about writes.
FALLBACK_TICK = 0.05
#: The watching thread looks at its stop flag at least this often.
_READ_TIMEOUT_MS = 1000


class StoreBell:
    """Rings :attr:`bell` (a :class:`threading.Event` the caller may share
    with other wake sources) whenever the store's files are written by any
    process. ``watching`` says whether the kernel does the watching
    (otherwise the caller polls on :data:`FALLBACK_TICK`)."""

    def __init__(self, store_path: Path, bell: threading.Event | None = None) -> None:
        self.bell = bell if bell is not None else threading.Event()
        self._names = {store_path.name, f"{store_path.name}-wal"}
        self._closed = threading.Event()
        self._notify: Any = None
        try:
            from inotify_simple import INotify, flags

            notify = INotify()
            try:
                mask = flags.MODIFY | flags.CLOSE_WRITE | flags.CREATE | flags.MOVED_TO
                notify.add_watch(str(store_path.parent), mask)
            except OSError:
                notify.close()
                raise
            self._notify = notify
        except (ImportError, OSError) as exc:
            _log.debug("store changes: polling (%s)", type(exc).__name__)
            return
        threading.Thread(target=self._watch, name="syncengine-store-bell", daemon=True).start()

    @property
    def watching(self) -> bool:
        return self._notify is not None

    @property
    def tick(self) -> float | None:
        """How long a waiter may wait on the bell alone (``None``: for ever)."""
        return None if self.watching else FALLBACK_TICK

    def _watch(self) -> None:
        notify = self._notify
        try:
            while not self._closed.is_set():
                events = notify.read(timeout=_READ_TIMEOUT_MS)
                if any(event.name in self._names for event in events):
                    self.bell.set()
        except OSError as exc:
            _log.debug("store changes: the watch ended (%s)", exc)
            self._notify = None  # waiters fall back to polling on their next wait
            self.bell.set()
        finally:
            # Closed here, by the one thread that reads it: a descriptor
            # closed under a reader could be reused and read by mistake.
            with contextlib.suppress(OSError):
                notify.close()

    def close(self) -> None:
        """Stop watching (the thread closes the descriptor within a second)."""
        self._closed.set()
