from tests.relay.app_relay import Device, Relay
from tests.relay.helpers import batch


def test_stored_batch_reads_back_in_sequence_order(relay: Relay, device: Device) -> None:
    messages = batch(3)
    posted = relay.client.post("/v1/messages", json={"messages": messages}, headers=device.headers)
    assert posted.status_code == 200, posted.text
    assert [a["server_seq"] for a in posted.json()["acks"]] == ["1", "2", "3"]
    page = relay.client.get("/v1/messages?after=0&limit=2", headers=device.headers)
    assert page.status_code == 200, page.text
    body = page.json()
    assert [m["id"] for m in body["messages"]] == [m["id"] for m in messages[:2]]
    assert body["has_more"] is True and body["next_after"] == "2"
