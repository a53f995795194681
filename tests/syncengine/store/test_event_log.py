"""Import/export of event-log schema v1 (driver-interface §2.3)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from syncengine.local_store import Store
from syncengine.store import Conflict, InvalidInput
from syncengine.store.event_log import normalize_at


def jsonl(*records: Mapping[str, object]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


SENT = {
    "type": "message_sent",
    "id": "01a229f4-8606-7572-b1a5-9d920be46956",
    "team": "dev",
    "from": "alice",
    "to": "bob",
    "body": "hi",
    "at": "2026-05-30T19:00:00Z",
}


def test_unknown_record_types_and_fields_are_ignored(store: Store) -> None:
    added, _ = store.import_bytes(
        jsonl({"type": "team_renamed", "whatever": 1}, dict(SENT, future_field=[1, 2]))
    )
    assert added == 1
    [message] = store.list_unread("dev", "bob")
    assert message.to_record()["id"] == SENT["id"]


def test_whole_second_timestamps_are_kept_as_written(store: Store) -> None:
    store.import_bytes(jsonl(SENT))
    assert store.history("dev")[0].at == "2026-05-30T19:00:00Z"


def test_a_stored_whole_second_timestamp_is_sealed_in_the_six_digit_wire_form() -> None:
    from syncengine.store.event_log import canonical_at

    assert canonical_at("2026-05-30T19:00:00Z") == "2026-05-30T19:00:00.000000Z"
    assert canonical_at("2026-05-30T19:00:00.5Z") == "2026-05-30T19:00:00.500000Z"
    assert canonical_at("2026-05-30T19:00:00.123456Z") == "2026-05-30T19:00:00.123456Z"


def test_legacy_decimal_ids_pass_through_as_opaque_strings(store: Store) -> None:
    store.import_bytes(jsonl(dict(SENT, id="42")))
    store.mark_read_batch("dev", "bob", ["42"])
    assert store.list_unread("dev", "bob") == []


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b'{"type":"message_sent","type":"x"}\n', "duplicate key"),
        (b"[1,2]\n", "JSON object"),
        (b"not json\n", "not valid JSON"),
        (jsonl(dict(SENT, body=7)), "body"),
        (jsonl(dict(SENT, at="yesterday")), "timestamp"),
        (jsonl(dict(SENT, to="bad:name")), "agent name"),
        (jsonl(dict(SENT, id="line\nbreak")), "control characters"),
        (jsonl(dict(SENT, origin="elsewhere")), "origin"),
        (jsonl(SENT)[:-1], "truncated"),
        (jsonl(SENT).replace(b"\n", b"\r\n"), "carriage return"),
        (b"\xff\xfe\n", "UTF-8"),
        (
            jsonl(
                {
                    "type": "message_read",
                    "id": "1",
                    "msg_id": 2,
                    "team": "dev",
                    "agent": "bob",
                    "at": "2026-05-30T19:00:00Z",
                }
            ),
            "msg_id",
        ),
    ],
)
def test_a_bad_line_anywhere_rejects_the_whole_import(
    store: Store, data: bytes, problem: str
) -> None:
    good = dict(SENT, id="01a229f4-8606-7572-b1a5-9d920be46000")
    with pytest.raises(InvalidInput, match=problem):
        store.import_bytes(jsonl(good) + data)
    assert store.history("dev") == []


def test_same_id_with_different_content_is_a_conflict(store: Store) -> None:
    store.import_bytes(jsonl(SENT))
    with pytest.raises(Conflict, match="other content"):
        store.import_bytes(jsonl(dict(SENT, body="changed")))
    assert [m.body for m in store.history("dev")] == ["hi"]


def test_export_orders_reads_after_the_messages_that_existed_then(
    store: Store, tmp_path: Path
) -> None:
    m1 = store.send("dev", "alice", "bob", "1").id
    store.mark_read_batch("dev", "bob", [m1])
    store.send("dev", "alice", "bob", "2")
    out = tmp_path / "exports" / "e.jsonl"
    out.parent.mkdir()
    assert store.export(out) == 3
    kinds = [json.loads(line)["type"] for line in out.read_text().splitlines()]
    assert kinds == ["message_sent", "message_read", "message_sent"]
    assert [p.name for p in out.parent.iterdir()] == ["e.jsonl"], "temporary file left behind"


def test_export_into_a_missing_directory_is_refused(store: Store, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="does not exist"):
        store.export(tmp_path / "nope" / "e.jsonl")


def test_imported_origin_round_trips_and_local_origin_is_implicit(
    store: Store, tmp_path: Path
) -> None:
    store.import_bytes(jsonl(dict(SENT, origin="imported")))
    store.send("dev", "bob", "alice", "local")
    out = tmp_path / "e.jsonl"
    store.export(out)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records[0]["origin"] == "imported"
    assert "origin" not in records[1]


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("2026-05-30T19:00:00Z", "2026-05-30T19:00:00.000000Z"),
        ("2026-05-30T19:00:00.5Z", "2026-05-30T19:00:00.500000Z"),
        ("2026-05-30T19:00:00.123456Z", "2026-05-30T19:00:00.123456Z"),
    ],
)
def test_event_timestamps_normalize_to_six_fractional_digits(text: str, canonical: str) -> None:
    assert normalize_at(text, "at") == canonical


@pytest.mark.parametrize(
    "text",
    [
        "2026-02-30T19:00:00.000000Z",  # canonical shape, not a real day
        "2026-05-30 19:00:00.000000Z",
        "2026-05-30T19:00:00.1234567Z",
        "2026-05-30T19:00:00+00:00",
        "",
    ],
)
def test_event_timestamps_that_are_not_real_utc_instants_are_refused(text: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        normalize_at(text, "line 3.at")
    assert caught.value.field == "line 3.at"


READ = {
    "type": "message_read",
    "id": "read-cursor-v1:dev:bob:" + str(SENT["id"]),
    "team": "dev",
    "agent": "bob",
    "msg_id": SENT["id"],
    "at": "2026-05-30T19:05:00Z",
}


def test_a_read_imported_before_its_message_is_linked_when_the_message_arrives(
    store: Store,
) -> None:
    store.import_bytes(jsonl(READ))
    store.import_bytes(jsonl(SENT))
    assert store.list_unread("dev", "bob") == []
    assert store.read_cursor_get("dev", "bob") == "1"


def test_a_read_of_an_id_this_store_never_held_is_kept_and_exported(
    store: Store, tmp_path: Path
) -> None:
    store.import_bytes(jsonl(dict(READ, msg_id="legacy-17")))
    out = tmp_path / "e.jsonl"
    store.export(out)
    assert [json.loads(line) for line in out.read_text().splitlines()] == [
        dict(READ, msg_id="legacy-17")
    ]


def test_an_export_of_the_bundled_drivers_shapes_reimports_to_the_same_bytes(
    store: Store, tmp_path: Path
) -> None:
    source = b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in (SENT, READ))
    store.import_bytes(source)
    out = tmp_path / "e.jsonl"
    store.export(out)
    assert out.read_bytes() == source


def test_compact_coalesces_repeated_reads_of_an_id_the_store_does_not_hold(store: Store) -> None:
    first = dict(READ, msg_id="legacy-17")
    other = dict(READ, id="read-other", msg_id="legacy-18")  # a different ID: kept
    store.import_bytes(jsonl(first, dict(first, id="read-again"), other))
    assert store.compact() == 1
    assert store.compact() == 0
