"""Keep process start-up cheap: scheduled ``syncengine pull`` runs pay it.

httpx's package ``__init__`` tries to import its optional command-line tool
(``httpx._main``), which pulls in click, rich and pygments whenever those
happen to be installed (they often are, as dependencies of other tools) and
costs tens of milliseconds at every start. syncengine never uses that tool,
so before httpx is first imported we register a stand-in for it.

A command process also postpones cyclic garbage collection while it starts
(:class:`PostponedCollection`).
"""

from __future__ import annotations

import gc
import sys
import types


def _no_httpx_cli() -> None:
    raise SystemExit("the httpx command-line tool is not available inside syncengine")


def skip_httpx_cli() -> None:
    if "httpx" in sys.modules or "httpx._main" in sys.modules:
        return
    stand_in = types.ModuleType("httpx._main")
    stand_in.main = _no_httpx_cli  # type: ignore[attr-defined]
    sys.modules["httpx._main"] = stand_in


#: Net allocations a command process may make before its first cyclic
#: collection: an idle ``sync`` makes about 47,000 (the import of some 300
#: modules), ``status`` about 23,000. Everything imported lives until exit,
#: so collecting during start-up only scans survivors (about 67 collections,
#: 9 ms of an idle ``sync``).
START_UP_ALLOCATIONS = 200_000


class PostponedCollection:
    """Cyclic garbage collection postponed until a command process has made
    :data:`START_UP_ALLOCATIONS` net allocations, then normal again: the
    first collection restores the interpreter's thresholds, so a long
    ``run`` loop, a large pull or the relay server collect exactly as
    before (issue #17, start-up). Leaving restores them too, so a caller
    that runs :func:`syncengine.cli.main` in-process keeps its own."""

    def __init__(self) -> None:
        self._saved = gc.get_threshold()
        self._resumed = False

    def __enter__(self) -> PostponedCollection:
        gc.set_threshold(START_UP_ALLOCATIONS, *self._saved[1:])
        gc.callbacks.append(self._resume)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._resume in gc.callbacks:
            gc.callbacks.remove(self._resume)
        self._restore()

    def _resume(self, phase: str, info: dict[str, int]) -> None:
        if phase == "stop":
            self._restore()

    def _restore(self) -> None:
        if not self._resumed:
            self._resumed = True
            gc.set_threshold(*self._saved)
