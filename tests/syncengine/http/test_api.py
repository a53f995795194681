"""The package's public surface, and the package boundary."""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType

import syncengine.http as http_package
from syncengine.http import errors


def test_all_lists_exactly_the_public_names() -> None:
    # Exports resolve on first use (wire.lazy); __all__ must name each one once.
    assert sorted(http_package.__all__) == sorted(http_package._EXPORTS)
    assert len(http_package.__all__) == len(set(http_package.__all__))
    for name in http_package.__all__:
        value = getattr(http_package, name)
        assert not isinstance(value, ModuleType), name


def test_connect_stays_the_function_once_its_module_is_imported() -> None:
    # Lazy like every export, yet importing the pairing module never rebinds
    # the package's ``connect`` to a module (its module is named otherwise).
    import syncengine.http.pairing as pairing

    assert http_package.connect is pairing.connect
    assert callable(http_package.connect)


def test_every_error_class_carries_code_classification_and_remediation() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        if not (isinstance(cls, type) and issubclass(cls, errors.RelayClientError)):
            continue
        assert cls.default_code, name
        assert isinstance(cls.retryable, bool), name
        assert isinstance(cls.state, errors.EngineState), name
        assert cls.remediation.strip(), name
        assert cls.retryable is (cls.state is errors.EngineState.BACKOFF), name


def test_http_package_never_imports_relay() -> None:
    root = Path(http_package.__file__).parent
    for source in root.glob("*.py"):
        tree = ast.parse(source.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not any(n == "relay" or n.startswith("relay.") for n in names), source
