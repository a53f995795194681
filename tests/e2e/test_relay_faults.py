"""Relay faults end to end: a real relay behind a loopback fault proxy
(tests/e2e/proxy.py), the engine run as the ``syncengine sync`` process a
user runs.

* A batch committed by the relay whose answer never arrives is re-sent
  byte for byte; the relay answers ``duplicate`` and nothing is stored twice.
* 429 and 503 with ``Retry-After`` are honoured: the next attempt comes no
  sooner than the relay asked, and the cycle then succeeds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import LeanTeam, exactly_once, relay_counts, relay_port, run_cli
from tests.e2e.proxy import Fault, error_body, fault_proxy
from tests.relay.live import LiveRelay

POST = "POST /v1/messages"
CAPABILITIES = "GET /v1/capabilities"


def test_batch_committed_but_unanswered_is_resent_and_acked_duplicate_without_copies(
    live: LiveRelay, tmp_path: Path
) -> None:
    lost = Fault(POST, "drop_response")
    with fault_proxy(relay_port(live), lost) as proxy:
        team = LeanTeam(live, tmp_path, endpoint=proxy.url)
        a, b = team.machine("a"), team.machine("b")
        a.send("alice", "bob", "m1", "m2", "m3")
        result = run_cli(a, "sync", "--json")
        assert result.returncode == 0, result.stderr
        push = json.loads(result.stdout)["push"]
        # The first POST was committed (3 stored) but its answer was lost; the
        # identical retry learnt the outcome as duplicates.
        assert push["candidates"] == 3
        assert (push["stored"], push["duplicate"]) == (0, 3)
        posts = proxy.requests(POST)
        assert [p.fault for p in posts] == ["drop_response", None]
        assert lost.fired_at is not None
        assert relay_counts(live, team.id) == (3, 3)  # no copy on the relay
        b.sync()
        expected = [("alice", "bob", body) for body in ("m1", "m2", "m3")]
        assert exactly_once(a) == exactly_once(b) == expected
        assert a.sync().push.candidates == 0  # acked durably: nothing to re-send


@pytest.mark.parametrize(("status", "code"), [(429, "rate-limited"), (503, "unavailable")])
def test_retry_after_is_waited_out_before_the_next_attempt_then_the_cycle_succeeds(
    live: LiveRelay, tmp_path: Path, status: int, code: str
) -> None:
    with fault_proxy(relay_port(live)) as proxy:
        team = LeanTeam(live, tmp_path, endpoint=proxy.url)
        a = team.machine("a")
        a.send("alice", "bob", "after the wait")
        body = error_body(status, code, server_instance_id=live.server_instance_id, team_id=team.id)
        # The cycle's first request (the push preflight) is refused for 1 s.
        refusal = Fault(CAPABILITIES, "answer", status=status, retry_after="1", body=body)
        proxy.faults.append(refusal)
        result = run_cli(a, "sync", "--json")
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        assert report["push"]["stored"] == 1
        first, second = proxy.requests(CAPABILITIES)[:2]
        assert first.fault == "answer" and second.fault is None
        assert second.at - first.at >= 1.0  # lower bound only: the relay asked for 1 s
        assert relay_counts(live, team.id) == (1, 1)
        with a.engine() as engine:
            assert engine.status().engine.state == "ok"
