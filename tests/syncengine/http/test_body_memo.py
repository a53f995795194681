"""The roster and read-state answers a client remembers (syncengine/http/client.py,
``_Call.memo``; specs/read-state.md §8): a body byte-identical to the last one
of its endpoint is the same proven document, and the checks against the
request still run on every answer."""

from __future__ import annotations

from typing import Any

import pytest
import respx

from syncengine.http import ProtocolViolation
from tests.syncengine.http.helpers import FakeTime, make_client, reply
from tests.wire.http_v1 import samples
from wire.http_v1.read_state import ReadStateRequest


def _request(page_after: dict[str, str] | None = None) -> ReadStateRequest:
    return ReadStateRequest.from_obj({**samples.read_request(), "page_after": page_after})


def test_the_same_roster_body_again_is_the_same_document(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.get("/v1/members").mock(return_value=reply(samples.members()))
    with make_client(fake_time) as client:
        first = client.members()
        assert client.members() is first


def test_a_changed_roster_body_is_parsed_afresh(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    renamed = samples.members()
    renamed["members"][1] = {**renamed["members"][1], "name": "tester"}
    router.get("/v1/members").mock(side_effect=[reply(samples.members()), reply(renamed)])
    with make_client(fake_time) as client:
        client.members()
        assert [m.name for m in client.members().members] == ["planner", "tester"]


def test_a_malformed_roster_body_is_refused_every_time_it_comes(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    broken: dict[str, Any] = samples.members()
    broken["members"] = list(reversed(broken["members"]))  # no longer ascending
    router.get("/v1/members").mock(return_value=reply(broken))
    with make_client(fake_time) as client:
        for _ in range(2):
            with pytest.raises(ProtocolViolation):
                client.members()


def test_the_same_read_state_body_again_is_the_same_page(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.post("/v1/read-state/sync").mock(return_value=reply(samples.read_page()))
    with make_client(fake_time) as client:
        first = client.read_state_sync(_request())
        assert client.read_state_sync(_request()) is first


def test_a_remembered_read_state_body_is_still_checked_against_its_request(
    router: respx.MockRouter, fake_time: FakeTime
) -> None:
    router.post("/v1/read-state/sync").mock(return_value=reply(samples.read_page()))
    later = {"member_id": samples.MEMBER_B, "kind": "frontier"}
    with make_client(fake_time) as client:
        client.read_state_sync(_request())
        with pytest.raises(ProtocolViolation):
            client.read_state_sync(_request(page_after=later))  # items do not sort after it
