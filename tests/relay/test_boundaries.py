"""Package boundaries: the relay depends on wire, never on the client package."""

from __future__ import annotations

import ast
from pathlib import Path

import relay


def test_relay_never_imports_syncengine() -> None:
    root = Path(relay.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] == "syncengine"]
    assert offenders == []
