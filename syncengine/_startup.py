"""Keep process start-up cheap: scheduled ``syncengine pull`` runs pay it.

httpx's package ``__init__`` tries to import its optional command-line tool
(``httpx._main``), which pulls in click, rich and pygments whenever those
happen to be installed (they often are, as dependencies of other tools) and
costs tens of milliseconds at every start. syncengine never uses that tool,
so before httpx is first imported we register a stand-in for it.
"""

from __future__ import annotations

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
