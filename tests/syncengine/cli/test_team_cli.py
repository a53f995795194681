"""``syncengine team …`` (specs/store.md §4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from syncengine.cli import main


def team(path: Path, *args: str) -> int:
    return main(["team", "--store", str(path), *args])


def test_create_list_rename_add_member_and_export_provisioning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    assert team(db, "create", "dev", "--member", "alice", "--member", "bob") == 0
    assert team(db, "add-member", "dev", "carol") == 0
    assert team(db, "rename", "dev", "core") == 0
    capsys.readouterr()
    assert team(db, "list", "--json") == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["team_name"] == "core"
    assert [m["name"] for m in listed["members"]] == ["alice", "bob", "carol"]
    out = tmp_path / "prov.json"
    assert team(db, "export-provisioning", "core", "--output", str(out)) == 0
    doc = json.loads(out.read_text())
    assert doc["team_id"] == listed["team_id"] and doc["team_name"] == "core"
    assert sorted(m["member_id"] for m in doc["members"]) == [
        m["member_id"] for m in doc["members"]
    ]


def test_errors_go_to_stderr_with_the_status_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    assert team(db, "create", "dev", "--member", "alice") == 0
    assert team(db, "create", "dev") == 13
    assert team(db, "add-member", "ghost", "x") == 13
    assert team(db, "create", "bad:name") == 13
    err = capsys.readouterr().err
    assert "already exists" in err and "ghost" in err and "':'" in err


def test_store_flag_and_environment_select_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    env_db = tmp_path / "env.db"
    monkeypatch.setenv("SYNCENGINE_STORE", str(env_db))
    assert main(["team", "create", "from-env"]) == 0
    assert env_db.exists()
    capsys.readouterr()
    assert main(["team", "list"]) == 0
    assert "from-env" in capsys.readouterr().out
    assert team(tmp_path / "other.db", "list") == 0
    assert capsys.readouterr().out == ""
