"""The operator CLI: ``syncengine relay …`` in-process through the real parser."""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from relay.secrets import hash_secret, new_uuid7
from relay.storage import location
from syncengine.cli import main
from tests.relay.backends import BACKENDS, Backend, require_postgres
from tests.support.cli import run_main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    return run_main(capsys, ["relay", *args])


@pytest.fixture(params=BACKENDS)
def cli_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    """An empty database of either kind, for the CLI to ``init`` itself."""
    if request.param == "sqlite":
        yield Backend("sqlite", str(tmp_path / "data" / "relay.db"))
        return
    server = require_postgres()
    url = server.create_database()
    try:
        yield Backend("postgres", url)
    finally:
        server.drop_database(url)


@pytest.fixture
def db(cli_backend: Backend, capsys: pytest.CaptureFixture[str]) -> str:
    assert run(capsys, "init", "--db", cli_backend.location)[0] == 0
    return cli_backend.location


@pytest.fixture
def team_id(db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    team = new_uuid7()
    doc = tmp_path / "team.json"
    doc.write_text(
        json.dumps(
            {
                "team_id": team,
                "team_name": "ops",
                "members": [{"member_id": new_uuid7(), "name": "a"}],
            }
        )
    )
    code, out, _ = run(capsys, "team", "apply", str(doc), "--db", str(db), "--json")
    assert code == 0 and json.loads(out)["created"] is True
    return team


def _instance_id(db: str) -> str:
    store = location.open_store(db)
    try:
        return store.server_instance_id
    finally:
        store.close()


def test_init_creates_a_private_database_with_an_immutable_uuid7(
    db: str, cli_backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    if not cli_backend.is_postgres:
        assert stat.S_IMODE(Path(db).stat().st_mode) == 0o600
    first = _instance_id(db)
    code, _, err = run(capsys, "init", "--db", str(db))
    assert code == 2 and "already exists" in err
    assert _instance_id(db) == first
    assert first[14] == "7"


def test_db_defaults_to_the_environment_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "env.db"
    monkeypatch.setenv("SYNCENGINE_RELAY_DB", str(target))
    code, out, _ = run(capsys, "init", "--json")
    assert code == 0 and json.loads(out)["db"] == str(target) and target.exists()


def test_token_is_printed_once_and_stored_only_as_a_hash(
    db: str, cli_backend: Backend, team_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys, "token", "issue", "--team", team_id, "--device-name", "laptop", "--db", str(db)
    )
    assert code == 0
    token = out.strip()
    assert token.startswith("agmsg_pair_")
    raw = cli_backend.dump()
    digest = hash_secret(token)
    assert token.encode() not in raw and (digest in raw or digest.hex().encode() in raw)


def test_token_for_an_unknown_team_is_an_operator_error(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "token", "issue", "--team", new_uuid7(), "--db", str(db))
    assert code == 2 and "team apply" in err


def test_policy_set_retain_and_status_report_as_json(
    db: str, team_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys, "policy", "set", "--team", team_id, "--allow", "age-v1", "--db", str(db), "--json"
    )
    assert code == 0 and json.loads(out)["write_allowed_ciphers"] == ["age-v1"]
    code, _, err = run(capsys, "retain", "--team", team_id, "--through", "5", "--db", str(db))
    assert code == 2 and "beyond current_seq" in err
    code, out, _ = run(
        capsys, "retain", "--team", team_id, "--through", "0", "--db", str(db), "--json"
    )
    assert code == 0 and json.loads(out)["new_floor"] == "0"
    code, out, _ = run(capsys, "status", "--db", str(db), "--json")
    status = json.loads(out)
    assert status["teams"][0]["team_id"] == team_id
    assert status["teams"][0]["write_allowed_ciphers"] == ["age-v1"]


def test_credential_list_and_revoke_by_id(
    db: str, team_id: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from relay.secrets import new_credential_secret, timestamp, utc_now

    store = location.open_store(db)
    _, out, _ = run(capsys, "token", "issue", "--team", team_id, "--db", str(db))
    credential_id = new_uuid7()
    store.exchange_pairing_token(
        hash_secret(out.strip()),
        credential_id,
        hash_secret(new_credential_secret()),
        timestamp(utc_now()),
    )
    store.close()
    code, out, _ = run(capsys, "credential", "list", "--team", team_id, "--db", str(db), "--json")
    assert json.loads(out)["credentials"][0]["revoked_at"] is None
    code, out, _ = run(
        capsys, "credential", "revoke", "--team", team_id, credential_id, "--db", str(db)
    )
    assert code == 0 and "revoked" in out
    code, out, _ = run(capsys, "credential", "list", "--db", str(db), "--json")
    assert json.loads(out)["credentials"][0]["revoked_at"] is not None


def test_missing_database_is_an_operator_error_with_remediation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "status", "--db", str(tmp_path / "absent.db"))
    assert code == 2 and "syncengine relay init" in err


def test_invalid_provisioning_document_changes_nothing(
    db: str, team_id: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "bad.json"
    doc.write_text(
        json.dumps({"team_id": team_id, "team_name": "ops", "members": [], "members_revision": "9"})
    )
    code, _, err = run(capsys, "team", "apply", str(doc), "--db", str(db))
    assert code == 2 and "members_revision" in err
    _, out, _ = run(capsys, "status", "--db", str(db), "--json")
    assert json.loads(out)["teams"][0]["members_revision"] == "0"


def test_init_refuses_a_file_that_is_not_a_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "notes.db"
    other.write_text("not sqlite, but somebody's data\n")
    code, _, err = run(capsys, "init", "--db", str(other))
    assert code == 2 and "already exists" in err
    assert other.read_text() == "not sqlite, but somebody's data\n"


def test_init_takes_over_an_empty_file_left_by_an_interrupted_init(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "relay.db"
    empty.touch(mode=0o644)
    code, _, _ = run(capsys, "init", "--db", str(empty))
    assert code == 0
    assert stat.S_IMODE(empty.stat().st_mode) == 0o600
    assert _instance_id(str(empty))[14] == "7"


def test_serve_without_the_relay_extra_names_the_extra_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """#18: without starlette/uvicorn, ``relay serve`` died with a traceback."""
    monkeypatch.setitem(sys.modules, "uvicorn", None)
    monkeypatch.delitem(sys.modules, "relay.server", raising=False)
    db = tmp_path / "relay.db"
    assert main(["relay", "init", "--db", str(db)]) == 0
    capsys.readouterr()
    assert main(["relay", "serve", "--db", str(db), "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "'relay' extra" in err and "remedy: " in err and "Traceback" not in err


def test_serve_help_documents_the_workers_and_connection_options_and_their_variables(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["relay", "serve", "--help"])
    assert exited.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    for needle in (
        "--workers N",
        "$SYNCENGINE_RELAY_WORKERS",
        "PostgreSQL only",
        "--max-connections-per-peer N",
        "$SYNCENGINE_RELAY_MAX_CONNECTIONS_PER_PEER",
        "--request-read-timeout SECONDS",
        "$SYNCENGINE_RELAY_REQUEST_READ_TIMEOUT",
    ):
        assert needle in text, needle


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("SYNCENGINE_RELAY_MAX_CONNECTIONS_PER_PEER", "many"),
        ("SYNCENGINE_RELAY_REQUEST_READ_TIMEOUT", "-1"),
        ("SYNCENGINE_RELAY_WORKERS", "0"),
    ],
)
def test_an_invalid_serve_variable_without_its_option_is_one_line_exit_2(
    variable: str,
    value: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = tmp_path / "relay.db"
    assert main(["relay", "init", "--db", str(db)]) == 0
    capsys.readouterr()
    monkeypatch.setenv(variable, value)
    assert main(["relay", "serve", "--db", str(db), "--port", "0"]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and variable in errors[0], err
    assert "remedy: " in err and "Traceback" not in err


@pytest.mark.parametrize(
    "option",
    [
        ("--workers", "0"),
        ("--workers", "65"),
        ("--max-connections-per-peer", "0"),
        ("--request-read-timeout", "0"),
        ("--request-read-timeout", "nan"),
    ],
)
def test_a_serve_option_out_of_its_range_is_a_usage_error(
    option: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["relay", "serve", "--db", str(tmp_path / "relay.db"), *option])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option[0]}" in err and "Traceback" not in err
