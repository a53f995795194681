"""Where a store lives (specs/store.md §1).

Precedence: an explicit path (``--store PATH``), then ``SYNCENGINE_STORE``,
then ``$XDG_STATE_HOME/syncengine/store.db`` — falling back to
``~/.local/state`` when ``XDG_STATE_HOME`` is unset, empty or relative, as the
XDG base-directory specification requires.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["STORE_ENV", "default_store_path", "resolve_store_path"]

STORE_ENV = "SYNCENGINE_STORE"


def default_store_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    state_home = env.get("XDG_STATE_HOME", "")
    if not state_home or not os.path.isabs(state_home):
        home = env.get("HOME") or str(Path.home())
        state_home = os.path.join(home, ".local", "state")
    return Path(state_home) / "syncengine" / "store.db"


def resolve_store_path(
    explicit: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Path:
    env = os.environ if environ is None else environ
    if explicit is not None and str(explicit) != "":
        return Path(explicit)
    from_env = env.get(STORE_ENV, "")
    if from_env:
        return Path(from_env)
    return default_store_path(env)
