"""A POST's bulk append (issue #35) keeps the write path's atomicity, on both backends.

PostgreSQL appends a batch's ``messages`` and ``wire_ids`` rows with one
binary ``COPY`` each, SQLite with one prepared ``INSERT``
(relay/storage/dialect.py ``insert_rows``). The contract suite already
proves acks, duplicates and the gap-free sequence through that path; these
tests force what no honest request reaches — an append that fails part-way —
and show the whole batch is rolled back: no message, no wire-ID tombstone,
no head movement (v1.md "Team sequence allocation": a POST is one
transaction).
"""

from __future__ import annotations

from typing import Any

from tests.relay.app_relay import Device, Relay
from tests.relay.helpers import batch

#: The sequence a stray row occupies ahead of the head, so the next batch's
#: third message collides with it mid-append.
_STRAY_SEQ = 5


def _post(relay: Relay, device: Device, messages: list[dict[str, Any]]) -> Any:
    return relay.client.post("/v1/messages", json={"messages": messages}, headers=device.headers)


def _occupy(relay: Relay, team_id: str, seq: int) -> None:
    """A ``messages`` row at ``seq`` written behind the relay's back."""
    relay.backend.execute(
        "INSERT INTO messages(team_pk, team_seq, wire_id, server_received_at, v, cipher, "
        "key_id, blob) SELECT team_pk, ?, 'stray', '2026-01-01T00:00:00Z', 1, 'none', NULL, "
        "'AA==' FROM teams WHERE team_id = ?",
        (seq, team_id),
    )


def _clear(relay: Relay, seq: int) -> None:
    relay.backend.execute("DELETE FROM messages WHERE team_seq = ?", (seq,))


def test_a_post_whose_bulk_append_fails_midway_is_refused_without_moving_the_head(
    relay: Relay, device: Device
) -> None:
    assert _post(relay, device, batch(2)).status_code == 200
    _occupy(relay, device.team.team_id, _STRAY_SEQ)

    failed = _post(relay, device, batch(5))  # seqs 3..7: the third row collides

    assert failed.status_code == 500
    assert failed.json()["error"]["code"] == "internal-error"
    head = relay.client.get("/v1/capabilities", headers=device.headers).json()
    assert int(head["current_seq"]) == 2


def test_a_batch_whose_bulk_append_failed_leaves_no_tombstone_behind(
    relay: Relay, device: Device
) -> None:
    assert _post(relay, device, batch(2)).status_code == 200
    _occupy(relay, device.team.team_id, _STRAY_SEQ)
    messages = batch(5)
    assert _post(relay, device, messages).status_code == 500
    _clear(relay, _STRAY_SEQ)

    retried = _post(relay, device, messages)

    # Every message is new to the relay (no wire ID of the failed attempt
    # survived), numbered from the unchanged head with no gap.
    assert retried.status_code == 200
    acks = retried.json()["acks"]
    assert [a["disposition"] for a in acks] == ["stored"] * 5
    assert [int(a["server_seq"]) for a in acks] == [3, 4, 5, 6, 7]
