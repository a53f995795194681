"""The stage1-resync records, strict in both directions
(retention-gap-resynchronization.md "Driver transaction and audit record";
UPSTREAM-RECORDS §2.6; specs/sync-stage1.md §4.5).

``sync_resync`` is read by the driver; ``sync_resync_status`` and
``sync_resync_result`` are read by the engine. Every reader checks the exact
member set, canonical signed-64-bit decimal sequences, the one reason string
and the gap arithmetic ``gap_start = expected + 1``, ``gap_end = floor``,
``expected < floor <= current``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncengine.ops.resync import (
    RESYNC_REASON,
    SyncResync,
    SyncResyncAudit,
    SyncResyncResult,
    SyncResyncStatus,
)
from syncengine.ops.sync_records import dump_line, parse_jsonl
from syncengine.store import InvalidInput

MAX_SEQ = 2**63 - 1

RESYNC: dict[str, Any] = {
    "type": "sync_resync",
    "expected_transport_cursor": "42",
    "min_available_seq": "100",
    "current_seq": "120",
    "reason": "retention-gap-accepted",
}
AUDIT: dict[str, Any] = {
    "expected_transport_cursor": "42",
    "accepted_floor": "100",
    "gap_start": "43",
    "gap_end": "100",
    "reason": "retention-gap-accepted",
}
STATUS: dict[str, Any] = {
    "type": "sync_resync_status",
    "driver_generation": "0190a1b2-generation",
    "transport_cursor": "100",
    "audit": AUDIT,
}
RESULT: dict[str, Any] = {
    "type": "sync_resync_result",
    "driver_generation": "0190a1b2-generation",
    "expected_transport_cursor": "42",
    "transport_cursor": "100",
    "accepted_floor": "100",
    "gap_start": "43",
    "gap_end": "100",
    "reason": "retention-gap-accepted",
}

#: Values no canonical sequence field may carry: (id, value).
NONCANONICAL_SEQUENCES = [
    ("leading-zero", "042"),
    ("exponent", "1e2"),
    ("json-number", 42),
    ("json-float", 42.0),
    ("negative", "-1"),
    ("plus-sign", "+42"),
    ("above-int64", str(2**63)),
    ("twenty-digits", "1" + "0" * 19),
    ("empty", ""),
    ("leading-space", " 42"),
    ("trailing-newline", "42\n"),
    ("non-ascii-digits", "\u0664\u0662"),
    ("boolean", True),
    ("null", None),
]
BAD_REASONS = [
    ("other-text", "operator-said-so"),
    ("uppercase", "RETENTION-GAP-ACCEPTED"),
    ("trailing-space", "retention-gap-accepted "),
    ("empty", ""),
    ("null", None),
    ("list", ["retention-gap-accepted"]),
]
BAD_GENERATIONS = [
    ("empty", ""),
    ("number", 7),
    ("null", None),
    ("too-long", "g" * 257),
    ("too-long-in-utf8", "\u00e9" * 129),
    ("nul", "gen\x00"),
    ("newline", "gen\n"),
    ("tab", "gen\t"),
    ("delete", "gen\x7f"),
    ("c1-control", "gen\x85"),
]


def _ids(cases: list[tuple[str, Any]]) -> list[str]:
    return [case[0] for case in cases]


def _line(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the other side would read it: one JSONL line, parsed."""
    ((_, value),) = list(parse_jsonl((json.dumps(obj) + "\n").encode()))
    return value


# -- sync_resync (engine → driver) ---------------------------------------------------


def test_sync_resync_parses_the_exact_five_members_and_round_trips() -> None:
    request = SyncResync.from_obj(_line(RESYNC))
    assert request == SyncResync(42, 100, 120, RESYNC_REASON)
    assert request.to_obj() == RESYNC
    assert list(request.to_obj()) == list(RESYNC)


@pytest.mark.parametrize("missing", sorted(set(RESYNC) - {"type"}))
def test_sync_resync_refuses_a_missing_member_naming_it(missing: str) -> None:
    obj = {k: v for k, v in RESYNC.items() if k != missing}
    with pytest.raises(InvalidInput, match="required member is missing") as caught:
        SyncResync.from_obj(obj)
    assert caught.value.field == f"sync_resync.{missing}"


def test_sync_resync_refuses_a_missing_type() -> None:
    obj = {k: v for k, v in RESYNC.items() if k != "type"}
    with pytest.raises(InvalidInput) as caught:
        SyncResync.from_obj(obj)
    assert caught.value.field == "sync_resync.type"


@pytest.mark.parametrize("kind", ["sync_resync_result", "sync_resync_status", "sync_prepare", 1])
def test_sync_resync_refuses_another_record_type(kind: Any) -> None:
    with pytest.raises(InvalidInput, match="expected a 'sync_resync' record"):
        SyncResync.from_obj({**RESYNC, "type": kind})


@pytest.mark.parametrize("extra", ["driver_generation", "accepted_floor", "Reason", "token"])
def test_sync_resync_refuses_an_unknown_member(extra: str) -> None:
    with pytest.raises(InvalidInput, match="unknown member") as caught:
        SyncResync.from_obj({**RESYNC, extra: "1"})
    assert caught.value.field == f"sync_resync.{extra}"


def test_a_sync_resync_line_with_a_duplicate_member_is_refused() -> None:
    line = dump_line(RESYNC)[:-1] + ',"min_available_seq":"101"}\n'
    with pytest.raises(InvalidInput, match="duplicate"):
        list(parse_jsonl(line.encode()))


@pytest.mark.parametrize("field", ["expected_transport_cursor", "min_available_seq", "current_seq"])
@pytest.mark.parametrize(
    "bad", [case[1] for case in NONCANONICAL_SEQUENCES], ids=_ids(NONCANONICAL_SEQUENCES)
)
def test_sync_resync_refuses_a_noncanonical_sequence_naming_the_field(field: str, bad: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        SyncResync.from_obj({**RESYNC, field: bad})
    assert caught.value.field == f"sync_resync.{field}"


@pytest.mark.parametrize("bad", [case[1] for case in BAD_REASONS], ids=_ids(BAD_REASONS))
def test_sync_resync_refuses_any_other_reason(bad: Any) -> None:
    with pytest.raises(InvalidInput, match="retention-gap-accepted") as caught:
        SyncResync.from_obj({**RESYNC, "reason": bad})
    assert caught.value.field == "sync_resync.reason"


@pytest.mark.parametrize(
    ("expected", "floor"),
    [("100", "100"), ("101", "100"), ("0", "0"), (str(MAX_SEQ), str(MAX_SEQ))],
    ids=["equal", "above", "both-zero", "both-max"],
)
def test_sync_resync_refuses_a_floor_not_above_the_expected_cursor(
    expected: str, floor: str
) -> None:
    obj = {**RESYNC, "expected_transport_cursor": expected, "min_available_seq": floor}
    obj["current_seq"] = floor
    with pytest.raises(InvalidInput, match="must lie above the expected") as caught:
        SyncResync.from_obj(obj)
    assert caught.value.field == "sync_resync.min_available_seq"


def test_sync_resync_refuses_a_floor_beyond_current_seq() -> None:
    with pytest.raises(InvalidInput, match="beyond current_seq") as caught:
        SyncResync.from_obj({**RESYNC, "current_seq": "99"})
    assert caught.value.field == "sync_resync.min_available_seq"


def test_sync_resync_accepts_a_floor_equal_to_current_seq() -> None:
    request = SyncResync.from_obj({**RESYNC, "current_seq": "100"})
    assert (request.min_available_seq, request.current_seq) == (100, 100)


def test_sync_resync_accepts_the_extremes_of_the_signed_64_bit_range() -> None:
    obj = {
        **RESYNC,
        "expected_transport_cursor": "0",
        "min_available_seq": str(MAX_SEQ),
        "current_seq": str(MAX_SEQ),
    }
    assert SyncResync.from_obj(obj).to_obj() == obj


def test_sync_resync_errors_name_the_line_they_came_from() -> None:
    with pytest.raises(InvalidInput) as caught:
        SyncResync.from_obj({**RESYNC, "current_seq": "0120"}, "stdin line 1")
    assert caught.value.field == "stdin line 1.current_seq"


@pytest.mark.parametrize(
    "request_",
    [
        SyncResync(42, 42, 100),
        SyncResync(42, 101, 100),
        SyncResync(42, 100, 120, "because"),
    ],
    ids=["floor-at-expected", "floor-beyond-current", "other-reason"],
)
def test_check_refuses_a_directly_built_request_that_breaks_the_rules(
    request_: SyncResync,
) -> None:
    with pytest.raises(InvalidInput):
        request_.check()


# -- the audit object -----------------------------------------------------------------


def test_an_audit_derives_its_inclusive_gap_from_the_cursor_and_floor() -> None:
    audit = SyncResyncAudit(42, 100)
    assert (audit.gap_start, audit.gap_end, audit.unavailable) == (43, 100, 58)
    assert audit.to_obj() == AUDIT
    assert list(audit.to_obj()) == list(AUDIT)


def test_an_audit_of_a_single_missing_sequence_has_equal_ends() -> None:
    audit = SyncResyncAudit.from_obj(
        {**AUDIT, "accepted_floor": "43", "gap_end": "43"}, "sync_resync_status.audit"
    )
    assert (audit.gap_start, audit.gap_end, audit.unavailable) == (43, 43, 1)


# -- sync_resync_status (driver → engine) --------------------------------------------


def test_status_with_an_audit_round_trips() -> None:
    status = SyncResyncStatus.from_obj(_line(STATUS), requested_floor=100)
    assert status == SyncResyncStatus("0190a1b2-generation", 100, SyncResyncAudit(42, 100))
    assert status.to_obj() == STATUS
    assert list(status.to_obj()) == ["type", "driver_generation", "transport_cursor", "audit"]


def test_status_with_a_null_audit_round_trips() -> None:
    obj = {**STATUS, "transport_cursor": "42", "audit": None}
    status = SyncResyncStatus.from_obj(_line(obj), requested_floor=100)
    assert status.audit is None and status.transport_cursor == 42
    assert status.to_obj() == obj


def test_status_with_a_null_audit_needs_no_requested_floor() -> None:
    obj = {**STATUS, "audit": None}
    assert SyncResyncStatus.from_obj(obj).to_obj() == obj


@pytest.mark.parametrize("missing", ["driver_generation", "transport_cursor", "audit"])
def test_status_refuses_a_missing_member_naming_it(missing: str) -> None:
    obj = {k: v for k, v in STATUS.items() if k != missing}
    with pytest.raises(InvalidInput, match="required member is missing") as caught:
        SyncResyncStatus.from_obj(obj, requested_floor=100)
    assert caught.value.field == f"sync_resync_status.{missing}"


@pytest.mark.parametrize("extra", ["accepted_floor", "push_cursor", "Audit"])
def test_status_refuses_an_unknown_top_level_member(extra: str) -> None:
    with pytest.raises(InvalidInput, match="unknown member") as caught:
        SyncResyncStatus.from_obj({**STATUS, extra: "100"}, requested_floor=100)
    assert caught.value.field == f"sync_resync_status.{extra}"


@pytest.mark.parametrize("extra", ["type", "current_seq", "accepted_at"])
def test_status_refuses_an_unknown_audit_member(extra: str) -> None:
    audit = {**AUDIT, extra: "120"}
    with pytest.raises(InvalidInput, match="unknown member") as caught:
        SyncResyncStatus.from_obj({**STATUS, "audit": audit}, requested_floor=100)
    assert caught.value.field == f"sync_resync_status.audit.{extra}"


@pytest.mark.parametrize("missing", sorted(AUDIT))
def test_status_refuses_a_partial_audit_naming_the_missing_member(missing: str) -> None:
    audit = {k: v for k, v in AUDIT.items() if k != missing}
    with pytest.raises(InvalidInput, match="required member is missing") as caught:
        SyncResyncStatus.from_obj({**STATUS, "audit": audit}, requested_floor=100)
    assert caught.value.field == f"sync_resync_status.audit.{missing}"


def test_status_refuses_an_empty_audit_object() -> None:
    with pytest.raises(InvalidInput, match="required member is missing"):
        SyncResyncStatus.from_obj({**STATUS, "audit": {}}, requested_floor=100)


@pytest.mark.parametrize(
    "bad",
    [[], [AUDIT], "null", "", 0, False, True],
    ids=["empty-list", "list", "string-null", "empty-string", "zero", "false", "true"],
)
def test_status_refuses_an_audit_that_is_neither_null_nor_an_object(bad: Any) -> None:
    with pytest.raises(InvalidInput, match="null or an audit object") as caught:
        SyncResyncStatus.from_obj({**STATUS, "audit": bad}, requested_floor=100)
    assert caught.value.field == "sync_resync_status.audit"


@pytest.mark.parametrize(
    "bad", [case[1] for case in NONCANONICAL_SEQUENCES], ids=_ids(NONCANONICAL_SEQUENCES)
)
def test_status_refuses_a_noncanonical_transport_cursor(bad: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        SyncResyncStatus.from_obj({**STATUS, "transport_cursor": bad, "audit": None})
    assert caught.value.field == "sync_resync_status.transport_cursor"


@pytest.mark.parametrize("field", sorted(set(AUDIT) - {"reason"}))
@pytest.mark.parametrize(
    "bad", [case[1] for case in NONCANONICAL_SEQUENCES], ids=_ids(NONCANONICAL_SEQUENCES)
)
def test_status_refuses_a_noncanonical_audit_sequence(field: str, bad: Any) -> None:
    audit = {**AUDIT, field: bad}
    with pytest.raises(InvalidInput) as caught:
        SyncResyncStatus.from_obj({**STATUS, "audit": audit}, requested_floor=100)
    assert caught.value.field == f"sync_resync_status.audit.{field}"


@pytest.mark.parametrize("bad", [case[1] for case in BAD_REASONS], ids=_ids(BAD_REASONS))
def test_status_refuses_an_audit_with_any_other_reason(bad: Any) -> None:
    audit = {**AUDIT, "reason": bad}
    with pytest.raises(InvalidInput, match="retention-gap-accepted") as caught:
        SyncResyncStatus.from_obj({**STATUS, "audit": audit}, requested_floor=100)
    assert caught.value.field == "sync_resync_status.audit.reason"


@pytest.mark.parametrize("bad", [case[1] for case in BAD_GENERATIONS], ids=_ids(BAD_GENERATIONS))
def test_status_refuses_a_bad_driver_generation(bad: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        SyncResyncStatus.from_obj({**STATUS, "driver_generation": bad}, requested_floor=100)
    assert caught.value.field == "sync_resync_status.driver_generation"


@pytest.mark.parametrize(
    "generation",
    ["g" * 256, "\u00e9" * 128, "\u20ac" * 85, "g", "gen\u00a0eration"],
    ids=["256-ascii", "256-bytes-two-byte", "255-bytes-three-byte", "one-char", "nbsp"],
)
def test_status_accepts_a_generation_of_up_to_256_utf8_bytes(generation: str) -> None:
    obj = {**STATUS, "driver_generation": generation}
    status = SyncResyncStatus.from_obj(obj, requested_floor=100)
    assert status.driver_generation == generation


def test_status_refuses_an_audit_for_another_floor_than_requested() -> None:
    with pytest.raises(InvalidInput, match="requested floor 99") as caught:
        SyncResyncStatus.from_obj(STATUS, requested_floor=99)
    assert caught.value.field == "sync_resync_status.audit.accepted_floor"


def test_status_refuses_a_gap_end_other_than_the_floor() -> None:
    audit = {**AUDIT, "gap_end": "99"}
    with pytest.raises(InvalidInput, match="must equal accepted_floor") as caught:
        SyncResyncStatus.from_obj({**STATUS, "audit": audit}, requested_floor=100)
    assert caught.value.field == "sync_resync_status.audit.gap_end"


@pytest.mark.parametrize("gap_start", ["42", "44", "0", "100"])
def test_status_refuses_a_gap_start_other_than_expected_plus_one(gap_start: str) -> None:
    audit = {**AUDIT, "gap_start": gap_start}
    with pytest.raises(InvalidInput, match=r"expected_transport_cursor \+ 1") as caught:
        SyncResyncStatus.from_obj({**STATUS, "audit": audit}, requested_floor=100)
    assert caught.value.field == "sync_resync_status.audit.gap_start"


@pytest.mark.parametrize("expected", ["100", "101"])
def test_status_refuses_an_audit_whose_expected_cursor_is_not_below_the_floor(
    expected: str,
) -> None:
    audit = {**AUDIT, "expected_transport_cursor": expected, "gap_start": str(int(expected) + 1)}
    with pytest.raises(InvalidInput, match="must lie above the expected") as caught:
        SyncResyncStatus.from_obj({**STATUS, "audit": audit}, requested_floor=100)
    assert caught.value.field == "sync_resync_status.audit.accepted_floor"


def test_status_refuses_an_audit_floor_beyond_the_transport_cursor() -> None:
    with pytest.raises(InvalidInput, match="beyond the cursor") as caught:
        SyncResyncStatus.from_obj({**STATUS, "transport_cursor": "99"}, requested_floor=100)
    assert caught.value.field == "sync_resync_status.audit.accepted_floor"


def test_status_accepts_a_transport_cursor_that_has_moved_past_the_floor() -> None:
    status = SyncResyncStatus.from_obj({**STATUS, "transport_cursor": "150"}, requested_floor=100)
    assert status.transport_cursor == 150 and status.audit == SyncResyncAudit(42, 100)


@pytest.mark.parametrize("kind", ["sync_resync_result", "sync_state", None])
def test_status_refuses_another_record_type(kind: Any) -> None:
    with pytest.raises(InvalidInput, match="expected a 'sync_resync_status' record"):
        SyncResyncStatus.from_obj({**STATUS, "type": kind}, requested_floor=100)


@pytest.mark.parametrize(
    "line",
    [
        '{"type":"sync_resync_status","driver_generation":"g","driver_generation":"h",'
        '"transport_cursor":"1","audit":null}\n',
        '{"type":"sync_resync_status","driver_generation":"g","transport_cursor":"100",'
        '"audit":{"expected_transport_cursor":"42","accepted_floor":"100","gap_start":"43",'
        '"gap_end":"100","gap_end":"100","reason":"retention-gap-accepted"}}\n',
    ],
    ids=["top-level", "inside-audit"],
)
def test_a_status_line_with_a_duplicate_member_is_refused(line: str) -> None:
    with pytest.raises(InvalidInput, match="duplicate"):
        list(parse_jsonl(line.encode()))


# -- sync_resync_result (driver → engine) --------------------------------------------


def test_result_round_trips_with_the_upstream_member_order() -> None:
    result = SyncResyncResult.from_obj(_line(RESULT))
    assert result == SyncResyncResult("0190a1b2-generation", SyncResyncAudit(42, 100))
    assert result.transport_cursor == 100
    assert result.to_obj() == RESULT
    assert list(result.to_obj()) == list(RESULT)


@pytest.mark.parametrize("missing", sorted(set(RESULT) - {"type"}))
def test_result_refuses_a_missing_member_naming_it(missing: str) -> None:
    obj = {k: v for k, v in RESULT.items() if k != missing}
    with pytest.raises(InvalidInput, match="required member is missing") as caught:
        SyncResyncResult.from_obj(obj)
    assert caught.value.field == f"sync_resync_result.{missing}"


@pytest.mark.parametrize("extra", ["audit", "current_seq", "push_cursor"])
def test_result_refuses_an_unknown_member(extra: str) -> None:
    with pytest.raises(InvalidInput, match="unknown member") as caught:
        SyncResyncResult.from_obj({**RESULT, extra: None})
    assert caught.value.field == f"sync_resync_result.{extra}"


@pytest.mark.parametrize("kind", ["sync_resync", "sync_resync_status", ""])
def test_result_refuses_another_record_type(kind: str) -> None:
    with pytest.raises(InvalidInput, match="expected a 'sync_resync_result' record"):
        SyncResyncResult.from_obj({**RESULT, "type": kind})


@pytest.mark.parametrize("field", sorted(set(RESULT) - {"type", "driver_generation", "reason"}))
@pytest.mark.parametrize(
    "bad", [case[1] for case in NONCANONICAL_SEQUENCES], ids=_ids(NONCANONICAL_SEQUENCES)
)
def test_result_refuses_a_noncanonical_sequence_naming_the_field(field: str, bad: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        SyncResyncResult.from_obj({**RESULT, field: bad})
    assert caught.value.field == f"sync_resync_result.{field}"


@pytest.mark.parametrize("cursor", ["99", "101", "42", "0"])
def test_result_refuses_a_transport_cursor_other_than_the_floor(cursor: str) -> None:
    with pytest.raises(InvalidInput, match="must equal accepted_floor") as caught:
        SyncResyncResult.from_obj({**RESULT, "transport_cursor": cursor})
    assert caught.value.field == "sync_resync_result.transport_cursor"


def test_result_refuses_a_gap_start_other_than_expected_plus_one() -> None:
    with pytest.raises(InvalidInput, match=r"\+ 1") as caught:
        SyncResyncResult.from_obj({**RESULT, "gap_start": "42"})
    assert caught.value.field == "sync_resync_result.gap_start"


def test_result_refuses_a_gap_end_other_than_the_floor() -> None:
    with pytest.raises(InvalidInput, match="must equal accepted_floor") as caught:
        SyncResyncResult.from_obj({**RESULT, "gap_end": "101"})
    assert caught.value.field == "sync_resync_result.gap_end"


def test_result_refuses_a_floor_not_above_the_expected_cursor() -> None:
    obj = {
        **RESULT,
        "expected_transport_cursor": "100",
        "gap_start": "101",
    }
    with pytest.raises(InvalidInput, match="must lie above the expected"):
        SyncResyncResult.from_obj(obj)


@pytest.mark.parametrize("bad", [case[1] for case in BAD_REASONS], ids=_ids(BAD_REASONS))
def test_result_refuses_any_other_reason(bad: Any) -> None:
    with pytest.raises(InvalidInput, match="retention-gap-accepted") as caught:
        SyncResyncResult.from_obj({**RESULT, "reason": bad})
    assert caught.value.field == "sync_resync_result.reason"


@pytest.mark.parametrize("bad", [case[1] for case in BAD_GENERATIONS], ids=_ids(BAD_GENERATIONS))
def test_result_refuses_a_bad_driver_generation(bad: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        SyncResyncResult.from_obj({**RESULT, "driver_generation": bad})
    assert caught.value.field == "sync_resync_result.driver_generation"


def test_a_result_line_with_a_duplicate_member_is_refused() -> None:
    line = dump_line(RESULT)[:-1] + ',"transport_cursor":"100"}\n'
    with pytest.raises(InvalidInput, match="duplicate"):
        list(parse_jsonl(line.encode()))


# -- the arithmetic over the whole canonical range -----------------------------------


@st.composite
def gaps(draw: st.DrawFn) -> tuple[int, int, int]:
    """``expected < floor <= current`` anywhere in 0..2^63-1, ends included."""
    edge = st.sampled_from([0, 1, MAX_SEQ - 2, MAX_SEQ - 1])
    expected = draw(st.integers(0, MAX_SEQ - 1) | edge)
    floor = draw(st.integers(expected + 1, MAX_SEQ) | st.just(expected + 1) | st.just(MAX_SEQ))
    current = draw(st.integers(floor, MAX_SEQ) | st.just(floor) | st.just(MAX_SEQ))
    return expected, floor, current


@settings(max_examples=150, deadline=None)
@given(gap=gaps(), generation=st.text(st.characters(codec="utf-8", min_codepoint=0xA0), min_size=1))
def test_any_valid_gap_round_trips_through_every_record(
    gap: tuple[int, int, int], generation: str
) -> None:
    expected, floor, current = gap
    request = SyncResync.from_obj(_line(SyncResync(expected, floor, current).to_obj()))
    assert (request.expected_transport_cursor, request.min_available_seq) == (expected, floor)
    audit = SyncResyncAudit(request.expected_transport_cursor, request.min_available_seq)
    assert (audit.gap_start, audit.gap_end, audit.unavailable) == (
        expected + 1,
        floor,
        floor - expected,
    )
    generation = generation.encode()[:256].decode("utf-8", "ignore") or "g"
    result = SyncResyncResult(generation, audit)
    assert SyncResyncResult.from_obj(_line(result.to_obj())) == result
    assert result.to_obj()["transport_cursor"] == str(floor)
    status = SyncResyncStatus(generation, current, audit)
    assert SyncResyncStatus.from_obj(_line(status.to_obj()), requested_floor=floor) == status


@settings(max_examples=100, deadline=None)
@given(expected=st.integers(0, MAX_SEQ), floor=st.integers(0, MAX_SEQ))
def test_a_floor_at_or_below_the_expected_cursor_is_refused_everywhere(
    expected: int, floor: int
) -> None:
    if floor > expected:
        expected, floor = floor, expected
    audit = {
        "expected_transport_cursor": str(expected),
        "accepted_floor": str(floor),
        "gap_start": str(expected + 1),
        "gap_end": str(floor),
        "reason": RESYNC_REASON,
    }
    request = {
        **RESYNC,
        "expected_transport_cursor": str(expected),
        "min_available_seq": str(floor),
        "current_seq": str(floor),
    }
    with pytest.raises(InvalidInput, match="must lie above"):
        SyncResync.from_obj(request)
    result = {**RESULT, **audit, "transport_cursor": str(floor)}
    with pytest.raises(InvalidInput):  # gap_start may also overflow the range
        SyncResyncResult.from_obj(result)
    status = {**STATUS, "transport_cursor": str(floor), "audit": audit}
    with pytest.raises(InvalidInput):
        SyncResyncStatus.from_obj(status, requested_floor=floor)


@settings(max_examples=100, deadline=None)
@given(gap=gaps(), short=st.integers(1, MAX_SEQ))
def test_a_floor_beyond_current_seq_is_refused(gap: tuple[int, int, int], short: int) -> None:
    expected, floor, _ = gap
    current = floor - min(short, floor)
    obj = SyncResync(expected, floor, floor).to_obj() | {"current_seq": str(current)}
    with pytest.raises(InvalidInput, match="beyond current_seq"):
        SyncResync.from_obj(obj)
