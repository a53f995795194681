"""What to install when an optional part of the relay is missing.

The remedy names the packages of the installed distribution's extra, read
from its own metadata, as one ``pip`` command for this very interpreter —
right for a wheel and a checkout alike. It never says ``pip install
syncengine[…]``: a distribution of that name on the package index is
someone else's.
"""

from __future__ import annotations

import re
import shlex
import sys

__all__ = ["install_hint"]

_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def install_hint(extra: str) -> str:
    """``<python> -m pip install <the extra's requirements>``, or plain words
    when the metadata cannot be read."""
    try:
        from importlib.metadata import PackageNotFoundError, requires

        listed = requires("syncengine") or []
    except (ImportError, PackageNotFoundError):  # pragma: no cover - not installed as a package
        listed = []
    packages = []
    for requirement in listed:
        spec, _, marker = requirement.partition(";")
        found = _EXTRA.search(marker)
        if found is not None and found.group(1) == extra:
            packages.append(spec.strip())
    if not packages:
        return f"install syncengine's '{extra}' extra into this environment"
    command = " ".join(shlex.quote(p) for p in packages)
    return f"install it: {shlex.quote(sys.executable)} -m pip install {command}"
