"""syncengine's packages export their names lazily (syncengine/_lazy.py).

An idle scheduled run imports a few submodules of ``syncengine.engine``,
``syncengine.ops`` and ``syncengine.http``; each of those first runs its
package's ``__init__``, which must not import the rest of the package.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import syncengine.engine
import syncengine.http
import syncengine.ops

#: A package and a submodule it re-exports from that an idle pull never needs.
UNNEEDED = {
    "syncengine.engine": ("syncengine.engine.runloop", "RunLoop"),
    "syncengine.ops": ("syncengine.ops.reprocess", "ReprocessResult"),
    "syncengine.http": ("syncengine.http.pairing", "connect"),
}


@pytest.mark.parametrize("package", sorted(UNNEEDED))
def test_importing_a_package_imports_none_of_its_submodules_until_a_name_is_read(
    package: str,
) -> None:
    module, name = UNNEEDED[package]
    code = (
        f"import sys, {package}\n"
        f"assert {module!r} not in sys.modules, 'imported with the package'\n"
        f"getattr({package}, {name!r})\n"
        f"assert {module!r} in sys.modules, 'not imported on first use'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr


def test_a_name_the_package_does_not_export_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match=r"'syncengine\.engine' has no attribute 'Nope'"):
        _ = syncengine.engine.Nope


@pytest.mark.parametrize("package", [syncengine.engine, syncengine.ops, syncengine.http])
def test_dir_of_a_package_lists_every_name_it_exports(package: object) -> None:
    assert set(package.__all__) <= set(dir(package))  # type: ignore[attr-defined]


def test_the_syncengine_packages_do_not_borrow_the_codec_s_lazy_helper() -> None:
    code = "import sys, syncengine.engine, syncengine.ops, syncengine.http\n"
    code += "assert 'wire.lazy' not in sys.modules\n"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
