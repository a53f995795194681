"""The architecture map and the contributor guide name only things that exist.

ARCHITECTURE.md and CONTRIBUTING.md point a newcomer at files, folders and
functions; a map that names a module someone renamed sends the reader to a
room that is not there. Every backticked repository path in them
(``syncengine/ops/apply_pull.py``, ``tests/relay/``) must exist, and every
``path.py::name`` or ``path.py::Class.method`` must be defined in that file,
so a rename that forgets the map fails here, naming the stale reference.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ("ARCHITECTURE.md", "CONTRIBUTING.md")

#: Top-level folders a path may start with; anything else in backticks (a
#: command, an environment variable, a crash point) is not a path.
_ROOTS = ("wire", "syncengine", "relay", "tests", "crash_tests", "bench", "specs", "scripts")
_PATH = re.compile("`((?:" + "|".join(_ROOTS) + r")/[\w./-]*)(?:::([\w.]+))?`")


def references(text: str) -> list[tuple[str, str | None]]:
    """(path, name or None) for every backticked repository path in ``text``."""
    return [(match[1], match[2] or None) for match in _PATH.finditer(text)]


def _defines(path: Path, dotted: str) -> bool:
    """Whether ``path`` defines ``name`` at module level, or ``Class.method``."""
    scope: list[ast.stmt] = ast.parse(path.read_text(encoding="utf-8")).body
    for part in dotted.split("."):
        found = [
            node
            for node in scope
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            and node.name == part
        ] + [
            node
            for node in scope
            if isinstance(node, ast.Assign | ast.AnnAssign)
            and part
            in {
                target.id
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
                if isinstance(target, ast.Name)
            }
        ]
        if not found:
            return False
        node = found[0]
        scope = node.body if isinstance(node, ast.ClassDef) else []
    return True


def stale(text: str, root: Path = ROOT) -> list[str]:
    """Every reference in ``text`` that names nothing under ``root``."""
    problems: list[str] = []
    for path, name in references(text):
        target = root / path
        if not target.exists():
            problems.append(f"{path}: no such file or folder")
        elif name is not None and not _defines(target, name):
            problems.append(f"{path}::{name}: not defined there")
    return problems


@pytest.mark.parametrize("document", DOCUMENTS)
def test_every_path_and_function_the_document_names_exists(document: str) -> None:
    text = (ROOT / document).read_text(encoding="utf-8")
    assert references(text), f"{document} names no repository path: the pattern is broken"
    assert stale(text) == []


def test_a_renamed_module_or_function_is_reported_by_name() -> None:
    # The check itself: a vanished file and a vanished function are both caught.
    text = (
        "`syncengine/ops/apply_pull.py::plan_apply` "
        "`syncengine/ops/no_such_module.py` "
        "`syncengine/ops/apply_pull.py::no_such_function` "
        "`syncengine/engine/engine.py::Engine.no_such_method`"
    )
    assert stale(text) == [
        "syncengine/ops/no_such_module.py: no such file or folder",
        "syncengine/ops/apply_pull.py::no_such_function: not defined there",
        "syncengine/engine/engine.py::Engine.no_such_method: not defined there",
    ]
