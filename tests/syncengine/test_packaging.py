"""What an install carries (issue #18, item 6): an SPDX license with its
file, and the bash driver inside the package where ``driver path`` finds it."""

from __future__ import annotations

import tomllib
from pathlib import Path

from syncengine.cli.driver.command import driver_file

ROOT = Path(__file__).resolve().parents[2]


def _project() -> dict[str, object]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def test_the_license_is_an_spdx_expression_with_its_file_shipped() -> None:
    project = _project()["project"]
    assert isinstance(project, dict)
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    assert "MIT License" in (ROOT / "LICENSE").read_text()


def test_the_bash_driver_is_package_data_at_the_path_driver_path_prints() -> None:
    tool = _project()["tool"]
    assert isinstance(tool, dict)
    patterns = tool["setuptools"]["package-data"]["syncengine"]
    path = Path(driver_file())
    assert path.is_file() and path.is_relative_to(ROOT / "syncengine")
    assert any(path.match(f"*/syncengine/{pattern}") for pattern in patterns)
