"""`syncengine envelope seal|open` with the age-v1 options (#3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import json_lines, run_main
from wire.age_keys import X25519Identity

TEAM = "018f3f7e-0000-7000-8000-000000000001"
WIRE = "550e8400-e29b-41d4-a716-446655440000"
MESSAGE = {
    "body": "Run the test suite",
    "created_at": "2026-07-20T06:30:00.000000Z",
    "from_agent": "leader",
    "to_agent": "worker-1",
}
ALICE = X25519Identity.generate()
BOB = X25519Identity.generate()
BINDING = ["--team-id", TEAM, "--wire-id", WIRE]


def run(
    capsys: pytest.CaptureFixture[str], argv: list[str], stdin: str
) -> tuple[int, list[dict[str, object]], str]:
    """``syncengine ARGV`` in-process with ``stdin``: exit code, JSON lines, stderr."""
    code, out, err = run_main(capsys, argv, stdin=stdin)
    return code, json_lines(out), err


def identity_file(tmp_path: Path, identity: X25519Identity, name: str = "id.txt") -> Path:
    path = tmp_path / name
    path.write_text(f"# test\n{identity.to_secret_string()}\n")
    path.chmod(0o600)
    return path


def seal_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> dict[str, object]:
    recipients = tmp_path / "recipients.txt"
    recipients.write_text(f"# epoch-1\n{ALICE.recipient.to_string()}\n")
    argv = ["envelope", "seal", "--cipher", "age-v1", "--key-id", "epoch-1"]
    argv += ["--recipients-file", str(recipients), "--recipient", BOB.recipient.to_string()]
    code, records, err = run(capsys, argv + BINDING, json.dumps(MESSAGE) + "\n")
    assert (code, err) == (0, "")
    return records[0]


def test_age_seal_then_open_round_trips(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    envelope = seal_line(capsys, tmp_path)
    assert (envelope["cipher"], envelope["key_id"]) == ("age-v1", "epoch-1")
    argv = ["envelope", "open", "--trusted-key-id", "epoch-1", *BINDING]
    argv += ["--identity", str(identity_file(tmp_path, BOB))]
    code, records, _ = run(capsys, argv, json.dumps(envelope) + "\n")
    assert (code, records) == (0, [MESSAGE])


def test_age_open_without_identity_reports_pending_key(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    envelope = seal_line(capsys, tmp_path)
    argv = ["envelope", "open", "--trusted-key-id", "epoch-1", *BINDING]
    code, records, _ = run(capsys, argv, json.dumps(envelope) + "\n")
    assert code == 1
    assert records[0]["state"] == "pending_key"


def test_age_open_under_another_epoch_is_policy_violation(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    envelope = seal_line(capsys, tmp_path)
    argv = ["envelope", "open", "--trusted-key-id", "epoch-2", *BINDING]
    argv += ["--identity", str(identity_file(tmp_path, ALICE))]
    code, records, _ = run(capsys, argv, json.dumps(envelope) + "\n")
    assert code == 1
    assert records[0]["state"] == "policy_violation"


def test_age_open_refuses_an_identity_outside_the_manifest_without_leaking_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    outsider = X25519Identity.generate()
    argv = ["envelope", "open", "--trusted-key-id", "epoch-1", *BINDING]
    argv += ["--identity", str(identity_file(tmp_path, outsider))]
    argv += ["--recipient", ALICE.recipient.to_string()]
    code, records, err = run(capsys, argv, "")
    assert records == []
    assert code == 2
    assert "not in the manifest" in err
    assert outsider.to_secret_string()[16:] not in err.upper()


def test_age_seal_requires_key_id_team_and_wire(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["envelope", "seal", "--cipher", "age-v1", "--recipient", ALICE.recipient.to_string()]
    code, _, err = run(capsys, argv, json.dumps(MESSAGE) + "\n")
    assert code == 2
    assert "--key-id" in err


def test_age_seal_names_a_bad_recipient_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    recipients = tmp_path / "r.txt"
    recipients.write_text("age1notarecipient\n")
    argv = ["envelope", "seal", "--cipher", "age-v1", "--key-id", "epoch-1", *BINDING]
    argv += ["--recipients-file", str(recipients)]
    code, _, err = run(capsys, argv, json.dumps(MESSAGE) + "\n")
    assert code == 2
    assert "recipients_file:1" in err


def test_age_seal_over_the_blob_limit_cannot_seal(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["envelope", "seal", "--cipher", "age-v1", "--key-id", "epoch-1", *BINDING]
    argv += ["--recipient", ALICE.recipient.to_string(), "--max-blob-bytes", "200"]
    code, _, err = run(capsys, argv, json.dumps(MESSAGE) + "\n")
    assert code == 3
    assert "blob limit is 200" in err
