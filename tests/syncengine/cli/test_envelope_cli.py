"""`syncengine envelope`: JSON Lines in, JSON Lines out, documented exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.cli import json_lines, run_main

MESSAGE = {
    "body": "Run the test suite",
    "created_at": "2026-07-20T06:30:00.000000Z",
    "from_agent": "leader",
    "to_agent": "worker-1",
}
# The example envelope of server/spec/v1.md "Message representation".
SPEC_BLOB = (
    "eyJib2R5IjoiUnVuIHRoZSB0ZXN0IHN1aXRlIiwiY3JlYXRlZF9hdCI6IjIwMjYtMDctMjBUMDY6MzA6MDAuMDAw"
    "MDAwWiIsImZyb21fYWdlbnQiOiJsZWFkZXIiLCJ0b19hZ2VudCI6Indvcmtlci0xIn0="
)
SPEC_ENVELOPE = {"v": 1, "cipher": "none", "key_id": None, "blob": SPEC_BLOB}


def run(
    capsys: pytest.CaptureFixture[str], argv: list[str], stdin: str
) -> tuple[int, list[dict[str, object]], str]:
    """``syncengine ARGV`` in-process with ``stdin``: exit code, JSON lines, stderr."""
    code, out, err = run_main(capsys, argv, stdin=stdin)
    return code, json_lines(out), err


def lines(*objs: object) -> str:
    return "".join(json.dumps(obj) + "\n" for obj in objs)


def test_seal_produces_the_canonical_none_envelope(capsys: pytest.CaptureFixture[str]) -> None:
    code, records, _ = run(capsys, ["envelope", "seal"], lines(MESSAGE))
    assert code == 0
    assert records == [SPEC_ENVELOPE]


def test_seal_then_open_round_trips_every_line(capsys: pytest.CaptureFixture[str]) -> None:
    second = dict(MESSAGE, body="second ✅", to_agent="worker-2")
    _, sealed, _ = run(capsys, ["envelope", "seal"], lines(MESSAGE, second))
    code, opened, _ = run(capsys, ["envelope", "open"], lines(*sealed))
    assert code == 0
    assert opened == [MESSAGE, second]


def test_open_reports_blocked_state_with_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    bad = dict(SPEC_ENVELOPE, key_id="epoch-1")
    code, records, _ = run(capsys, ["envelope", "open"], lines(bad))
    assert code == 1
    assert records[0]["state"] == "malformed"
    assert "key_id" in str(records[0]["reason"])


def test_open_of_unknown_cipher_is_unsupported_cipher(capsys: pytest.CaptureFixture[str]) -> None:
    bad = dict(SPEC_ENVELOPE, cipher="rot13")
    code, records, _ = run(capsys, ["envelope", "open"], lines(bad))
    assert code == 1
    assert records == [{"state": "unsupported_cipher", "reason": "cipher 'rot13' unsupported"}]


def test_open_with_policy_excluding_none_is_policy_violation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, records, _ = run(capsys, ["envelope", "open", "--allow", "age-v1"], lines(SPEC_ENVELOPE))
    assert code == 1
    assert records[0]["state"] == "policy_violation"


def test_invalid_envelope_line_exits_2_naming_line_and_field(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, records, err = run(capsys, ["envelope", "open"], lines(SPEC_ENVELOPE, {"v": 1}))
    assert code == 2
    assert len(records) == 1
    assert "line 2" in err and "envelope.blob: required member is missing" in err


def test_carriage_return_line_ending_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, records, err = run(capsys, ["envelope", "digest"], json.dumps(SPEC_ENVELOPE) + "\r\n")
    assert code == 2
    assert records == []
    assert "carriage return" in err


def test_seal_refuses_invalid_message_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, ["envelope", "seal"], lines(dict(MESSAGE, from_agent="../etc")))
    assert code == 2
    assert "message.from_agent" in err


def test_seal_over_team_blob_limit_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    code, records, err = run(capsys, ["envelope", "seal", "--max-blob-bytes", "64"], lines(MESSAGE))
    assert code == 3
    assert records == []
    assert "blob limit is 64" in err


def test_digest_matches_envelope_digest(capsys: pytest.CaptureFixture[str]) -> None:
    from wire.envelope import Envelope

    code, records, _ = run(capsys, ["envelope", "digest"], lines(SPEC_ENVELOPE))
    assert code == 0
    assert records == [{"digest": Envelope.from_obj(SPEC_ENVELOPE).digest().hex()}]


def test_inspect_shows_only_what_the_relay_sees(capsys: pytest.CaptureFixture[str]) -> None:
    code, records, _ = run(capsys, ["envelope", "inspect"], lines(SPEC_ENVELOPE))
    assert code == 0
    (record,) = records
    assert set(record) == {
        "v", "cipher", "key_id", "blob_bytes", "blob_chars", "envelope_bytes", "digest"
    }  # fmt: skip
    assert record["blob_bytes"] == 116
    assert record["blob_chars"] == len(SPEC_BLOB)
    assert "Run the test suite" not in json.dumps(record)


def test_console_script_runs_as_a_process() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "syncengine", "envelope", "seal"],
        input=lines(MESSAGE),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == SPEC_ENVELOPE
