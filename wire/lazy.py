"""Lazy package exports (PEP 562) for the codec's own packages.

``wire`` and ``wire.http_v1`` re-export many names; importing every
submodule up front would make each process that needs one document pay for
all of them. Each package maps a public name to its module and imports it on
first use. Only ``wire`` uses this: ``syncengine`` keeps its own copy
(``syncengine/_lazy.py``), so the codec holds nothing of a client's
start-up machinery (issue #36).
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
    """``(__getattr__, __dir__)`` for ``package``, resolving ``exports`` lazily."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        vars(sys.modules[package])[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
