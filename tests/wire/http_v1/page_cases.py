"""The page documents the fast and the column decoding paths are both checked against: the
sample cases and the builders that vary them."""

from __future__ import annotations

from typing import Any

from tests.wire.http_v1 import samples

W3 = samples.WIRE_3


W4 = "6f1c2d3e-4a5b-4c6d-8e7f-000000000004"


def four() -> dict[str, Any]:
    return samples.page(
        samples.pulled("41", samples.WIRE_1),
        samples.pulled("42", samples.WIRE_2),
        samples.pulled("43", W3),
        samples.pulled("44", W4),
    )


def with_element(index: int, member: str, value: Any, envelope: bool = False) -> dict[str, Any]:
    doc = four()
    target = doc["messages"][index]["envelope"] if envelope else doc["messages"][index]
    target[member] = value
    return doc


CASES = [
    four(),
    samples.page(),
    samples.page(next_after="40"),
    # sequences: leading zero, zero, 19 digits, non-ASCII digits, not a string
    with_element(1, "server_seq", "042"),
    with_element(0, "server_seq", "0"),
    with_element(3, "server_seq", "9223372036854775807"),
    with_element(3, "server_seq", "9223372036854775808"),
    with_element(2, "server_seq", "\u0664\u0663"),
    with_element(2, "server_seq", 43),
    with_element(2, "server_seq", ""),
    # ids, receipt times (repeated and not), the envelope's members
    with_element(1, "id", samples.WIRE_1),
    with_element(1, "id", samples.WIRE_1.upper()),
    with_element(2, "server_received_at", "2026-02-30T00:00:00.000000Z"),
    with_element(2, "server_received_at", "2026-03-04T05:06:07.000000Z"),
    with_element(2, "server_received_at", ["x"]),
    with_element(1, "v", True, envelope=True),
    with_element(1, "v", 2**32, envelope=True),
    with_element(1, "v", 2, envelope=True),
    with_element(1, "cipher", "age-v1", envelope=True),
    with_element(1, "cipher", "Bad", envelope=True),
    with_element(1, "cipher", ["none"], envelope=True),
    with_element(1, "key_id", "epoch-1", envelope=True),
    with_element(1, "key_id", "e\u0301", envelope=True),
    with_element(1, "key_id", {"k": 1}, envelope=True),
    with_element(1, "blob", "aGk", envelope=True),
    with_element(1, "blob", "", envelope=True),
    with_element(1, "blob", 7, envelope=True),
    with_element(1, "extra", 1, envelope=True),
    with_element(1, "extra", {"open": "objects keep unknown members"}),
    # page rules: a hole, a repeat, below the floor, next_after, has_more
    samples.page(samples.pulled("41", samples.WIRE_1), samples.pulled("43", samples.WIRE_2)),
    samples.page(samples.pulled("41", samples.WIRE_1), samples.pulled("42", samples.WIRE_1)),
    samples.page(samples.pulled("42", samples.WIRE_1), samples.pulled("41", samples.WIRE_2)),
    {**samples.page(), **samples.binding(floor="41")},
    samples.page(next_after="43"),
    samples.page(has_more=True),
    # an element error after a page-rule break still wins (elements parse first)
    samples.page(
        samples.pulled("41", samples.WIRE_1),
        samples.pulled("43", samples.WIRE_2),
        {**samples.pulled("44", W3), "id": "nope"},
    ),
]
