"""POST batches, acks and GET pages (v1.md "POST /v1/messages", "GET /v1/messages",
"Team sequence allocation and visibility")."""

from __future__ import annotations

import pytest

from tests.wire.http_v1 import samples
from tests.wire.http_v1.helpers import field_of
from wire.envelope import Envelope
from wire.errors import EnvelopeError, SchemaError
from wire.http_v1 import (
    Disposition,
    MessageBatch,
    MessagePage,
    MessagesQuery,
    OutgoingMessage,
    PushResponse,
)
from wire.limits import MAX_SEQ

# --- batch ---------------------------------------------------------------------


def test_spec_shaped_batch_is_accepted_and_round_trips() -> None:
    doc = samples.batch()
    batch = MessageBatch.from_obj(doc)
    assert [message.id for message in batch.messages] == [samples.WIRE_1, samples.WIRE_2]
    assert batch.to_obj() == doc


def test_empty_batch_is_rejected() -> None:
    assert field_of(MessageBatch.from_obj, {"messages": []}) == "request.messages"


def test_batch_over_1000_messages_is_rejected() -> None:
    doc = {"messages": [samples.batch()["messages"][0]] * 1001}
    assert field_of(MessageBatch.from_obj, doc) == "request.messages"


def test_batch_of_exactly_1000_messages_is_accepted() -> None:
    doc = {"messages": [samples.batch()["messages"][0]] * 1000}
    assert len(MessageBatch.from_obj(doc).messages) == 1000


def test_unknown_request_member_is_rejected() -> None:
    doc = samples.batch()
    doc["dry_run"] = True
    assert field_of(MessageBatch.from_obj, doc) == "request.dry_run"


def test_unknown_member_of_a_batch_element_is_rejected() -> None:
    doc = samples.batch()
    doc["messages"][0]["server_seq"] = "1"
    assert field_of(MessageBatch.from_obj, doc) == "request.messages[0].server_seq"


def test_uuid7_wire_id_is_rejected() -> None:
    doc = samples.batch()
    doc["messages"][0]["id"] = samples.TEAM
    assert field_of(MessageBatch.from_obj, doc) == "request.messages[0].id"


def test_non_canonical_blob_is_rejected_as_envelope_error() -> None:
    doc = samples.batch()
    doc["messages"][1]["envelope"]["blob"] = "aGk"
    with pytest.raises(EnvelopeError) as caught:
        MessageBatch.from_obj(doc)
    assert caught.value.field == "request.messages[1].envelope.blob"


def test_blob_over_the_team_limit_is_rejected() -> None:
    doc = samples.batch()
    with pytest.raises(EnvelopeError):
        MessageBatch.from_obj(doc, max_blob_bytes=8)


def test_identical_repeated_id_is_not_a_conflict() -> None:
    batch = MessageBatch.from_obj(samples.batch(samples.WIRE_1, samples.WIRE_1))
    assert batch.conflicting_duplicate() is None


def test_repeated_id_with_different_envelope_is_a_conflict() -> None:
    doc = samples.batch(samples.WIRE_1, samples.WIRE_2)
    doc["messages"][1]["id"] = samples.WIRE_1
    assert MessageBatch.from_obj(doc).conflicting_duplicate() == samples.WIRE_1


def test_builder_refuses_a_non_envelope() -> None:
    batch = MessageBatch((OutgoingMessage(samples.WIRE_1, "blob"),))  # type: ignore[arg-type]
    assert field_of(batch.to_obj) == "request.messages[0].envelope"


# --- acks ----------------------------------------------------------------------


def test_spec_shaped_acks_are_accepted_and_match_the_batch() -> None:
    response = PushResponse.from_obj(samples.push_response())
    response.check_matches(MessageBatch.from_obj(samples.batch()))
    assert [ack.disposition for ack in response.acks] == [Disposition.STORED] * 2
    assert response.to_obj() == samples.push_response()


def test_ack_count_must_equal_batch_length() -> None:
    response = PushResponse.from_obj(samples.push_response(samples.ack(samples.WIRE_1, "41")))
    batch = MessageBatch.from_obj(samples.batch())
    assert field_of(response.check_matches, batch) == "response.acks"


def test_ack_order_must_equal_batch_order() -> None:
    response = PushResponse.from_obj(samples.push_response())
    batch = MessageBatch.from_obj(samples.batch(samples.WIRE_2, samples.WIRE_1))
    assert field_of(response.check_matches, batch) == "response.acks[0].id"


def test_unknown_disposition_is_rejected() -> None:
    doc = samples.push_response(samples.ack(samples.WIRE_1, "41", "accepted"))
    assert field_of(PushResponse.from_obj, doc) == "response.acks[0].disposition"


def test_ack_sequence_zero_is_rejected() -> None:
    doc = samples.push_response(samples.ack(samples.WIRE_1, "0"))
    assert field_of(PushResponse.from_obj, doc) == "response.acks[0].server_seq"


def test_repeated_id_shares_one_sequence() -> None:
    doc = samples.push_response(
        samples.ack(samples.WIRE_1, "41"), samples.ack(samples.WIRE_1, "41", "duplicate")
    )
    assert PushResponse.from_obj(doc).acks[1].server_seq == 41


def test_repeated_id_with_two_sequences_is_rejected() -> None:
    doc = samples.push_response(
        samples.ack(samples.WIRE_1, "41"), samples.ack(samples.WIRE_1, "42", "duplicate")
    )
    assert field_of(PushResponse.from_obj, doc) == "response.acks[1].server_seq"


def test_only_first_occurrence_can_be_stored() -> None:
    doc = samples.push_response(
        samples.ack(samples.WIRE_1, "41"), samples.ack(samples.WIRE_1, "41")
    )
    assert field_of(PushResponse.from_obj, doc) == "response.acks[1].disposition"


def test_distinct_ids_cannot_share_a_sequence() -> None:
    doc = samples.push_response(
        samples.ack(samples.WIRE_1, "41", "duplicate"),
        samples.ack(samples.WIRE_2, "41", "duplicate"),
    )
    assert field_of(PushResponse.from_obj, doc) == "response.acks[1].server_seq"


def test_stored_sequences_must_be_consecutive() -> None:
    doc = samples.push_response(
        samples.ack(samples.WIRE_1, "41"), samples.ack(samples.WIRE_2, "43")
    )
    assert field_of(PushResponse.from_obj, doc) == "response.acks[1].server_seq"


def test_stored_sequences_must_ascend_in_input_order() -> None:
    doc = samples.push_response(
        samples.ack(samples.WIRE_1, "42"), samples.ack(samples.WIRE_2, "41")
    )
    assert field_of(PushResponse.from_obj, doc) == "response.acks[1].server_seq"


def test_replayed_old_ids_may_come_in_any_order() -> None:
    doc = samples.push_response(
        samples.ack(samples.WIRE_1, "9", "duplicate"),
        samples.ack(samples.WIRE_2, "3", "duplicate"),
        samples.ack(samples.WIRE_3, "10"),
    )
    assert PushResponse.from_obj(doc).acks[2].server_seq == 10


def test_pre_existing_id_cannot_follow_a_newly_stored_sequence() -> None:
    doc = samples.push_response(
        samples.ack(samples.WIRE_1, "10"), samples.ack(samples.WIRE_2, "12", "duplicate")
    )
    assert field_of(PushResponse.from_obj, doc) == "response.acks[1].server_seq"


def test_acks_below_the_floor_are_allowed_for_tombstoned_replays() -> None:
    doc = samples.push_response(samples.ack(samples.WIRE_1, "3", "duplicate"))
    doc["min_available_seq"] = "50"
    assert PushResponse.from_obj(doc).acks[0].server_seq == 3


def test_push_response_needs_policy_revision() -> None:
    doc = samples.push_response()
    del doc["policy_revision"]
    assert field_of(PushResponse.from_obj, doc) == "response.policy_revision"


# --- query ---------------------------------------------------------------------


def test_query_round_trips_and_defaults_the_limit() -> None:
    query = MessagesQuery.from_params([("after", "40")])
    assert query.effective_limit == 100
    assert MessagesQuery.from_params(MessagesQuery(40, 1000).to_params()) == MessagesQuery(40, 1000)


def test_query_requires_after() -> None:
    assert field_of(MessagesQuery.from_params, [("limit", "5")]) == "query.after"


@pytest.mark.parametrize("limit", ["0", "1001", "010", "-1", "5.0", ""])
def test_query_limit_outside_1_to_1000_or_non_canonical_is_rejected(limit: str) -> None:
    assert field_of(MessagesQuery.from_params, [("after", "0"), ("limit", limit)]) == "query.limit"


def test_query_repeated_parameter_is_rejected() -> None:
    assert field_of(MessagesQuery.from_params, [("after", "0"), ("after", "1")]) == "query.after"


def test_query_unknown_parameter_is_rejected() -> None:
    assert field_of(MessagesQuery.from_params, [("after", "0"), ("team", "x")]) == "query.team"


def test_query_after_beyond_signed_64_bit_is_rejected() -> None:
    assert field_of(MessagesQuery.from_params, [("after", str(MAX_SEQ + 1))]) == "query.after"


# --- page ----------------------------------------------------------------------


def test_spec_shaped_page_is_accepted_and_matches_its_query() -> None:
    page = MessagePage.from_obj(samples.page())
    page.check_matches(MessagesQuery(40, 100))
    assert page.next_after == 42
    assert isinstance(page.messages[0].envelope, Envelope)
    assert page.to_obj() == samples.page()


def test_page_sequences_must_ascend() -> None:
    doc = samples.page(samples.pulled("42", samples.WIRE_1), samples.pulled("41", samples.WIRE_2))
    assert field_of(MessagePage.from_obj, doc) == "page.messages[1].server_seq"


def test_page_sequences_must_have_no_holes() -> None:
    doc = samples.page(samples.pulled("41", samples.WIRE_1), samples.pulled("43", samples.WIRE_2))
    assert field_of(MessagePage.from_obj, doc) == "page.messages[1].server_seq"


def test_page_repeated_id_is_rejected() -> None:
    doc = samples.page(samples.pulled("41", samples.WIRE_1), samples.pulled("42", samples.WIRE_1))
    assert field_of(MessagePage.from_obj, doc) == "page.messages[1].id"


def test_page_message_at_or_below_floor_is_rejected() -> None:
    doc = samples.page()
    doc["min_available_seq"] = "41"
    assert field_of(MessagePage.from_obj, doc) == "page.messages[0].server_seq"


def test_next_after_must_be_the_last_sequence() -> None:
    doc = samples.page(next_after="41")
    assert field_of(MessagePage.from_obj, doc) == "page.next_after"


def test_empty_page_cannot_have_more() -> None:
    doc = samples.page(has_more=True)
    doc["messages"] = []
    doc["next_after"] = "40"
    assert field_of(MessagePage.from_obj, doc) == "page.has_more"


def test_empty_page_must_echo_after() -> None:
    doc = samples.page()
    doc["messages"] = []
    doc["next_after"] = "39"
    page = MessagePage.from_obj(doc)
    assert field_of(page.check_matches, MessagesQuery(40)) == "page.next_after"
    page.check_matches(MessagesQuery(39))


def test_page_must_start_right_after_the_cursor() -> None:
    page = MessagePage.from_obj(samples.page())
    assert field_of(page.check_matches, MessagesQuery(39)) == "page.messages[0].server_seq"


def test_page_longer_than_the_limit_is_rejected() -> None:
    page = MessagePage.from_obj(samples.page())
    assert field_of(page.check_matches, MessagesQuery(40, 1)) == "page.messages"


def test_has_more_only_on_a_full_page() -> None:
    page = MessagePage.from_obj(samples.page(has_more=True))
    assert field_of(page.check_matches, MessagesQuery(40, 3)) == "page.has_more"
    page.check_matches(MessagesQuery(40, 2))


def test_page_for_a_cursor_below_the_floor_is_rejected() -> None:
    doc = samples.page()
    doc["min_available_seq"] = "40"
    page = MessagePage.from_obj(doc)
    assert field_of(page.check_matches, MessagesQuery(39)) == "page.min_available_seq"


def test_pulled_message_needs_a_canonical_receipt_time() -> None:
    doc = samples.page()
    doc["messages"][0]["server_received_at"] = "2026-03-04T05:06:07Z"
    assert field_of(MessagePage.from_obj, doc) == "page.messages[0].server_received_at"


def test_pulled_envelope_with_extra_member_is_rejected() -> None:
    doc = samples.page()
    doc["messages"][0]["envelope"]["sender"] = "planner"
    with pytest.raises(SchemaError) as caught:
        MessagePage.from_obj(doc)
    assert caught.value.field == "page.messages[0].envelope.sender"


def test_has_more_must_be_boolean() -> None:
    doc = samples.page()
    doc["has_more"] = 0
    with pytest.raises(SchemaError) as caught:
        MessagePage.from_obj(doc)
    assert caught.value.field == "page.has_more"
