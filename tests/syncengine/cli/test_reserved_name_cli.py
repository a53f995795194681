"""The commands people type meet a renamed-away name (specs/store.md §4.1):
one line on stderr naming the member that held it and the fix, exit 13 (the
store's runtime_error), nothing changed; the member itself may take it back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from syncengine.cli import main


@pytest.fixture
def db(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """Team crew = {alice, bob, carol}, then bob renamed to robert."""
    path = tmp_path / "s.db"
    args = ["--member", "alice", "--member", "bob", "--member", "carol"]
    assert main(["team", "--store", str(path), "create", "crew", *args]) == 0
    assert main(["team", "--store", str(path), "rename-member", "crew", "bob", "robert"]) == 0
    capsys.readouterr()
    return path


def members(db: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    capsys.readouterr()
    assert main(["team", "--store", str(db), "list", "--json"]) == 0
    [team] = json.loads(capsys.readouterr().out)
    return sorted(m["name"] for m in team["members"])


def one_line(err: str) -> str:
    assert err.endswith("\n") and err.count("\n") == 1 and "Traceback" not in err
    return err


@pytest.mark.parametrize(
    "argv",
    [
        ["team", "rename-member", "crew", "carol", "bob"],
        ["team", "add-member", "crew", "bob"],
    ],
    ids=["rename-member", "add-member"],
)
def test_giving_a_renamed_away_name_to_another_member_is_one_line_and_exit_13(
    db: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert main([argv[0], "--store", str(db), *argv[1:]]) == 13
    err = one_line(capsys.readouterr().err)
    assert "name 'bob' is reserved in team 'crew': member 'robert'" in err
    assert "syncengine team rename-member crew robert bob" in err
    assert members(db, capsys) == ["alice", "carol", "robert"]


def test_renaming_a_member_back_to_its_own_former_name_succeeds(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["team", "--store", str(db), "rename-member", "crew", "robert", "bob"]) == 0
    assert members(db, capsys) == ["alice", "bob", "carol"]


@pytest.mark.parametrize("names", [("bob", "alice"), ("alice", "bob")], ids=["from", "to"])
def test_send_naming_a_renamed_away_name_names_its_holder_not_add_member(
    db: Path, capsys: pytest.CaptureFixture[str], names: tuple[str, str]
) -> None:
    field = "from" if names[0] == "bob" else "to"
    assert main(["send", "--store", str(db), "crew", *names, "hi"]) == 13
    err = one_line(capsys.readouterr().err)
    assert f"{field}: name 'bob' is reserved" in err and "add-member" not in err
    assert main(["history", "--store", str(db), "crew"]) == 0
    assert capsys.readouterr().out == ""
