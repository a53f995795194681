"""The stage-2 read-state JSONL records (UPSTREAM-RECORDS §2.7;
specs/read-state.md §4).

Strict like every sync record: the exact member set, canonical decimal
sequences, UUIDv7 member IDs, UUIDv4 wire IDs, and the HTTP v1 bounds of
1,000 members and 1,000 local agents per context. A refusal names the field.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncengine.ids import new_uuid4, new_uuid7
from syncengine.ops import read_records as rr
from syncengine.store import InvalidInput

MEMBER = new_uuid7()
OTHER = new_uuid7()
WIRE = new_uuid4()
CONTEXT: dict[str, Any] = {
    "type": "sync_read_context",
    "min_available_seq": "3",
    "current_seq": "42",
    "members": [{"member_id": MEMBER, "name": "alice"}, {"member_id": OTHER, "name": "bob"}],
    "local_agents": ["alice", "bob"],
}
FRONTIER: dict[str, Any] = {"type": "sync_read_frontier", "member_id": MEMBER, "server_seq": "7"}
EXACT: dict[str, Any] = {"type": "sync_read_exact", "member_id": MEMBER, "wire_id": WIRE}
SNAPSHOT: dict[str, Any] = {
    "type": "sync_read_snapshot",
    "min_available_seq": "3",
    "current_seq": "42",
}
BLOCK: dict[str, Any] = {
    "type": "sync_read_block",
    "member_id": MEMBER,
    "reason": "read-state-limit-exceeded",
}
NONCANONICAL = ["07", "+7", "-1", "7.0", "1e2", " 7", "", "\u0667", 7, None, str(2**63)]


def _refused(parse: Any, value: dict[str, Any], field: str) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        parse(value)
    assert caught.value.field.endswith(field), caught.value.field
    return caught.value


# -- sync_read_context ----------------------------------------------------------------


def test_a_context_round_trips_through_its_exact_key_set() -> None:
    context = rr.SyncReadContext.from_obj(dict(CONTEXT))
    assert context == rr.SyncReadContext(
        3, 42, ((MEMBER, "alice"), (OTHER, "bob")), ("alice", "bob")
    )
    assert context.to_obj() == CONTEXT


@pytest.mark.parametrize("missing", ["min_available_seq", "current_seq", "members", "local_agents"])
def test_a_context_missing_a_key_is_refused_naming_it(missing: str) -> None:
    value = {k: v for k, v in CONTEXT.items() if k != missing}
    _refused(rr.SyncReadContext.from_obj, value, missing)


def test_a_context_with_an_unknown_key_is_refused_naming_it() -> None:
    error = _refused(rr.SyncReadContext.from_obj, {**CONTEXT, "page_after": None}, "page_after")
    assert "unknown" in str(error)


def test_a_member_entry_with_an_unknown_key_is_refused_naming_it() -> None:
    members = [{"member_id": MEMBER, "name": "alice", "active": True}]
    _refused(rr.SyncReadContext.from_obj, {**CONTEXT, "members": members}, "members[0].active")


def test_a_context_of_another_type_is_refused_naming_the_type() -> None:
    _refused(rr.SyncReadContext.from_obj, {**CONTEXT, "type": "sync_read_snapshot"}, "type")


@pytest.mark.parametrize("bad", NONCANONICAL, ids=repr)
@pytest.mark.parametrize("field", ["min_available_seq", "current_seq"])
def test_a_context_sequence_must_be_a_canonical_decimal_string(field: str, bad: Any) -> None:
    _refused(rr.SyncReadContext.from_obj, {**CONTEXT, field: bad}, field)


def test_a_context_floor_beyond_its_current_seq_is_refused() -> None:
    value = {**CONTEXT, "min_available_seq": "43"}
    error = _refused(rr.SyncReadContext.from_obj, value, "min_available_seq")
    assert "current_seq" in str(error)


def test_a_context_floor_equal_to_its_current_seq_is_accepted() -> None:
    value = {**CONTEXT, "min_available_seq": "42"}
    assert rr.SyncReadContext.from_obj(value).min_available_seq == 42


@pytest.mark.parametrize(
    "member_id",
    [WIRE, MEMBER.upper(), MEMBER + "\r", MEMBER[:-1], 7],
    ids=["uuid4", "uppercase", "carriage-return", "short", "number"],
)
def test_a_member_id_must_be_a_canonical_uuid7(member_id: Any) -> None:
    members = [{"member_id": member_id, "name": "alice"}]
    _refused(rr.SyncReadContext.from_obj, {**CONTEXT, "members": members}, "members[0].member_id")


@pytest.mark.parametrize("name", ["", "a/b", "..", "-x", "a\nb", 5], ids=repr)
def test_a_member_name_must_be_a_valid_agent_name(name: Any) -> None:
    members = [{"member_id": MEMBER, "name": name}]
    _refused(rr.SyncReadContext.from_obj, {**CONTEXT, "members": members}, "members[0].name")


def test_a_member_listed_twice_is_refused() -> None:
    members = [{"member_id": MEMBER, "name": "alice"}, {"member_id": MEMBER, "name": "bob"}]
    error = _refused(
        rr.SyncReadContext.from_obj, {**CONTEXT, "members": members}, "members[1].member_id"
    )
    assert "twice" in str(error)


def test_two_members_sharing_a_name_are_refused() -> None:
    members = [{"member_id": MEMBER, "name": "alice"}, {"member_id": OTHER, "name": "alice"}]
    _refused(rr.SyncReadContext.from_obj, {**CONTEXT, "members": members}, "members[1].name")


def test_a_context_holds_at_most_one_thousand_members() -> None:
    members = [{"member_id": new_uuid7(), "name": f"agent{i}"} for i in range(1001)]
    _refused(rr.SyncReadContext.from_obj, {**CONTEXT, "members": members}, "members")
    assert len(rr.SyncReadContext.from_obj({**CONTEXT, "members": members[:1000]}).members) == 1000


def test_a_context_holds_at_most_one_thousand_local_agents() -> None:
    agents = [f"agent{i}" for i in range(1001)]
    _refused(rr.SyncReadContext.from_obj, {**CONTEXT, "local_agents": agents}, "local_agents")
    assert len(rr.SyncReadContext.from_obj({**CONTEXT, "local_agents": agents[:1000]}).local_agents)


def test_local_agents_must_be_distinct() -> None:
    value = {**CONTEXT, "local_agents": ["alice", "alice"]}
    _refused(rr.SyncReadContext.from_obj, value, "local_agents")


def test_a_local_agent_must_be_a_valid_agent_name() -> None:
    value = {**CONTEXT, "local_agents": ["alice", "a/b"]}
    _refused(rr.SyncReadContext.from_obj, value, "local_agents[1]")


@pytest.mark.parametrize("field", ["members", "local_agents"])
def test_the_lists_of_a_context_must_be_json_arrays(field: str) -> None:
    _refused(rr.SyncReadContext.from_obj, {**CONTEXT, field: {}}, field)


def test_a_refusal_names_the_line_it_was_given() -> None:
    with pytest.raises(InvalidInput) as caught:
        rr.SyncReadContext.from_obj({**CONTEXT, "current_seq": "042"}, "stdin line 1")
    assert caught.value.field == "stdin line 1.current_seq"


names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(
    floor=st.integers(0, 2**63 - 1),
    extra=st.integers(0, 2**63 - 1),
    member_names=st.lists(names, unique=True, max_size=6),
    agents=st.lists(names, unique=True, max_size=6),
)
def test_every_valid_context_survives_its_own_serialization(
    floor: int, extra: int, member_names: list[str], agents: list[str]
) -> None:
    current = min(floor + extra, 2**63 - 1)
    members = tuple((new_uuid7(), name) for name in member_names)
    context = rr.SyncReadContext(floor, current, members, tuple(agents))
    assert rr.SyncReadContext.from_obj(context.to_obj()) == context


# -- sync_read_frontier / sync_read_exact / parse_read_item -----------------------------


def test_a_frontier_round_trips() -> None:
    frontier = rr.SyncReadFrontier.from_obj(dict(FRONTIER))
    assert frontier == rr.SyncReadFrontier(MEMBER, 7)
    assert frontier.to_obj() == FRONTIER


def test_a_frontier_at_zero_is_accepted() -> None:
    assert rr.SyncReadFrontier.from_obj({**FRONTIER, "server_seq": "0"}).server_seq == 0


@pytest.mark.parametrize("bad", NONCANONICAL, ids=repr)
def test_a_frontier_sequence_must_be_a_canonical_decimal_string(bad: Any) -> None:
    _refused(rr.SyncReadFrontier.from_obj, {**FRONTIER, "server_seq": bad}, "server_seq")


def test_a_frontier_member_must_be_a_uuid7() -> None:
    _refused(rr.SyncReadFrontier.from_obj, {**FRONTIER, "member_id": WIRE}, "member_id")


def test_an_exact_read_round_trips() -> None:
    exact = rr.SyncReadExact.from_obj(dict(EXACT))
    assert exact == rr.SyncReadExact(MEMBER, WIRE)
    assert exact.to_obj() == EXACT


@pytest.mark.parametrize(
    "wire_id",
    [MEMBER, WIRE.upper(), WIRE + "\r", WIRE.replace("-", ""), None],
    ids=["uuid7", "uppercase", "carriage-return", "no-dashes", "null"],
)
def test_an_exact_read_wire_id_must_be_a_canonical_uuid4(wire_id: Any) -> None:
    _refused(rr.SyncReadExact.from_obj, {**EXACT, "wire_id": wire_id}, "wire_id")


@pytest.mark.parametrize("record", [FRONTIER, EXACT], ids=["frontier", "exact"])
def test_an_item_with_an_unknown_key_is_refused(record: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput, match="unknown"):
        rr.parse_read_item({**record, "extra": "1"}, "stdin line 2")


def test_parse_read_item_returns_the_record_its_type_names() -> None:
    assert rr.parse_read_item(dict(FRONTIER), "x") == rr.SyncReadFrontier(MEMBER, 7)
    assert rr.parse_read_item(dict(EXACT), "x") == rr.SyncReadExact(MEMBER, WIRE)


@pytest.mark.parametrize(
    "kind", ["sync_read_snapshot", "sync_read_blocked", "sync_read_context", None, "frontier"]
)
def test_parse_read_item_refuses_any_other_type_naming_the_line(kind: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        rr.parse_read_item({**FRONTIER, "type": kind}, "stdin line 3")
    assert caught.value.field == "stdin line 3.type"


# -- sync_read_snapshot ---------------------------------------------------------------


def test_a_snapshot_round_trips() -> None:
    snapshot = rr.SyncReadSnapshot.from_obj(dict(SNAPSHOT))
    assert snapshot == rr.SyncReadSnapshot(3, 42)
    assert snapshot.to_obj() == SNAPSHOT


def test_a_snapshot_floor_beyond_its_current_seq_is_refused() -> None:
    _refused(
        rr.SyncReadSnapshot.from_obj,
        {**SNAPSHOT, "min_available_seq": "43"},
        "min_available_seq",
    )


@pytest.mark.parametrize("bad", NONCANONICAL, ids=repr)
def test_a_snapshot_sequence_must_be_a_canonical_decimal_string(bad: Any) -> None:
    _refused(rr.SyncReadSnapshot.from_obj, {**SNAPSHOT, "current_seq": bad}, "current_seq")


def test_a_snapshot_with_an_unknown_key_is_refused() -> None:
    _refused(rr.SyncReadSnapshot.from_obj, {**SNAPSHOT, "has_more": False}, "has_more")


# -- block / blocked / unblock / results ----------------------------------------------


def test_a_block_round_trips_and_defaults_to_the_limit_reason() -> None:
    assert rr.SyncReadBlock.from_obj(dict(BLOCK)).to_obj() == BLOCK
    assert rr.SyncReadBlock(MEMBER).reason == rr.REASON_LIMIT == "read-state-limit-exceeded"


def test_a_block_for_a_name_mismatch_is_accepted() -> None:
    value = {**BLOCK, "reason": "member-name-mismatch"}
    assert rr.SyncReadBlock.from_obj(value).reason == rr.REASON_NAME_MISMATCH


@pytest.mark.parametrize("reason", ["other", "", None, "READ-STATE-LIMIT-EXCEEDED"], ids=repr)
def test_a_block_reason_must_be_one_of_the_two_known_reasons(reason: Any) -> None:
    error = _refused(rr.SyncReadBlock.from_obj, {**BLOCK, "reason": reason}, "reason")
    assert "member-name-mismatch" in str(error) and "read-state-limit-exceeded" in str(error)


def test_a_block_needs_its_reason_on_the_wire() -> None:
    value = {k: v for k, v in BLOCK.items() if k != "reason"}
    _refused(rr.SyncReadBlock.from_obj, value, "reason")


def test_a_blocked_record_round_trips_and_checks_its_reason() -> None:
    value = {"type": "sync_read_blocked", "member_id": MEMBER, "reason": "member-name-mismatch"}
    assert rr.SyncReadBlocked.from_obj(value).to_obj() == value
    _refused(rr.SyncReadBlocked.from_obj, {**value, "reason": "bored"}, "reason")


def test_an_unblock_round_trips_and_carries_only_the_member() -> None:
    value = {"type": "sync_read_unblock", "member_id": MEMBER}
    assert rr.SyncReadUnblock.from_obj(value).to_obj() == value
    _refused(rr.SyncReadUnblock.from_obj, {**value, "reason": rr.REASON_LIMIT}, "reason")


def test_an_unblock_member_must_be_a_uuid7() -> None:
    value = {"type": "sync_read_unblock", "member_id": WIRE}
    _refused(rr.SyncReadUnblock.from_obj, value, "member_id")


def test_the_result_records_have_their_exact_shapes() -> None:
    assert rr.SyncReadApplyResult(12, 2).to_obj() == {
        "type": "sync_read_apply_result",
        "min_available_seq": "12",
        "member_count": 2,
    }
    assert rr.SyncReadUnblocked(MEMBER).to_obj() == {
        "type": "sync_read_unblocked",
        "member_id": MEMBER,
    }


def test_the_capability_and_reasons_are_the_published_strings() -> None:
    assert rr.CAPABILITY_STAGE2_READ_STATE == "stage2-read-state"
    assert sorted(rr.BLOCK_REASONS) == ["member-name-mismatch", "read-state-limit-exceeded"]


def test_the_module_exports_every_record_it_defines_and_nothing_it_lacks() -> None:
    defined = {
        name
        for name, value in vars(rr).items()
        if not name.startswith("_")
        and isinstance(value, type | type(rr.parse_read_item))
        and value.__module__ == rr.__name__
    }
    constants = {"BLOCK_REASONS", "CAPABILITY_STAGE2_READ_STATE", "REASON_LIMIT"}
    constants.add("REASON_NAME_MISMATCH")
    assert sorted(rr.__all__) == sorted(defined | constants)
