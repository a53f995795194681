"""A writer whose epoch manifest drifted, end to end (issue #34; specs/age-v1.md
"The reader's manifest check"): two machines of one epoch, one connected
with a stale recipients file that also names an outsider. What it seals
reaches the relay, and the reader holds it ``manifest_mismatch`` — blocking,
never imported, its remedy named — through the real CLI and a live relay.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.live_relay import LiveRelay
from tests.support.machines import LeanTeam, age_epoch, run_cli
from wire.age_keys import X25519Identity


def test_a_reader_quarantines_a_drifted_writers_message_as_a_blocking_manifest_mismatch(
    live: LiveRelay, tmp_path: Path
) -> None:
    team = LeanTeam(live, tmp_path)
    recipients, keys = age_epoch(tmp_path, "a", "b")
    stale = tmp_path / "stale.recipients"
    outsider = X25519Identity.generate().recipient.to_string()
    stale.write_text(recipients.read_text() + outsider + "\n")
    epoch = {"key_id": "epoch-1", "mode": "e2ee-required"}
    writer = team.machine("a", recipients_file=str(stale), identity_file=str(keys["a"]), **epoch)
    reader = team.machine(
        "b", recipients_file=str(recipients), identity_file=str(keys["b"]), **epoch
    )

    writer.send("alice", "bob", "sealed to three")
    writer.sync()
    reader.sync()
    assert "sealed to three" not in reader.bodies()

    status = run_cli(reader, "status", "--team", "crew", "--json")
    assert status.returncode == 0, status.stderr
    obj = json.loads(status.stdout)
    assert obj["state"] == "blocked"
    (blocked,) = obj["messages_blocked"]
    assert (blocked["status"], blocked["count"]) == ("manifest_mismatch", 1)
    assert "keys epoch import" in blocked["remediation"]

    listing = run_cli(reader, "quarantine", "list", "--team", "crew", "--json")
    (row,) = json.loads(listing.stdout)["blocked"]
    assert row["status"] == "manifest_mismatch"
    assert "3 X25519 recipient stanza(s)" in row["reason"] and "2 recipient(s)" in row["reason"]

    doctor = run_cli(reader, "doctor", "--team", "crew")
    assert doctor.returncode == 1
    assert "manifest_mismatch" in doctor.stdout

    # Reprocess judges it again and keeps it: the envelope cannot change.
    assert run_cli(reader, "reprocess", "--team", "crew").returncode == 0
    assert "sealed to three" not in reader.bodies()
