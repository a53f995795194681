"""The package exports exactly its public names (STYLE.md, httpx habit)."""

from __future__ import annotations

import wire.http_v1 as http_v1


def test_all_lists_exactly_the_public_names() -> None:
    public = {
        name
        for name, value in vars(http_v1).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("wire.http_v1")
    }
    constants = {"BINDING_MEMBERS", "ERROR_CODES", "ReadStateItem"}
    assert set(http_v1.__all__) == public | constants
    assert all(hasattr(http_v1, name) for name in http_v1.__all__)
