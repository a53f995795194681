from __future__ import annotations

import re
import time

from syncengine.ids import new_uuid4, new_uuid4s, new_uuid7

UUID7 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
UUID4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def test_uuid7_is_lowercase_canonical_version_7() -> None:
    assert all(UUID7.fullmatch(new_uuid7()) for _ in range(200))


def test_uuid7_embeds_the_current_unix_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    value = new_uuid7()
    after = time.time_ns() // 1_000_000
    embedded = int(value.replace("-", "")[:12], 16)
    assert before <= embedded <= after + 1


def test_uuid7_minted_in_one_process_strictly_increase() -> None:
    values = [new_uuid7() for _ in range(5000)]
    assert values == sorted(values)
    assert len(set(values)) == len(values)


def test_uuid4_is_lowercase_canonical_version_4_and_random() -> None:
    values = {new_uuid4() for _ in range(200)}
    assert len(values) == 200
    assert all(UUID4.fullmatch(v) for v in values)


def test_uuid4s_minted_together_are_canonical_version_4_and_distinct() -> None:
    values = new_uuid4s(1000)
    assert len(values) == 1000 and len(set(values)) == 1000
    assert all(UUID4.fullmatch(v) for v in values)
    assert new_uuid4s(0) == []
