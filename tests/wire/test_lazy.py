"""Package exports resolve lazily and only on first use."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_importing_a_package_does_not_import_its_submodules() -> None:
    code = (
        "import sys, wire.http_v1\n"
        "assert 'wire.http_v1.read_state' not in sys.modules\n"
        "wire.http_v1.ReadStatePage\n"
        "assert 'wire.http_v1.read_state' in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_an_unknown_name_is_an_attribute_error() -> None:
    import wire.http_v1

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = wire.http_v1.Nope


def test_dir_lists_every_export() -> None:
    import wire.http_v1

    assert set(wire.http_v1.__all__) <= set(dir(wire.http_v1))
