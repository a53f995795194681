"""Shared assertions of the HTTP v1 codec tests."""

from __future__ import annotations

from typing import Any

import pytest

from wire.errors import WireError


def field_of(call: Any, *args: Any, error: type[WireError] = WireError, **kwargs: Any) -> str:
    """The field named by the ``error`` that ``call(*args, **kwargs)`` must raise."""
    with pytest.raises(error) as caught:
        call(*args, **kwargs)
    return caught.value.field
