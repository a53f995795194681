"""The test tree's own layout rules (issue #36, CONTRIBUTING.md "Test layers").

Why they are tested: a test module that imports another test module makes
pytest collect the imported module's tests under the importer's name as well
as its own, and ties two files' rules together so that moving or renaming
one breaks the other. Shared helpers therefore live in ``tests/support/``
(what several folders use) or a non-test helper module beside the tests
that use it. And a test folder is named for the package folder it tests, so
a reader finds a module's tests at the same path under ``tests/``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Every tree that holds tests or what tests share.
TEST_TREES = ("tests", "crash_tests")

#: Test folders that mirror no package folder, and why.
CROSS_CUTTING = {
    "tests/e2e": "whole machines against a live relay: every package at once",
    "tests/support": "what several test folders share; no tests of its own",
    "tests/syncengine/driver": (
        "the agmsg driver contract, through syncengine/cli/driver and the host scripts"
    ),
}


def _python_files() -> Iterator[Path]:
    for tree in TEST_TREES:
        yield from sorted((ROOT / tree).rglob("*.py"))


def _imported_modules(path: Path) -> Iterator[str]:
    """Every module ``path`` imports, wherever the import sits (module level,
    inside a function, under TYPE_CHECKING); a relative import is resolved."""
    package = path.relative_to(ROOT).parent.parts
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join((*anchor, base)) if base else ".".join(anchor)
            yield base
            # ``from tests.relay import test_workers`` imports a module too.
            yield from (f"{base}.{alias.name}" for alias in node.names)


def _is_test_module(module: str) -> bool:
    parts = module.split(".")
    return parts[0] in TEST_TREES and parts[-1].startswith("test_")


def test_no_test_module_imports_another_test_module() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in _python_files()
        for module in _imported_modules(path)
        if _is_test_module(module)
    ]
    assert offenders == [], "move the shared helper to tests/support/: " + "; ".join(offenders)


def test_no_module_imports_a_conftest() -> None:
    """A conftest.py is pytest's to load, once per folder: importing it as a
    module loads a second copy whose fixtures and constants are different
    objects. What a conftest's fixtures and its neighbours share sits in a
    helper module both import."""
    offenders = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in _python_files()
        for module in _imported_modules(path)
        if module.split(".")[0] in TEST_TREES and "conftest" in module.split(".")
    ]
    assert offenders == [], "; ".join(offenders)


def test_tests_support_imports_no_test_folder() -> None:
    """tests/support sits below every test folder: it may use the packages
    and itself, never a folder of tests (that would make its users depend on
    that folder's fixtures and helpers)."""
    offenders = [
        f"{path.relative_to(ROOT)} imports {module}"
        for path in sorted((ROOT / "tests" / "support").rglob("*.py"))
        for module in _imported_modules(path)
        if module.split(".")[0] in TEST_TREES and not module.startswith("tests.support")
    ]
    assert offenders == [], "; ".join(offenders)


def test_every_test_folder_mirrors_a_package_folder() -> None:
    """tests/<package>/<sub>/ tests <package>/<sub>/: the path of a module's
    tests is the module's own path under tests/."""
    strays = [
        folder.relative_to(ROOT).as_posix()
        for folder in sorted((ROOT / "tests").rglob("*"))
        if folder.is_dir()
        and (folder / "__init__.py").exists()
        and folder.relative_to(ROOT).as_posix() not in CROSS_CUTTING
        and not any(folder.relative_to(ROOT).as_posix().startswith(c + "/") for c in CROSS_CUTTING)
        and not (ROOT / folder.relative_to(ROOT / "tests")).is_dir()
    ]
    assert strays == [], f"test folders naming no package folder: {strays}"
