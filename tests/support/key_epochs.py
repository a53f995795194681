"""Key-epoch steps the end-to-end epoch tests and the crash tests share: a machine's
manifest, a snapshot's export and import, a CLI call read as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.machines import Machine, run_cli
from wire.age_keys import X25519Identity


def recipient_of(key: Path) -> str:
    return X25519Identity.from_string(key.read_text().strip()).recipient.to_string()


def manifest(tmp: Path, name: str, keys: list[Path]) -> Path:
    path = tmp / f"{name}.recipients"
    path.write_text("".join(recipient_of(k) + "\n" for k in keys))
    return path


def cli_json(machine: Machine, *args: str) -> dict[str, object]:
    result = run_cli(machine, *args, "--team", "crew", "--json")
    assert result.returncode == 0, result.stderr
    obj = json.loads(result.stdout)
    assert isinstance(obj, dict)
    return obj


def export(machine: Machine, output: Path) -> str:
    digest = cli_json(machine, "keys", "epoch", "export", "--output", str(output))
    return str(digest["snapshot_sha256"])


def import_into(machine: Machine, snapshot: Path, digest: str) -> None:
    cli_json(
        machine, "keys", "epoch", "import", "--file", str(snapshot), "--confirm-digest", digest
    )
