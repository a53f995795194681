"""The ``syncengine`` command line.

Each command group lives in its own module exposing ``register(subparsers)``;
modules are imported only when the program starts so that ``--help`` and
fast commands stay cheap. A handler returns the process exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Command-group modules, in the order their help appears.
COMMAND_MODULES: tuple[str, ...] = (
    "syncengine.cli.envelope",
    "syncengine.cli.driver",
    "syncengine.cli.team",
    "syncengine.cli.relay",
    "syncengine.cli.keys",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="syncengine",
        description="Encrypted, crash-safe sync for local-first agent message stores.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = args.handler
    code: int = handler(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
