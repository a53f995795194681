"""The README's first command runs the demo: two machines, one live relay on
127.0.0.1, every step a real ``syncengine`` process. It must keep working,
prove what it claims, and show no secret."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from relay.secrets import CREDENTIAL_PREFIX, PAIRING_TOKEN_PREFIX
from syncengine import demo


def test_demo_syncs_two_machines_through_a_live_relay_and_checks_both_inboxes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert demo.main(["--keep"]) == 0
    out = capsys.readouterr().out
    verdict, _, kept = out.rstrip().splitlines()[-3:]
    assert verdict == "ok: each inbox holds exactly the expected messages, once"
    for step in range(1, 10):
        assert f"\n=== {step}. " in out
    # Each inbox line was read back from the other machine's store.
    for _, sender, recipient, body in demo.MESSAGES:
        assert out.count(f"  {sender} -> {recipient}: {body}") == 1
    assert out.count("pulled 3 message(s): 2 imported, 1 reconciled") == 1  # B's first sync
    assert "pulled 1 message(s): 1 imported" in out  # A's second
    assert "--token @machine-a/pairing-token" in out and "relay stopped\n" in out
    assert "seq 3, floor 0, live 3" in out  # the relay holds each message once

    # No secret reached the output: tokens, bearer credentials, identities.
    assert PAIRING_TOKEN_PREFIX not in out and CREDENTIAL_PREFIX not in out
    assert "AGE-SECRET-KEY" not in out
    (root,) = tmp_path.glob("syncengine-demo-*")
    assert f"working directory: {root}" in out and kept == f"kept the working directory: {root}"
    for name in ("a", "b"):
        machine = root / f"machine-{name}"
        assert not (machine / "pairing-token").exists()  # spent tokens are removed
        secret = re.search(
            r"agmsg_credential_[A-Za-z0-9_-]+", (machine / "credentials" / "crew.json").read_text()
        )
        assert secret is not None and secret.group(0) not in out
        assert (machine / "identity.key").stat().st_mode & 0o077 == 0


def test_inbox_problems_name_missing_unexpected_and_duplicated_messages() -> None:
    expected = [("alice", "bob", "one"), ("alice", "bob", "two")]

    def record(body: str) -> dict[str, object]:
        return {"from": "alice", "to": "bob", "body": body}

    assert demo.inbox_problems(expected, [record("two"), record("one")]) == []
    assert demo.inbox_problems(expected, [record("one")]) == ["missing: alice -> bob: two"]
    assert demo.inbox_problems(expected, [record("one"), record("two"), record("three")]) == [
        "unexpected: alice -> bob: three"
    ]
    assert demo.inbox_problems(expected, [record("one"), record("two"), record("two")]) == [
        "2 copies of: alice -> bob: two"
    ]


def test_working_directory_is_removed_unless_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with demo.working_directory(keep=False) as gone:
        (gone / "relay.db").write_text("x")
    assert not gone.exists()
    with demo.working_directory(keep=True) as kept:
        (kept / "relay.db").write_text("x")
    assert (kept / "relay.db").exists()
