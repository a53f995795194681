"""PEP 562 exports for syncengine's packages (``ops``, ``engine``, ``http``).

Importing any submodule runs its package's ``__init__`` first, so a package
that imported every module it re-exports would make an idle scheduled
``syncengine pull`` load the connect, doctor and resync machinery too: the
start-up pins in ``tests/syncengine/cli/test_startup_imports.py`` forbid
that. Each package therefore maps a public name to the module defining it,
and the module is imported the first time the name is read.

This is syncengine's own copy on purpose: ``wire`` keeps the same few lines
for its packages (``wire/lazy.py``), and the codec should not carry the
client's start-up machinery (issue #36).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` a package assigns at module level.

    ``exports`` maps each public name to the module that defines it. A name
    is resolved once, then stored on the package, so later reads are plain
    attribute lookups that never reach ``__getattr__`` again."""

    def __getattr__(name: str) -> Any:
        home = exports.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
