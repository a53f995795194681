"""``judge_page``: a page's verdicts, its ``none`` envelopes opened together.

Item by item, the page's verdicts must be exactly what ``judge`` gives
under each item's own policy (v1.md "Pull state layers") — for canonical
plaintexts, refused ones, a wrong version or ``key_id``, a cipher the
policy forbids, and age-v1 envelopes beside them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syncengine.engine.evaluation import Pulled, judge, judge_page
from syncengine.engine.identity import read_identity
from syncengine.engine.state import ConnectionRecord
from syncengine.ids import new_uuid4
from tests.syncengine.engine.worker_support import judge_items, make_connection, make_keys
from tests.wire.wire_strategies import messages
from wire.envelope import Envelope, encode_blob
from wire.message import Message

AT = "2026-07-20T06:30:00.000000Z"
CANONICAL = Message("hi", AT, "leader", "worker-1").to_jcs()
ALLOWED = st.sampled_from(
    [frozenset({"none"}), frozenset({"age-v1"}), frozenset({"none", "age-v1"}), frozenset()]
)


def none_envelope(data: bytes, v: int = 1, key_id: str | None = None) -> Envelope:
    return Envelope(v, "none", key_id, encode_blob(data), data)


plaintexts = messages.map(Message.to_jcs) | st.sampled_from(
    [
        CANONICAL,
        b" " + CANONICAL,
        CANONICAL.replace(b'"hi"', b'""'),
        CANONICAL.replace(b"2026-07-20", b"2026-02-30"),
        b"1,2",
        b"]",
        b"\xff",
    ]
)
envelopes = st.one_of(
    plaintexts.map(none_envelope),
    plaintexts.map(lambda data: none_envelope(data, v=2)),
    plaintexts.map(lambda data: none_envelope(data, key_id="epoch-1")),
    plaintexts.map(lambda data: Envelope(1, "age-v1", "epoch-1", encode_blob(data), data)),
    st.just(Envelope(1, "none", None, encode_blob(CANONICAL))),  # no cached bytes
)


@pytest.fixture(scope="module")
def connection(tmp_path_factory: pytest.TempPathFactory) -> ConnectionRecord:
    keys = make_keys(tmp_path_factory.mktemp("keys"))
    return make_connection(keys, keys.bob_file)


def verdicts_one_by_one(
    page: list[Pulled], allowed: list[frozenset[str]], connection: ConnectionRecord
) -> list[object]:
    return [
        judge(item[3], item[1], item[0], ciphers, connection, lambda key_id: None)
        for item, ciphers in zip(page, allowed, strict=True)
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(envelopes, ALLOWED), max_size=10))
def test_page_verdicts_are_each_envelopes_own_judgement(
    connection: ConnectionRecord, items: list[tuple[Envelope, frozenset[str]]]
) -> None:
    page: list[Pulled] = [
        (seq, new_uuid4(), AT, envelope) for seq, (envelope, _) in enumerate(items, start=1)
    ]
    allowed = [ciphers for _, ciphers in items]
    assert judge_page(page, allowed, connection, lambda key_id: None) == verdicts_one_by_one(
        page, allowed, connection
    )


def test_sealed_and_plain_envelopes_together_are_judged_as_one_by_one(tmp_path: Path) -> None:
    keys = make_keys(tmp_path)
    connection = make_connection(keys, keys.bob_file)
    assert connection.identity_path is not None
    identity = read_identity(connection, Path(connection.identity_path))
    items = judge_items(keys, connection)
    page: list[Pulled] = [(seq, wire_id, AT, envelope) for envelope, wire_id, seq, _ in items]
    allowed = [ciphers for *_, ciphers in items]
    expected = [
        judge(envelope, wire_id, seq, ciphers, connection, lambda key_id: identity)
        for envelope, wire_id, seq, ciphers in items
    ]
    assert judge_page(page, allowed, connection, lambda key_id: identity) == expected
    statuses = {status for status, _, _ in expected}
    assert "importable" in statuses and len(statuses) > 2
