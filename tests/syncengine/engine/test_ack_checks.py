"""A push answer checked against the relay's own snapshots before anything of
it is recorded (issue #14; specs/sync-stage1.md §8.20;
engine/cycle.py ``check_ack_sequences``).

``fresh`` stands for the one extra ``GET /v1/capabilities`` the check may
make; the end-to-end proofs against the real relay are in
tests/e2e/test_byzantine_state.py.
"""

from __future__ import annotations

import pytest

from syncengine.engine.cycle import AckBound, check_ack_sequences
from syncengine.engine.errors import EXIT_HALTED, classify
from syncengine.http.errors import AckContradiction
from syncengine.ids import new_uuid4
from wire.http_v1.messages import Disposition, PushAck


class Snapshots:
    """Counts the fresh snapshots taken; each reports ``current_seq``."""

    def __init__(self, current_seq: int) -> None:
        self.current_seq = current_seq
        self.taken = 0

    def __call__(self) -> int:
        self.taken += 1
        return self.current_seq


def stored(seq: int) -> PushAck:
    return PushAck(new_uuid4(), seq, Disposition.STORED)


def duplicate(seq: int) -> PushAck:
    return PushAck(new_uuid4(), seq, Disposition.DUPLICATE)


def test_acks_within_the_preflight_take_no_fresh_snapshot() -> None:
    fresh = Snapshots(99)
    check_ack_sequences([duplicate(4), stored(7), stored(8)], AckBound(6), fresh)
    assert fresh.taken == 0


def test_a_stored_ack_at_or_below_the_preflight_current_seq_is_refused_without_a_request() -> None:
    fresh = Snapshots(99)
    for seq in (6, 1):
        with pytest.raises(AckContradiction, match=f"newly stored at server_seq {seq}"):
            check_ack_sequences([stored(seq)], AckBound(6), fresh)
    assert fresh.taken == 0


def test_a_duplicate_above_the_preflight_is_accepted_when_a_fresh_snapshot_holds_it() -> None:
    fresh = Snapshots(8)
    bound = AckBound(6)
    check_ack_sequences([duplicate(7), duplicate(8)], bound, fresh)
    assert fresh.taken == 1 and bound.current_seq == 8


def test_a_duplicate_beyond_the_fresh_current_seq_refuses_the_answer_as_a_halt() -> None:
    fresh = Snapshots(7)
    with pytest.raises(AckContradiction, match="duplicate at server_seq 999") as caught:
        check_ack_sequences([duplicate(999)], AckBound(6), fresh)
    record = classify(caught.value)
    assert (record.state.value, record.code, record.exit_code) == (
        "halted",
        "ack-contradiction",
        EXIT_HALTED,
    )


def test_one_fresh_snapshot_serves_every_later_answer_of_the_round() -> None:
    fresh = Snapshots(10)
    bound = AckBound(6)
    check_ack_sequences([duplicate(7)], bound, fresh)
    check_ack_sequences([duplicate(9), duplicate(10)], bound, fresh)
    assert fresh.taken == 1


def test_a_fresh_snapshot_never_lowers_the_bound() -> None:
    bound = AckBound(6)
    with pytest.raises(AckContradiction):
        check_ack_sequences([duplicate(7)], bound, Snapshots(3))
    assert bound.current_seq == 6
