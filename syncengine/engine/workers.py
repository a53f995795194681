"""Worker processes for sealing and opening large age-v1 batches
(specs/engine.md §4.7).

Why processes: age-v1 costs about 0.2 ms of X25519 and ChaCha20-Poly1305
per message, and the ``cryptography`` calls hold the GIL, so threads run
them one at a time. A backlog of thousands of envelopes is instead split
across worker processes, one per CPU (at most :data:`MAX_WORKERS`), while
the engine's own process keeps the store and the relay connection.

When: only for batches of at least :data:`MIN_PARALLEL_BATCH` age-v1
messages, on a machine with two or more CPUs, unless ``SYNCENGINE_WORKERS``
says otherwise (``0`` turns the pool off). Starting the pool costs about
0.2 s and moving a message to a worker and back a few microseconds, which
only a large batch repays. The engine starts the pool on the first such
batch and keeps it until it closes.

Secrets: a worker receives the non-secret connection record (IDs, the epoch
manifest, the identity file's *path*) and reads the identity file itself
through :func:`~syncengine.engine.identity.read_identity`, exactly as the
engine does. No key material crosses a pipe.

What a worker computes is a pure function of its inputs (sealing mints a
random wire ID, which is private until the engine publishes it), so the
results are the same as in-process; every store transaction and every
crash point stays in the engine's process. If a worker dies or the pool
cannot start, the batch is redone in-process and the pool is not used
again by this engine (logged).

Workers are ``spawn``-ed children of the engine: unlike ``fork`` that is
safe while the engine's network threads run and its SQLite connection is
open. A worker drops the engine's stdin/stdout/stderr and exits on its own
soon after the engine process is gone, however it ended, so a crashed or
killed engine leaves no process behind holding its pipes.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from syncengine.engine.state import ConnectionRecord

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    from syncengine.engine.evaluation import Verdict
    from syncengine.ops.bindings import BindingKey
    from syncengine.ops.prepare_push import BlockedSeal, LocalMessage, Sealed
    from syncengine.ops.sync_records import SyncPrepare
    from wire.envelope import Envelope

__all__ = [
    "MAX_WORKERS",
    "MIN_PARALLEL_BATCH",
    "WORKERS_ENV",
    "Workers",
    "worker_count",
]

_log = logging.getLogger("syncengine.engine")

#: Environment variable: how many worker processes (``0`` = none).
WORKERS_ENV = "SYNCENGINE_WORKERS"
#: Never more workers than this, whatever the CPU count.
MAX_WORKERS = 4
#: Smaller batches are sealed or opened in-process.
MIN_PARALLEL_BATCH = 200
#: Each batch is cut into this many parts per worker, so that a worker that
#: finishes early takes the next part instead of waiting.
_PARTS_PER_WORKER = 2
#: Seconds between a worker's checks that the engine is still alive.
_WATCH_INTERVAL = 0.25

T = TypeVar("T")
R = TypeVar("R")


def worker_count(environ: dict[str, str] | None = None) -> int:
    """Workers to use: ``SYNCENGINE_WORKERS`` if set, else one per CPU
    (capped) when there are at least two; 0 means in-process only."""
    env = os.environ if environ is None else environ
    text = env.get(WORKERS_ENV)
    if text is not None and text.strip():
        try:
            wanted = int(text)
        except ValueError:
            _log.warning("%s=%r is not a number; using no worker processes", WORKERS_ENV, text)
            return 0
        return max(0, min(wanted, MAX_WORKERS))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return min(cpus or 1, MAX_WORKERS) if (cpus or 1) >= 2 else 0


class Workers:
    """A lazily started pool of worker processes for one engine."""

    def __init__(self, connection: ConnectionRecord, processes: int) -> None:
        self._connection = connection
        self._processes = processes
        self._pool: ProcessPoolExecutor | None = None
        self._broken = processes < 1

    @property
    def available(self) -> bool:
        return not self._broken

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    # -- the two jobs ---------------------------------------------------------------

    def seal(
        self, messages: Sequence[LocalMessage], request: SyncPrepare, key: BindingKey
    ) -> list[Sealed | BlockedSeal] | None:
        """Seal ``messages`` on the workers; ``None`` if that was not possible
        (the caller then seals in-process)."""
        # start-up pin: status loads no syncengine.ops.prepare_push
        from syncengine.ops.prepare_push import BlockedSeal, Sealed
        from wire.envelope import Envelope

        results = self._submit(_seal_part, messages, request, key)()
        if results is None:
            return None
        items: list[Sealed | BlockedSeal] = []
        for message, result in zip(messages, results, strict=True):
            if result[0] == "sealed":
                _, wire_id, v, cipher, key_id, blob = result
                items.append(Sealed(message, wire_id, Envelope(v, cipher, key_id, blob)))
            else:
                items.append(BlockedSeal(message, result[1], result[2]))
        return items

    def judge(
        self, items: Sequence[tuple[Envelope, str, int, frozenset[str]]]
    ) -> Callable[[], list[Verdict] | None]:
        """Start opening ``(envelope, wire ID, allowed ciphers)`` items on the
        workers and return at once; calling the result waits for the verdicts,
        or gives ``None`` if the workers failed (the caller then opens
        in-process). The engine applies the previous page meanwhile."""
        wire = [(e.v, e.cipher, e.key_id, e.blob, w, seq, allowed) for e, w, seq, allowed in items]
        return self._submit(_judge_part, wire)

    # -- plumbing -------------------------------------------------------------------

    def _submit(
        self, job: Callable[..., list[R]], items: Sequence[T], *extra: Any
    ) -> Callable[[], list[R] | None]:
        if self._broken:
            return _nothing
        size = max(1, -(-len(items) // (self._processes * _PARTS_PER_WORKER)))
        parts = [(list(items[i : i + size]), *extra) for i in range(0, len(items), size)]
        try:
            results = self._start().map(job, parts)  # submits every part now
        except Exception as exc:
            return self._degraded(exc)

        def collect() -> list[R] | None:
            try:
                return [result for part in results for result in part]
            except Exception as exc:
                return self._degraded(exc)()

        return collect

    def _degraded(self, exc: Exception) -> Callable[[], None]:
        # A dead worker or a failed start: degrade, never lose work.
        _log.warning("worker processes unavailable (%s); continuing in-process", exc)
        self._broken = True
        self.close()
        return _nothing

    def _start(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # start-up pin (WORKER_POOL): only this path loads multiprocessing
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(
                self._processes,
                mp_context=context,
                initializer=_initialize,
                initargs=(self._connection, os.getpid()),
            )
        return self._pool


def _nothing() -> None:
    return None


# -- inside a worker process --------------------------------------------------------

_connection: ConnectionRecord | None = None
_identity: dict[str, object | None] = {}


def _initialize(connection: ConnectionRecord, engine_pid: int) -> None:
    # Imported here, in the worker: every command that only counts its
    # workers (``status`` included) is spared it (issue #17, start-up).
    import signal

    global _connection
    # Ctrl-C reaches the whole process group; the engine decides how to stop
    # and then closes the pool, so a worker ignores it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _detach_stdio()
    # The engine's pid comes from the engine: were it read here with
    # getppid(), an engine that died while this worker started would already
    # have been replaced by the new parent, and the worker would wait forever.
    _follow_engine(engine_pid)
    _connection = connection
    _identity.clear()


def _detach_stdio() -> None:
    """A worker never writes to the terminal; holding the engine's stdout and
    stderr would keep a caller's pipes open after the engine is gone."""
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)


def _follow_engine(engine_pid: int) -> None:
    """Exit soon after the engine does, however it ended (a crash point's
    ``os._exit``, SIGKILL, power to the process cut): an orphaned worker is
    re-parented, which this thread notices within a quarter second."""

    def watch() -> None:
        while os.getppid() == engine_pid:
            time.sleep(_WATCH_INTERVAL)
        os._exit(0)

    threading.Thread(target=watch, name="syncengine-worker-watch", daemon=True).start()


def _worker_identity(key_id: str) -> object | None:
    if key_id not in _identity:
        # start-up pin: status loads no syncengine.engine.identity
        from syncengine.engine.identity import read_identity

        assert _connection is not None
        epoch = _connection.epochs.by_key_id(key_id)
        path = epoch.identity_path if epoch is not None else None
        _identity[key_id] = None if path is None else read_identity(_connection, Path(path), key_id)
    return _identity[key_id]


def _judge_part(
    part: tuple[list[tuple[int, str, str | None, str, str, int, frozenset[str]]]],
) -> list[Verdict]:
    # start-up pin: status loads no syncengine.engine.evaluation
    from syncengine.engine.evaluation import judge
    from wire.envelope import Envelope

    assert _connection is not None
    return [
        judge(
            Envelope(v, cipher, key_id, blob), wire_id, seq, allowed, _connection, _worker_identity
        )
        for v, cipher, key_id, blob, wire_id, seq, allowed in part[0]
    ]


def _seal_part(
    part: tuple[list[LocalMessage], SyncPrepare, BindingKey],
) -> list[tuple[Any, ...]]:
    # start-up pin: status loads no syncengine.ops.prepare_push
    from syncengine.ops.prepare_push import Sealed, seal_chunk

    messages, request, key = part
    out: list[tuple[Any, ...]] = []
    for item in seal_chunk(messages, request, key):
        if isinstance(item, Sealed):
            env = item.envelope
            out.append(("sealed", item.wire_id, env.v, env.cipher, env.key_id, env.blob))
        else:
            out.append(("blocked", item.limit, item.reason))
    return out
