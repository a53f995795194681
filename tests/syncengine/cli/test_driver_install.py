"""``syncengine driver install``: what it prints makes an agmsg host load
the installed driver file under the host's own discovery and trust rules.

The host's rules are reproduced here in our own code (from its
``scripts/lib/storage.sh`` and ``scripts/lib/driver-registry.sh``): the
driver name comes from ``AGMSG_STORAGE_DRIVER``; the bases are
``<root>/scripts/drivers`` (built in, always trusted), ``<root>/plugins``
and each directory of ``AGMSG_PLUGIN_DIRS``, in that order; the file is
``<base>/storage/<name>.sh``; the first eligible one is sourced; an external
one is eligible only when ``<root>/db/trusted-plugins`` holds exactly the
line ``storage/<name><TAB><base>/storage/<name>.sh``. Both a Python
resolver and a bash loader written to those rules are used, the bash one
then calling ``storage_describe`` as the host's adapter does.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest

from syncengine.cli.driver.command import driver_file
from syncengine.cli.driver.install import trust_line
from tests.syncengine.driver.contract import SYNCENGINE_BIN

#: The host's loader, to its rules (not its code): prints the file it would
#: source, sources it and answers storage_describe, or fails as the host does.
HOST_LOADER = r"""
name="${AGMSG_STORAGE_DRIVER:-sqlite}"
trust="$ROOT/db/trusted-plugins"
found=""
bases=("builtin	$ROOT/scripts/drivers" "external	$ROOT/plugins")
IFS=: read -r -a extra <<<"${AGMSG_PLUGIN_DIRS:-}"
for d in "${extra[@]}"; do [ -n "$d" ] && bases+=("external	$d"); done
for entry in "${bases[@]}"; do
    kind="${entry%%	*}" base="${entry#*	}"
    file="$base/storage/$name.sh"
    [ -f "$file" ] || continue
    if [ "$kind" = external ]; then
        line="$(printf 'storage/%s\t%s' "$name" "$file")"
        [ -f "$trust" ] && grep -qxF "$line" "$trust" || continue
    fi
    found="$file"; break
done
[ -n "$found" ] || { echo "agmsg: no trusted storage driver \"$name\" found" >&2; exit 1; }
echo "loaded=$found"
source "$found"
storage_describe
"""


def resolve(root: Path, env: dict[str, str]) -> str | None:
    """The file the host would source, or ``None``."""
    name = env.get("AGMSG_STORAGE_DRIVER") or "sqlite"
    bases = [("builtin", str(root / "scripts" / "drivers")), ("external", str(root / "plugins"))]
    bases += [("external", d) for d in env.get("AGMSG_PLUGIN_DIRS", "").split(":") if d]
    trust = root / "db" / "trusted-plugins"
    trusted = trust.read_text().splitlines() if trust.exists() else []
    for kind, base in bases:
        candidate = f"{base}/storage/{name}.sh"
        if not os.path.isfile(candidate):
            continue
        if kind == "external" and f"storage/{name}\t{candidate}" not in trusted:
            continue
        return candidate
    return None


def install(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SYNCENGINE_BIN), "driver", "install", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def exported(stdout: str) -> dict[str, str]:
    values = {}
    for line in stdout.splitlines():
        assert line.startswith("export "), line
        key, _, value = line.removeprefix("export ").partition("=")
        (values[key],) = shlex.split(value)
    return values


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An agmsg install directory with its built-in sqlite driver."""
    made = tmp_path / "agmsg"
    (made / "scripts" / "drivers" / "storage").mkdir(parents=True)
    (made / "scripts" / "drivers" / "storage" / "sqlite.sh").write_text(
        "storage_describe() { :; }\n"
    )
    return made


def test_install_with_the_agmsg_root_makes_the_host_load_the_installed_file(root: Path) -> None:
    done = install("--agmsg-root", str(root))
    assert done.returncode == 0, done.stderr
    env = exported(done.stdout)
    assert env["AGMSG_STORAGE_DRIVER"] == "syncengine"
    assert resolve(root, env) == driver_file()
    loaded = subprocess.run(
        ["bash", "--norc", "-c", HOST_LOADER],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "ROOT": str(root), **env},
        check=False,
    )
    assert loaded.returncode == 0, loaded.stderr
    lines = loaded.stdout.splitlines()
    assert lines[0] == f"loaded={driver_file()}"
    assert "capabilities=stage1-sync,stage1-resync,stage2-read-state" in lines


def test_the_exported_name_alone_is_refused_by_the_host_until_it_is_trusted(root: Path) -> None:
    env = exported(install().stdout)
    assert resolve(root, env) is None
    assert not (root / "db").exists()


def test_a_path_as_the_driver_name_is_not_what_the_host_loads(root: Path) -> None:
    """The recipe the README once gave: the host takes a name, not a path."""
    install("--agmsg-root", str(root))
    assert resolve(root, {"AGMSG_STORAGE_DRIVER": driver_file()}) is None


def test_install_records_the_trust_line_once_and_keeps_other_lines(root: Path) -> None:
    (root / "db").mkdir()
    trust = root / "db" / "trusted-plugins"
    trust.write_text("types/other\t/somewhere/else")  # no final newline
    for _ in range(2):
        assert install("--agmsg-root", str(root)).returncode == 0
    base = str(Path(driver_file()).parent.parent)
    assert trust.read_text().splitlines() == ["types/other\t/somewhere/else", trust_line(base)]


def test_trust_is_pinned_to_the_path_so_a_moved_install_is_not_loaded(
    root: Path, tmp_path: Path
) -> None:
    install("--agmsg-root", str(root))
    moved = tmp_path / "moved" / "drivers"
    (moved / "storage").mkdir(parents=True)
    (moved / "storage" / "syncengine.sh").write_text(Path(driver_file()).read_text())
    env = {"AGMSG_STORAGE_DRIVER": "syncengine", "AGMSG_PLUGIN_DIRS": str(moved)}
    assert resolve(root, env) is None


def test_install_without_an_agmsg_directory_is_a_usage_error(tmp_path: Path) -> None:
    done = install("--agmsg-root", str(tmp_path / "missing"))
    assert done.returncode == 2 and "no such directory" in done.stderr and done.stdout == ""
    assert install("--bogus").returncode == 2
