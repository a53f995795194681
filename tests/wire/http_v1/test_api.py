"""The package exports exactly its public names (STYLE.md, httpx habit)."""

from __future__ import annotations

import wire.http_v1 as http_v1


def test_all_lists_exactly_the_lazily_exported_names() -> None:
    # Exports resolve on first use (wire.lazy); __all__ must name each one once.
    assert sorted(http_v1.__all__) == sorted(http_v1._EXPORTS)
    assert len(http_v1.__all__) == len(set(http_v1.__all__))


def test_every_exported_name_resolves_to_its_declared_module() -> None:
    for name, module in http_v1._EXPORTS.items():
        value = getattr(http_v1, name)
        declared = getattr(value, "__module__", module)
        assert declared == module or not isinstance(value, type), name
