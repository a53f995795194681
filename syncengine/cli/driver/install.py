"""``syncengine driver install [--agmsg-root DIR]``: make the installed bash
driver loadable by an agmsg host (specs/store.md §11.2).

The host does not source a path it is given. It takes a storage driver
*name* (``AGMSG_STORAGE_DRIVER``), looks for ``<base>/storage/<name>.sh``
in its driver bases — its own ``scripts/drivers``, ``<root>/plugins``, then
each directory of ``AGMSG_PLUGIN_DIRS`` in order, the first one found wins —
and loads a file outside its own tree only when the exact line
``storage/<name><TAB><base>/storage/<name>.sh`` is in its trust file,
``<root>/db/trusted-plugins`` (ADR 0002: an unexpected drop-in never runs).
The path in that line is compared as text, so trust pins this one
installed file: an upgrade in place keeps it, a moved or re-created
virtualenv needs ``install`` again.

This command prints the two variables to set, as ``export`` lines a shell
can ``eval``; with ``--agmsg-root`` it also records the trust line there
(once). Nothing here sources or runs the host's code.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import IO

__all__ = ["DRIVER_NAME", "install", "trust_line"]

#: The name a host selects the driver by (``<base>/storage/<name>.sh``).
DRIVER_NAME = "syncengine"

_USAGE = "usage: syncengine driver install [--agmsg-root DIR]"


def trust_line(base: str) -> str:
    """The host's trust-file line for our driver under ``base``."""
    return f"storage/{DRIVER_NAME}\t{base}/storage/{DRIVER_NAME}.sh"


def _root(args: list[str]) -> str | None:
    if not args:
        return None
    if len(args) == 2 and args[0] == "--agmsg-root":
        return args[1]
    if len(args) == 1 and args[0].startswith("--agmsg-root="):
        return args[0].removeprefix("--agmsg-root=")
    raise ValueError(_USAGE)


def _record_trust(root: Path, line: str) -> tuple[Path, bool]:
    """Append ``line`` to ``<root>/db/trusted-plugins`` unless it is there;
    returns the file and whether it was added."""
    if not root.is_dir():
        raise ValueError(f"--agmsg-root {root}: no such directory (the agmsg install directory)")
    trust = root / "db" / "trusted-plugins"
    trust.parent.mkdir(exist_ok=True)
    present = trust.read_text(encoding="utf-8").splitlines() if trust.exists() else []
    if line in present:
        return trust, False
    with trust.open("a", encoding="utf-8") as handle:
        if present and not trust.read_text(encoding="utf-8").endswith("\n"):
            handle.write("\n")
        handle.write(line + "\n")
    return trust, True


def install(driver_file: str, args: list[str], out: IO[bytes], err: IO[bytes]) -> int:
    try:
        root = _root(args)
        storage_dir = os.path.dirname(driver_file)
        base = os.path.dirname(storage_dir)
        if ":" in base or "\t" in base or "\n" in base:
            raise ValueError(
                f"the driver is installed under {base!r}, a path the host cannot list in "
                "AGMSG_PLUGIN_DIRS (':' separates its entries); install syncengine elsewhere"
            )
        line = trust_line(base)
        if root is not None:
            trust, added = _record_trust(Path(root), line)
            said = "trusted" if added else "already trusted"
            err.write(f"{said}: storage/{DRIVER_NAME} at {base}/storage in {trust}\n".encode())
        else:
            err.write(
                (
                    "the host loads the driver only once it is trusted: run again with "
                    "--agmsg-root <agmsg install directory>, or add this line to "
                    f"<agmsg install directory>/db/trusted-plugins:\n{line}\n"
                ).encode()
            )
    except (ValueError, OSError) as exc:
        err.write(f"syncengine driver install: {exc}\n".encode())
        return 2
    out.write(
        (
            f"export AGMSG_PLUGIN_DIRS={shlex.quote(base)}\n"
            f"export AGMSG_STORAGE_DRIVER={DRIVER_NAME}\n"
        ).encode()
    )
    out.flush()
    return 0
