"""The install directive a driver op answers with when a dependency is
missing (driver-interface §1.4: ``missing_deps``, exit 10).

Both :mod:`syncengine.cli.driver.command` (the storage ops) and
:mod:`syncengine.cli.driver.sync_verbs` (the Stage-1 sync verbs) answer a missing
APSW binding the same way; the directive lives here so that neither module
imports the other for it.
"""

from __future__ import annotations

import json
import sys
from typing import IO

__all__ = ["DIRECTIVE_PREFIX", "install_command", "missing_deps"]

DIRECTIVE_PREFIX = "AGMSG-DIRECTIVE: "


def install_command() -> str:
    """This installation's own repair: APSW comes with syncengine, so it is
    installed into the interpreter that runs syncengine (never a bare
    ``python3``, which may be another one)."""
    # start-up pin: a driver op loads no shlex
    import shlex

    return f"{shlex.quote(sys.executable)} -m pip install 'apsw>=3.45'"


def missing_deps(op: str, out: IO[bytes], err: IO[bytes], reason: str, *, status_line: bool) -> int:
    """Write the directive (and, for a control op, the ``missing_deps``
    status line); returns the exit code 10."""
    directive = {
        "type": "install_deps",
        "driver": "syncengine",
        "commands": [install_command()],
        "reason": reason,
    }
    err.write(f"syncengine driver {op}: {reason}\n".encode())
    lines = [DIRECTIVE_PREFIX + json.dumps(directive, separators=(",", ":"))]
    if status_line:
        lines.append("missing_deps")
    out.write(("\n".join(lines) + "\n").encode("utf-8"))
    out.flush()
    return 10
